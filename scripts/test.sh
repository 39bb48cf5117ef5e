#!/usr/bin/env bash
# The test command: installs what the tests need, checks formatting and lints, then runs every
# test of the workspace. Tests that need root (network namespaces, the emulated link) pass
# without running when not root, so a run without root is reported as incomplete (exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --release -- -D warnings
# The code's shape: file sizes, no import loops, unsafe fenced, a pure protocol crate.
python3 scripts/check-shape.py
# Every file the docs cite as evidence is committed (results/*/ is git-ignored).
python3 scripts/check-cited.py
# Each root-only test notes in this file whether it ran or skipped (tests/support: root_only).
root_log=target/root-only-tests.log
mkdir -p target
: >"$root_log"
SHOAL_ROOT_ONLY_LOG="$PWD/$root_log" cargo test --workspace --release --no-fail-fast "$@"
# The vendored yamux: exactly upstream + our patch, and upstream's own tests pass on it.
scripts/check-vendor.sh
cargo test --release --manifest-path vendor/yamux/Cargo.toml --target-dir target/vendor-yamux
# Root-only tests (tests/*.rs: `root_only()`, or `note_root_only(true)` after their own check)
# print "skipped: … needs root" and return when not root.
expected=$(grep -hoE 'if !root_only\(\)|note_root_only\(true\)' tests/*.rs | wc -l)
ran=$(grep -c '^ran ' "$root_log" || true)
skipped=$(grep -c '^skipped ' "$root_log" || true)
if [ "$(id -u)" -eq 0 ] && [ "$skipped" -eq 0 ] && { [ "$ran" -eq "$expected" ] || [ $# -gt 0 ]; }; then
  echo "test.sh: ran as root: $ran of $expected root-only tests ran"
else
  echo "test.sh: NOT COMPLETE: $ran of $expected root-only tests (namespaces, emulated link) ran, $skipped only printed 'skipped'$([ "$(id -u)" -eq 0 ] || echo '; not root: run as root')" >&2
  grep '^skipped ' "$root_log" >&2 || true
  exit 1
fi
