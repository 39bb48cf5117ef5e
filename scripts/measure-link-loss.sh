#!/usr/bin/env bash
# Segment loss a bulk TCP flow sees on the emulated link (issue 14, section 2).
# For each loss setting: bring a 20 ms / 300 Mbit/s link up (offload on, the default), send one
# file of SIZE over tcp-bundle with BBR, and print lost_bytes / bytes_sent and
# retransmits / sent_packets from the sender's row, plus the forwarder's own drop counters.
# Usage: [MODE=tcp-bundle] [CC=bbr] scripts/measure-link-loss.sh [SHOAL] [SIZE] [LOSSES...]   (root)
set -euo pipefail
S=${1:-target/release/shoal}
SIZE=${2:-64MiB}
shift 2 || true
LOSSES=("${@:-0.1% 1% 5%}")
[ $# -eq 0 ] && LOSSES=(0.1% 1% 5%)
NAME=llm$$
W=$(mktemp -d /tmp/linkloss.XXXX)
trap '$S link down --name $NAME >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
$S gen --out "$W/src" --files 1 --size "$SIZE" --seed 14 >/dev/null
printf '%-6s %-8s %12s %12s %9s %12s %12s %9s %10s %10s\n' loss size lost_bytes bytes_sent lost/sent retransmits sent_packets rtx/sent fwd_lossdr fwd_queuedr
for L in "${LOSSES[@]}"; do
  $S link up --name "$NAME" --rtt 20ms --rate 300mbit --loss "$L" --seed 7 >/dev/null
  rm -rf "$W/dst" "$W/id"
  $S link exec --name "$NAME" rcv -- "$S" recv --listen 198.18.0.2:7474 --dest "$W/dst" --identity "$W/id" --once >/dev/null 2>&1 &
  RX=$!
  for _ in $(seq 50); do [ -s "$W/id/token" ] && break; sleep 0.1; done
  sleep 0.3
  ROW=$(timeout 300 $S link exec --name "$NAME" snd -- "$S" send --to 198.18.0.2:7474 --src "$W/src" --identity "$W/id" --mode "${MODE:-tcp-bundle}" --cc "${CC:-bbr}" --json)
  wait $RX || true
  ST=$($S link status --name "$NAME" --json)
  python3 - "$L" "$SIZE" "$ROW" "$ST" <<'PY'
import json, sys
l, size, row, st = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
c = st.get("counters") or {}
up = c.get("up", {})
print(f"{l:<6} {size:<8} {row['lost_bytes']:>12} {row['bytes_sent']:>12} {100*row['lost_bytes']/row['bytes_sent']:>8.3f}% "
      f"{row['retransmits']:>12} {row['sent_packets']:>12} {100*row['retransmits']/row['sent_packets']:>8.3f}% "
      f"{up.get('dropped_loss','?'):>10} {up.get('dropped_queue','?'):>10}  status={row['status']} {row['seconds']:.2f}s")
PY
  $S link down --name "$NAME" >/dev/null
done
