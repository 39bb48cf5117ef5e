#!/usr/bin/env python3
"""Markdown tables for docs/results.md from a sweep's runs.csv (the study's).

    scripts/study-tables.py results/study-2026-11-30/runs.csv

One table per payload: every configuration with runs ok/total, median MB/s with min–max over
the verified runs, median seconds, the largest peak RSS of each side over all its runs, median
sender CPU seconds, and the run statistics used to say what binds an arm (smoothed RTT,
retransmitted packets, peak outstanding streams, emulator queue drops). Failed runs carry no
speed; their completion-rate bound (bytes verified / seconds) is shown instead.

Sweeps that record them (receiver_cpu_seconds, link_cpu_seconds) get three more columns:
median receiver and emulator CPU seconds, and "cores busy", the median over verified runs of
(sender + receiver + emulator CPU) / seconds: near the machine's core count, the run was
CPU-bound. Sweeps that record read_wait_ms and stream_wait_ms get their medians in seconds
(summed over connections: 8 connections waiting a whole 5 s run show 40 s), and those that
record host_busy_cores_p90 get "busy p90": the machine's busy cores, 90th percentile of 100 ms
samples during the run, median over verified runs (its peaks: the "cores busy" average hides
them behind an idle slow start). Sweeps over a lossy link (link_loss > 0) get "lost/sent %":
the sender's lost packets / packets sent (TCP retransmitted segments / data segments sent;
QUIC packets declared lost / packets sent), median over verified runs, and "link loss
drops": the wire packets the emulator dropped at random (both directions), median.
"""
import csv
import statistics
import sys
from collections import defaultdict


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, digits=1):
    return "–" if x is None else f"{x:.{digits}f}"


def arm(r):
    if r["kind"] != "shoal":
        return r["kind"] + (f" (cap {r['param_timeout']})" if r.get("param_timeout") else "")
    parts = [r.get("param_mode") or "tcp-bundle"]
    if r.get("param_cc"):
        parts.append(r["param_cc"])
    if r.get("param_connections"):
        parts.append(f"×{r['param_connections']}")
    return " ".join(parts)


def main(path):
    rows = list(csv.DictReader(open(path)))
    by_payload = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by_payload[r["payload"]][arm(r)].append(r)
    for payload, arms in by_payload.items():
        any_row = next(iter(arms.values()))[0]
        print(f"\n#### {payload}: {any_row['payload_files']} files, "
              f"{int(any_row['payload_bytes']) / 1e6:.1f} MB\n")
        cpu = "receiver_cpu_seconds" in any_row
        waits = "stream_wait_ms" in any_row
        p90 = "host_busy_cores_p90" in any_row
        lossy = any((num(r.get("link_loss")) or 0) > 0 for rs in arms.values() for r in rs)
        print("| arm | ok/runs | MB/s median (min–max) | s median | peak RSS MB snd / rcv "
              "| snd CPU s " + ("| rcv CPU s | link CPU s | cores busy " if cpu else "")
              + ("| busy p90 " if p90 else "")
              + ("| read wait s | stream wait s " if waits else "")
              + ("| lost/sent % | link loss drops " if lossy else "")
              + "| RTT ms | retrans. pkts | peak streams | queue drops | failed: bound MB/s |")
        print("|---|---|---|---|---|---|" + ("---|---|---|" if cpu else "")
              + ("---|" if p90 else "") + ("---|---|" if waits else "")
              + ("---|---|" if lossy else "") + "---|---|---|---|---|")
        ordered = sorted(arms.items(), key=lambda kv: -(med(
            [num(r["mb_per_s"]) for r in kv[1] if r["status"] == "ok"]) or 0))
        for name, rs in ordered:
            ok = [r for r in rs if r["status"] == "ok"]
            mbs = [num(r["mb_per_s"]) for r in ok]
            secs = [num(r["seconds"]) for r in ok]
            rss_s = max((num(r["sender_peak_rss_bytes"]) or 0) for r in rs) / 1e6
            rss_r = max((num(r["receiver_peak_rss_bytes"]) or 0) for r in rs) / 1e6
            bound = med([num(r.get("partial_mb_per_s")) for r in rs if r["status"] != "ok"])
            rng = (f"{fmt(med(mbs), 2)} ({fmt(min(mbs), 2)}–{fmt(max(mbs), 2)})"
                   if mbs else "–")
            extra_cols = ""
            if cpu:
                busy = [sum(num(r.get(k)) or 0 for k in
                            ("sender_cpu_seconds", "receiver_cpu_seconds", "link_cpu_seconds"))
                        / num(r["seconds"]) for r in ok if num(r["seconds"])]
                extra_cols = (f"| {fmt(med([num(r.get('receiver_cpu_seconds')) for r in rs]), 2)} "
                            f"| {fmt(med([num(r.get('link_cpu_seconds')) for r in rs]), 2)} "
                            f"| {fmt(med(busy), 2)} ")
            if p90:
                extra_cols += f"| {fmt(med([num(r.get('host_busy_cores_p90')) for r in ok]) if ok else None, 2)} "
            if waits:
                extra_cols += "".join(
                    f"| {fmt(med([(num(r.get(k)) or 0) / 1e3 for r in ok]) if ok else None, 2)} "
                    for k in ("read_wait_ms", "stream_wait_ms"))
            if lossy:
                shares = [100 * num(r.get("retransmits")) / num(r.get("sent_packets"))
                          for r in ok if num(r.get("retransmits")) is not None
                          and num(r.get("sent_packets"))]
                extra_cols += (f"| {fmt(med(shares), 2)} "
                               f"| {fmt(med([num(r.get('link_dropped_loss')) for r in rs]), 0)} ")
            print(f"| {name} | {len(ok)}/{len(rs)} | {rng} | {fmt(med(secs), 2)} "
                  f"| {rss_s:.0f} / {rss_r:.0f} "
                  f"| {fmt(med([num(r['sender_cpu_seconds']) for r in rs]), 2)} "
                  + extra_cols +
                  f"| {fmt(med([num(r.get('rtt_ms')) for r in rs]), 0)} "
                  f"| {fmt(med([num(r.get('retransmits')) for r in rs]), 0)} "
                  f"| {fmt(med([num(r.get('peak_streams')) for r in rs]), 0)} "
                  f"| {fmt(med([num(r.get('link_dropped_queue')) for r in rs]), 0)} "
                  f"| {fmt(bound, 2)} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs.csv")
