#!/usr/bin/env bash
# Issue 42, section 2 (root): one large file in the per-file-stream modes against the bundled
# mode of the same transport, on an emulated RTT/RATE link (`shoal link`, tmpfs at both ends).
# Each pair runs the streams arm and its bundled arm back to back (which goes first alternates
# pass by pass); every run is verified by SHA-256. Prints one line per run, then per arm the
# median of the pairs' ratios (streams / bundle; target ≥ 0.95).
#
#   PAIRS="tcp-streams:tcp-bundle:1 quic-streams:quic-bundle:8" PASSES=3 \
#     RATE=300mbit scripts/bench/streams-large-link.sh
#
# SEND_ARGS adds arguments to every `send`; SND_SYSCTLS (`key=value` words) are set in the
# sender's namespace after the link is up; the link is taken down at exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
NAME=${NAME:-streamsbn}
RTT=${RTT:-141ms}
RATE=${RATE:-300mbit}
SIZE=${SIZE:-128MiB}
PASSES=${PASSES:-3}
PAIRS=${PAIRS:-tcp-streams:tcp-bundle:1 quic-streams:quic-bundle:1 tcp-streams:tcp-bundle:8 quic-streams:quic-bundle:8}
SEND_ARGS=${SEND_ARGS:-}
SND_SYSCTLS=${SND_SYSCTLS:-}
SHOAL=${SHOAL:-$PWD/target/release/shoal}
WORK=$(mktemp -d /dev/shm/shoal-streams-link.XXXXXX)
cleanup() {
  set +e
  [ -n "${RPID:-}" ] && kill "$RPID" 2>/dev/null
  [ -n "${RPID:-}" ] && wait "$RPID" 2>/dev/null
  "$SHOAL" link down --name "$NAME" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
"$SHOAL" link up --name "$NAME" --rtt "$RTT" --rate "$RATE" >/dev/null
for kv in $SND_SYSCTLS; do ip netns exec "$NAME-snd" sysctl -qw "$kv"; done
"$SHOAL" gen --out "$WORK/big" --files 1 --size "$SIZE" --seed 1 >/dev/null
"$SHOAL" link exec rcv --name "$NAME" -- "$SHOAL" recv --listen 198.18.0.2:7474 --flat --dest "$WORK/dst" \
  --identity "$WORK/identity" >"$WORK/recv.log" 2>&1 &
RPID=$!
for _ in $(seq 100); do grep -q '^listening on' "$WORK/recv.log" 2>/dev/null && break; sleep 0.1; done
echo "binary $SHOAL ($(sha256sum "$SHOAL" | cut -c1-12)), link $RTT / $RATE, $SIZE, $(nproc) cores, $PASSES passes, send args '$SEND_ARGS', sender sysctls '$SND_SYSCTLS'"
# One run: prints its MB/s (empty when it failed or did not verify) and logs the row's figures.
one() {
  local mode=$1 conns=$2 json
  # shellcheck disable=SC2086
  json=$("$SHOAL" link exec snd --name "$NAME" -- "$SHOAL" send --to 198.18.0.2:7474 \
    --src "$WORK/big" --mode "$mode" --identity "$WORK/identity" --connections "$conns" \
    --json $SEND_ARGS) || true
  if echo "$json" | grep -q '"status":"ok"' && "$SHOAL" verify "$WORK/big" "$WORK/dst" >/dev/null; then
    echo "$json" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("run\t%s x%s\t%.2f MB/s\tpeak streams %s\tstream window %s\tload %.2f" % (sys.argv[1], sys.argv[2],
      r["mb_per_s"], r.get("peak_streams"), r.get("stream_window"), r["load_1m_start"]), file=sys.stderr)
print("%.4f" % r["mb_per_s"])' "$mode" "$conns"
  else
    echo "FAILED or not verified: $mode x$conns: $json" >&2
  fi
  find "$WORK/dst" -mindepth 1 -delete
}
: >"$WORK/results"
for pass in $(seq "$PASSES"); do
  for pair in $PAIRS; do
    IFS=: read -r streams bundle conns <<<"$pair"
    if [ $((pass % 2)) -eq 1 ]; then
      s=$(one "$streams" "$conns")
      b=$(one "$bundle" "$conns")
    else
      b=$(one "$bundle" "$conns")
      s=$(one "$streams" "$conns")
    fi
    if [ -n "$s" ] && [ -n "$b" ]; then
      printf '%s x%s\t%s\t%s\n' "$streams/$bundle" "$conns" "$s" "$b" >>"$WORK/results"
      printf 'pair %s x%s: %.2f / %.2f = %.3f\n' "$streams/$bundle" "$conns" "$s" "$b" \
        "$(python3 -c "print($s / $b)")"
    fi
  done
done
python3 - "$WORK/results" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    arm, s, b = line.rstrip("\n").split("\t")
    by.setdefault(arm, []).append((float(s), float(b)))
for arm, pairs in by.items():
    ratios = [s / b for s, b in pairs]
    print("median %-28s streams %6.2f bundle %6.2f MB/s, ratio %.3f (%s; target >= 0.95)" % (
        arm, statistics.median(s for s, _ in pairs), statistics.median(b for _, b in pairs),
        statistics.median(ratios), " ".join("%.3f" % r for r in ratios)))
PY
