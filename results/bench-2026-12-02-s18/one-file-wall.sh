#!/usr/bin/env bash
# A `shoal send` process's fixed cost: the whole process's wall time moving a tree of one small
# file over loopback (start, identity, walk, connect, handshake, one file, completion, close,
# exit), per binary and mode, alternating binaries, ROUNDS rounds; medians. Each binary sends to
# its own receiver (started once, `recv --flat` into a tmpfs folder).
#   ROUNDS=15 one-file-wall.sh BIN_A BIN_B
set -euo pipefail
ROUNDS=${ROUNDS:-15}
MODES=${MODES:-tcp-bundle tcp-streams quic-bundle quic-streams}
W=$(mktemp -d /dev/shm/one-file-wall.XXXXXX)
trap 'kill $(cat "$W"/*.pid 2>/dev/null) 2>/dev/null; rm -rf "$W"' EXIT
mkdir -p "$W/src/d" && echo hello >"$W/src/d/f"
i=0
for bin in "$@"; do
  "$bin" recv --listen 127.0.0.1:0 --flat --dest "$W/dst$i" --identity "$W/id" >"$W/recv$i.log" 2>&1 &
  echo $! >"$W/r$i.pid"
  i=$((i + 1))
done
addr_of() { for _ in $(seq 100); do a=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' "$W/recv$1.log"); [ -n "$a" ] && { echo "$a"; return; }; sleep 0.05; done; echo "no receiver $1" >&2; exit 1; }
echo "# one-file-wall.sh ROUNDS=$ROUNDS $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$W/walls"
for round in $(seq "$ROUNDS"); do
  for mode in $MODES; do
    i=0
    for bin in "$@"; do
      addr=$(addr_of $i)
      s=$(date +%s%N)
      "$bin" send --to "$addr" --src "$W/src" --mode "$mode" --identity "$W/id" --json >"$W/row.json"
      e=$(date +%s%N)
      status=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["status"], "%.4f" % r["seconds"])' "$W/row.json")
      echo "$(basename "$bin") $mode $(( (e - s) / 1000 )) $status" >>"$W/walls"
      i=$((i + 1))
    done
  done
done
echo "# binary mode: median whole-process wall (ms), median row seconds (ms), ok runs"
python3 - "$W/walls" <<'PY'
import statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    b, m, us, status, secs = line.split()
    rows.setdefault((b, m), []).append((int(us) / 1000, status, float(secs) * 1000))
for (b, m), rs in rows.items():
    ok = [r for r in rs if r[1] == "ok"]
    print(f"{b:22} {m:13} wall {st.median(r[0] for r in ok):7.1f} ms  seconds {st.median(r[2] for r in ok):6.1f} ms  ok {len(ok)}/{len(rs)}")
PY
