#!/usr/bin/env bash
# Builds scripts/quinn-anchor (the quinn-only reference the benchmark scripts run beside Shoal)
# in a scratch folder, offline, against this checkout's Cargo.lock and vendored quinn-proto, and
# prints the binary's path.
#   scripts/quinn-anchor/build.sh [SCRATCH]   (default /work/bench/quinn-bench)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SCRATCH=${1:-/work/bench/quinn-bench}
mkdir -p "$SCRATCH/src"
sed "s|@ROOT@|$ROOT|g" "$ROOT/scripts/quinn-anchor/Cargo.toml.in" >"$SCRATCH/Cargo.toml"
cp "$ROOT/scripts/quinn-anchor/main.rs" "$SCRATCH/src/main.rs"
cp "$ROOT/Cargo.lock" "$SCRATCH/Cargo.lock"
(cd "$SCRATCH" && nice -n 10 cargo build --offline --release --quiet)
echo "$SCRATCH/target/release/quinn-anchor"
