#!/usr/bin/env bash
# A/B of binaries on the emulated link; receiver per binary started per run (recv --once).
set -uo pipefail
NAME=ab
RATE=${RATE:-1gbit}
W=/dev/shm/linkab; rm -rf $W/dst; mkdir -p $W
S0=/work/bench/shoal-base
$S0 link up --name $NAME --rtt 141ms --rate $RATE >/dev/null 2>&1 || exit 1
[ -d $W/big ] || $S0 gen --out $W/big --files 1 --size 256MiB --seed 1 >/dev/null
[ -d $W/small ] || $S0 gen --out $W/small --files 65536 --size 4KiB --seed 2 >/dev/null
for pass in $(seq ${PASSES:-3}); do
 bins="$BINS"; [ $((pass%2)) -eq 0 ] && bins=$(echo $BINS | tr ' ' '\n' | tac | tr '\n' ' ')
 for S in $bins; do
  for src in ${SRCS:-big small}; do
   for mode in ${MODES:-quic-bundle}; do
   rm -rf $W/dst
   $S link exec rcv --name $NAME -- $S recv --once --listen 198.18.0.2:7474 --flat --dest $W/dst --identity $W/id > $W/recv.log 2>&1 &
   RP=$!
   for _ in $(seq 100); do grep -q '^listening on' $W/recv.log && break; sleep 0.1; done
   json=$($S link exec snd --name $NAME -- $S send --to 198.18.0.2:7474 --src $W/$src --mode $mode --identity $W/id --json ${SEND_ARGS:-} 2>/dev/null)
   wait $RP
   echo "$json" | python3 -c '
import json,sys
r=json.load(sys.stdin)
print("%-28s %-12s %-5s %s %6.2f MB/s snd_cpu %.2f rcv_cpu %.2f rss %.1f/%.1f busy %s" % (sys.argv[1].split("/")[-1], sys.argv[3], sys.argv[2], r["status"], r["mb_per_s"] or 0, r["sender_cpu_seconds"], r.get("receiver_run_cpu_seconds") or 0, r["sender_peak_rss_bytes"]/1e6, (r.get("receiver_peak_rss_bytes") or 0)/1e6, r.get("host_all_cores_busy_share")))' $S $src $mode
   done
  done
 done
done
$S0 link down --name $NAME >/dev/null
