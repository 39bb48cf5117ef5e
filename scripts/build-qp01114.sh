#!/usr/bin/env bash
# Builds shoal at COMMIT against quinn 0.11.9 and the published quinn-proto 0.11.14 (before
# quinn-rs/quinn PR #2640, whose CUBIC cut its window to 0.595 × instead of 0.7 × after a loss in
# fast convergence), for a sweep's `shoal` axis beside the build it came from (docs/sweep.md,
# "A build against quinn-proto 0.11.14").
#
#   scripts/build-qp01114.sh [COMMIT [OUT]]      # defaults: HEAD, /tmp/shoal-qp01114
#
# quinn 0.11.12 needs quinn-proto >= 0.11.18; 0.11.9 is the newest quinn that accepts 0.11.14.
# Of vendor/quinn-proto/shoal.patch every hunk applies to 0.11.14 except the assembler's bound
# on buffered chunks, which 0.11.14 does not have (the bound came later). quinn-proto 0.11.14 has
# no `PathStats::min_rtt`, so this build records `min_rtt_ms` as 0 and its receiver sizes the
# QUIC window from the least smoothed round trip it read instead. Fetches from the registry
# once, then builds with --offline in a throwaway worktree; prints the binary's --version.
set -euo pipefail
commit=${1:-HEAD}
out=${2:-/tmp/shoal-qp01114}
repo=$(cd "$(dirname "$0")/.." && pwd)
src=$(mktemp -d /tmp/shoal-qp01114-src.XXXXXX)
rmdir "$src"
git -C "$repo" worktree add -q --detach "$src" "$commit"
trap 'git -C "$repo" worktree remove --force "$src"' EXIT

# quinn-proto 0.11.14 from the registry.
# shellcheck source=scripts/lib/fetch-crate.sh
. "$repo/scripts/lib/fetch-crate.sh"
mkdir -p "$src/target"
up=$(fetch_crate quinn-proto 0.11.14 "$src/target")

# The vendored crate replaced by 0.11.14 with Shoal's patch, less the assembler's hunk.
rm -rf "$src/vendor/quinn-proto"
cp -r "$up" "$src/vendor/quinn-proto"
python3 - "$repo/vendor/quinn-proto/shoal.patch" > "$src/target/qp01114.patch" <<'PY'
import sys
blocks = open(sys.argv[1]).read().split("diff -ruN ")
sys.stdout.write("".join("diff -ruN " + b for b in blocks[1:] if "src/connection/assembler.rs" not in b.splitlines()[0]))
PY
patch -s -p1 --no-backup-if-mismatch -d "$src/vendor/quinn-proto" < "$src/target/qp01114.patch"

# What quinn-proto 0.11.14 does not have.
sed -i 's/        min_rtt_ms: ms(s.path.min_rtt),/        min_rtt_ms: 0.0, \/\/ quinn-proto 0.11.14 has no PathStats::min_rtt/' \
  "$src/transport/src/stats.rs"
sed -i -e 's/conn.stats().path.min_rtt;/conn.stats().path.rtt; \/\/ quinn-proto 0.11.14: the least smoothed one read/' \
  -e 's/            rtt = min_rtt(&conn);/            rtt = rtt.min(min_rtt(\&conn));/' "$src/receiver/src/tune.rs"
grep -q 'min_rtt_ms: 0.0' "$src/transport/src/stats.rs"
grep -q 'rtt = rtt.min(min_rtt' "$src/receiver/src/tune.rs"

cd "$src"
cargo update -q -p quinn --precise 0.11.9
grep -A1 '^name = "quinn-proto"$' Cargo.lock | grep -q '0.11.14'
cargo fetch -q
cargo build -q --release --offline -p shoal
install -m 755 target/release/shoal "$out"
"$out" --version
