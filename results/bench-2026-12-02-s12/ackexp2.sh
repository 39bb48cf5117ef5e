#!/usr/bin/env bash
set -uo pipefail
S=/work/bench/shoal-ackexp2
NAME=ax
W=/dev/shm/winexp; rm -rf $W/dst; mkdir -p $W
$S link up --name $NAME --rtt 141ms --rate 1gbit >/dev/null 2>&1 || exit 1
[ -d $W/small ] || $S gen --out $W/small --files 65536 --size 4KiB --seed 2 >/dev/null
udp() { $S link exec $1 --name $NAME -- cat /proc/net/snmp | awk '/^Udp:/{n++} /^Udp:/&&n==2{print $5}'; }
for pass in 1 2 3; do
 for ack in 1 16; do
   rm -rf $W/dst
   $S link exec rcv --name $NAME -- $S recv --once --listen 198.18.0.2:7474 --flat --dest $W/dst --identity $W/id > $W/recv.log 2>&1 &
   for _ in $(seq 100); do grep -q '^listening on' $W/recv.log && break; sleep 0.1; done
   a=$(udp snd); b=$(udp rcv); la=$($S link status --name $NAME --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("forwarder_cpu_seconds",0))' 2>/dev/null)
   $S link exec snd --name $NAME -- env SHOAL_EXP_ACK=$ack $S send --to 198.18.0.2:7474 --src $W/small --mode quic-bundle --identity $W/id --json --initial-window 7000 > $W/row.json 2>/dev/null
   wait
   python3 -c 'import json,sys;r=json.load(open("/dev/shm/winexp/row.json"));print("ack", sys.argv[1], r["status"], round(r["mb_per_s"],2), "cpu", round(r["sender_cpu_seconds"],2), round(r["receiver_run_cpu_seconds"],2), "snd_out_dgrams", sys.argv[2], "rcv_out_dgrams", sys.argv[3])' $ack $(( $(udp snd) - a )) $(( $(udp rcv) - b ))
 done
done
$S link down --name $NAME >/dev/null
