#!/usr/bin/env bash
# Loopback (tmpfs) A/B of binaries for one mode, alternating, order reversed every round.
# Each entry of BINS is a binary, optionally followed by "+FLAG" added to its `recv`
# (e.g. /work/bench/shoal-3dfd6b7+--fixed-window). Prints one line per run (the whole `send`
# process's wall, both ends' CPU from the row, both ends' peak RSS) and, per entry, the
# medians of wall, CPU (sender, receiver, both) and the largest peak RSS of its rounds.
# Medians are over the runs whose row says `ok` (the receiver verified each file's hash against
# the sender's), counted as `ok n/N`; the destination is compared with the source by `diff -r`
# on the first round.
#   BINS="A B" MODE=tcp-bundle ROUNDS=7 [SRC=/var/tmp/s14/src] ./cpuab.sh
set -uo pipefail
MODE=${MODE:-tcp-bundle}
ROUNDS=${ROUNDS:-5}
SRC=${SRC:-/var/tmp/s14/src}
W=${W:-/var/tmp/s14/ab}
rm -rf "$W"; mkdir -p "$W"
: >"$W/rows.txt"
echo "# cpuab.sh MODE=$MODE ROUNDS=$ROUNDS SRC=$SRC $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  entries="$BINS"
  [ $((round % 2)) -eq 0 ] && entries=$(echo $BINS | tr ' ' '\n' | tac | tr '\n' ' ')
  for entry in $entries; do
    bin=${entry%%+*}; flag=""; [ "$entry" != "$bin" ] && flag=${entry#*+}
    # The log is removed first: the receiver's shell truncates it only once it runs, and a
    # stale log's address sent the sender to the last run's port.
    rm -rf "$W/dst" "$W/recv.log"
    $bin recv --once --listen 127.0.0.1:0 --flat --dest "$W/dst" --identity "$W/id" $flag >"$W/recv.log" 2>&1 &
    rp=$!
    addr=""
    for _ in $(seq 200); do
      addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' "$W/recv.log")
      [ -n "$addr" ] && break; sleep 0.05
    done
    s=$(date +%s.%N)
    $bin send --to "$addr" --src "$SRC" --mode "$MODE" --identity "$W/id" --json >"$W/row.json" 2>"$W/send.err"
    e=$(date +%s.%N)
    kill $rp 2>/dev/null # a sender that never reached it leaves `recv --once` waiting
    wait $rp
    if [ "$round" -eq 1 ] && ! diff -rq "$SRC" "$W/dst" >/dev/null; then echo "DIFFERS: $entry"; fi
    python3 - "$W/row.json" "$entry" "$s" "$e" >>"$W/rows.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
name = sys.argv[2].split("/")[-1]
wall = float(sys.argv[4]) - float(sys.argv[3])
snd, rcv = r["sender_cpu_seconds"], r.get("receiver_run_cpu_seconds") or 0.0
print(name, r["status"], "%.3f" % wall, "%.3f" % snd, "%.3f" % rcv, "%.3f" % (snd + rcv),
      "%.1f" % (r["sender_peak_rss_bytes"] / 1e6), "%.1f" % ((r.get("receiver_peak_rss_bytes") or 0) / 1e6),
      r.get("receiver_conn_window_min", ""))
PY
    tail -1 "$W/rows.txt"
  done
done
echo "# medians over the ok rounds: wall, CPU sender / receiver / both; largest peak RSS sender / receiver (MB)"
python3 - "$W/rows.txt" <<'PY'
import statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(f[0], []).append(f)
for name, rs in rows.items():
    ok = [r for r in rs if r[1] == "ok"]
    med = lambda i: st.median(float(r[i]) for r in ok)
    print(f"{name:34} ok {len(ok)}/{len(rs)}  wall {med(2):.3f}  cpu {med(3):.3f} / {med(4):.3f} / {med(5):.3f}"
          f"  rss {max(float(r[6]) for r in ok):.1f} / {max(float(r[7]) for r in ok):.1f}")
PY
