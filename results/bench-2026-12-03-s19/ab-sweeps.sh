#!/usr/bin/env bash
# Alternating link sweeps of two binaries over one folder's matrix.toml (one run per arm):
# pass 1 A then B, pass 2 B then A; each sweep into DIR/out-BIN-PASS with its check-memory.txt.
#   ab-sweeps.sh DIR A B      (as run: drs-link, drs3-link and drs-quic-streams-link with
#                              /work/bench/shoal-0bcd2f9 and /work/bench/shoal-drs; drs2-link with
#                              /work/bench/shoal-drs2 as B)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$1" || exit 1
A=$2; B=$3
for pass in 1 2; do
  order="$A $B"; [ "$pass" -eq 2 ] && order="$B $A"
  for bin in $order; do
    out=out-$(basename "$bin")-$pass
    rm -rf "$out"
    "$bin" sweep --matrix matrix.toml --out "$out" >"console-$(basename "$bin")-$pass.log" 2>&1
    python3 "$ROOT/scripts/check-memory.py" "$out/runs.csv" >"$out/check-memory.txt"
  done
done
