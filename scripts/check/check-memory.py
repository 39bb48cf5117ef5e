#!/usr/bin/env python3
"""Checks every Shoal row of a sweep's runs.csv (or rows appended by `shoal send --csv`)
against the memory ceilings of issue 19: tcp-bundle and quic-bundle <= 32 MB peak RSS at each
end, tcp-streams and quic-streams <= 48 MB. Prints one line per row (mode, cc, connections,
files, MB/s, both ends' peak RSS, peak streams, verdict) and exits 1 when any row is over its
ceiling or has no figure, 0 otherwise. Baseline rows (no Shoal mode) are skipped.

    scripts/check/check-memory.py RUNS.CSV [RUNS.CSV ...]

The sweeps to run it on (the study's arms on the emulated link; docs/benchmarks.md, Memory):
    shoal sweep --matrix scripts/matrices/memory-1gbit.toml --out results/memory-1gbit
    shoal sweep --matrix scripts/matrices/memory-300mbit.toml --out results/memory-300mbit
    scripts/check/check-memory.py results/memory-1gbit/runs.csv results/memory-300mbit/runs.csv
"""
import csv
import sys

MB = 1_000_000
CEILINGS = {"tcp-bundle": 32 * MB, "quic-bundle": 32 * MB,
            "tcp-streams": 48 * MB, "quic-streams": 48 * MB}


def mb(v):
    return f"{int(v) / MB:6.1f}" if v not in (None, "") else "     -"


def main(paths):
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    over = checked = 0
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                mode = row.get("mode", "")
                if mode not in CEILINGS:
                    continue
                checked += 1
                ceiling = CEILINGS[mode]
                ends = [row.get("sender_peak_rss_bytes"), row.get("receiver_peak_rss_bytes")]
                bad = [e for e in ends if e in (None, "") or int(e) > ceiling]
                verdict = "ok" if not bad else f"OVER {ceiling // MB} MB"
                over += bool(bad)
                print(f"{mode:12} {row.get('cc', ''):12} conns {row.get('connections', ''):>2} "
                      f"files {row.get('files', ''):>6} {row.get('status', ''):6} "
                      f"{float(row.get('mb_per_s') or 0):7.1f} MB/s  rss MB send {mb(ends[0])} "
                      f"recv {mb(ends[1])}  peak streams {row.get('receiver_peak_streams', '')}"
                      f"  {verdict}")
    print(f"{checked} rows checked, {over} over their ceiling")
    return 1 if over or not checked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
