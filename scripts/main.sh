#!/usr/bin/env bash
# The main job: a small loopback demo — generate a tree, transfer it, verify it, print the
# figures. (Becomes a sweep on an emulated link once the sweep engine lands.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -q -p shoal
exec target/release/shoal demo "$@"
