#!/usr/bin/env bash
# wbab.sh ROUNDS: quic-bundle 65,536 x 4 KiB over the 141 ms / 1 Gbit/s link into fresh Btrfs,
# receiver's write budget default (4 MiB) vs 2 MiB, 1 and 8 connections, alternating.
B=/work/bench/shoal-ca0756b
for r in $(seq $1); do
  for c in 1 8; do
    order="4 2"; [ $((r % 2)) -eq 0 ] && order="2 4"
    for wb in $order; do
      if [ $wb = 4 ]; then args=""; else args="--write-budget 2MiB"; fi
      out=$(RECV_ARGS="$args" ./rcvheap.sh $B $c 2>&1 | grep -E "^ok|^failed|receiver:")
      echo "round $r conns $c budget ${wb}MiB: $(echo $out | tr '\n' ' ')"
    done
  done
done
