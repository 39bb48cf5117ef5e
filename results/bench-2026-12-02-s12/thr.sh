#!/usr/bin/env bash
# quic-streams on loopback (tmpfs): --threads 1 against 2 at both ends, alternating.
set -uo pipefail
S=${S:-/work/bench/shoal-final2}
MODE=${MODE:-quic-streams}
W=/var/tmp/shoal-anchor/thr; rm -rf $W; mkdir -p $W
SRC=/var/tmp/shoal-anchor/small/t
for pass in 1 2 3 4; do
 for t in 1 2; do
  rm -rf $W/dst
  $S recv --once --listen 127.0.0.1:0 --flat --dest $W/dst --identity $W/id --threads $t > $W/recv.log 2>&1 &
  addr=""; for _ in $(seq 100); do addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' $W/recv.log); [ -n "$addr" ] && break; sleep 0.05; done
  s=$(date +%s.%N)
  $S send --to $addr --src $SRC --mode $MODE --identity $W/id --json --threads $t > $W/row.json 2>/dev/null
  e=$(date +%s.%N)
  wait
  python3 -c 'import json,sys;r=json.load(open(sys.argv[1]));print("threads", sys.argv[2], r["mode"], r["status"], "wall %.3f"%(float(sys.argv[4])-float(sys.argv[3])), "s %.3f"%r["seconds"], "cpu", round(r["sender_cpu_seconds"],2), round(r["receiver_run_cpu_seconds"],2), "thr", r["threads"], r["receiver_threads"])' $W/row.json $t $s $e
 done
done
