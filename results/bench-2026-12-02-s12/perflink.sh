#!/usr/bin/env bash
# perf of both ends of one quic-bundle transfer on the emulated link.
set -uo pipefail
S=${S:-/work/bench/shoal-base}
NAME=pl
SRC=${SRC:-big}
MODE=${MODE:-quic-bundle}
W=/dev/shm/perflink; rm -rf $W/dst; mkdir -p $W
$S link up --name $NAME --rtt 141ms --rate ${RATE:-1gbit} >/dev/null 2>&1 || exit 1
[ -d $W/big ] || $S gen --out $W/big --files 1 --size 256MiB --seed 1 >/dev/null
[ -d $W/small ] || $S gen --out $W/small --files 65536 --size 4KiB --seed 2 >/dev/null
$S link exec rcv --name $NAME -- perf record -F 1999 -e cpu-clock -g -o $W/rcv.perf -- $S recv --once --listen 198.18.0.2:7474 --flat --dest $W/dst --identity $W/id > $W/recv.log 2>&1 &
RP=$!
for _ in $(seq 100); do grep -q '^listening on' $W/recv.log && break; sleep 0.1; done
$S link exec snd --name $NAME -- perf record -F 1999 -e cpu-clock -g -o $W/snd.perf -- $S send --to 198.18.0.2:7474 --src $W/$SRC --mode $MODE --identity $W/id --json ${SEND_ARGS:-} > $W/row.json 2>$W/send.err
wait $RP
python3 -c 'import json;r=json.load(open("/dev/shm/perflink/row.json"));print(r["status"], r["mb_per_s"], r["sender_cpu_seconds"], r["receiver_run_cpu_seconds"])'
$S link down --name $NAME >/dev/null
