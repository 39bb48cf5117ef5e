#!/usr/bin/env bash
# The receiver's writer pool alone (pipeline/examples/write_tree.rs, fed from memory) with
# several writer counts, each run into a fresh loop volume: whether parallel creation lifts a
# file system's rate.
#
#   scripts/bench/writers.sh                                  # btrfs, 1 2 4 8 writers, 3 passes
#   FS=xfs WRITERS="1 2" PASSES=5 IMG_SIZE=4G IMG_DIR= scripts/bench/writers.sh
#
# Root. 65,536 × 4 KiB generated on a tmpfs (FILES, SIZE); the volume's sparse image in IMG_DIR
# (default /var/tmp: on disk, as the sweep's volumes) of IMG_SIZE (default 64G, past the size
# below which Btrfs waits on metadata reservations: docs/decisions/0028). The counts alternate,
# their order reversed every other pass. Prints write_tree's line per run, a run whose copy
# does not verify (SHA-256) as FAILED.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/bench/volume.sh
source scripts/bench/volume.sh
[ "$(id -u)" -eq 0 ] || { echo "writers.sh: needs root (loop volumes)" >&2; exit 2; }
FS=${FS:-btrfs}
WRITERS=${WRITERS:-1 2 4 8}
PASSES=${PASSES:-3}
FILES=${FILES:-65536}
SIZE=${SIZE:-4KiB}
IMG_SIZE=${IMG_SIZE:-64G}
IMG_DIR=${IMG_DIR-/var/tmp}
cargo build --release -q -p shoal -p shoal-pipeline --example write_tree
SHOAL=$PWD/target/release/shoal
WRITER=$PWD/target/release/examples/write_tree
bench_work writers
echo "$FILES files of $SIZE; $FS volumes of $IMG_SIZE in ${IMG_DIR:-$WORK}; writers $WRITERS; $PASSES passes; $("$SHOAL" --version)"
for pass in $(seq "$PASSES"); do
  order=$WRITERS
  if [ $((pass % 2)) -eq 0 ]; then order=$(echo "$WRITERS" | tr ' ' '\n' | tac | tr '\n' ' '); fi
  for n in $order; do
    make_volume "$FS" "$IMG" "$MNT" "$IMG_SIZE"
    sync
    if line=$("$WRITER" "$WORK/src" "$MNT/dst" "$n") && "$SHOAL" verify "$WORK/src" "$MNT/dst" >/dev/null 2>&1; then
      echo "pass $pass: $line"
    else
      echo "pass $pass: $n writers FAILED (exit or verification)"
    fi
    drop_volume
  done
done
