#!/usr/bin/env bash
# File creation at the receiver, no network: how fast each tool creates a tree of small files
# on a fresh volume, and where Shoal's receiver stands among them (issue #42, section 1).
#
#   scripts/bench/create.sh                         # 65,536 × 4 KiB, btrfs ext4 xfs, 5 passes
#   FSES="btrfs" PASSES=3 FILES=20000 scripts/bench/create.sh
#   SUMMARY_OF=LOG scripts/bench/create.sh          # the summary of an earlier run's output
#   IMG_DIR=/var/tmp FSES=btrfs ARMS="tar-x writer" scripts/bench/create.sh   # images on disk
#   IMG_SIZES="2G 64G" FSES=btrfs ARMS=writer scripts/bench/create.sh   # volume sizes alternated
#
# Root. The source and a tar archive of it sit on a tmpfs (read from memory); every run writes
# into a FRESH loop volume (a sparse image in /dev/shm, so the disk under it is memory too and
# what is measured is each file system's CPU and locking cost), made with mkfs defaults (ext4
# keeps its journal) and removed after the run. The arms, alternating (order reversed every
# other pass), each after one untimed warm-up run per file system:
#   tar-x   tar -C DST -xf SRC.tar                  (the archive is already made)
#   cpz     cpz SRC DST                             (crate cpz, project fuc; installed by
#                                                    `cargo install cpz` when missing)
#   cp-r    cp -r SRC DST
#   shoal   shoal recv on 127.0.0.1 into DST, fed by `shoal send --mode tcp-bundle` over
#           loopback: the receiver's writes plus the transfer (the sender reads from tmpfs)
#   writer  the receiver's writer pool alone, fed from memory (pipeline/examples/write_tree.rs:
#           the tree is read before its clock starts): the writes without the network
# Time: the wall time of the command (for shoal, of `shoal send`, which returns after the
# receiver's completion report: every file written, closed and renamed to its final name; for
# writer, the time it prints, from starting the writers to their end). No tool fsyncs. Every
# destination is verified by SHA-256 after its clock stopped; a run that does not verify is a
# failure line, never a time. Prints one line per run, then docs/benchmarks.md's tables of the
# log: per file system the medians in files/s, the ratios of shoal and of its writer to tar -x
# and cpz with their pass-by-pass range, and the loopback arm's CPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/bench/recv.sh
. scripts/bench/recv.sh
# shellcheck source=scripts/bench/volume.sh
. scripts/bench/volume.sh

# The summary is docs/benchmarks.md's table of this log (scripts/bench-tables.py, kind create).
summarize() {
  python3 scripts/bench-tables.py --print create "$1"
}

if [ -n "${SUMMARY_OF:-}" ]; then
  summarize "$SUMMARY_OF"
  exit
fi
[ "$(id -u)" -eq 0 ] || { echo "create.sh: needs root (loop volumes)" >&2; exit 2; }

FILES=${FILES:-65536}
SIZE=${SIZE:-4KiB}
PASSES=${PASSES:-5}
FSES=${FSES:-btrfs ext4 xfs}
ARMS=${ARMS:-tar-x cpz cp-r shoal writer}
IMG_SIZE=${IMG_SIZE:-4G}
# Several volume sizes: each arm runs at each, alternated with the others within every pass, and
# a line's file system reads FS@SIZE.
IMG_SIZES=${IMG_SIZES:-$IMG_SIZE}
# Where the volume's image goes: with the source in /dev/shm by default (the disk under the
# volume is memory); a folder on disk puts the host's disk and page cache under it, as the
# sweep's `dest_fs` volumes have.
IMG_DIR=${IMG_DIR:-}

if [ -n "${SHOAL_BIN:-}" ]; then
  SHOAL=$SHOAL_BIN
else
  cargo build --release -q -p shoal
  SHOAL=$PWD/target/release/shoal
fi
if [[ " $ARMS " == *" writer "* ]]; then
  cargo build --release -q -p shoal-pipeline --example write_tree
  WRITER=$PWD/target/release/examples/write_tree
fi
if [[ " $ARMS " == *" cpz "* ]] && ! command -v cpz >/dev/null; then
  echo "installing cpz (cargo install cpz)…"
  cargo install -q cpz
fi
export PATH="$HOME/.cargo/bin:$PATH"

bench_work create
tar -C "$WORK/src" -cf "$WORK/src.tar" .
{
  echo "payload: $FILES files of $SIZE in $WORK/src (tmpfs); file systems $FSES; arms $ARMS; $PASSES passes; volume images of $IMG_SIZES in ${IMG_DIR:-$WORK} ($(stat -f -c %T "${IMG_DIR:-$WORK}"))"
  echo "kernel $(uname -r), $(nproc) cores; $("$SHOAL" --version); cpz $(cpz --version 2>/dev/null | head -1 || echo absent); $(tar --version | head -1)"
} | tee "$WORK/results.txt"

now() { date +%s.%N; }

# Runs case $2 (ARM@SIZE) on file system $1, pass $3; prints its line.
run() {
  local fs=$1 arm=${2%@*} size=${2#*@} pass=$3 dst=$MNT/dst folder t0 t1 ok=1 cpu="" label=$1 why=""
  [ "$IMG_SIZES" = "$IMG_SIZE" ] || label=$fs@$size
  make_volume "$fs" "$IMG" "$MNT" "$size"
  sync
  case $arm in
    tar-x)
      mkdir "$dst"
      t0=$(now); tar -C "$dst" -xf "$WORK/src.tar" || { why="exit status $?"; ok=0; }; t1=$(now)
      folder=$dst ;;
    cpz)
      t0=$(now); cpz "$WORK/src" "$dst" || { why="exit status $?"; ok=0; }; t1=$(now)
      folder=$dst ;;
    cp-r)
      t0=$(now); cp -r "$WORK/src" "$dst" || { why="exit status $?"; ok=0; }; t1=$(now)
      folder=$dst ;;
    shoal)
      local log=$WORK/recv.log json run_id
      start_receiver "$log" "$SHOAL" --dest "$dst" --identity "$WORK/identity" --once
      local rpid=$RECV_PID
      t0=$(now)
      json=$("$SHOAL" send --to "$RECV_ADDR" --src "$WORK/src" --mode tcp-bundle --identity "$WORK/identity" --json) || { why="exit status $?"; ok=0; }
      t1=$(now)
      wait "$rpid" || true
      run_id=$(echo "$json" | grep -o '"run_id":"[0-9a-f]*"' | cut -d'"' -f4)
      # Both ends share this host's cores: what each used (the row's getrusage figures).
      cpu=$(echo "$json" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("cpu sender %.2f s, receiver %.2f s" % (r["sender_cpu_seconds"], r["receiver_run_cpu_seconds"]))' 2>/dev/null || true)
      folder=$dst/$run_id ;;
    writer)
      local line
      line=$("$WRITER" "$WORK/src" "$dst") || { why="exit status $?"; ok=0; }
      # Its own clock: the source was read into memory before it started.
      t0=0; t1=$(echo "$line" | sed -nE 's/.* in ([0-9.]+) s,.*/\1/p')
      [ -n "$t1" ] || { why=${why:-"no time in its output"}; ok=0; }
      folder=$dst ;;
  esac
  # A run counts only if its destination verifies; a failure line says why (the tool's exit
  # status, or `shoal verify`'s verdict: a tool that exits 0 having left files out fails here).
  local verdict=""
  [ "$ok" = 1 ] && { verdict=$("$SHOAL" verify "$WORK/src" "$folder" 2>&1 | tail -1) || ok=0; }
  [ "$ok" = 1 ] || why=${why:-"verification: $verdict"}
  if [ "$ok" = 1 ]; then
    awk -v f="$FILES" -v t0="$t0" -v t1="$t1" -v fs="$label" -v a="$arm" -v p="$pass" -v c="$cpu" \
      'BEGIN { s=t1-t0; printf "%-6s %-6s pass %s: %7.3f s %9.0f files/s%s\n", fs, a, p, s, f/s, (c == "" ? "" : "  " c) }'
  else
    echo "$label $arm pass $pass: FAILED ($why)"
  fi
  drop_volume
}

CASES=$(for arm in $ARMS; do for size in $IMG_SIZES; do echo "$arm@$size"; done; done | tr '\n' ' ')
for fs in $FSES; do
  for c in $CASES; do run "$fs" "$c" warm-up; done
  for pass in $(seq "$PASSES"); do
    order=$CASES
    if [ $((pass % 2)) -eq 0 ]; then order=$(echo "$CASES" | tr ' ' '\n' | tac | tr '\n' ' '); fi
    for c in $order; do run "$fs" "$c" "$pass"; done
  done
done | tee -a "$WORK/results.txt"
summarize "$WORK/results.txt"
