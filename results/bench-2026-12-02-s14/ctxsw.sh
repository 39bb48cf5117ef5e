#!/usr/bin/env bash
# Context switches and CPU of both ends of one loopback transfer of the small tree (tmpfs),
# from `perf stat -e context-switches,task-clock`, and of the per-file-stream anchor.
#   BIN=/work/bench/shoal-X MODE=quic-streams ANCHOR=target/release/examples/stream_anchor ./ctxsw.sh
set -uo pipefail
BIN=${BIN:?}; MODE=${MODE:-quic-streams}; SRC=${SRC:-/var/tmp/s14/src}
W=/var/tmp/s14/ctxsw; rm -rf $W; mkdir -p $W
perf stat -e context-switches,task-clock -o $W/rcv.txt -- $BIN recv --once --listen 127.0.0.1:0 --flat --dest $W/dst --identity $W/id >$W/recv.log 2>&1 &
rp=$!
addr=""; for _ in $(seq 400); do addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' $W/recv.log); [ -n "$addr" ] && break; sleep 0.05; done
perf stat -e context-switches,task-clock -o $W/snd.txt -- $BIN send --to $addr --src $SRC --mode $MODE --identity $W/id --json >$W/row.json
wait $rp
echo "# $(basename $BIN) $MODE: $(python3 -c 'import json,sys;r=json.load(open(sys.argv[1]));print(r["status"])' $W/row.json)"
echo "receiver: $(grep -hE 'context-switches' $W/rcv.txt | awk '{print $1}') switches, $(grep -hE 'task-clock' $W/rcv.txt | awk '{print $1}') ms"
echo "sender: $(grep -hE 'context-switches' $W/snd.txt | awk '{print $1}') switches, $(grep -hE 'task-clock' $W/snd.txt | awk '{print $1}') ms"
if [ -n "${ANCHOR:-}" ]; then
  p=quic; [ "$MODE" = tcp-streams ] && p=yamux
  perf stat -e context-switches,task-clock -o $W/anchor.txt -- $ANCHOR $p >$W/anchor.out
  echo "anchor $p: $(grep -hE 'context-switches' $W/anchor.txt | awk '{print $1}') switches, $(grep -hE 'task-clock' $W/anchor.txt | awk '{print $1}') ms ($(cat $W/anchor.out))"
fi
