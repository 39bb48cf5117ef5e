#!/usr/bin/env bash
# quic-bundle's CPU per GB beside quinn's own bulk transfer (the anchor), on loopback, tmpfs.
#
#   scripts/bench-quinn-anchor.sh [SHOAL_BIN] [RUNS] [BYTES]
#     SHOAL_BIN  default target/release/shoal
#     RUNS       default 5 (each run: the anchor, then Shoal, alternating)
#     BYTES      default 268435456 (256 MiB: one file for Shoal, one stream for the anchor)
#   QUINN_ANCHOR_DIR  scratch folder for the anchor's build (default /work/bench/quinn-bench)
#
# The anchor (scripts/quinn-anchor/main.rs) is the minimal equivalent of quinn 0.11's
# benches/bench.rs large_data_1_stream, built offline from registry sources with Shoal's
# Cargo.lock and vendored quinn-proto (same quinn, rustls, ring, tokio): quinn's own bench cannot be built offline, its
# `bencher` dev-dependency is not in the registry cache. CPU is user + system seconds:
# the anchor's client and server threads; Shoal's `send` and `recv --once` processes, whole
# life each (from /usr/bin/time: connect, handshake, reading the file from tmpfs, writing it to
# tmpfs, exit). Medians over RUNS; ratio = Shoal's (send + recv) / anchor's (client + server).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(readlink -f "${1:-$ROOT/target/release/shoal}")
RUNS=${2:-5}
BYTES=${3:-268435456}
SCRATCH=${QUINN_ANCHOR_DIR:-/work/bench/quinn-bench}
mkdir -p "$SCRATCH/src"
sed "s|@ROOT@|$ROOT|g" "$ROOT/scripts/quinn-anchor/Cargo.toml.in" >"$SCRATCH/Cargo.toml"
cp "$ROOT/scripts/quinn-anchor/main.rs" "$SCRATCH/src/main.rs"
cp "$ROOT/Cargo.lock" "$SCRATCH/Cargo.lock"
(cd "$SCRATCH" && nice -n 10 cargo build --offline --release --quiet)
ANCHOR=$SCRATCH/target/release/quinn-anchor

W=/var/tmp/shoal-anchor
mkdir -p $W
mountpoint -q $W || mount -t tmpfs -o size=2G anchor $W
SRC=$W/src-$BYTES
[ -d "$SRC" ] || "$BIN" gen --out "$SRC" --files 1 --size "$BYTES" --seed 1 >/dev/null
OUT=$W/lines; : > $OUT
for i in $(seq "$RUNS"); do
  line=$("$ANCHOR" "$BYTES")
  echo "run $i anchor: $line"
  echo "$line" | awk -v b="$BYTES" '{print "anchor", ($7+$9)/(b/1e9), $7/(b/1e9), $9/(b/1e9)}' >> $OUT

  rm -rf $W/dst; log=$W/recv.log
  /usr/bin/time -f "%U %S" -o $W/recv.time "$BIN" recv --listen 127.0.0.1:0 --dest $W/dst --identity $W/id --once --flat >$log 2>&1 &
  rp=$!
  addr=""
  for _ in $(seq 100); do addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' $log); [ -n "$addr" ] && break; sleep 0.1; done
  /usr/bin/time -f "%U %S" -o $W/send.time "$BIN" send --to "$addr" --src "$SRC" --mode quic-bundle --identity $W/id --json >$W/row.json 2>$W/send.err || true
  wait $rp || true
  status=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["status"], r["seconds"], r.get("udp_payload_bytes"), r.get("sender_gso_segments"), r.get("receiver_gro_segments"))' $W/row.json 2>/dev/null || echo "no-row")
  s=$(awk '{print $1+$2}' $W/send.time); r=$(awk '{print $1+$2}' $W/recv.time)
  echo "run $i shoal quic-bundle: status/seconds/udp_payload/gso/gro $status send_cpu_s $s recv_cpu_s $r"
  case $status in ok*) echo "shoal $(python3 -c "b=$BYTES/1e9; print(($s+$r)/b, $s/b, $r/b)")" >> $OUT ;; esac
done
python3 - "$OUT" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    k, *v = line.split()
    rows.setdefault(k, []).append([float(x) for x in v])
med = {k: [statistics.median(c) for c in zip(*v)] for k, v in rows.items()}
for k, (t, a, b) in sorted(med.items()):
    ends = "client + server" if k == "anchor" else "send + recv"
    print(f"median CPU s/GB {k:6}: {t:.3f} ({ends}: {a:.3f} + {b:.3f}) over {len(rows[k])} runs")
if "anchor" in med and "shoal" in med:
    print(f"ratio shoal/anchor (both ends): {med['shoal'][0] / med['anchor'][0]:.2f} (target <= 1.2)")
PY
