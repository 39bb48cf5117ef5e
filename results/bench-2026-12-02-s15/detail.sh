#!/usr/bin/env bash
# Alternating loopback runs of BINS in MODE (tmpfs tree SRC), one line per run with what the
# row says about the QUIC path: wall of the whole `send`, both ends' CPU, UDP payload size,
# retransmits, lost bytes, congestion events, the sender's UDP receive-buffer drops, the
# receiver's smallest window.   BINS="A B" MODE=quic-bundle N=8 ./detail.sh
set -uo pipefail
MODE=${MODE:-quic-bundle}; N=${N:-8}; SRC=${SRC:-/var/tmp/s14/src}; W=${W:-/var/tmp/s14/detail}
rm -rf "$W"; mkdir -p "$W"
echo "# detail.sh MODE=$MODE N=$N SRC=$SRC $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# bin status wall snd_cpu rcv_cpu udp_payload retransmits lost_bytes congestion_events snd_rcvbuf_errors window_min"
for i in $(seq "$N"); do
  entries="$BINS"; [ $((i % 2)) -eq 0 ] && entries=$(echo $BINS | tr ' ' '\n' | tac | tr '\n' ' ')
  for bin in $entries; do
    rm -rf "$W/dst" "$W/recv.log"
    $bin recv --once --listen 127.0.0.1:0 --flat --dest "$W/dst" --identity "$W/id" >"$W/recv.log" 2>&1 &
    rp=$!; addr=""
    for _ in $(seq 200); do
      addr=$(sed -n 's/^listening on \([0-9.]*:[0-9][0-9]*\)$/\1/p' "$W/recv.log"); [ -n "$addr" ] && break; sleep 0.05
    done
    s=$(date +%s.%N)
    $bin send --to "$addr" --src "$SRC" --mode "$MODE" --identity "$W/id" --json >"$W/row.json" 2>"$W/send.err"
    e=$(date +%s.%N)
    kill $rp 2>/dev/null; wait $rp
    python3 - "$W/row.json" "$bin" "$s" "$e" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(sys.argv[2].split("/")[-1], r["status"], "%.3f" % (float(sys.argv[4]) - float(sys.argv[3])),
      "%.3f" % r["sender_cpu_seconds"], "%.3f" % (r.get("receiver_run_cpu_seconds") or 0),
      r.get("udp_payload_bytes"), r.get("retransmits"), r.get("lost_bytes"), r.get("congestion_events"),
      r.get("sender_udp_rcvbuf_errors"), r.get("receiver_conn_window_min"))
PY
  done
done
