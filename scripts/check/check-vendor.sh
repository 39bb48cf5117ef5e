#!/usr/bin/env bash
# Every crate under vendor/ that Shoal patches must be exactly the published crate (from the
# crates.io registry) with vendor/CRATE/shoal.patch applied: no change hides in a vendored tree.
# Run by scripts/test.sh. After changing vendored code, regenerate its patch (see
# vendor/CRATE/README.shoal.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/lib/fetch-crate.sh
. scripts/lib/fetch-crate.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() {
  local name=$1 version=$2
  local up
  up=$(fetch_crate "$name" "$version" "$tmp")
  mkdir "$tmp/tree-$name"
  cp -r "$up/src" "$up/Cargo.toml" "$tmp/tree-$name/"
  patch -s -p1 -d "$tmp/tree-$name" < "vendor/$name/shoal.patch"
  # A build script is vendored unchanged, or not at all.
  if [ -f "$up/build.rs" ] || [ -f "vendor/$name/build.rs" ]; then
    diff "$up/build.rs" "vendor/$name/build.rs" || { echo "check-vendor: vendor/$name/build.rs differs from $name $version's" >&2; exit 1; }
  fi
  if diff -r "$tmp/tree-$name/src" "vendor/$name/src" && diff "$tmp/tree-$name/Cargo.toml" "vendor/$name/Cargo.toml"; then
    echo "check-vendor: vendor/$name = $name $version + shoal.patch"
  else
    echo "check-vendor: vendor/$name differs from $name $version + vendor/$name/shoal.patch (diff above)" >&2
    exit 1
  fi
}
check yamux 0.14.1
check quinn-proto 0.11.19
check quinn 0.11.12
