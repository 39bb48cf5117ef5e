#!/usr/bin/env bash
# rcvheap.sh BIN CONNS [WRAP...]: one quic-bundle run of 65,536 x 4 KiB in 256 folders over the
# qmem link (141 ms, 1 Gbit/s) into a fresh Btrfs loop volume; the receiver optionally wrapped
# (e.g. heaptrack -o FILE); samplers record both ends' RssAnon/RssFile.
set -u
BIN=$1; CONNS=$2; shift 2
W=/var/tmp/shoal-qmem; mkdir -p $W; mountpoint -q $W || mount -t tmpfs -o size=2G qmem $W
SRC=$W/small; [ -d $SRC ] || $BIN gen --out $SRC --files 65536 --size 4KiB --dirs 256 --seed 1 >/dev/null
ip netns list | grep -q qmem || $BIN link up --name qmem --rtt 141ms --rate 1gbit > $W/link.log 2>&1
IMG=/var/tmp/rcvheap.img; MNT=/var/tmp/rcvheap-mnt
umount $MNT 2>/dev/null; rm -f $IMG; truncate -s 2G $IMG; mkfs.btrfs -q -f $IMG; mkdir -p $MNT; mount -o loop $IMG $MNT
rm -f $W/recv.log
$BIN link exec --name qmem rcv -- "$@" $BIN recv --once --listen 198.18.0.2:0 --dest $MNT/d --identity $W/id --flat ${RECV_ARGS:-} > $W/recv.log 2>&1 &
rp=$!
for _ in $(seq 300); do addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' $W/recv.log); [ -n "$addr" ] && break; sleep 0.1; done
/work/bench/s20/sample.sh "^$BIN recv --once" $W/rs.txt &
sp1=$!
/work/bench/s20/sample.sh "^$BIN send --to" $W/ss.txt &
sp2=$!
$BIN link exec --name qmem snd -- ${SEND_WRAP:-} $BIN send --to $addr --src $SRC --mode quic-bundle --connections $CONNS --identity $W/id --json --cc cubic > $W/row.json 2>$W/send.err
wait $rp; wait $sp1 $sp2
python3 -c "
import json;r=json.load(open('$W/row.json'));print(r['status'],r['mb_per_s'],'snd',r['sender_peak_rss_bytes']/1e6,'rcv',r['receiver_peak_rss_bytes']/1e6, 'win_min', r.get('receiver_conn_window_min'))" || tail -3 $W/send.err
echo "sender: $(cat $W/ss.txt)"; echo "receiver: $(cat $W/rs.txt)"
umount $MNT; rm -f $IMG
