#!/usr/bin/env bash
# The main job: a local sweep on an emulated long link (141 ms RTT, 300 Mbit/s, 1-BDP queue),
# scripts/matrices/quick.toml: 8,192 × 4 KiB in the four Shoal modes × {CUBIC, BBR} and with
# tar|ssh, one 32 MiB file in the bundled modes, rclone (capped at 30 s) and one iperf3 flow per
# payload and controller, three runs each in one shuffled order; every run is verified by SHA-256
# of every file before its time counts. Prints the medians and where runs.csv, medians.csv and
# the charts are (results/<timestamp>/). Extra arguments go to `shoal sweep` (e.g. --runs 5,
# --seed 7, --quiet-wait, --matrix scripts/matrices/study.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "main: building shoal (release; the first build takes a few minutes)"
cargo build --release -p shoal
if [ "$(id -u)" -ne 0 ]; then
  echo "main: the sweep needs root (network namespaces); running the loopback demo instead"
  exec target/release/shoal demo
fi
args=("$@")
case " $* " in
  *" --matrix "* | *" --matrix="*) ;;
  *) args=(--matrix scripts/matrices/quick.toml "${args[@]}") ;;
esac
# Each run waits (at most 2 minutes) for the 1-minute load to fall below the core count, so
# that one run's own load does not slow the next.
exec target/release/shoal sweep --quiet-wait --quiet-load "$(nproc)" --quiet-max 2m "${args[@]}"
