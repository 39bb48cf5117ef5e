#!/usr/bin/env bash
# System calls per file created, by tool (issue #42, section 1): each arm of
# scripts/bench/create.sh once under `strace -f -c` into a fresh ext4 loop volume (tmpfs under
# it), the source on tmpfs. For shoal, the receiver alone is traced (its writes plus its socket
# reads); the writer arm is the receiver's writer pool fed from memory, its own reads of the
# source included (one openat, fstat, read and close per file: subtract them to compare).
#
#   scripts/bench/create-syscalls.sh                # 8,192 × 4 KiB
#   FILES=20000 FS=xfs scripts/bench/create-syscalls.sh
#
# Root. Prints, per arm, the total calls per file and the calls that make up most of it. strace
# slows every call, so no time here is a figure of speed.
set -euo pipefail
cd "$(dirname "$0")/../.."
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

WORK=$(mktemp -d /dev/shm/shoal-syscalls.XXXXXX)
MNT=$WORK/mnt
IMG=$WORK/volume.img
cleanup() {
  mountpoint -q "$MNT" && umount "$MNT"
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$MNT"
"$SHOAL" gen --out "$WORK/src" --files "$FILES" --size "$SIZE" --seed 1 >/dev/null
tar -C "$WORK/src" -cf "$WORK/src.tar" .
echo "payload: $FILES files of $SIZE (tmpfs) into a fresh $FS loop volume; $("$SHOAL" --version); $(strace -V | head -1)"

fresh_volume() {
  rm -f "$IMG"
  truncate -s 4G "$IMG"
  case $FS in
    ext4) mkfs.ext4 -q -N 400000 -E lazy_itable_init=0,lazy_journal_init=0 "$IMG" ;;
    xfs) mkfs.xfs -q -f "$IMG" ;;
    btrfs) mkfs.btrfs -q -f "$IMG" >/dev/null ;;
  esac
  mount -o loop "$IMG" "$MNT"
}

for arm in $ARMS; do
  fresh_volume
  dst=$MNT/dst out=$WORK/$arm.strace
  case $arm in
    tar-x) mkdir "$dst"; strace -f -c -o "$out" tar -C "$dst" -xf "$WORK/src.tar" ;;
    cpz) strace -f -c -o "$out" cpz "$WORK/src" "$dst" ;;
    cp-r) strace -f -c -o "$out" cp -r "$WORK/src" "$dst" ;;
    writer) strace -f -c -o "$out" "$WRITER" "$WORK/src" "$dst" >/dev/null ;;
    shoal)
      # start_receiver (scripts/bench/recv.sh) with the receiver under strace.
      log=$WORK/recv.log
      rm -f "$log"
      strace -f -c -o "$out" "$SHOAL" recv --listen 127.0.0.1:0 --dest "$dst" \
        --identity "$WORK/identity" --once >"$log" 2>&1 &
      rpid=$! RECV_ADDR=""
      for _ in $(seq 100); do
        RECV_ADDR=$(sed -n 's/^listening on //p' "$log" 2>/dev/null || true)
        [ -n "$RECV_ADDR" ] && break
        sleep 0.1
      done
      [ -n "$RECV_ADDR" ] || { echo "receiver did not start"; cat "$log"; exit 1; }
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
