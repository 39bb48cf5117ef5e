#!/usr/bin/env python3
"""Where a process's threads wait: an off-CPU profile from /proc, with no tracer to install.

    scripts/bench/wchan-sample.py NAME [INTERVAL_S] [LIMIT_S]    # root (reads /proc/PID/stack)

Every INTERVAL_S (default 0.01) it reads, for each thread of every process whose program's name
ends with NAME (or a `shoal NAME …` process: `recv`, `send`), the thread's state, its wait
channel (`/proc/PID/task/TID/wchan`) and the top six frames of its kernel stack. It waits for
such a process to appear, ends when the last one is gone or after LIMIT_S (default 600), and
prints counts, most frequent first: samples per thread and state (R running, S sleeping,
D uninterruptible), per blocked thread and wait channel, and per thread and kernel stack.
A thread in D inside a file system's function waits on that file system.
"""
import collections
import os
import sys
import time

import procs


def main():
    name = sys.argv[1]
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 0.01
    limit = float(sys.argv[3]) if len(sys.argv) > 3 else 600.0
    states, waits, stacks = collections.Counter(), collections.Counter(), collections.Counter()
    start, seen, samples = time.time(), False, 0
    while time.time() - start < limit:
        pids = procs.find(name)
        if not pids:
            if seen:
                break
            time.sleep(interval)
            continue
        seen, samples = True, samples + 1
        for p in pids:
            try:
                tids = os.listdir(f"/proc/{p}/task")
            except OSError:
                continue
            for t in tids:
                base = f"/proc/{p}/task/{t}"
                try:
                    comm = open(f"{base}/comm").read().strip()
                    state = open(f"{base}/stat").read().rsplit(")", 1)[1].split()[0]
                    wchan = open(f"{base}/wchan").read().strip() or "-"
                    stack = open(f"{base}/stack").read().splitlines()
                except OSError:
                    continue
                states[(comm, state)] += 1
                if state == "R":
                    continue
                waits[(comm, state, wchan)] += 1
                frames = [line.split()[1].split("+")[0] for line in stack if line.strip()][:6]
                stacks[(comm, " < ".join(frames))] += 1
        time.sleep(interval)
    print(f"samples: {samples} (every {interval} s)")
    for (comm, state), n in states.most_common(30):
        print(f"state {n} {comm} {state}")
    for (comm, state, wchan), n in waits.most_common(30):
        print(f"wchan {n} {comm} {state} {wchan}")
    for (comm, frames), n in stacks.most_common(25):
        print(f"stack {n} {comm} {frames}")


if __name__ == "__main__":
    main()
