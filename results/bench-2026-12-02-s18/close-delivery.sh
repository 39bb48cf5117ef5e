#!/usr/bin/env bash
# Does the QUIC sender's close reach the receiver? For each of N one-file quic-bundle runs over
# loopback: the `send` process's wall time, and how long after it ended the receiver printed the
# run's line (the receiver prints it once the sender's close arrives, or 5 s after its
# completion without one: receiver/src/quic.rs).
#   close-delivery.sh BIN [N]
set -euo pipefail
BIN=$1; N=${2:-6}
W=$(mktemp -d /dev/shm/close-delivery.XXXXXX)
trap 'kill $rp 2>/dev/null; rm -rf "$W"' EXIT
mkdir -p "$W/src/d" && echo hello >"$W/src/d/f"
"$BIN" recv --listen 127.0.0.1:0 --flat --dest "$W/dst" --identity "$W/id" >"$W/recv.log" 2>&1 &
rp=$!
for _ in $(seq 100); do addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' "$W/recv.log"); [ -n "$addr" ] && break; sleep 0.05; done
echo "# close-delivery.sh $(basename "$BIN") N=$N $(date -u +%FT%TZ)"
for i in $(seq "$N"); do
  n0=$(grep -c '^run ' "$W/recv.log" || true)
  s=$(date +%s%N)
  "$BIN" send --to "$addr" --src "$W/src" --mode quic-bundle --identity "$W/id" --json >"$W/row.json"
  e=$(date +%s%N)
  for _ in $(seq 1000); do [ "$(grep -c '^run ' "$W/recv.log" || true)" -gt "$n0" ] && break; sleep 0.01; done
  r=$(date +%s%N)
  echo "run $i: send process $(( (e - s) / 1000000 )) ms, receiver's run line $(( (r - e) / 1000000 )) ms after it ended, row $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$W/row.json")"
done
