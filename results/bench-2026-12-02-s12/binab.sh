#!/usr/bin/env bash
# Loopback (tmpfs) A/B of binaries for one mode, alternating; whole send wall and CPU.
set -uo pipefail
MODE=${MODE:-quic-streams}
W=/var/tmp/shoal-anchor/binab; rm -rf $W; mkdir -p $W
SRC=${SRC:-/var/tmp/shoal-anchor/small/t}
for pass in $(seq ${PASSES:-4}); do
 bins="$BINS"; [ $((pass%2)) -eq 0 ] && bins=$(echo $BINS | tr ' ' '\n' | tac | tr '\n' ' ')
 for S in $bins; do
  rm -rf $W/dst
  $S recv --once --listen 127.0.0.1:0 --flat --dest $W/dst --identity $W/id > $W/recv.log 2>&1 &
  addr=""; for _ in $(seq 100); do addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' $W/recv.log); [ -n "$addr" ] && break; sleep 0.05; done
  s=$(date +%s.%N)
  $S send --to $addr --src $SRC --mode $MODE --identity $W/id --json > $W/row.json 2>/dev/null
  e=$(date +%s.%N)
  wait
  python3 -c 'import json,sys;r=json.load(open(sys.argv[1]));print(sys.argv[2].split("/")[-1].ljust(20), r["mode"], r["status"], "wall %.3f"%(float(sys.argv[4])-float(sys.argv[3])), "s %.3f"%r["seconds"], "cpu", round(r["sender_cpu_seconds"],2), round(r.get("receiver_run_cpu_seconds") or 0,2), "rss", r["sender_peak_rss_bytes"]//100000/10, r["receiver_peak_rss_bytes"]//100000/10)' $W/row.json $S $s $e
 done
done
