#!/usr/bin/env bash
# The test command: installs what the tests need, checks formatting and lints, then runs every
# test of the workspace. Tests that need root (network namespaces, the emulated link) are
# `#[ignore = "needs root"]`: as root they run (`--include-ignored`); without root cargo reports
# them ignored and the run is incomplete (exit 1). Arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --release -- -D warnings
# The code's shape: no import cycle, crate and file sizes, clap, unsafe and the protocol crate
# fenced, no working session named (scripts/check/check-shape.py says how).
python3 scripts/check/check-shape.py
# Every file the docs cite as evidence is committed (results/*/ is git-ignored).
python3 scripts/check/check-cited.py
root=false
[ "$(id -u)" -eq 0 ] && root=true
args=("$@")
if $root; then
  # After the caller's own `--` if it has one (test-binary arguments), else after a new one.
  if printf '%s\n' "$@" | grep -qx -- '--'; then args+=(--include-ignored); else args+=(-- --include-ignored); fi
fi
log=target/test-output.log
mkdir -p target
cargo test --workspace --release --no-fail-fast "${args[@]}" | tee "$log"
# The vendored yamux: exactly upstream + our patch, and upstream's own tests pass on it.
scripts/check/check-vendor.sh
cargo test --release --manifest-path vendor/yamux/Cargo.toml --target-dir target/vendor-yamux
ignored=$(grep -oE '[0-9]+ ignored' "$log" | awk '{n += $1} END {print n + 0}')
if $root && [ "$ignored" -eq 0 ]; then
  echo "test.sh: ran as root: every test ran, root-only ones included"
else
  echo "test.sh: NOT COMPLETE: $ignored test(s) ignored, not run$($root || echo ' (they need root: run as root)'):" >&2
  grep -E '^test .* \.\.\. ignored' "$log" >&2 || true
  exit 1
fi
