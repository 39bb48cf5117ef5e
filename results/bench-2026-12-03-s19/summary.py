#!/usr/bin/env python3
"""Per arm of one ab-sweeps.sh folder: each binary's runs (MB/s, peak RSS sender / receiver, smallest
receive window).   summary.py DIR"""
import csv, glob, collections, os, sys
os.chdir(sys.argv[1])
rows = collections.defaultdict(list)
for f in sorted(glob.glob("out-*/runs.csv")):
    name = f.split("/")[0][4:].rsplit("-", 1)[0]
    for r in csv.DictReader(open(f)):
        key = (r["payload"], r["cc"], r["connections"])
        rows[key].append((name, r["status"], float(r["mb_per_s"] or 0), float(r["sender_peak_rss_bytes"]) / 1e6,
                          float(r["receiver_peak_rss_bytes"]) / 1e6, int(r["receiver_conn_window_min"] or 0) / 1e6))
print("payload cc conns | binary: MB/s, RSS sender/receiver MB, smallest receive window MB (per run)")
for key in sorted(rows):
    print(" ".join(key))
    for name in sorted({x[0] for x in rows[key]}):
        runs = [x for x in rows[key] if x[0] == name]
        print(f"  {name:14} " + "  ".join(f"{s} {m:5.1f} MB/s {a:4.1f}/{b:4.1f} MB win {w:4.1f}" for _, s, m, a, b, w in runs))
