#!/usr/bin/env python3
"""Which mappings a process's peak resident set is made of: /proc/PID/smaps at its largest.

    scripts/bench/smaps-peak.py NAME [INTERVAL_S] [LIMIT_S]    # root for other users' processes

Waits for a process whose program's name ends with NAME (or a `shoal NAME …` process: `recv`,
`send`), reads its /proc/PID/smaps every INTERVAL_S (default 0.05) until it ends or LIMIT_S
(default 600) pass, and prints the snapshot with the largest total Rss: the total, the file
and anonymous parts, then every mapping holding more than 64 KiB, largest first, with its size
(a mapping's size, permissions and neighbours tell a quinn endpoint's receive buffer, a
thread's stack or a malloc arena apart; reserved ---p mappings of 1 MiB or more are listed too). The peak the kernel reports (VmHWM) can fall between two samples: the script prints it
beside the sampled peak.
"""
import os
import sys
import time

import procs


def snapshot(pid):
    """[(rss_kib, size_kib, anonymous_kib, name)] per mapping."""
    return [(rss, (hi - lo) // 1024, anon, f"{lo:x}-{hi:x} {perms} {path or '[anon]'}")
            for lo, hi, perms, path, rss, anon in procs.smaps(pid)]


def hwm(pid):
    return procs.status_kib(pid, "VmHWM")


def main():
    name = sys.argv[1]
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05
    limit = float(sys.argv[3]) if len(sys.argv) > 3 else 600.0
    start, pid = time.time(), None
    while pid is None and time.time() - start < limit:
        pid = next(iter(procs.find(name)), None)
        if pid is None:
            time.sleep(0.01)
    if pid is None:
        sys.exit(f"smaps-peak: no process named {name} within {limit} s")
    best, best_total, peak_kib, samples = [], -1, 0, 0
    while time.time() - start < limit:
        try:
            maps = snapshot(pid)
            peak_kib = hwm(pid)
        except (OSError, AttributeError, TypeError):
            break
        samples += 1
        total = sum(m[0] for m in maps)
        if total > best_total:
            best, best_total = maps, total
        time.sleep(interval)
    anon = sum(m[2] for m in best)
    print(f"# smaps-peak {name}: pid {pid}, {samples} samples every {interval} s; "
          f"VmHWM {peak_kib} KiB, largest sampled Rss {best_total} KiB "
          f"(anonymous {anon}, file {best_total - anon})")
    print("# rss_kib size_kib anonymous_kib mapping")
    for rss, size, an, what in sorted(best, key=lambda m: -m[0]):
        if rss > 64 or (size >= 1024 and "---p" in what):
            print(f"{rss:8} {size:9} {an:8} {what}")


if __name__ == "__main__":
    main()
