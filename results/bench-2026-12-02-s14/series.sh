#!/usr/bin/env bash
# The re-measurement of the thirteenth session's steps, in the order they landed, each
# against the binary before it (cpuab.sh, loopback, tmpfs, the small tree).
set -uo pipefail
cd "$(dirname "$0")"
B=/work/bench/shoal
# (Run in two invocations: the first stopped at the fifth A/B, where a stale receiver log sent
# a sender to the last run's port; cpuab.sh removes the log first now. SKIP=4 resumes there.)
step() { n=$((${n:-0} + 1)); [ "$n" -gt "${SKIP:-0}" ]; }
step && BINS="$B-e3c0d05 $B-1dafb60" MODE=tcp-bundle ROUNDS=7 ./cpuab.sh > ab-tcp-bundle-1dafb60-vs-e3c0d05.log 2>&1
step && BINS="$B-e3c0d05 $B-1dafb60" MODE=quic-bundle ROUNDS=7 ./cpuab.sh > ab-quic-bundle-1dafb60-vs-e3c0d05.log 2>&1
step && BINS="$B-1dafb60 $B-33b0df6" MODE=tcp-bundle ROUNDS=7 ./cpuab.sh > ab-tcp-bundle-33b0df6-vs-1dafb60.log 2>&1
step && BINS="$B-33b0df6 $B-b47f5fe $B-b47f5fe+--fixed-window" MODE=quic-bundle ROUNDS=5 ./cpuab.sh > ab-quic-bundle-b47f5fe-path-vs-fixed.log 2>&1
step && BINS="$B-b47f5fe $B-46d97fd $B-7f75ceb" MODE=tcp-bundle ROUNDS=7 ./cpuab.sh > ab-tcp-bundle-7f75ceb-46d97fd-b47f5fe.log 2>&1
for m in quic-streams tcp-streams tcp-bundle quic-bundle; do
  BINS="$B-7f75ceb $B-7a36cd4" MODE=$m ROUNDS=5 ./cpuab.sh > ab-$m-7a36cd4-vs-7f75ceb.log 2>&1
done
BINS="$B-7f75ceb $B-7a36cd4" MODE=quic-streams ROUNDS=5 ./cpuab.sh > ab-quic-streams-7a36cd4-vs-7f75ceb-2.log 2>&1
for m in tcp-bundle quic-bundle tcp-streams quic-streams; do
  BINS="$B-e3c0d05 $B-3dfd6b7" MODE=$m ROUNDS=5 ./cpuab.sh > ab-$m-3dfd6b7-vs-e3c0d05.log 2>&1
done
echo series done
