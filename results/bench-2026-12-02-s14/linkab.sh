#!/usr/bin/env bash
# A/B of binaries on the emulated 141 ms link (RATE, default 1gbit): a receiver per run
# (`recv --once`, destination on /dev/shm), alternating, order reversed every pass. Each entry
# of BINS is a binary, optionally followed by "+FLAG" added to its `recv` (as in cpuab.sh).
# The link is brought up with the first binary and taken down at the end.
#   BINS="A A+--fixed-window" SRCS="big small" MODES=quic-bundle PASSES=2 ./linkab.sh
set -uo pipefail
NAME=ab14
RATE=${RATE:-1gbit}
W=/dev/shm/linkab14; rm -rf $W/dst; mkdir -p $W
first=${BINS%% *}; S0=${first%%+*}
$S0 link up --name $NAME --rtt 141ms --rate $RATE >/dev/null 2>&1 || { echo "link up failed"; exit 1; }
[ -d $W/big ] || $S0 gen --out $W/big --files 1 --size 256MiB --seed 1 >/dev/null
[ -d $W/small ] || $S0 gen --out $W/small --files 65536 --size 4KiB --seed 2 >/dev/null
echo "# linkab.sh RATE=$RATE $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
for pass in $(seq ${PASSES:-2}); do
  entries="$BINS"; [ $((pass % 2)) -eq 0 ] && entries=$(echo $BINS | tr ' ' '\n' | tac | tr '\n' ' ')
  for entry in $entries; do
    S=${entry%%+*}; flag=""; [ "$entry" != "$S" ] && flag=${entry#*+}
    for src in ${SRCS:-big small}; do
      for mode in ${MODES:-quic-bundle}; do
        rm -rf $W/dst $W/recv.log # a stale log would say "listening" before this receiver does
        $S link exec rcv --name $NAME -- $S recv --once --listen 198.18.0.2:7474 --flat --dest $W/dst --identity $W/id $flag >$W/recv.log 2>&1 &
        rp=$!
        for _ in $(seq 100); do grep -q '^listening on' $W/recv.log && break; sleep 0.1; done
        json=$($S link exec snd --name $NAME -- $S send --to 198.18.0.2:7474 --src $W/$src --mode $mode --identity $W/id --json ${SEND_ARGS:-} 2>/dev/null)
        kill $rp 2>/dev/null; wait $rp
        echo "$json" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("%-34s %-12s %-5s %s %6.2f MB/s snd_cpu %.2f rcv_cpu %.2f rss %.1f/%.1f window_min %s udp %s" % (sys.argv[1].split("/")[-1], sys.argv[3], sys.argv[2], r["status"], r["mb_per_s"] or 0, r["sender_cpu_seconds"], r.get("receiver_run_cpu_seconds") or 0, r["sender_peak_rss_bytes"] / 1e6, (r.get("receiver_peak_rss_bytes") or 0) / 1e6, r.get("receiver_conn_window_min"), r.get("udp_payload_bytes")))' "$entry" $src $mode
      done
    done
  done
done
$S0 link down --name $NAME >/dev/null
