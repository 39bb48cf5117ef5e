"""The memory ceilings Shoal's rows are checked against, shared by scripts/check/check-memory.py
and scripts/bench-tables.py (kinds memory and memory-vs-quinn).

- Flat (issue 19): tcp-bundle and quic-bundle 32 MB peak RSS at each end, tcp-streams and
  quic-streams 48 MB.
- Against quinn (issue 42, section 4, for QUIC ends): quinn's own client and server on the
  same link and window + 6 MB, read from a scripts/bench/quic-link-memory.sh log of the same
  day at the rows' connection count (else of one connection); and a receiver whose writer is
  slower than the link (a small tree into a file system slower than the link) at most 32 MB at
  one connection. At other connection counts the issue names no figure for that receiver.
"""
import re

MB = 1_000_000
FLAT = {"tcp-bundle": 32, "quic-bundle": 32, "tcp-streams": 48, "quic-streams": 48}
MARGIN = 6
SLOW_WRITER = 32

# A scripts/bench/quic-link-memory.sh run line: arm, MB/s, both ends' peak RSS (MB).
RUN = re.compile(r"^run \d+ (anchor|shoal quic-bundle): ([\d.]+) MB/s .*peak RSS sender ([\d.]+) MB "
                 r"receiver ([\d.]+) MB")


def quinn_log(log):
    """(connections, sender ceiling, receiver ceiling) in MB from one quic-link-memory.sh log:
    its connection count (1 in logs from before the script had one) and quinn's largest sender
    and receiver of its anchor runs, each + MARGIN."""
    text = open(log, encoding="utf-8").read()
    conns = re.search(r"^# scripts/bench/quic-link-memory\.sh .*, connections (\d+),", text, re.M)
    runs = [[float(x) for x in m.group(2, 3, 4)] for m in map(RUN.match, text.splitlines())
            if m and m.group(1) == "anchor"]
    if not runs:
        raise SystemExit(f"{log}: no anchor runs (not a scripts/bench/quic-link-memory.sh log?)")
    return (int(conns.group(1)) if conns else 1, max(r[1] for r in runs) + MARGIN,
            max(r[2] for r in runs) + MARGIN)


def against_quinn(logs):
    """{connections: (sender MB, receiver MB, log)} from quic-link-memory.sh logs."""
    out = {}
    for log in logs:
        n, send_c, recv_c = quinn_log(log)
        out[n] = (send_c, recv_c, log)
    return out


def quic_ceilings(quinn, files, conns):
    """(sender MB, receiver MB or None) for a QUIC row of FILES files over CONNS connections,
    against quinn's logs (`against_quinn`). A tree of many files is the slow-writer case."""
    send_c, recv_c, _ = quinn.get(conns, quinn.get(1) or next(iter(quinn.values())))
    if files > 1:
        return send_c, (SLOW_WRITER if conns == 1 else None)
    return send_c, recv_c
