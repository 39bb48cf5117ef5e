#!/usr/bin/env bash
# The tcp-streams race behind the CI failure on cf218c8: a sender that fails at its first file
# (mode 000, read without CAP_DAC_OVERRIDE) goes away within a millisecond or two. Counts, over
# N runs against one receiver (pinned to core 0, as when it was found), the receiver's FAILED
# run lines and its "no yamux control stream" lines (a run it never reported). Root only.
#   ./first-file-unreadable.sh BIN [N]
set -euo pipefail
BIN=$1; N=${2:-30}
W=$(mktemp -d /var/tmp/first-unreadable.XXXXXX)
trap 'kill $rp 2>/dev/null; rm -rf "$W"' EXIT
"$BIN" gen --out "$W/src" --files 200 --size 16KiB --dirs 4 --seed 25 >/dev/null
chmod 000 "$W/src/d0/f000"
taskset -c 0 "$BIN" recv --listen 127.0.0.1:0 --identity "$W/id" --dest "$W/dst" --idle-timeout 3s >"$W/rx.log" 2>&1 &
rp=$!
addr=""
for _ in $(seq 200); do
  addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' "$W/rx.log"); [ -n "$addr" ] && break; sleep 0.05
done
for _ in $(seq "$N"); do
  setpriv --bounding-set -dac_override,-dac_read_search -- "$BIN" send --to "$addr" --src "$W/src" \
    --identity "$W/id" --mode tcp-streams --read-ahead 1MiB >/dev/null 2>&1 || true
done
sleep 4
echo "$("$BIN" --version): $N senders failing at d0/f000;" \
  "FAILED run lines $(grep -c '^run .*FAILED' "$W/rx.log" || true)," \
  "'no yamux control stream' $(grep -c 'no yamux control stream' "$W/rx.log" || true)"
