#!/usr/bin/env bash
set -uo pipefail
S=/work/bench/shoal-dc1667a
NAME=wx
W=/dev/shm/winexp; rm -rf $W/dst; mkdir -p $W
$S link up --name $NAME --rtt 141ms --rate 1gbit >/dev/null 2>&1 || exit 1
[ -d $W/small ] || $S gen --out $W/small --files 65536 --size 4KiB --seed 2 >/dev/null
for pass in 1 2 3; do
 for win in 20MiB 40MiB; do
   rm -rf $W/dst
   $S link exec rcv --name $NAME -- $S recv --once --listen 198.18.0.2:7474 --flat --dest $W/dst --identity $W/id --stream-window $win --conn-window $win > $W/recv.log 2>&1 &
   for _ in $(seq 100); do grep -q '^listening on' $W/recv.log && break; sleep 0.1; done
   $S link exec snd --name $NAME -- $S send --to 198.18.0.2:7474 --src $W/small --mode quic-bundle --identity $W/id --json --initial-window ${IW:-7000} --stream-window $win --conn-window $win --send-window $win --trace-dir $W/tr-$win-$pass > $W/row.json 2>/dev/null
   wait
   python3 -c 'import json,sys;r=json.load(open("/dev/shm/winexp/row.json"));print(sys.argv[1], r["status"], round(r["mb_per_s"],2), "cpu", round(r["sender_cpu_seconds"],2), round(r["receiver_run_cpu_seconds"],2), "rss", r["sender_peak_rss_bytes"]//10**6, r["receiver_peak_rss_bytes"]//10**6, "iw", r["initial_window_bytes"])' $win
 done
done
$S link down --name $NAME >/dev/null
