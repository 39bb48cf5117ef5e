#!/usr/bin/env bash
# Peak RSS split (file-backed vs anonymous) of the sender and receiver of one run on the link.
set -uo pipefail
S=${S:-/work/bench/shoal-mem0}
NAME=mp
SRC=${SRC:-small}; MODE=${MODE:-quic-bundle}; CONNS=${CONNS:-1}
W=/dev/shm/memprobe; rm -rf $W/dst; mkdir -p $W
$S link up --name $NAME --rtt 141ms --rate ${RATE:-1gbit} >/dev/null 2>&1 || exit 1
[ -d $W/big ] || $S gen --out $W/big --files 1 --size 256MiB --seed 1 >/dev/null
[ -d $W/small ] || $S gen --out $W/small --files 65536 --size 4KiB --seed 2 >/dev/null
$S link exec rcv --name $NAME -- $S recv --once --listen 198.18.0.2:7474 --flat --dest $W/dst --identity $W/id ${RECV_ARGS:-} > $W/recv.log 2>&1 &
for _ in $(seq 100); do grep -q '^listening on' $W/recv.log && break; sleep 0.1; done
RP=$(pgrep -f "recv --once --listen 198.18.0.2:7474" | head -1)
$S link exec snd --name $NAME -- $S send --to 198.18.0.2:7474 --src $W/$SRC --mode $MODE --connections $CONNS --identity $W/id --json ${SEND_ARGS:-} > $W/row.json 2>$W/send.err &
sleep 0.05
SP=$(pgrep -f "send --to 198.18.0.2:7474" | tail -1)
python3 - $SP $RP "${SMAPS_OUT:-}" <<'PY'
import sys, time, os
pids = {"send": sys.argv[1], "recv": sys.argv[2]}
smaps_out = sys.argv[3]  # SMAPS_OUT=FILE: the sender's full smaps at its sampled peak
peak_smaps = ""
peak = {k: (0, None) for k in pids}
def roll(pid):
    d = {}
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            p = line.split()
            if p[0] in ("Rss:", "Anonymous:", "Pss_File:", "Shared_Clean:", "Private_Clean:"):
                d[p[0][:-1]] = int(p[1])
    except OSError:
        return None
    return d
while any(os.path.exists(f"/proc/{p}") for p in pids.values()):
    for k, p in pids.items():
        d = roll(p)
        if d and d["Rss"] > peak[k][0]:
            peak[k] = (d["Rss"], d)
            if k == "send" and smaps_out:
                try:
                    peak_smaps = open(f"/proc/{p}/smaps").read()
                except OSError:
                    pass
    time.sleep(0.02)
if smaps_out:
    open(smaps_out, "w").write(peak_smaps)
for k, (rss, d) in peak.items():
    print(k, "peak Rss %.1f MB" % (rss / 1000 * 1.024), {x: round(v * 1.024 / 1000, 1) for x, v in (d or {}).items()})
PY
wait
python3 -c 'import json;r=json.load(open("/dev/shm/memprobe/row.json"));print(r["status"], round(r["mb_per_s"],1), "row rss", r["sender_peak_rss_bytes"]/1e6, r["receiver_peak_rss_bytes"]/1e6)'
$S link down --name $NAME >/dev/null
