#!/usr/bin/env bash
# Issue 18's link targets (root): on an emulated RTT/RATE link (`shoal link`, tmpfs at both
# ends), per mode: one SIZE file over 1 connection, the same over N, and FILES × 4 KiB over N,
# alternated run by run (order reversed every other pass), every run verified by SHA-256.
#
#   MODES="tcp-bundle quic-bundle" PASSES=3 scripts/bench/blocks-link.sh
#
# Prints one line per run and each arm's median; the link is taken down at exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
NAME=${NAME:-blk}
RTT=${RTT:-141ms}
RATE=${RATE:-1gbit}
SIZE=${SIZE:-256MiB}
FILES=${FILES:-65536}
N=${N:-8}
PASSES=${PASSES:-3}
MODES=${MODES:-tcp-bundle quic-bundle}
SHOAL=${SHOAL:-$PWD/target/release/shoal}
WORK=$(mktemp -d /dev/shm/shoal-blocks-link.XXXXXX)
cleanup() {
  set +e
  [ -n "${RPID:-}" ] && kill "$RPID" 2>/dev/null
  [ -n "${RPID:-}" ] && wait "$RPID" 2>/dev/null
  "$SHOAL" link down --name "$NAME" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
"$SHOAL" link up --name "$NAME" --rtt "$RTT" --rate "$RATE" >/dev/null
"$SHOAL" gen --out "$WORK/big" --files 1 --size "$SIZE" --seed 1 >/dev/null
"$SHOAL" gen --out "$WORK/small" --files "$FILES" --size 4KiB --seed 2 >/dev/null
tar -C "$WORK" -cf - big small >/dev/null
"$SHOAL" link exec rcv --name "$NAME" -- "$SHOAL" recv --listen 198.18.0.2:7474 --flat --dest "$WORK/dst" \
  --identity "$WORK/identity" >"$WORK/recv.log" 2>&1 &
RPID=$!
for _ in $(seq 100); do grep -q '^listening on' "$WORK/recv.log" 2>/dev/null && break; sleep 0.1; done
echo "binary $SHOAL ($(sha256sum "$SHOAL" | cut -c1-12)), link $RTT / $RATE, $(nproc) cores, $PASSES passes"
arms=("big 1" "big $N" "small $N")
: >"$WORK/results"
for pass in $(seq "$PASSES"); do
  for mode in $MODES; do
    order=(0 1 2)
    if [ $((pass % 2)) -eq 0 ]; then order=(2 1 0); fi
    for i in "${order[@]}"; do
      read -r src conns <<<"${arms[$i]}"
      json=$("$SHOAL" link exec snd --name "$NAME" -- "$SHOAL" send --to 198.18.0.2:7474 \
        --src "$WORK/$src" --mode "$mode" --identity "$WORK/identity" --connections "$conns" --json) || true
      if echo "$json" | grep -q '"status":"ok"' && "$SHOAL" verify "$WORK/$src" "$WORK/dst" >/dev/null; then
        echo "$json" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("%s\t%s x%s\t%.2f\t%.2f\t%s\t%s" % (sys.argv[1], sys.argv[2], sys.argv[3], r["mb_per_s"], r["load_1m_start"], r["connections_used"], r["connection_bytes"]))' "$mode" "$src" "$conns" | tee -a "$WORK/results"
      else
        echo "FAILED or not verified: $mode $src x$conns: $json"
      fi
      find "$WORK/dst" -mindepth 1 -delete
    done
  done
done
python3 - "$WORK/results" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    mode, arm, mb, load, used, spread = line.rstrip("\n").split("\t")
    by.setdefault(mode, {}).setdefault(arm, []).append(float(mb))
for mode, arms in by.items():
    med = {a: statistics.median(v) for a, v in arms.items()}
    for a, v in arms.items():
        print("median %-12s %-12s %7.2f MB/s (%s)" % (mode, a, med[a], " ".join("%.1f" % x for x in v)))
    keys = list(med)
    big1, bigN, smallN = (next((med[k] for k in keys if k.startswith(p)), None) for p in ("big x1", "big x", "small"))
    bigN = next((med[k] for k in keys if k.startswith("big x") and not k.endswith("x1")), None)
    if big1 and bigN:
        print("%s: big xN / big x1 = %.3f (target >= 1.15)" % (mode, bigN / big1))
    if bigN and smallN:
        print("%s: big xN / small xN = %.3f (target within 5%%: 0.95..1.05)" % (mode, bigN / smallN))
PY
