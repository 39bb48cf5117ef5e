#!/usr/bin/env bash
# Instruction counts (valgrind --tool=callgrind, load-independent) of one end of a loopback
# transfer on tmpfs: the other end runs natively. Prints one line per mode and side:
#   MODE SIDE Ir=<total instructions> files=N per_file=<Ir/N> selfhash_Ir=<the binary's own
#   SHA-256 for the row> per_file_without_selfhash status=<row status>
# and keeps each callgrind output in OUT for callgrind_annotate.
#
#   scripts/bench/callgrind.sh BIN OUT [MODES] [SIDES] [FILES]
#     BIN    the shoal binary to measure (e.g. target/release/shoal)
#     OUT    folder for cg.MODE.SIDE files (created)
#     MODES  default "tcp-bundle tcp-streams quic-bundle quic-streams"
#     SIDES  default "recv send"
#     FILES  default 8192 (× 4 KiB, shoal gen --seed 1)
#   PEER=/path/to/shoal runs the other (unmeasured) end with that binary, so an A/B of one
#   end's instructions does not change what arrives at it (default: BIN at both ends).
# Needs a tmpfs at /var/tmp/shoal-cg, or at CG_WORK if set (mounted here if it is not; root).
set -euo pipefail
BIN=$(readlink -f "$1"); OUT=$(mkdir -p "$2" && readlink -f "$2")
MODES=${3:-"tcp-bundle tcp-streams quic-bundle quic-streams"}
SIDES=${4:-"recv send"}
FILES=${5:-8192}
W=${CG_WORK:-/var/tmp/shoal-cg}
mkdir -p $W
mountpoint -q $W || mount -t tmpfs -o size=2G,nr_inodes=0 shoalcg $W
SRC=$W/src-$FILES
[ -d $SRC ] || "$BIN" gen --out $SRC --files "$FILES" --size 4KiB --seed 1 >/dev/null
PEER=$(readlink -f "${PEER:-$BIN}")
VG="valgrind --tool=callgrind --quiet"
for mode in $MODES; do
  for side in $SIDES; do
    rm -rf $W/dst; log=$W/recv.log; cg=$OUT/cg.$mode.$side
    rm -f $log # a stale log's address is the last run's receiver, gone by now
    rbin=$PEER; sbin=$PEER
    if [ $side = recv ]; then rbin=$BIN; else sbin=$BIN; fi
    rcmd="$rbin recv --listen 127.0.0.1:0 --dest $W/dst --identity $W/id --once --flat --idle-timeout 120s"
    scmd="$sbin send --src $SRC --mode $mode --identity $W/id --json --connect-timeout 60s"
    if [ $side = recv ]; then $VG --callgrind-out-file=$cg $rcmd >$log 2>&1 &
    else $rcmd >$log 2>&1 &
    fi
    rp=$!
    addr=""
    for _ in $(seq 600); do addr=$(sed -n 's/^listening on //p' $log); [ -n "$addr" ] && break; sleep 0.1; done
    if [ $side = send ]; then $VG --callgrind-out-file=$cg $scmd --to "$addr" >$W/row.json 2>$W/send.err || true
    else $scmd --to "$addr" >$W/row.json 2>$W/send.err || true
    fi
    wait $rp || true
    status=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["status"], r.get("error") or "")' $W/row.json 2>/dev/null || echo "no-row $(tail -1 $W/send.err)")
    ir=$(awk '/^totals:/{print $2}' $cg 2>/dev/null || echo 0)
    # The sender hashes its own binary for the row's provenance (about 14 MB: a fixed cost per
    # run, and without SHA-NI under valgrind most of the sender's count): shown apart.
    # (awk reads to the end: leaving early would fail the pipeline with SIGPIPE under pipefail)
    selfhash=$(callgrind_annotate --inclusive=yes $cg 2>/dev/null | awk '/provenance::file_sha256/ && !n {gsub(",","",$1); n=$1} END {print n+0}')
    selfhash=${selfhash:-0}
    echo "$mode $side Ir=$ir files=$FILES per_file=$(( ${ir:-0} / FILES )) selfhash_Ir=$selfhash per_file_without_selfhash=$(( (${ir:-0} - selfhash) / FILES )) status=$status"
  done
done
