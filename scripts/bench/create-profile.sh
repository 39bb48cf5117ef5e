#!/usr/bin/env bash
# Where the receiver's writer spends a tree's creation (issue #42, section 1): the writer alone
# (pipeline/examples/write_tree.rs, fed from memory) into a fresh loop volume, the whole host
# sampled by `perf record -a -g` while it runs; prints the share of samples by thread and the
# kernel paths of its system calls (children included: a path's share holds what it calls).
#
#   scripts/bench/create-profile.sh                 # btrfs, 65,536 × 4 KiB
#   FS=ext4 FILES=20000 scripts/bench/create-profile.sh
#
# Root. The source is read into memory before the writer's clock starts, but perf samples that
# too (the `write_tree` thread's reads, about one tenth of the samples): the writer threads are
# `shoal-writer-N`, the file system's own workers `kworker/…`.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/bench/volume.sh
. scripts/bench/volume.sh
[ "$(id -u)" -eq 0 ] || { echo "create-profile.sh: needs root (loop volumes)" >&2; exit 2; }
command -v perf >/dev/null || { echo "create-profile.sh: needs perf" >&2; exit 2; }
FILES=${FILES:-65536}
SIZE=${SIZE:-4KiB}
FS=${FS:-btrfs}
cargo build --release -q -p shoal
cargo build --release -q -p shoal-pipeline --example write_tree
SHOAL=$PWD/target/release/shoal
WRITER=$PWD/target/release/examples/write_tree

IMG_DIR='' bench_work profile
make_volume "$FS" "$IMG" "$MNT"
sync
echo "payload: $FILES files of $SIZE (tmpfs) into a fresh $FS loop volume; $("$SHOAL" --version); kernel $(uname -r), $(nproc) cores"
perf record -q -a -g -o "$WORK/perf.data" -- "$WRITER" "$WORK/src" "$MNT/dst" 2>&1 | grep '^writer:'
echo "samples by thread:"
perf report -i "$WORK/perf.data" --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -12
echo "kernel paths (children included):"
perf report -i "$WORK/perf.data" --children --sort sym --stdio 2>/dev/null | grep -E '^ +[0-9]' |
  grep -E '\] (worker_thread|__x64_sys_(linkat|openat|write|close|renameat2?|statx|read)|do_linkat|vfs_tmpfile|[a-z0-9]+_(tmpfile|link|create|rename|create_new_inode|orphan_add|del_orphan_item|insert_dir_item|insert_inode_ref|writepages|file_write_iter|buffered_write|sync_file|evict_inode)|ext4_orphan_(add|del)|xfs_iunlink(_remove)?|loop_process_work|pv_native_safe_halt)$' |
  head -40
