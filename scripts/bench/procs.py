"""The processes the bench samplers follow, found by name (wchan-sample.py, smaps-peak.py), and
what /proc says of their memory (smaps-peak.py, code-pages.py)."""
import os


def matches(cmd, name):
    """Whether a command line (its NUL-split words) is program NAME, or `shoal NAME …`."""
    prog = os.path.basename(cmd[0].decode(errors="replace")) if cmd and cmd[0] else ""
    return prog.endswith(name) or (prog == "shoal" and len(cmd) > 1 and cmd[1] == name.encode())


def find(name):
    """PIDs (strings) of the processes matching NAME, this one left out."""
    pids = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if p != str(os.getpid()) and matches(cmd, name):
            pids.append(p)
    return pids


def smaps(pid):
    """/proc/PID/smaps, one (lo, hi, perms, path, rss_kib, anonymous_kib) per mapping; path is
    "" for an anonymous mapping."""
    maps, cur = [], None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):
                lo, hi = (int(x, 16) for x in first.split("-"))
                parts = line.split(None, 5)
                cur = [lo, hi, parts[1], parts[5].strip() if len(parts) > 5 else "", 0, 0]
                maps.append(cur)
            elif first == "Rss:":
                cur[4] = int(line.split()[1])
            elif first == "Anonymous:":
                cur[5] = int(line.split()[1])
    return [tuple(m) for m in maps]


def status_kib(pid, key):
    """A KiB figure of /proc/PID/status (VmHWM, VmRSS), 0 when absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0
