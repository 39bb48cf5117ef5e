#!/usr/bin/env python3
"""Checks every Shoal row of a sweep's runs.csv (or rows appended by `shoal send --csv`)
against its memory ceiling (scripts/check/memory_ceilings.py) and prints one line per row
(mode, cc, connections, files, MB/s, both ends' peak RSS, peak streams, the ceilings, verdict).
Exits 1 when any row is over its ceiling or has no figure, 0 otherwise. Baseline rows (no
Shoal mode) are skipped.

    scripts/check/check-memory.py [--quinn LOG ...] RUNS.CSV [RUNS.CSV ...]

Without --quinn: issue 19's flat ceilings, tcp-bundle and quic-bundle <= 32 MB peak RSS at
each end, tcp-streams and quic-streams <= 48 MB. With --quinn LOG (a
scripts/bench/quic-link-memory.sh log of the same day and link; one per connection count, as
`CONNECTIONS=8` writes): issue 42's ceilings for quic-bundle's ends, quinn's own sender and
receiver + 6 MB at the row's connection count, and a small tree's receiver (its writer slower
than the link) <= 32 MB at one connection; the other modes keep the flat ones.

The sweeps to run it on (the study's arms on the emulated link; docs/benchmarks.md, Memory):
    shoal sweep --matrix scripts/matrices/memory-1gbit.toml --out results/memory-1gbit
    shoal sweep --matrix scripts/matrices/memory-300mbit.toml --out results/memory-300mbit
    scripts/check/check-memory.py results/memory-1gbit/runs.csv results/memory-300mbit/runs.csv
    shoal sweep --matrix scripts/matrices/memory-1gbit-quic.toml --out OUT
    scripts/bench/quic-link-memory.sh > q1.log; CONNECTIONS=8 scripts/bench/quic-link-memory.sh > q8.log
    scripts/check/check-memory.py --quinn q1.log --quinn q8.log OUT/runs.csv
"""
import csv
import sys

from memory_ceilings import FLAT, MB, against_quinn, quic_ceilings


def mb(v):
    return f"{int(v) / MB:6.1f}" if v not in (None, "") else "     -"


def main(argv):
    quinn_logs, paths = [], []
    while argv:
        arg = argv.pop(0)
        if arg == "--quinn" and argv:
            quinn_logs.append(argv.pop(0))
        elif arg.startswith("-"):
            paths = []
            break
        else:
            paths.append(arg)
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    quinn = against_quinn(quinn_logs) if quinn_logs else None
    over = checked = 0
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                mode = row.get("mode", "")
                if mode not in FLAT:
                    continue
                checked += 1
                if quinn and mode == "quic-bundle":
                    send_c, recv_c = quic_ceilings(quinn, int(row.get("payload_files") or row.get("files") or 0),
                                                   int(row.get("connections") or 1))
                else:
                    send_c = recv_c = FLAT[mode]
                ends = [row.get("sender_peak_rss_bytes"), row.get("receiver_peak_rss_bytes")]
                limits = [send_c, recv_c]
                bad = [e for e, c in zip(ends, limits)
                       if e in (None, "") or (c is not None and int(e) > c * MB)]
                shown = "/".join("-" if c is None else f"{c:.1f}" for c in limits)
                verdict = "ok" if not bad else "OVER"
                over += bool(bad)
                print(f"{mode:12} {row.get('cc', ''):12} conns {row.get('connections', ''):>2} "
                      f"files {row.get('files', ''):>6} {row.get('status', ''):6} "
                      f"{float(row.get('mb_per_s') or 0):7.1f} MB/s  rss MB send {mb(ends[0])} "
                      f"recv {mb(ends[1])}  peak streams {row.get('receiver_peak_streams', '')}"
                      f"  ceilings {shown} MB  {verdict}")
    print(f"{checked} rows checked, {over} over their ceiling")
    return 1 if over or not checked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
