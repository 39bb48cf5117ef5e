#!/usr/bin/env bash
# rsab.sh ROUNDS CONNS A B: quic-bundle 65,536 x 4 KiB over the 141 ms / 1 Gbit/s link into fresh
# Btrfs (rcvheap.sh), binaries A and B alternating, the order reversed every round.
R=$1; C=$2; A=$3; B=$4
for r in $(seq $R); do
  order="$A $B"; [ $((r % 2)) -eq 0 ] && order="$B $A"
  for bin in $order; do
    out=$(./rcvheap.sh $bin $C 2>&1 | grep -E "^ok|^failed|sender:")
    echo "round $r conns $C $(basename $bin): $(echo $out | tr '\n' ' ')"
  done
done
