#!/usr/bin/env python3
"""Per binary in a cpuab.sh log: medians and min-max of wall and both ends' CPU, the range of
each end's peak RSS, and the receiver's smallest connection windows seen.

    ./abstats.py ab-*.log
"""
import statistics as st
import sys

for path in sys.argv[1:]:
    rows = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 8 and f[1] == "ok" and "/" not in f[2]:
            rows.setdefault(f[0], []).append(f)
    print(f"== {path}")
    for name, rs in rows.items():
        col = lambda i: sorted(float(r[i]) for r in rs)
        w, c, s, r = col(2), col(5), col(6), col(7)
        windows = sorted({x[8] for x in rs if len(x) > 8})
        print(f"{name:30} n {len(rs)}  wall {st.median(w):.3f} ({w[0]:.3f}-{w[-1]:.3f})"
              f"  cpu {st.median(c):.3f} ({c[0]:.3f}-{c[-1]:.3f})"
              f"  rss snd {s[0]:.1f}-{s[-1]:.1f} rcv {r[0]:.1f}-{r[-1]:.1f}  window_min {' '.join(windows)}")
