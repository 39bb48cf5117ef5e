#!/usr/bin/env bash
# Peak RSS of both ends and CPU per GB, per mode, on loopback with tmpfs (not timed: the
# figures do not depend on the machine's load). Prints one line per mode and run from the row:
#   MODE run N: status, sender/receiver peak RSS (MB), sender/receiver CPU s per GB,
#   peak streams at the receiver, QUIC UDP payload and GSO/GRO segments
#
#   scripts/bench/rss.sh [SHOAL_BIN] [FILES] [SIZE] [RUNS] [MODES]
#     defaults: target/release/shoal, 65536, 4KiB, 1, "tcp-bundle tcp-streams quic-bundle quic-streams"
#   SEND_ARGS / RECV_ARGS (environment): extra flags for `shoal send` / `shoal recv`, e.g.
#     SEND_ARGS="--connections 8" or RECV_ARGS="--conn-window 8MiB" (experiments)
# Targets (issue 19): bundle modes <= 32 MB at each end, per-file modes <= 48 MB with 4,096
# streams outstanding (the default --max-streams).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(readlink -f "${1:-$ROOT/target/release/shoal}")
FILES=${2:-65536}; SIZE=${3:-4KiB}; RUNS=${4:-1}
MODES=${5:-"tcp-bundle tcp-streams quic-bundle quic-streams"}
W=/var/tmp/shoal-rss
mkdir -p $W
mountpoint -q $W || mount -t tmpfs -o size=3G,nr_inodes=0 shoalrss $W
SRC=$W/src-$FILES-$SIZE
[ -d "$SRC" ] || "$BIN" gen --out "$SRC" --files "$FILES" --size "$SIZE" --seed 1 >/dev/null
for i in $(seq "$RUNS"); do
  for mode in $MODES; do
    rm -rf $W/dst; log=$W/recv.log
    rm -f $log # a stale log's address is the last run's receiver, gone by now
    "$BIN" recv --listen 127.0.0.1:0 --dest $W/dst --identity $W/id --once --flat ${RECV_ARGS:-} >$log 2>&1 &
    rp=$!
    addr=""
    for _ in $(seq 100); do addr=$(sed -n 's/^listening on //p' $log); [ -n "$addr" ] && break; sleep 0.1; done
    "$BIN" send --to "$addr" --src "$SRC" --mode "$mode" --identity $W/id ${SEND_ARGS:-} --json >$W/row.json 2>$W/send.err || true
    wait $rp || true
    python3 - "$W/row.json" "$mode" "$i" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"{sys.argv[2]} run {sys.argv[3]}: no row ({e})"); sys.exit()
mb = lambda k: f"{r[k] / 1e6:.1f}"
f = lambda k: "-" if r.get(k) is None else (f"{r[k]:.2f}" if isinstance(r[k], float) else str(r[k]))
print(f"{sys.argv[2]} run {sys.argv[3]}: {r['status']} rss_MB send {mb('sender_peak_rss_bytes')} recv {mb('receiver_peak_rss_bytes')}"
      f" cpu_s_per_GB send {f('sender_cpu_s_per_gb')} recv {f('receiver_cpu_s_per_gb')}"
      f" recv_peak_streams {r['receiver_peak_streams']} udp_payload {f('udp_payload_bytes')}"
      f" gso/gro send {f('sender_gso_segments')}/{f('sender_gro_segments')} recv {f('receiver_gso_segments')}/{f('receiver_gro_segments')} {r['error']}")
PY
  done
done
