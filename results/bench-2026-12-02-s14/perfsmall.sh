#!/usr/bin/env bash
# perf profile (cpu-clock, 1999 Hz, all threads) of both ends of one loopback transfer of the
# small tree (tmpfs); prints each end's top symbols by self time.
#   BIN=/work/bench/shoal-X MODE=tcp-bundle [CALLGRAPH=1] ./perfsmall.sh
set -uo pipefail
BIN=${BIN:?}; MODE=${MODE:-tcp-bundle}; SRC=${SRC:-/var/tmp/s14/src}
W=/var/tmp/s14/perf; rm -rf $W; mkdir -p $W
g=""; [ -n "${CALLGRAPH:-}" ] && g="--call-graph ${CALLGRAPH_KIND:-dwarf,16384}"
perf record -q -F 1999 -e cpu-clock $g -o $W/rcv.perf -- $BIN recv --once --listen 127.0.0.1:0 --flat --dest $W/dst --identity $W/id >$W/recv.log 2>&1 &
rp=$!
addr=""; for _ in $(seq 400); do addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' $W/recv.log); [ -n "$addr" ] && break; sleep 0.05; done
perf record -q -F 1999 -e cpu-clock $g -o $W/snd.perf -- $BIN send --to $addr --src $SRC --mode $MODE --identity $W/id --json >$W/row.json 2>$W/send.err
wait $rp
echo "# $(basename $BIN) $MODE: $(python3 -c 'import json,sys;r=json.load(open(sys.argv[1]));print(r["status"], "cpu", r["sender_cpu_seconds"], r["receiver_run_cpu_seconds"])' $W/row.json)"
for end in snd rcv; do
  echo "## $end"
  echo "# share of samples by thread"
  perf report -i $W/$end.perf --no-children --stdio --sort pid,comm 2>/dev/null | grep -E '^ +[0-9]'
  echo "# top symbols by self time"
  if [ -n "${CALLGRAPH:-}" ]; then
    perf report -i $W/$end.perf --no-children --stdio --percent-limit 1.5 2>/dev/null | grep -v '^$' | head -${LINES_OUT:-400}
  else
    perf report -i $W/$end.perf --no-children --stdio --sort symbol 2>/dev/null | grep -E '^ +[0-9]' | head -${TOP:-45}
  fi
done
