# Sourced by the bench scripts: starts a `shoal recv` on loopback and waits for its address.
#
#   start_receiver LOG SHOAL_BIN [recv arguments...]
#   RECV_WRAP="strace -f -c -o FILE" start_receiver …    # the receiver under a wrapper command
#
# Runs `SHOAL_BIN recv --listen 127.0.0.1:0 ARGS...` in the background with its output in LOG
# and sets RECV_PID and RECV_ADDR (host:port from its "listening on" line). LOG is removed
# first: the shell truncates it only once the child starts, and a stale address would name the
# last run's receiver. Exits 1 with the log when no address appears within 10 s.
start_receiver() {
  local log=$1 bin=$2
  shift 2
  rm -f "$log"
  # RECV_WRAP is split into words on purpose: a command and its arguments, no spaces inside.
  # shellcheck disable=SC2086
  ${RECV_WRAP:-} "$bin" recv --listen 127.0.0.1:0 "$@" >"$log" 2>&1 &
  RECV_PID=$!
  RECV_ADDR=""
  for _ in $(seq 100); do
    RECV_ADDR=$(sed -n 's/^listening on //p' "$log" 2>/dev/null || true)
    [ -n "$RECV_ADDR" ] && return 0
    sleep 0.1
  done
  echo "receiver did not start"; cat "$log"; kill "$RECV_PID"; exit 1
}
