#!/usr/bin/env bash
# System calls per file created, by tool (issue #42, section 1): each arm of
# scripts/bench/create.sh once under `strace -f -c` into a fresh ext4 loop volume (tmpfs under
# it), the source on tmpfs. For shoal, the receiver alone is traced (its writes plus its socket
# reads); the writer arm is the receiver's writer pool fed from memory, its own reads of the
# source included (an openat, two statx, two reads and a close per file, as measured: subtract them to compare).
#
#   scripts/bench/create-syscalls.sh                # 8,192 × 4 KiB
#   FILES=20000 FS=xfs scripts/bench/create-syscalls.sh
#
# Root. Prints, per arm, the total calls per file and the calls that make up most of it. strace
# slows every call, so no time here is a figure of speed.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/bench/recv.sh
. scripts/bench/recv.sh
# shellcheck source=scripts/bench/volume.sh
. scripts/bench/volume.sh
[ "$(id -u)" -eq 0 ] || { echo "create-syscalls.sh: needs root (loop volumes)" >&2; exit 2; }
command -v strace >/dev/null || apt-get install -y -q strace >/dev/null

FILES=${FILES:-8192}
SIZE=${SIZE:-4KiB}
FS=${FS:-ext4}
ARMS=${ARMS:-tar-x cpz cp-r shoal writer}
cargo build --release -q -p shoal
cargo build --release -q -p shoal-pipeline --example write_tree
SHOAL=$PWD/target/release/shoal
WRITER=$PWD/target/release/examples/write_tree
export PATH="$HOME/.cargo/bin:$PATH"

IMG_DIR='' bench_work syscalls
tar -C "$WORK/src" -cf "$WORK/src.tar" .
echo "payload: $FILES files of $SIZE (tmpfs) into a fresh $FS loop volume; $("$SHOAL" --version); $(strace -V | head -1)"

for arm in $ARMS; do
  make_volume "$FS" "$IMG" "$MNT"
  dst=$MNT/dst out=$WORK/$arm.strace
  case $arm in
    tar-x) mkdir "$dst"; strace -f -c -o "$out" tar -C "$dst" -xf "$WORK/src.tar" ;;
    cpz) strace -f -c -o "$out" cpz "$WORK/src" "$dst" ;;
    cp-r) strace -f -c -o "$out" cp -r "$WORK/src" "$dst" ;;
    writer) strace -f -c -o "$out" "$WRITER" "$WORK/src" "$dst" >/dev/null ;;
    shoal)
      RECV_WRAP="strace -f -c -o $out" start_receiver "$WORK/recv.log" "$SHOAL" --dest "$dst" \
        --identity "$WORK/identity" --once
      rpid=$RECV_PID
      "$SHOAL" send --to "$RECV_ADDR" --src "$WORK/src" --mode tcp-bundle \
        --identity "$WORK/identity" >/dev/null
      wait "$rpid" || true ;;
  esac
  python3 - "$out" "$FILES" "$arm" <<'PY'
import sys
path, files, arm = sys.argv[1], int(sys.argv[2]), sys.argv[3]
calls = {}
for line in open(path):
    f = line.split()
    # "% time seconds usecs/call calls [errors] syscall"
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
        calls[f[-1]] = int(f[3])
total = sum(calls.values())
top = sorted(calls.items(), key=lambda kv: -kv[1])[:8]
print(f"{arm:6s} {total / files:6.2f} calls per file: " + ", ".join(f"{n} {c / files:.2f}" for n, c in top))
PY
  umount "$MNT"
done
