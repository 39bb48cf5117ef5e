"""The processes the bench samplers (wchan-sample.py, smaps-peak.py) follow, found by name."""
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
