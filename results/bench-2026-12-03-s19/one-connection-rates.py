#!/usr/bin/env python3
"""quic-bundle, 65,536 x 4 KiB into Btrfs on the link, one connection: every run's MB/s of the
base (shoal-0bcd2f9) and of the new window rule (shoal-drs; shoal-drs2 is the same rule with one
connection) in drs-link/, drs2-link/ and drs3-link/, their medians, and a two-sided Mann-Whitney U
test (normal approximation) of the two sets."""
import csv, glob, math, os, statistics as st
here = os.path.dirname(os.path.abspath(__file__))
sets = {"base": [], "new rule": []}
for d in ("drs-link", "drs2-link", "drs3-link"):
    for f in sorted(glob.glob(f"{here}/{d}/out-*/runs.csv")):
        arm = "base" if "0bcd2f9" in f else "new rule"
        for r in csv.DictReader(open(f)):
            if r["payload"] == "small" and r["connections"] == "1" and r["status"] == "ok":
                sets[arm].append(float(r["mb_per_s"]))
for k, v in sets.items():
    print(f"{k:8} n={len(v)} median {st.median(v):.2f} MB/s: " + " ".join(f"{x:.1f}" for x in sorted(v)))
a, b = sets["base"], sets["new rule"]
u = sum((x > y) + 0.5 * (x == y) for x in a for y in b)
n1, n2 = len(a), len(b)
z = (u - n1 * n2 / 2) / math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
p = math.erfc(abs(z) / math.sqrt(2))
print(f"new / base medians {st.median(b) / st.median(a):.3f}; Mann-Whitney U {u:.1f} of {n1 * n2}, z {z:.2f}, two-sided p {p:.3f}")
