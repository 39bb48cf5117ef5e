#!/usr/bin/env bash
# The test command: installs what the tests need, checks formatting and lints, then runs every
# test of the workspace. Tests that need root (network namespaces, the emulated link) pass
# without running when not root, so a run without root is reported as incomplete (exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --release -- -D warnings
cargo test --workspace --release --no-fail-fast "$@"
# The vendored yamux: exactly upstream + our patch, and upstream's own tests pass on it.
scripts/check-vendor.sh
cargo test --release --manifest-path vendor/yamux/Cargo.toml --target-dir target/vendor-yamux
# Root-only tests say "skipped: … needs root" and return when not root.
root_only=$(grep -rh --include='*.rs' -c 'skipped: .*needs root' tests | awk '{s+=$1} END {print s+0}')
if [ "$(id -u)" -eq 0 ]; then
  echo "test.sh: ran as root: all $root_only root-only tests ran"
else
  echo "test.sh: NOT COMPLETE: not root, so $root_only root-only tests (namespaces, emulated link) only printed 'skipped'; run as root" >&2
  exit 1
fi
