#!/usr/bin/env bash
# vendor/yamux must be exactly upstream yamux 0.14.1 (from the crates.io registry) with
# vendor/yamux/shoal.patch applied: no change hides in the vendored tree. Run by scripts/test.sh.
# After changing the vendored code, regenerate the patch (see vendor/yamux/README.shoal.md).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Fetch upstream through a throwaway package (the workspace itself uses the vendored copy).
mkdir -p "$tmp/fetch/src"
cat > "$tmp/fetch/Cargo.toml" <<'TOML'
[package]
name = "fetch-upstream-yamux"
version = "0.0.0"
edition = "2021"
[dependencies]
yamux = "=0.14.1"
TOML
echo 'fn main() {}' > "$tmp/fetch/src/main.rs"
cargo fetch -q --manifest-path "$tmp/fetch/Cargo.toml"
up=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -maxdepth 2 -type d -name 'yamux-0.14.1' | head -1)
[ -n "$up" ] || { echo "check-vendor: upstream yamux 0.14.1 not found after cargo fetch" >&2; exit 1; }
mkdir "$tmp/tree"
cp -r "$up/src" "$up/Cargo.toml" "$tmp/tree/"
patch -s -p1 -d "$tmp/tree" < vendor/yamux/shoal.patch
if diff -r "$tmp/tree/src" vendor/yamux/src && diff "$tmp/tree/Cargo.toml" vendor/yamux/Cargo.toml; then
  echo "check-vendor: vendor/yamux = yamux 0.14.1 + shoal.patch"
else
  echo "check-vendor: vendor/yamux differs from yamux 0.14.1 + vendor/yamux/shoal.patch (diff above)" >&2
  exit 1
fi
