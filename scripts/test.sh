#!/usr/bin/env bash
# The test command: installs what the tests need, checks formatting and lints, then runs every
# test of the workspace. Tests that need root (network namespaces, the emulated link) are
# `#[ignore = "needs root"]`: cargo reports them ignored; as root they run next, one at a time,
# so that no other test competes with the emulated link for the CPU. Without root the run is
# incomplete (exit 1). Arguments: `cargo test` arguments, then optionally `--` and test ones.
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
cargo_args=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do cargo_args+=("$1"); shift; done
[ $# -gt 0 ] && shift
test_args=("$@")
mkdir -p target
log=target/test-output.log
status=0
cargo test --workspace --release --no-fail-fast "${cargo_args[@]}" -- "${test_args[@]}" | tee "$log" || status=$?
# `test NAME ... ignored, needs root`: the root-only tests this run left out.
mapfile -t root_only < <(sed -nE 's/^test (.*) \.\.\. ignored, needs root$/\1/p' "$log" | sort -u)
ran=0
if [ "$(id -u)" -eq 0 ] && [ ${#root_only[@]} -gt 0 ]; then
  # Only those tests (by exact name), keeping the caller's test flags (not its filters).
  flags=()
  for a in "${test_args[@]}"; do [[ $a == -* ]] && flags+=("$a"); done
  cargo test --workspace --release --no-fail-fast "${cargo_args[@]}" -- \
    --ignored --exact --test-threads=1 "${flags[@]}" "${root_only[@]}" | tee "$log.root" || status=$?
  ran=$(sed -nE 's/^test result: .* ([0-9]+) passed.*/\1/p' "$log.root" | awk '{n += $1} END {print n + 0}')
fi
[ "$status" -eq 0 ] || exit "$status"
# The vendored yamux: exactly upstream + our patch, and upstream's own tests pass on it.
scripts/check/check-vendor.sh
cargo test --release --manifest-path vendor/yamux/Cargo.toml --target-dir target/vendor-yamux
if [ ${#root_only[@]} -eq 0 ] || [ "$ran" -ge ${#root_only[@]} ]; then
  echo "test.sh: complete: every test ran, the ${#root_only[@]} root-only ones as root, one at a time"
else
  why=$([ "$(id -u)" -eq 0 ] && echo "as root $ran passed" || echo "not root: run as root")
  echo "test.sh: NOT COMPLETE: ${#root_only[@]} root-only test(s) (namespaces, emulated link) did not run ($why):" >&2
  printf '  %s\n' "${root_only[@]}" >&2
  exit 1
fi
