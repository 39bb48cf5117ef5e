#!/usr/bin/env python3
"""quic-bundle, 65,536 x 4 KiB into Btrfs on the 141 ms / 1 Gbit/s link: every run of the base
(shoal-0bcd2f9) and of the final receiver window rule (shoal-drs) in drs-link/ and drs3-link/
(two invocations, each two alternating passes), per connection count and in all: MB/s and the
receiver's peak RSS, each run and the medians."""
import csv, glob, os, statistics as st
here = os.path.dirname(os.path.abspath(__file__))
for conns in ("1", "8", None):
    for b in ("shoal-0bcd2f9", "shoal-drs"):
        v, rr = [], []
        for d in ("drs-link", "drs3-link"):
            for f in sorted(glob.glob(f"{here}/{d}/out-{b}-*/runs.csv")):
                for r in csv.DictReader(open(f)):
                    if r["payload"] == "small" and r["status"] == "ok" and conns in (None, r["connections"]):
                        v.append(float(r["mb_per_s"]))
                        rr.append(float(r["receiver_peak_rss_bytes"]) / 1e6)
        print(f"{'all' if conns is None else 'x' + conns:4} {b:14} n={len(v):2}  MB/s median {st.median(v):5.2f} "
              f"({min(v):.1f}-{max(v):.1f})  receiver RSS median {st.median(rr):5.1f} MB ({min(rr):.1f}-{max(rr):.1f})")
