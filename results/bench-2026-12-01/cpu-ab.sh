#!/usr/bin/env bash
# CPU seconds (user+sys) of receiver and sender, base vs new, alternating, tmpfs.
set -euo pipefail
BASE=$1; NEW=$2; MODE=${3:-tcp-bundle}; N=${4:-5}
W=/var/tmp/shoal-cpu; mkdir -p $W; mountpoint -q $W || mount -t tmpfs -o size=6G,nr_inodes=0 cpu $W
[ -d $W/src ] || $NEW gen --out $W/src --files 65536 --size 4KiB --seed 1 >/dev/null
for i in $(seq $N); do
  for arm in base new; do
    bin=$BASE; [ $arm = new ] && bin=$NEW
    rm -rf $W/dst; log=$W/recv.log
    perf stat -x, -e instructions:u,instructions:k -o $W/recv.perf /usr/bin/time -f "RECVCPU %U %S" -o $W/recv.time $bin recv --listen 127.0.0.1:0 --dest $W/dst --identity $W/id --once >$log 2>&1 &
    rp=$!
    addr=""; for _ in $(seq 100); do addr=$(sed -n 's/^listening on //p' $log); [ -n "$addr" ] && break; sleep 0.1; done
    /usr/bin/time -f "SENDCPU %U %S %e" -o $W/send.time $bin send --to $addr --src $W/src --mode $MODE --identity $W/id --json > $W/row.json 2>/dev/null || true
    wait $rp || true
    r=$(awk '/RECVCPU/{print $2+$3}' $W/recv.time); s=$(awk '/SENDCPU/{print $2+$3}' $W/send.time)
    secs=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["seconds"], r["status"])' $W/row.json)
    ins=$(awk -F, '/instructions:u/{u=$1} /instructions:k/{k=$1} END{printf "%.2fG/%.2fG", u/1e9, k/1e9}' $W/recv.perf)
    echo "$arm $MODE pass $i: recv_ins_u/k $ins recv_cpu $r send_cpu $s seconds/status $secs load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
