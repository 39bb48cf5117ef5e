#!/usr/bin/env bash
# A sender's memory over one run on the emulated 141 ms link (RATE, default 1gbit): every 50 ms
# its RSS split (smaps_rollup: anonymous, file-backed), and at its peak the mappings that hold
# the most (smaps, top 8 by Rss). Prints the series (t since the send started, MB) and the peak.
#   S=/work/bench/shoal-s15a SRC=small MODE=quic-bundle ./memtime.sh
set -uo pipefail
S=${S:?}; NAME=mt15; SRC=${SRC:-small}; MODE=${MODE:-quic-bundle}; CONNS=${CONNS:-1}
W=/dev/shm/memtime15; rm -rf $W/dst; mkdir -p $W
$S link up --name $NAME --rtt 141ms --rate ${RATE:-1gbit} >/dev/null 2>&1 || exit 1
[ -d $W/big ] || $S gen --out $W/big --files 1 --size 256MiB --seed 1 >/dev/null
[ -d $W/small ] || $S gen --out $W/small --files 65536 --size 4KiB --seed 2 >/dev/null
rm -f $W/recv.log
$S link exec rcv --name $NAME -- $S recv --once --listen 198.18.0.2:7474 --flat --dest $W/dst --identity $W/id >$W/recv.log 2>&1 &
rp=$!
for _ in $(seq 100); do grep -q '^listening on' $W/recv.log 2>/dev/null && break; sleep 0.1; done
$S link exec snd --name $NAME -- $S send --to 198.18.0.2:7474 --src $W/$SRC --mode $MODE --connections $CONNS --identity $W/id --json >$W/row.json 2>$W/send.err &
sleep 0.02
SP=$(pgrep -f "send --to 198.18.0.2:7474" | tail -1)
python3 - "$SP" <<'PY'
import sys, time, os
pid = sys.argv[1]; t0 = time.time(); peak = (0, "", 0)
def rollup():
    d = {}
    for line in open(f"/proc/{pid}/smaps_rollup"):
        p = line.split()
        if p[0] in ("Rss:", "Anonymous:", "Pss_File:"): d[p[0][:-1]] = int(p[1]) * 1024 / 1e6
    return d
last = -1
while os.path.exists(f"/proc/{pid}"):
    try:
        d = rollup(); t = time.time() - t0
        if d.get("Rss", 0) > peak[0]:
            peak = (d["Rss"], open(f"/proc/{pid}/smaps").read(), t)
        if int(t * 2) != last:  # print every 0.5 s
            last = int(t * 2)
            print("t %5.2f s  rss %5.1f  anon %5.1f  file %5.1f" % (t, d.get("Rss", 0), d.get("Anonymous", 0), d.get("Pss_File", 0)))
    except (OSError, ValueError):
        break
    time.sleep(0.05)
maps, cur = [], None
for line in peak[1].splitlines():
    f = line.split()
    if "-" in f[0] and len(f[0]) > 8 and ":" not in f[0]:
        cur = [" ".join(f[5:]) or "[anon]", f[0], 0]; maps.append(cur)
    elif f[0] == "Rss:" and cur: cur[2] = int(f[1]) * 1024 / 1e6
print("peak rss %.1f MB at t %.2f s; largest mappings (MB):" % (peak[0], peak[2]))
for name, rng, rss in sorted(maps, key=lambda m: -m[2])[:8]:
    a, b = (int(x, 16) for x in rng.split("-"))
    print("  %6.1f of %7.1f  %s" % (rss, (b - a) / 1e6, name))
PY
wait $rp
python3 -c 'import json;r=json.load(open("/dev/shm/memtime15/row.json"));print("row:", r["status"], round(r["mb_per_s"],1), "MB/s, sender peak", r["sender_peak_rss_bytes"]/1e6, "MB")'
$S link down --name $NAME >/dev/null
