#!/usr/bin/env bash
# quic-bundle's CPU per GB beside quinn's own bulk benchmark (the anchor), on loopback, tmpfs.
#
#   scripts/bench/quinn-anchor.sh [SHOAL_BIN] [RUNS] [BYTES]
#     SHOAL_BIN  default target/release/shoal
#     RUNS       default 5 (each pass: quinn's bench, the single-stream anchor, Shoal; the order
#                reversed every other pass)
#     BYTES      default 268435456 (256 MiB: one file for Shoal, one stream for the anchor)
#   QUINN_BENCH_DIR   scratch folder for quinn's own bench (default /work/bench/quinn-own)
#   QUINN_ANCHOR_DIR  scratch folder for the single-stream anchor (default /work/bench/quinn-bench)
#   SHOAL_SEND_ARGS   more `shoal send` flags, e.g. "--max-udp-payload 1452": the datagram size
#                     quinn's bench and the anchor use on loopback (Shoal's default there is 6,500)
#
# Three arms, each built against Shoal's vendored quinn-proto (the same protocol code):
# - quinn-bench: quinn's own `benches/bench.rs`, `large_data_1_stream` (bencher; 1 MiB per
#   iteration on a new stream, waits for each stream to be stopped), built from the quinn crate
#   in the registry (the version in Cargo.lock). Its dev-dependencies come from the registry:
#   the first build fetches them (crates.io), later builds are offline. It prints time per
#   iteration, not bytes moved, so its bytes are counted on the loopback interface
#   (/sys/class/net/lo tx_bytes) and turned into payload with the single-stream anchor's
#   payload / loopback-bytes ratio measured in the same pass (same quinn, same packets).
# - anchor: scripts/quinn-anchor/main.rs, the same client and server as quinn's bench moving
#   BYTES on one stream (no per-iteration stream set-up or wait): the stricter reference.
# - shoal: `shoal send --mode quic-bundle` of one BYTES file to `shoal recv --once`.
# CPU is user + system of whole processes (/usr/bin/time): connect, handshake, and for Shoal
# reading the file from tmpfs and writing it to tmpfs, start-up and exit. The file I/O alone
# (dd of the same file from and into the same tmpfs) is printed as the floor a file copier adds.
# Medians over RUNS.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(readlink -f "${1:-$ROOT/target/release/shoal}")
RUNS=${2:-5}
BYTES=${3:-268435456}

# The single-stream anchor.
SCRATCH=${QUINN_ANCHOR_DIR:-/work/bench/quinn-bench}
ANCHOR=$("$ROOT/scripts/quinn-anchor/build.sh" "$SCRATCH")

# quinn's own bench, from the registry's quinn crate.
QV=$(awk '/^name = "quinn"$/{getline; gsub(/"/, "", $3); print $3; exit}' "$ROOT/Cargo.lock")
QDIR=${QUINN_BENCH_DIR:-/work/bench/quinn-own}
if [ ! -d "$QDIR/quinn-$QV" ]; then
  cargo fetch -q --manifest-path "$SCRATCH/Cargo.toml"
  QSRC=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -maxdepth 2 -type d -name "quinn-$QV" | head -1)
  [ -n "$QSRC" ] || { echo "bench-quinn-anchor: quinn $QV not in the registry cache" >&2; exit 1; }
  mkdir -p "$QDIR"
  cp -r "$QSRC" "$QDIR/quinn-$QV"
  printf '\n[patch.crates-io]\nquinn-proto = { path = "%s/vendor/quinn-proto" }\n' "$ROOT" >>"$QDIR/quinn-$QV/Cargo.toml"
fi
(cd "$QDIR/quinn-$QV" && nice -n 10 cargo build --release --quiet --bench bench --features rustls-ring --target-dir "$QDIR/target")
QBENCH=$(ls -t "$QDIR"/target/release/deps/bench-* | grep -v '\.d$' | head -1)

W=/var/tmp/shoal-anchor
mkdir -p $W
mountpoint -q $W || mount -t tmpfs -o size=2G anchor $W
SRC=$W/src-$BYTES
[ -d "$SRC" ] || "$BIN" gen --out "$SRC" --files 1 --size "$BYTES" --seed 1 >/dev/null
FILE=$(find "$SRC" -type f | head -1)
lo() { cat /sys/class/net/lo/statistics/tx_bytes; }
# UDP receive-buffer overflows (RcvbufErrors), host-wide: a run with drops retransmits.
drops() { awk '/^Udp:/{n++} /^Udp:/&&n==2{print $6}' /proc/net/snmp; }
cpu_of() { awk '{print $1+$2}' "$1"; }
OUT=$W/lines; : > $OUT
echo "binaries: shoal $BIN ($(sha256sum "$BIN" | cut -c1-12)), quinn $QV bench $QBENCH, anchor $ANCHOR; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"

run_quinn_bench() {
  local a b d
  a=$(lo); d=$(drops)
  /usr/bin/time -f "%U %S" -o $W/qb.time "$QBENCH" large_data_1_stream >$W/qb.out 2>&1
  b=$(lo)
  echo "run $1 quinn-bench: $(grep -o 'bench:.*' $W/qb.out) cpu_s $(cpu_of $W/qb.time) lo_bytes $((b - a)) udp_rcvbuf_drops $(($(drops) - d))"
  echo "qbraw $1 $(cpu_of $W/qb.time) $((b - a))" >> $OUT
}
run_anchor() {
  local a b d line
  a=$(lo); d=$(drops)
  line=$(/usr/bin/time -f "%U %S" -o $W/an.time "$ANCHOR" "$BYTES")
  b=$(lo)
  echo "run $1 anchor: $line process_cpu_s $(cpu_of $W/an.time) lo_bytes $((b - a)) udp_rcvbuf_drops $(($(drops) - d))"
  echo "anchor $1 $(cpu_of $W/an.time) $((b - a))" >> $OUT
}
run_shoal() {
  local a b d log=$W/recv.log addr="" status s r
  rm -rf $W/dst $log # a stale log's address is the last run's receiver, gone by now
  a=$(lo); d=$(drops)
  /usr/bin/time -f "%U %S" -o $W/recv.time "$BIN" recv --listen 127.0.0.1:0 --dest $W/dst --identity $W/id --once --flat >$log 2>&1 &
  local rp=$!
  for _ in $(seq 100); do addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' $log); [ -n "$addr" ] && break; sleep 0.1; done
  /usr/bin/time -f "%U %S" -o $W/send.time "$BIN" send --to "$addr" --src "$SRC" --mode quic-bundle --identity $W/id --json ${SHOAL_SEND_ARGS:-} >$W/row.json 2>$W/send.err || true
  wait $rp || true
  b=$(lo)
  status=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["status"], r["seconds"], r.get("udp_payload_bytes"), r.get("sender_gso_segments"), r.get("receiver_gro_segments"), r.get("threads"), r.get("receiver_threads"))' $W/row.json 2>/dev/null || echo "no-row")
  s=$(cpu_of $W/send.time); r=$(cpu_of $W/recv.time)
  echo "run $1 shoal quic-bundle: status/seconds/udp_payload/gso/gro/threads $status send_cpu_s $s recv_cpu_s $r lo_bytes $((b - a)) udp_rcvbuf_drops $(($(drops) - d))"
  case $status in ok*) echo "shoal $1 $s $r $((b - a))" >> $OUT ;; esac
}
for i in $(seq "$RUNS"); do
  if [ $((i % 2)) -eq 1 ]; then
    run_quinn_bench "$i"; run_anchor "$i"; run_shoal "$i"
  else
    run_shoal "$i"; run_anchor "$i"; run_quinn_bench "$i"
  fi
done
rm -rf $W/dst
for i in 1 2 3; do
  /usr/bin/time -f "%U %S" -o $W/rd.time dd if="$FILE" of=/dev/null bs=64k status=none
  /usr/bin/time -f "%U %S" -o $W/wr.time dd if="$FILE" of=$W/dd.out bs=64k status=none
  rm -f $W/dd.out
  echo "io $i $(cpu_of $W/rd.time) $(cpu_of $W/wr.time)" >> $OUT
done
python3 - "$OUT" "$BYTES" <<'PY'
import statistics, sys
gb = int(sys.argv[2]) / 1e9
rows = {}
for line in open(sys.argv[1]):
    k, i, *v = line.split()
    rows.setdefault(k, {})[int(i)] = [float(x) for x in v]
med = statistics.median
anchor = {i: (cpu / gb, gb * 1e9 / lo) for i, (cpu, lo) in rows.get("anchor", {}).items()}
res = {}
if anchor:
    res["anchor"] = [a for a, _ in anchor.values()]
    print(f"median CPU s/GB anchor      : {med(res['anchor']):.3f} (whole process, one {sys.argv[2]}-byte stream) over {len(anchor)} runs")
    ratio = med([r for _, r in anchor.values()])
    print(f"  payload / loopback bytes of the anchor: {ratio:.4f} (median), used for quinn-bench's payload")
    qb = [cpu / (lo * ratio / 1e9) for cpu, lo in rows.get("qbraw", {}).values()]
    if qb:
        res["quinn-bench"] = qb
        print(f"median CPU s/GB quinn-bench : {med(qb):.3f} (quinn's benches/bench.rs large_data_1_stream, whole process) over {len(qb)} runs")
sh = rows.get("shoal", {})
if sh:
    res["shoal"] = [(s + r) / gb for s, r, _ in sh.values()]
    print(f"median CPU s/GB shoal       : {med(res['shoal']):.3f} (send + recv: {med([s / gb for s, _, _ in sh.values()]):.3f} + {med([r / gb for _, r, _ in sh.values()]):.3f}) over {len(sh)} runs")
io = rows.get("io", {})
if io:
    rd = med([a for a, _ in io.values()]) / gb
    # dd into the tmpfs reads the file too: the write alone is the difference.
    wr = med([b for _, b in io.values()]) / gb - rd
    print(f"file I/O alone (dd from and into this tmpfs): read {rd:.3f} + write {wr:.3f} s/GB")
for ref in ("quinn-bench", "anchor"):
    if ref in res and "shoal" in res:
        print(f"ratio shoal / {ref:11}: {med(res['shoal']) / med(res[ref]):.2f} (target <= 1.2)")
PY
