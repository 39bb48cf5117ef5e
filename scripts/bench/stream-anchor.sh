#!/usr/bin/env bash
# What a stream per file costs on its own: the per-file-stream anchor (transport/examples/
# stream_anchor.rs: the same yamux-over-TLS and quinn settings as Shoal, FILES streams of SIZE
# bytes, no files, no hashing) beside `tar | tar` and Shoal's per-file and bundle modes on the
# same tree, loopback, tmpfs, alternating, the order reversed every pass, medians over PASSES.
#
#   scripts/bench/stream-anchor.sh [SHOAL_BIN] [PASSES] [FILES]
#     SHOAL_BIN  default target/release/shoal (built if absent)
#     PASSES     default 5
#     FILES      default 65536 (× 4 KiB, shoal gen --seed 1)
#
# Per arm: the whole process's wall time (for Shoal, the `shoal send` process: walk, connect,
# transfer, completion; for the anchor, its whole process: identity, handshake, streams) and
# both ends' CPU seconds (Shoal: the row's `sender_cpu_seconds` and `receiver_run_cpu_seconds`,
# each `getrusage` of its whole process, the receiver's from the run's admission; the anchor:
# `getrusage` of its one process, which holds both ends, from its start). The summary gives tar|tar's wall / each arm's wall, the ratio issue 19's
# targets use (tcp-streams >= 0.75, quic-streams >= 0.6): an anchor below a target says the
# protocol alone, as Shoal configures it, cannot meet it on this host. It then sets each
# per-file mode's CPU beside its bundle mode's plus the anchor's (what a stream per file adds
# beyond the protocol is the difference), and gives the wall-time floor that CPU sets on this
# many cores (CPU / cores: every core busy for the whole run) as tar|tar's wall over it: a
# target above that figure cannot be met by scheduling, only by less CPU. Every Shoal row must be
# `ok` (the receiver verified every file's SHA-256); tar's destination is checked with
# `shoal verify`. Needs root for the tmpfs (mounted and unmounted here).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PASSES=${2:-5}
FILES=${3:-65536}
cargo build --release -q -p shoal-transport --example stream_anchor
ANCHOR=$ROOT/target/release/examples/stream_anchor
if [ -n "${1:-}" ]; then
  SHOAL=$(readlink -f "$1")
else
  cargo build --release -q -p shoal
  SHOAL=$ROOT/target/release/shoal
fi

WORK=$(mktemp -d /var/tmp/shoal-stream-anchor.XXXXXX)
mount -t tmpfs -o size=4G,nr_inodes=0 shoal-stream-anchor "$WORK"
cleanup() { umount "$WORK" 2>/dev/null || true; rmdir "$WORK" 2>/dev/null || true; }
trap cleanup EXIT
"$SHOAL" gen --out "$WORK/src" --files "$FILES" --size 4KiB --seed 1 >/dev/null
tar -C "$WORK/src" -cf - . >/dev/null
echo "stream anchor: $FILES × 4 KiB, tmpfs, loopback, $PASSES passes; $(uname -r), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
echo "shoal: $SHOAL ($("$SHOAL" --version 2>/dev/null | head -1))"

now() { date +%s.%N; }
: >"$WORK/results.txt"

run_tar() {
  rm -rf "$WORK/dst"; mkdir -p "$WORK/dst"
  local t0 t1
  t0=$(now)
  tar -C "$WORK/src" -cf - . | tar -C "$WORK/dst" -xf -
  t1=$(now)
  "$SHOAL" verify "$WORK/src" "$WORK/dst" >/dev/null || { echo "tar: destination differs"; exit 1; }
  echo "tar $(echo "$t1 - $t0" | bc -l) 0 0" | tee -a "$WORK/results.txt"
}

run_anchor() {
  local t0 t1 out
  t0=$(now)
  out=$("$ANCHOR" "$1" "$FILES" 4096)
  t1=$(now)
  echo "$out" >&2
  echo "$out" | awk -v arm="anchor-$1" -v wall="$(echo "$t1 - $t0" | bc -l)" \
    '{for (i = 1; i < NF; i++) v[$i] = $(i + 1); print arm, wall, v["cpu_s"], 0}' |
    tee -a "$WORK/results.txt"
}

run_shoal() {
  rm -rf "$WORK/dst" "$WORK/recv.log" # a stale log's address is the last run's receiver
  "$SHOAL" recv --once --listen 127.0.0.1:0 --flat --dest "$WORK/dst" --identity "$WORK/id" >"$WORK/recv.log" 2>&1 &
  local rp=$! addr="" t0 t1
  for _ in $(seq 200); do
    addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' "$WORK/recv.log")
    [ -n "$addr" ] && break
    sleep 0.05
  done
  t0=$(now)
  "$SHOAL" send --to "$addr" --src "$WORK/src" --mode "$1" --identity "$WORK/id" --json >"$WORK/row.json"
  t1=$(now)
  wait "$rp"
  python3 - "$WORK/row.json" "$1" "$(echo "$t1 - $t0" | bc -l)" <<'PY' | tee -a "$WORK/results.txt"
import json, sys
r = json.load(open(sys.argv[1]))
if r["status"] != "ok":
    sys.exit(f"{sys.argv[2]}: run not ok: {r['status']} {r.get('error')}")
print(sys.argv[2], sys.argv[3], r["sender_cpu_seconds"], r.get("receiver_run_cpu_seconds") or 0)
PY
}

ARMS="tar tcp-bundle anchor-yamux tcp-streams quic-bundle anchor-quic quic-streams"
for pass in $(seq "$PASSES"); do
  arms=$ARMS
  [ $((pass % 2)) -eq 0 ] && arms=$(echo $ARMS | tr ' ' '\n' | tac | tr '\n' ' ')
  for arm in $arms; do
    case $arm in
      tar) run_tar ;;
      anchor-*) run_anchor "${arm#anchor-}" ;;
      *) run_shoal "$arm" ;;
    esac
  done
done

echo "# medians of $PASSES: wall s, CPU s of both ends, tar|tar wall / wall"
python3 - "$WORK/results.txt" <<'PY'
import os, statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    arm, wall, a, b = line.split()
    rows.setdefault(arm, []).append((float(wall), float(a) + float(b)))
tar = st.median(w for w, _ in rows["tar"])
med = {}
for arm in ["tar", "tcp-bundle", "anchor-yamux", "tcp-streams", "quic-bundle", "anchor-quic", "quic-streams"]:
    wall = st.median(w for w, _ in rows[arm])
    cpu = st.median(c for _, c in rows[arm])
    med[arm] = (wall, cpu)
    print(f"{arm:14} wall {wall:.3f}  cpu {cpu:.3f}  tar/this {tar / wall:.2f}")
# What a stream per file adds: the per-file mode's CPU beside its bundle mode's (the same files,
# walk, hashing, TLS and writes) plus the protocol alone; and the floor the CPU puts under the
# wall time when every core is busy all the time.
cores = os.cpu_count()
for streams, bundle, anchor in [("tcp-streams", "tcp-bundle", "anchor-yamux"),
                                ("quic-streams", "quic-bundle", "anchor-quic")]:
    s, b, a = med[streams][1], med[bundle][1], med[anchor][1]
    floor = s / cores
    print(f"{streams}: cpu {s:.3f} against {bundle} {b:.3f} + {anchor} {a:.3f} = {b + a:.3f};"
          f" cpu / {cores} cores = {floor:.3f} s, tar|tar wall / that = {tar / floor:.2f}")
PY
