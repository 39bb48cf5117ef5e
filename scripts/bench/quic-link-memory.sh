#!/usr/bin/env bash
# What a QUIC sender and receiver hold in memory on a long fat link: quic-bundle moving one
# file beside quinn alone moving the same bytes on one stream (the anchor), on Shoal's emulated
# link (needs root). Issue 19's ceiling for bundle modes is 32 MB peak RSS at each end.
#
#   scripts/bench/quic-link-memory.sh [SHOAL_BIN] [RUNS] [BYTES]
#     SHOAL_BIN  default target/release/shoal
#     RUNS       default 3 passes; each runs both arms, the order reversed every other pass
#     BYTES      default 268435456 (256 MiB: the study's large payload)
#   RTT, RATE      the link (default 141ms, 1gbit: the study's)
#   WINDOW         default 20971520: Shoal's default quic-bundle windows (send window at the
#                  sender, stream and connection receive windows at the receiver), given to
#                  the anchor too; quinn's own defaults would hold one connection to ~9 MB/s here
#   CC             default cubic (quinn's default controller, the anchor's)
#   CONNECTIONS    default 1: both arms spread BYTES over this many connections, WINDOW
#                  divided among them (at least 2 MiB each, as Shoal divides it)
#   SHOAL_SEND_ARGS  more `shoal send` flags
#
# Arms:
# - anchor: scripts/quinn-anchor/main.rs `serve` on the receiving side, `send` on the sending
#   side: quinn's bench client and server (default TransportConfig but the windows), one
#   unidirectional stream a connection written in 1 MiB slices; each prints its process's peak
#   RSS (VmHWM).
# - shoal: `shoal recv --once` / `shoal send --mode quic-bundle` of one BYTES file, tmpfs at
#   both ends; the row carries both ends' peak RSS (VmHWM) and MB/s (verified).
# Both anchor processes are smaller binaries than Shoal's: the script prints each binary's
# resident pages when idle beside the figures (the part of every RSS that is not data).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(readlink -f "${1:-$ROOT/target/release/shoal}")
RUNS=${2:-3}
BYTES=${3:-268435456}
RTT=${RTT:-141ms}
RATE=${RATE:-1gbit}
WINDOW=${WINDOW:-20971520}
CC=${CC:-cubic}
CONNECTIONS=${CONNECTIONS:-1}
[ "$(id -u)" -eq 0 ] || { echo "bench-quic-link-memory: needs root (network namespaces)" >&2; exit 1; }
ANCHOR=$("$ROOT/scripts/quinn-anchor/build.sh" "${QUINN_ANCHOR_DIR:-/work/bench/quinn-bench}")

W=/var/tmp/shoal-qmem
mkdir -p $W
mountpoint -q $W || mount -t tmpfs -o size=2G qmem $W
SRC=$W/src-$BYTES
[ -d "$SRC" ] || "$BIN" gen --out "$SRC" --files 1 --size "$BYTES" --seed 1 >/dev/null
LINK=qmem
"$BIN" link down --name $LINK >/dev/null 2>&1 || true
"$BIN" link up --name $LINK --rtt "$RTT" --rate "$RATE" >$W/link.log 2>&1
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  "$BIN" link down --name $LINK >/dev/null 2>&1 || true
  rm -rf $W/dst
}
trap cleanup EXIT
at() { "$BIN" link exec --name $LINK "$@"; }
echo "# scripts/bench/quic-link-memory.sh $(date -u +%FT%TZ): link $RTT $RATE, $BYTES bytes, window $WINDOW, cc $CC, connections $CONNECTIONS, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# shoal $BIN ($("$BIN" --version | head -1), sha256 $(sha256sum "$BIN" | cut -c1-12)); anchor $ANCHOR"
idle_rss() { # resident KiB of a process that has started and is waiting
  "$@" >/dev/null 2>&1 & local p=$!
  sleep 1; awk '/^VmRSS:/{print $2}' /proc/$p/status; kill $p; wait $p 2>/dev/null || true
}
echo "# idle resident KiB (the binary's pages, libc, a runtime): shoal recv $(idle_rss "$BIN" recv --listen 127.0.0.1:0 --dest $W/idle-dst --identity $W/id), anchor serve $(idle_rss "$ANCHOR" serve 127.0.0.1:0 $W/idle.der "$WINDOW")"
OUT=$W/lines; : >$OUT

run_anchor() {
  rm -f $W/cert.der
  at rcv -- "$ANCHOR" serve 198.18.0.2:4433 $W/cert.der "$WINDOW" "$CONNECTIONS" >$W/serve.out 2>&1 &
  local sp=$!; pids+=("$sp")
  for _ in $(seq 100); do [ -f $W/cert.der ] && break; sleep 0.05; done
  at snd -- "$ANCHOR" send 198.18.0.2:4433 $W/cert.der "$BYTES" "$WINDOW" "$CONNECTIONS" >$W/send.out 2>&1 || true
  wait "$sp" || true
  local s r secs
  s=$(sed -n 's/.*peak_rss_kb \([0-9]*\).*/\1/p' $W/send.out)
  r=$(sed -n 's/.*peak_rss_kb \([0-9]*\).*/\1/p' $W/serve.out)
  secs=$(sed -n 's/.*serve bytes [0-9]* seconds \([0-9.]*\).*/\1/p' $W/serve.out)
  if [ -n "$s" ] && [ -n "$r" ] && grep -q "serve bytes $BYTES " $W/serve.out; then
    echo "run $1 anchor: $(awk -v b="$BYTES" -v t="$secs" 'BEGIN{printf "%.1f", b/t/1e6}') MB/s (receiver's read time) peak RSS sender $(awk -v k="$s" 'BEGIN{printf "%.1f", k*1024/1e6}') MB receiver $(awk -v k="$r" 'BEGIN{printf "%.1f", k*1024/1e6}') MB"
    echo "anchor $1 $(awk -v b="$BYTES" -v t="$secs" 'BEGIN{print b/t/1e6}') $((s * 1024)) $((r * 1024))" >>$OUT
  else
    echo "run $1 anchor: FAILED ($(tail -1 $W/send.out) / $(tail -1 $W/serve.out))"
  fi
}
run_shoal() {
  local log=$W/recv.log addr=""
  rm -rf $W/dst $log # a stale log's address is the last run's receiver
  at rcv -- "$BIN" recv --once --listen 198.18.0.2:0 --dest $W/dst --identity $W/id --flat >$log 2>&1 &
  local rp=$!; pids+=("$rp")
  for _ in $(seq 100); do addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' $log); [ -n "$addr" ] && break; sleep 0.1; done
  at snd -- "$BIN" send --to "$addr" --src "$SRC" --mode quic-bundle --cc "$CC" --connections "$CONNECTIONS" --identity $W/id --json ${SHOAL_SEND_ARGS:-} >$W/row.json 2>$W/send.err || true
  wait "$rp" || true
  python3 - $W/row.json "$1" >>$OUT <<'PY' || echo "run $1 shoal: not counted ($(tail -1 $W/send.err))"
import json, sys
r = json.load(open(sys.argv[1]))
if r["status"] != "ok":
    print(f"run {sys.argv[2]} shoal: {r['status']}", file=sys.stderr)
    sys.exit(1)
if not r.get("receiver_peak_rss_bytes"):
    # A figure the receiver did not report is no figure: the run counts in neither median.
    print(f"run {sys.argv[2]} shoal: the receiver reported no peak RSS", file=sys.stderr)
    sys.exit(1)
print("shoal", sys.argv[2], r["mb_per_s"], r["sender_peak_rss_bytes"], r["receiver_peak_rss_bytes"])
PY
  tail -1 $OUT | awk '$1=="shoal"{printf "run %s shoal quic-bundle: %.1f MB/s (verified) peak RSS sender %.1f MB receiver %.1f MB\n", $2, $3, $4/1e6, $5/1e6}'
}
for i in $(seq "$RUNS"); do
  if [ $((i % 2)) -eq 1 ]; then run_anchor "$i"; run_shoal "$i"; else run_shoal "$i"; run_anchor "$i"; fi
done
python3 - "$OUT" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    k, i, *v = line.split()
    rows.setdefault(k, []).append([float(x) for x in v])
print("# medians: MB/s, peak RSS sender / receiver (MB); largest sender / receiver")
for k, rs in rows.items():
    med = lambda j: statistics.median(r[j] for r in rs)
    print(f"{k:7} n={len(rs)}  {med(0):6.1f} MB/s  {med(1)/1e6:5.1f} / {med(2)/1e6:5.1f} MB  max {max(r[1] for r in rs)/1e6:5.1f} / {max(r[2] for r in rs)/1e6:5.1f} MB")
PY
