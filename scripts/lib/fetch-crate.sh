# Sourced: the published source of a crate from the crates.io registry.
#
#   fetch_crate NAME VERSION WORK     # prints the folder ~/.cargo/registry/src/…/NAME-VERSION
#
# Fetches through a throwaway package in WORK/fetch-NAME (the workspace itself may use a
# vendored copy under another version), then finds the unpacked source in cargo's registry.
fetch_crate() {
  local name=$1 version=$2 fetch=$3/fetch-$1 up
  mkdir -p "$fetch/src"
  cat > "$fetch/Cargo.toml" <<TOML
[package]
name = "fetch-upstream-$name"
version = "0.0.0"
edition = "2021"
[dependencies]
$name = { version = "=$version", default-features = false }
[workspace]
TOML
  echo 'fn main() {}' > "$fetch/src/main.rs"
  cargo fetch -q --manifest-path "$fetch/Cargo.toml"
  up=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -maxdepth 2 -type d -name "$name-$version" | head -1)
  [ -n "$up" ] || { echo "fetch_crate: $name $version not found after cargo fetch" >&2; return 1; }
  echo "$up"
}
