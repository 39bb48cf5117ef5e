#!/usr/bin/env python3
"""How much of a process's resident code it touched, and how much the kernel mapped around it.

    scripts/bench/code-pages.py [--seconds S] [--runs N] -- COMMAND [ARGS...]   # root: perf

Starts COMMAND under `perf record -e exceptions:page_fault_user`, reads its /proc/PID/smaps
after S seconds (default 1.5: a server that has started and waits), stops it, and prints, for
its program's own file mappings (code `r-xp`, read-only data `r--p`), the pages the process
faulted on and the pages resident. A read fault on a file page the page cache holds maps up to
`fault_around_bytes` (64 KiB: 16 pages) around it, so resident pages / faulted pages is near 16
when the code the process runs is scattered over the file, near 1 when it is packed. The pages
faulted are a lower bound on the pages touched (a page mapped around an earlier fault is
touched without a fault); the resident pages are the upper bound. Also printed: VmRSS, and the
file's section sizes (`size -A`), so that `.rela.dyn` (read whole by the loader at start) can
be told from code. Runs are repeated N times (default 3) and each printed.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import procs


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def faults(data, pid):
    """The user page-fault addresses perf recorded for PID."""
    text = subprocess.run(["perf", "script", "-i", data, "-F", "pid,trace"],
                          capture_output=True, text=True).stdout
    addrs = []
    for line in text.splitlines():
        m = re.match(r"\s*(\d+)\s+address=(0x[0-9a-f]+)", line)
        if m and int(m.group(1)) == pid:
            addrs.append(int(m.group(2), 16))
    return addrs


def one_run(cmd, seconds):
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "pf.data")
        perf = subprocess.Popen(["perf", "record", "-q", "-e", "exceptions:page_fault_user",
                                 "-o", data, "--", *cmd],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pid = None
        for _ in range(200):
            kids = children(perf.pid)
            if kids:
                pid = kids[0]
                break
            time.sleep(0.01)
        if pid is None:
            perf.kill()
            raise SystemExit(f"code-pages: {cmd[0]} did not start under perf")
        time.sleep(seconds)
        try:
            path = os.readlink(f"/proc/{pid}/exe")
            maps = {}
            for lo, hi, perms, where, rss, _ in procs.smaps(pid):
                if where == path:
                    maps.setdefault(perms, []).append((lo, hi, rss))
            vmrss = procs.status_kib(pid, "VmRSS")
        except OSError:
            perf.wait(timeout=30)
            raise SystemExit(f"code-pages: {cmd[0]} ended before {seconds} s; it reads a process that "
                             "is still running (a server that waits, say)")
        os.kill(pid, signal.SIGTERM)
        perf.wait(timeout=30)
        addrs = faults(data, pid)
    rows = []
    for perm in ("r-xp", "r--p"):
        regions = maps.get(perm, [])
        pages = {a >> 12 for a in addrs for (lo, hi, _) in regions if lo <= a < hi}
        resident = sum(r[2] for r in regions)
        size = sum(r[1] - r[0] for r in regions) // 1024
        rows.append((perm, size, len(pages), resident))
    return path, vmrss, rows


def main(argv):
    seconds, runs = 1.5, 3
    while argv and argv[0] != "--":
        flag = argv.pop(0)
        if flag == "--seconds":
            seconds = float(argv.pop(0))
        elif flag == "--runs":
            runs = int(argv.pop(0))
        else:
            print(__doc__.strip(), file=sys.stderr)
            return 2
    if not argv or argv[0] != "--" or len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    cmd = argv[1:]
    print(f"# scripts/bench/code-pages.py {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}: "
          f"{' '.join(cmd)} (read after {seconds} s)")
    exe = None
    for run in range(1, runs + 1):
        path, vmrss, rows = one_run(cmd, seconds)
        if exe is None:
            exe = path
            sections = subprocess.run(["size", "-A", path], capture_output=True, text=True).stdout
            big = [l.split()[:2] for l in sections.splitlines()
                   if l.startswith(".") and len(l.split()) >= 2 and l.split()[1].isdigit()
                   and int(l.split()[1]) >= 64 * 1024]
            print(f"# {path}: " + ", ".join(f"{n} {int(s) // 1024} KiB" for n, s in big))
            print("run | VmRSS KiB | mapping | size KiB | pages faulted | KiB faulted | KiB resident "
                  "| resident / faulted")
        for perm, size, faulted, resident in rows:
            ratio = f"{resident / (faulted * 4):.1f}" if faulted else "-"
            print(f"{run} | {vmrss} | {perm} | {size} | {faulted} | {faulted * 4} | {resident} "
                  f"| {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
