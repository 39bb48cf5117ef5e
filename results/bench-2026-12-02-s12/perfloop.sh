#!/usr/bin/env bash
# perf of both ends of one transfer on loopback, tmpfs.
set -uo pipefail
S=${S:-/work/bench/shoal-base}
MODE=${MODE:-quic-bundle}
SRC=${SRC:-/var/tmp/shoal-anchor/src-268435456}
W=/var/tmp/shoal-anchor/perf; rm -rf $W; mkdir -p $W
export SHOAL_EXP_RT=${RT:-}
perf record -F 1999 -e cpu-clock -g -o $W/rcv.perf -- $S recv --once --listen 127.0.0.1:0 --flat --dest $W/dst --identity $W/id > $W/recv.log 2>&1 &
RP=$!
addr=""; for _ in $(seq 100); do addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' $W/recv.log); [ -n "$addr" ] && break; sleep 0.1; done
perf record -F 1999 -e cpu-clock -g -o $W/snd.perf -- $S send --to $addr --src $SRC --mode $MODE --identity $W/id --json ${SEND_ARGS:-} > $W/row.json 2>$W/send.err
wait $RP
python3 -c 'import json;r=json.load(open("/var/tmp/shoal-anchor/perf/row.json"));print(r["status"], r["mb_per_s"], r["sender_cpu_seconds"], r["receiver_run_cpu_seconds"])'
