#!/usr/bin/env python3
"""The physical floor under each configuration of a sweep on the emulated link: the link's
goodput ceiling for this payload over this transport (from what the rows' own packets carried),
plus the round trips no start can avoid. A median below its floor, or far above it, is a bug
until explained (DEVELOPERS.md: "Honest numbers").

    scripts/startup-floor.py RUNS.CSV [PAYLOAD]

Per configuration (verified runs only; medians):
- wire/content: bytes that crossed the bottleneck per content byte. The link charges IP packets
  (no Ethernet framing): for QUIC the UDP payloads quinn sent (`bytes_sent`) plus 28 bytes of
  IPv4 + UDP header per packet, for TCP the TCP payload (`bytes_sent`) plus 52 bytes of IPv4 +
  TCP (timestamps) per packet, less what the link's queue dropped (`link_dropped_queue`
  packets; `lost_bytes`), which never crossed. It holds QUIC's packet and frame headers and
  AEAD tag, TLS records, and Shoal's own record headers (one per file).
- ceiling MB/s: the link rate divided by wire/content: the fastest this payload can cross.
- transmission s: the payload at the ceiling.
- floor s (oracle start): transmission + the round trips before the first byte and after the
  last: TCP + TLS 1.3 two (connect, TLS), QUIC one (its handshake), and one for the last bytes
  to arrive and the completion report to come back; the link's base RTT (`link_rtt_ms`), so a
  lower bound.
- s / floor: the median seconds over the start-rule floor (1.05: within 5% of it).
- floor s (start rule): the oracle floor plus what the run's own start rule must cost. Careful
  Resume (RFC 9959): one RTT of Reconnaissance (the jump waits for the first flight's
  acknowledgement), then a first round trip that carries only the jump (`resume_jump_bytes`):
  (1 − jump / BDP) of an RTT lost, BDP = link rate × RTT. `initial-window = saved`: the same
  for the first flight (`initial_window_bytes`), with no Reconnaissance. Per run, then the
  median. Cold starts get no start-up term here (slow start's cost is what they measure).
"""
import csv
import statistics
import sys

HEADER = {"quic": 28, "tcp": 52}


def f(row, key):
    try:
        return float(row.get(key) or "nan")
    except ValueError:
        return float("nan")


def table(path, want=None):
    """The table's lines for the verified Shoal rows of PATH (payload WANT only, if given)."""
    groups = {}
    for r in csv.DictReader(open(path)):
        if r.get("kind") != "shoal" or r.get("verified") != "true":
            continue
        if want and r.get("payload") != want:
            continue
        groups.setdefault((r["payload"], r["config"]), []).append(r)
    lines = ["| payload | configuration | runs | MB/s | s | wire/content | ceiling MB/s | transmission s | floor s (oracle) | floor s (start rule) | MB/s at floor | measured / ceiling | s / floor |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (payload, config), rows in sorted(groups.items()):
        kind = "quic" if rows[0]["mode"].startswith("quic") else "tcp"
        rate = f(rows[0], "link_rate_bps") / 8
        rtt = f(rows[0], "link_rtt_ms") / 1000
        bdp = rate * rtt
        ratios, oracles, starts = [], [], []
        for r in rows:
            sent, pkts, lost = f(r, "bytes_sent"), f(r, "sent_packets"), f(r, "lost_bytes")
            dropped = f(r, "link_dropped_queue")
            wire = (sent - lost) + HEADER[kind] * (pkts - dropped)
            wpc = wire / f(r, "bytes")
            ratios.append(wpc)
            oracle = f(r, "bytes") * wpc / rate + (3 if kind == "tcp" else 2) * rtt
            oracles.append(oracle)
            if "resume=true" in config:
                jump = f(r, "resume_jump_bytes")
                start = oracle + rtt + max(0.0, 1 - jump / bdp) * rtt
            elif "initial-window=saved" in config:
                first = f(r, "initial_window_bytes")
                start = oracle + max(0.0, 1 - first / bdp) * rtt
            else:
                start = oracle
            starts.append(start)
        wpc = statistics.median(ratios)
        content = f(rows[0], "bytes")
        ceiling = rate / wpc
        tx = content / ceiling
        oracle = statistics.median(oracles)
        start = statistics.median(starts)
        mbs = statistics.median(f(r, "mb_per_s") for r in rows)
        secs = statistics.median(f(r, "seconds") for r in rows)
        name = config.replace("payload=%s " % payload, "").replace("kind=shoal ", "")
        lines.append(f"| {payload} | {name} | {len(rows)} | {mbs:.2f} | {secs:.3f} | {wpc:.4f} | "
                     f"{ceiling / 1e6:.2f} | {tx:.3f} | {oracle:.3f} | {start:.3f} | "
                     f"{content / start / 1e6:.2f} | {mbs * 1e6 / ceiling:.3f} | {secs / start:.3f} |")
    return lines


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    print("\n".join(table(argv[1], argv[2] if len(argv) > 2 else None)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
