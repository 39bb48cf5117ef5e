#!/usr/bin/env bash
# Loopback A/B for issue 18 (a large file in blocks over several connections): one file of
# SIZE on tmpfs (/dev/shm), each ARM a `shoal send` argument set, arms alternated pass by pass
# (order reversed every other pass), every destination verified by SHA-256 and then freed.
#
#   ARMS="--connections 1|--connections 4" SIZE=1GiB PASSES=5 scripts/bench/blocks.sh
#   ARMS="--connections 4 --block-size 16MiB|--connections 4 --block-size 64MiB" scripts/bench/blocks.sh
#
# Prints one line per run (MB/s, load, connection_bytes) and each arm's median.
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE=${SIZE:-1GiB}
PASSES=${PASSES:-5}
MODE=${MODE:-tcp-bundle}
ARMS=${ARMS:---connections 1|--connections 4}
SHOAL=${SHOAL:-$PWD/target/release/shoal}
WORK=$(mktemp -d /dev/shm/shoal-blocks.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
"$SHOAL" gen --out "$WORK/src" --files 1 --size "$SIZE" --seed 1 >/dev/null
cat "$WORK"/src/* >/dev/null 2>&1 || true
IFS='|' read -r -a arms <<<"$ARMS"
echo "binary $SHOAL ($(sha256sum "$SHOAL" | cut -c1-12)), mode $MODE, 1 file of $SIZE on tmpfs, $PASSES passes, $(nproc) cores"
: >"$WORK/results"
for pass in $(seq "$PASSES"); do
  order=("${!arms[@]}")
  if [ $((pass % 2)) -eq 0 ]; then order=($(printf '%s\n' "${order[@]}" | tac)); fi
  for i in "${order[@]}"; do
    dst="$WORK/dst"; log="$WORK/recv.log"
    rm -f "$log" # a stale log's address is the last run's receiver, gone by now
    "$SHOAL" recv --listen 127.0.0.1:0 --flat --dest "$dst" --identity "$WORK/identity" --once >"$log" 2>&1 &
    rpid=$!
    addr=""
    for _ in $(seq 100); do
      addr=$(sed -n 's/^listening on //p' "$log" 2>/dev/null || true)
      [ -n "$addr" ] && break
      sleep 0.1
    done
    # shellcheck disable=SC2086
    json=$("$SHOAL" send --to "$addr" --src "$WORK/src" --mode "$MODE" --identity "$WORK/identity" --json ${arms[$i]}) || true
    wait "$rpid" || true
    if echo "$json" | grep -q '"status":"ok"' && "$SHOAL" verify "$WORK/src" "$dst" >/dev/null; then
      echo "$json" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("%d\t%s\t%.2f\t%.2f\t%s\t%s" % (int(sys.argv[1]), sys.argv[2], r["mb_per_s"], r["load_1m_start"], r["connections_used"], r["connection_bytes"]))' "$i" "${arms[$i]}" | tee -a "$WORK/results"
    else
      echo "FAILED or not verified: ${arms[$i]}: $json"
    fi
    rm -rf "$dst"
  done
done
python3 - "$WORK/results" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    i, arm, mb, load, used, spread = line.rstrip("\n").split("\t")
    by.setdefault((int(i), arm), []).append(float(mb))
base = None
for (i, arm), v in sorted(by.items()):
    m = statistics.median(v)
    base = base or m
    print("median %-40s %8.2f MB/s over %d runs (%s), %.3f x the first arm" % (arm, m, len(v), " ".join("%.1f" % x for x in v), m / base))
PY
