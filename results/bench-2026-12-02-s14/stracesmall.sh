#!/usr/bin/env bash
# System calls of both ends of one loopback transfer of the small tree (tmpfs), counted by
# `strace -c -f` (all threads). strace slows every call, so only the counts mean anything.
#   BIN=/work/bench/shoal-X MODE=tcp-bundle ./stracesmall.sh > strace-MODE-X.txt
set -uo pipefail
BIN=${BIN:?}; MODE=${MODE:-tcp-bundle}; SRC=${SRC:-/var/tmp/s14/src}
W=/var/tmp/s14/strace; rm -rf $W; mkdir -p $W # fresh: no stale receiver log
strace -c -f -o $W/rcv.txt $BIN recv --once --listen 127.0.0.1:0 --flat --dest $W/dst --identity $W/id >$W/recv.log 2>&1 &
rp=$!
addr=""; for _ in $(seq 400); do addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' $W/recv.log); [ -n "$addr" ] && break; sleep 0.05; done
strace -c -f -o $W/snd.txt $BIN send --to $addr --src $SRC --mode $MODE --identity $W/id --json >$W/row.json 2>$W/send.err
wait $rp
echo "# $(basename $BIN) $MODE: $(python3 -c 'import json,sys;r=json.load(open(sys.argv[1]));print(r["status"], r["files"], "files")' $W/row.json)"
echo "## sender"; cat $W/snd.txt
echo "## receiver"; cat $W/rcv.txt
