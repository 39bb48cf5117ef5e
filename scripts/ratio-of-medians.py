#!/usr/bin/env python3
# Usage: scripts/ratio-of-medians.py RUNS.CSV PAYLOAD MODE:COLUMN=VALUE MODE:COLUMN=VALUE
#   e.g. scripts/ratio-of-medians.py results/X/runs.csv small \
#          tcp-bundle:param_initial_window=saved quic-bundle:param_resume=true
# Ratio of medians (MB/s) between two arms of one runs.csv, with a 95% percentile bootstrap
# interval (10,000 resamples of each side's verified runs, seed 22), as scripts/study-tables.py.
import csv, random, statistics, sys
path, payload, num, den = sys.argv[1:5]
rows = [r for r in csv.DictReader(open(path)) if r['payload'] == payload and r['verified'] == 'true']
def pick(spec):
    m, cond = spec.split(':')
    key, val = cond.split('=')
    return [float(r['mb_per_s']) for r in rows if r['param_mode'] == m and r.get(key) == val]
a, b = pick(num), pick(den)
rng = random.Random(22)
rs = sorted(statistics.median(rng.choices(a, k=len(a))) / statistics.median(rng.choices(b, k=len(b))) for _ in range(10000))
print(f"{payload}: {num} / {den} = {statistics.median(a):.2f} / {statistics.median(b):.2f} = {statistics.median(a)/statistics.median(b):.3f} [{rs[250]:.3f}–{rs[9749]:.3f}] ({len(a)} and {len(b)} runs)")
