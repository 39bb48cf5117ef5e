#!/usr/bin/env bash
# one.sh BIN [send args...]: one quic-bundle 256 MiB run on the qmem link with samplers; WRAP
# (e.g. "heaptrack -o FILE") goes before the sender
set -u
BIN=$1; shift
W=/var/tmp/shoal-qmem; mkdir -p $W; mountpoint -q $W || mount -t tmpfs -o size=2G qmem $W
SRC=$W/src-268435456; [ -d $SRC ] || $BIN gen --out $SRC --files 1 --size 268435456 --seed 1 >/dev/null
ip netns list | grep -q qmem || $BIN link up --name qmem --rtt 141ms --rate 1gbit > $W/link.log 2>&1
rm -rf $W/dst $W/recv.log
$BIN link exec --name qmem rcv -- $BIN recv --once --listen 198.18.0.2:0 --dest $W/dst --identity $W/id --flat > $W/recv.log 2>&1 &
rp=$!
for _ in $(seq 100); do addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' $W/recv.log); [ -n "$addr" ] && break; sleep 0.1; done
/work/bench/s20/sample.sh "^$BIN recv --once" $W/rs.txt &
sp1=$!
/work/bench/s20/sample.sh "^$BIN send --to" $W/ss.txt &
sp2=$!
$BIN link exec --name qmem snd -- ${WRAP:-} $BIN send --to $addr --src $SRC --mode quic-bundle --identity $W/id --json "$@" > $W/row.json 2>$W/send.err
wait $rp; wait $sp1 $sp2
python3 -c "
import json;r=json.load(open('$W/row.json'));print(r['status'],r['mb_per_s'],'snd',r['sender_peak_rss_bytes']/1e6,'rcv',r['receiver_peak_rss_bytes']/1e6)"
echo "sender: $(cat $W/ss.txt)"; echo "receiver: $(cat $W/rs.txt)"
