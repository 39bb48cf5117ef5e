#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test of the workspace.
# Tests that need root (network namespaces) report themselves as skipped without it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo test --workspace --release --no-fail-fast "$@"
