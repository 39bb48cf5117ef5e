#!/usr/bin/env python3
"""Markdown tables for docs/results.md from a sweep's runs.csv (the study's).

    scripts/study-tables.py results/study-300mbit/runs.csv
    scripts/study-tables.py --ratios results/X/runs.csv [PAYLOAD]
    scripts/study-tables.py --ratio-table results/X/runs.csv PAYLOAD NUM/DEN [NUM/DEN ...]
    scripts/study-tables.py --regimes results/X/runs.csv[:PAYLOAD] [results/Y/runs.csv ...]
    scripts/study-tables.py --page docs/results.md [--check]

--ratio-table: ratios of medians between any two arms, each named MODE or
MODE:COLUMN=VALUE (e.g. quic-bundle:param_resume=true/quic-bundle:param_resume=false), with
the same bootstrap interval as --ratios.

--ratios: the reference study's four ratios (QUIC and TCP CUBIC/BBR, BBR ×8/×1) and its
bundled TCP figure as measured, per context (link rate and loss, host profile, receiver CPU
cap), with a 95% bootstrap interval of each ratio of medians, whether it is within ±25% of the
study's, and the rows' own evidence (UDP receive-buffer drops, receiver throttled time, lost /
sent, RTT). --page rewrites every `<!-- generated: tables|ratios|ratio-table PATH [ARGS] -->` …
`<!-- end -->` region of the page from the committed runs.csv it names; with --check it only
compares and exits 1, showing the difference (tests/sweep/study_page.rs).

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
them behind an idle slow start). Sweeps over a lossy link (link_loss_percent > 0) get "lost/sent %":
the sender's lost packets / packets sent (TCP retransmitted segments / data segments sent;
QUIC packets declared lost / packets sent), median over verified runs, and "link loss
drops": the wire packets the emulator dropped at random (both directions), median.
"""
import csv
import re
import statistics
import sys
from collections import defaultdict


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def loss_fraction(r):
    """The link's random loss as a fraction: `link_loss_percent`, or an earlier runs.csv's
    `link_loss` (a fraction; docs/sweep.md, "Earlier column names")."""
    pct = num(r.get("link_loss_percent"))
    return pct / 100 if pct is not None else num(r.get("link_loss")) or 0


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, digits=1):
    return "–" if x is None else f"{x:.{digits}f}"


def regime(r):
    """The v2 axes that set the run's regime (profile, receiver CPU cap, loss), as a suffix."""
    parts = []
    if r.get("param_profile"):
        parts.append(r["param_profile"])
    if r.get("param_recv_cpu_quota"):
        parts.append(f"rcv cpu {r['param_recv_cpu_quota']}")
    if r.get("param_loss"):
        parts.append(f"loss {r['param_loss']}")
    # Issue 21's start-up axes: Careful Resume and the initial window.
    if r.get("param_resume") == "true":
        parts.append("--resume")
    elif r.get("param_resume") == "false":
        parts.append("cold")
    if r.get("param_initial_window"):
        parts.append(f"initial-window {r['param_initial_window']}")
    # Issue 43's: the UDP receive buffer, stalls, the CPU hog, another build.
    if r.get("param_udp_rcvbuf"):
        parts.append(f"udp-rcvbuf {r['param_udp_rcvbuf']}")
    for end, key in (("rcv", "param_recv_stall"), ("snd", "param_send_stall")):
        if r.get(key) and r[key] != "none":
            parts.append(f"{end} stall {r[key]}")
    if r.get("param_recv_cpu_hog") == "true":
        parts.append("hog")
    if r.get("param_shoal") and r["param_shoal"] != "new":
        parts.append(f"build {r['param_shoal']}")
    return (" · " + " · ".join(parts)) if parts else ""


def arm(r):
    if r["kind"] != "shoal":
        return (r["kind"] + (f" (cap {r['param_timeout']})" if r.get("param_timeout") else "")
                + regime(r))
    parts = [r.get("param_mode") or "tcp-bundle"]
    if r.get("param_cc"):
        parts.append(r["param_cc"])
    if r.get("param_connections"):
        parts.append(f"×{r['param_connections']}")
    return " ".join(parts) + regime(r)


def tables(path):
    """The tables of one runs.csv, as the text main() prints."""
    out = []
    print = lambda *a: out.append(" ".join(str(x) for x in a) + "\n")  # noqa: E731
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
        lossy = any(loss_fraction(r) > 0 for rs in arms.values() for r in rs)
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
                busy = [DERIVED["cores_busy"](r) for r in ok if num(r["seconds"])]
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
                extra_cols += (f"| {fmt(med([lost_share(r) for r in ok]), 2)} "
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
    return "".join(out)


# The reference study's figures (65,536 × 4 KiB, 141 ms; MB/s) and the ratios Study v2 tries to
# reproduce (issue #22): name, numerator arm, denominator arm (mode, cc, connections), the
# study's numerator and denominator.
STUDY_RATIOS = [
    ("QUIC CUBIC / BBR", ("quic-bundle", "cubic", "1"), ("quic-bundle", "bbr", "1"), 6.91, 29.26),
    ("TCP CUBIC / BBR", ("tcp-bundle", "cubic", "1"), ("tcp-bundle", "bbr", "1"), 20.90, 19.09),
    ("TCP BBR ×8 / ×1", ("tcp-bundle", "bbr", "8"), ("tcp-bundle", "bbr", "1"), 38.04, 19.09),
    ("QUIC BBR ×8 / ×1", ("quic-bundle", "bbr", "8"), ("quic-bundle", "bbr", "1"), 36.83, 29.26),
]
# Figures compared as they are (MB/s), not as ratios.
STUDY_FIGURES = [("bundled TCP CUBIC ×1, MB/s", ("tcp-bundle", "cubic", "1"), 20.90)]
# A reproduction counts when within ±25% of the study's figure.
TOLERANCE = 0.25
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 22


def arm_key(r):
    return (r.get("param_mode") or "tcp-bundle", r.get("param_cc") or "",
            r.get("param_connections") or "1")


def context(r):
    """What else a run varied in (profile, CPU cap, link): ratios are taken within one."""
    loss = loss_fraction(r)
    rate = num(r.get("link_rate_bps")) or 0
    parts = [f"{rate / 1e6:.0f} Mbit/s" if rate else "", f"loss {100 * loss:g}%" if loss else ""]
    parts.append(r.get("param_profile") or "")
    if r.get("param_recv_cpu_quota"):
        parts.append(f"rcv cpu {r['param_recv_cpu_quota']}")
    return " · ".join(p for p in parts if p)


def bootstrap_ratio(a, b, rng):
    """95% percentile-bootstrap interval of median(a) / median(b): each side resampled with
    replacement, BOOTSTRAP_RESAMPLES times, a fixed seed (so the page is reproducible)."""
    ratios = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        mb = statistics.median(rng.choices(b, k=len(b)))
        if mb > 0:
            ratios.append(statistics.median(rng.choices(a, k=len(a))) / mb)
    ratios.sort()
    lo = ratios[int(0.025 * (len(ratios) - 1))]
    hi = ratios[int(0.975 * (len(ratios) - 1))]
    return lo, hi


def mbps(rows):
    return [num(r["mb_per_s"]) for r in rows]


def lost_share(r):
    """The sender's lost / sent packets in %, where the row has both."""
    lost, sent = num(r.get("retransmits")), num(r.get("sent_packets"))
    return 100 * lost / sent if lost is not None and sent else None


# What can explain a ratio, from the rows themselves: name, value of one row, decimals.
EVIDENCE = [
    ("UDP rcvbuf drops", lambda r: num(r.get("receiver_udp_rcvbuf_errors")), 0),
    ("rcv throttled s", lambda r: num(r.get("receiver_cpu_throttled_seconds")), 2),
    ("lost/sent %", lost_share, 2),
    ("RTT ms", lambda r: num(r.get("rtt_ms")), 0),
]


def evidence(*sides):
    """Medians of each EVIDENCE measure over each side's runs, where any side has it."""
    parts = []
    for name, f, digits in EVIDENCE:
        meds = [med([f(r) for r in rs]) for rs in sides]
        if any(m is not None for m in meds):
            parts.append(f"{name} " + " / ".join(fmt(m, digits) for m in meds))
    return " · ".join(parts) or "–"


def coverage(n):
    """Probability that min … max of n runs covers the true median: 1 − 2 × 0.5^n."""
    return 1 - 2 * 0.5 ** n


def study_contexts(path, payload=None):
    """The verified Shoal runs of one runs.csv's `payload` (default: its largest), grouped by
    context and then by arm (`arm_key`): what the study's ratios are taken within."""
    rows = [r for r in csv.DictReader(open(path))
            if r["kind"] == "shoal" and r["status"] == "ok"]
    if not payload:
        payload = max(rows, key=lambda r: int(r["payload_files"]))["payload"] if rows else ""
    by = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["payload"] == payload:
            by[context(r)][arm_key(r)].append(r)
    return payload, by


def study_ratio(arms, num_arm, den_arm, rng):
    """Median MB/s of `num_arm` / `den_arm` within one context and its bootstrap interval,
    with both arms' runs; None when either arm has none."""
    ra, rb = arms.get(num_arm), arms.get(den_arm)
    if not ra or not rb:
        return None
    a, b = mbps(ra), mbps(rb)
    return statistics.median(a) / statistics.median(b), *bootstrap_ratio(a, b, rng), ra, rb


def within_tolerance(x, study):
    return abs(x / study - 1) <= TOLERANCE


def ratios(path, payload=None):
    """The study's ratios and figures as measured in one runs.csv, per context."""
    import random
    payload, by = study_contexts(path, payload)
    rng = random.Random(BOOTSTRAP_SEED)
    out = ["| measure | context | study | here (median) | 95% interval | runs | within ±25% "
           "| evidence (medians, numerator / denominator) |\n",
           "|---|---|---|---|---|---|---|---|\n"]
    ns = set()

    def verdict(x, study):
        return "yes" if within_tolerance(x, study) else "no"

    for ctx in sorted(by):
        arms = by[ctx]
        for name, num_arm, den_arm, sn, sd in STUDY_RATIOS:
            measured = study_ratio(arms, num_arm, den_arm, rng)
            if measured is None:
                continue
            x, lo, hi, ra, rb = measured
            a, b = mbps(ra), mbps(rb)
            ns.update([len(a), len(b)])
            out.append(f"| {name} | {ctx} | {sn / sd:.2f} | {x:.2f} | {lo:.2f}–{hi:.2f} "
                       f"| {len(a)} / {len(b)} | {verdict(x, sn / sd)} | {evidence(ra, rb)} |\n")
        for name, which, study in STUDY_FIGURES:
            ra = arms.get(which)
            if not ra:
                continue
            a = mbps(ra)
            ns.add(len(a))
            x = statistics.median(a)
            out.append(f"| {name} | {ctx} | {study:.2f} | {x:.2f} | {min(a):.2f}–{max(a):.2f} "
                       f"| {len(a)} | {verdict(x, study)} | {evidence(ra)} |\n")
    if not ns:
        return (f"No verified runs of the arms the study's ratios need (payload `{payload}`, "
                "bundled TCP and QUIC × cubic/bbr × 1 or 8 connections).\n")
    out.append(f"\nPayload `{payload}`, verified runs only. A ratio's interval: 95% percentile "
               f"bootstrap of the ratio of medians ({BOOTSTRAP_RESAMPLES:,} resamples of each "
               f"side's runs, seed {BOOTSTRAP_SEED}). A figure's interval is min–max of its runs: "
               "an interval for the median that covers it with probability 1 − 2 × 0.5^n ("
               + ", ".join(f"{100 * coverage(n):.2f}% for {n} runs" for n in sorted(ns))
               + ").\n")
    return "".join(out)


def pick_arm(rows, spec):
    """The MB/s of the rows of arm `spec`: MODE, or MODE:COLUMN=VALUE (e.g.
    `quic-bundle:param_resume=true`, `tcp-bundle:param_initial_window=saved`)."""
    mode, _, cond = spec.partition(":")
    key, _, value = cond.partition("=")
    return mbps([r for r in rows if (r.get("param_mode") or "tcp-bundle") == mode
                 and (not key or r.get(key) == value)])


def ratio_table(path, payload, *pairs):
    """Ratios of medians between named arms of one runs.csv, verified runs of `payload`:
    each pair is NUM/DEN, each side an arm as `pick_arm` reads it; the interval is
    `bootstrap_ratio`'s, the same as the study ratios'."""
    import random
    rows = [r for r in csv.DictReader(open(path))
            if r["kind"] == "shoal" and r["status"] == "ok" and r["payload"] == payload]
    rng = random.Random(BOOTSTRAP_SEED)
    out = ["| numerator | denominator | MB/s medians | ratio | 95% interval | runs |\n",
           "|---|---|---|---|---|---|\n"]
    for pair in pairs:
        num_spec, den_spec = pair.split("/")
        a, b = pick_arm(rows, num_spec), pick_arm(rows, den_spec)
        if not a or not b:
            raise SystemExit(f"{path} {payload}: no verified runs of {num_spec if not a else den_spec}")
        ma, mb = statistics.median(a), statistics.median(b)
        lo, hi = bootstrap_ratio(a, b, rng)
        out.append(f"| `{num_spec}` | `{den_spec}` | {ma:.2f} / {mb:.2f} | {ma / mb:.3f} "
                   f"| {lo:.3f}–{hi:.3f} | {len(a)} / {len(b)} |\n")
    out.append(f"\nPayload `{payload}`, verified runs only; the interval is a 95% percentile "
               f"bootstrap of the ratio of medians ({BOOTSTRAP_RESAMPLES:,} resamples of each "
               f"side's runs, seed {BOOTSTRAP_SEED}).\n")
    return "".join(out)


def regime_table(*sources):
    """The study's ratios and figure under every regime of several sweeps, one row per regime
    (a context of one runs.csv: link, loss, host profile, receiver CPU cap), one column per
    measure: the median ratio [95% bootstrap interval], in bold where within ±25% of the
    study's. Each source is PATH or PATH:PAYLOAD (default: the sweep's largest payload)."""
    import os
    import random
    rng = random.Random(BOOTSTRAP_SEED)
    measures = [(m[0], m[1], m[2], m[3] / m[4]) for m in STUDY_RATIOS] + [
        (name, which, None, study) for name, which, study in STUDY_FIGURES]
    out = ["| regime | sweep (payload) | " + " | ".join(m[0] for m in measures) + " |\n",
           "|---|---|" + "---|" * len(measures) + "\n",
           "| **the study** | 003 (65,536 × 4 KiB) | "
           + " | ".join(f"{m[3]:.2f}" for m in measures) + " |\n"]
    for source in sources:
        path, _, payload = source.partition(":")
        payload, by = study_contexts(path, payload)
        sweep = os.path.basename(os.path.dirname(path))
        for ctx in sorted(by):
            arms = by[ctx]
            cells = []
            for name, num_arm, den_arm, study in measures:
                if den_arm is None:
                    a = mbps(arms.get(num_arm, []))
                    if not a:
                        cells.append("–")
                        continue
                    x = statistics.median(a)
                    cell = f"{x:.2f} [{min(a):.2f}–{max(a):.2f}]"
                else:
                    measured = study_ratio(arms, num_arm, den_arm, rng)
                    if measured is None:
                        cells.append("–")
                        continue
                    x, lo, hi = measured[:3]
                    cell = f"{x:.2f} [{lo:.2f}–{hi:.2f}]"
                cells.append(f"**{cell}**" if within_tolerance(x, study) else cell)
            out.append(f"| {ctx} | `{sweep}` ({payload}) | " + " | ".join(cells) + " |\n")
    out.append(f"\nVerified runs only. Ratios: median / median, with a 95% percentile bootstrap "
               f"interval ({BOOTSTRAP_RESAMPLES:,} resamples of each side's runs, seed "
               f"{BOOTSTRAP_SEED}); the bundled TCP figure: median MB/s [min–max of its runs]. "
               f"**Bold**: within ±{100 * TOLERANCE:.0f}% of the study's figure.\n")
    return "".join(out)


# Inline values: `<!--= FUNCTION ARG ... -->VALUE<!--/-->` inside prose, VALUE rewritten from
# the data like a block region. Paths are named once with `<!-- let NAME = PATH -->` (a line
# of its own, anywhere before its first use). An arm selector is NAME:PAYLOAD:ARM, ARM being a
# mode or a baseline kind followed by `,KEY=VALUE` filters (KEY a runs.csv column, or its
# `param_` axis: `cc`, `connections`, `profile`, `recv_cpu_quota`, ...). A selector that
# matches runs of more than one configuration is an error unless it ends in `,*` (pooled on
# purpose), so a sentence cannot silently mix arms.
INLINE_RE = re.compile(r"<!--= (.*?) -->(.*?)<!--/-->")
LET_RE = re.compile(r"^<!-- let (\w+) = (\S+) -->\s*$")

def share_of_run(r, ms_col):
    """A per-run duration column (ms) as a share of the run's `seconds`."""
    ms, s = num(r.get(ms_col)), num(r.get("seconds"))
    return ms / 1e3 / s if ms is not None and s else None


# Per-run values that are not a single column.
DERIVED = {
    "lost_pct": lost_share,
    "cores_busy": lambda r: (sum(num(r.get(k)) or 0 for k in (
        "sender_cpu_seconds", "receiver_cpu_seconds", "link_cpu_seconds"))
        / num(r["seconds"])) if num(r.get("seconds")) else None,
    "bound_mbps": lambda r: num(r.get("partial_mb_per_s")),
    # The share of the run the sender's TCP flows were held by the receive window or by the
    # send buffer (summed over connections: above 1 with several).
    "rwnd_limited_share": lambda r: share_of_run(r, "rwnd_limited_ms"),
    "sndbuf_limited_share": lambda r: share_of_run(r, "sndbuf_limited_ms"),
    # Files verified per second of the run (a failed run's completion-rate bound in files).
    "verified_files_per_s": lambda r: (num(r.get("files_verified")) / num(r["seconds"])
                                       if num(r.get("files_verified")) is not None
                                       and num(r.get("seconds")) else None),
    # The mean time the receiver's CPU group was held per throttled CFS period (ms): how long
    # each quota stall lasted.
    "throttle_ms_per_period": lambda r: (num(r["receiver_cpu_throttled_seconds"]) * 1e3
                                         / num(r["receiver_cpu_throttled"])
                                         if num(r.get("receiver_cpu_throttled"))
                                         and num(r.get("receiver_cpu_throttled_seconds")) is not None
                                         else None),
    # Round trips of the link per file: seconds / (files × the link's RTT).
    "rtts_per_file": lambda r: (num(r["seconds"]) / (num(r["payload_files"])
                                                      * num(r["link_rtt_ms"]) / 1e3)
                                if num(r.get("link_rtt_ms")) and num(r.get("seconds")) else None),
}


class Inline:
    def __init__(self, root):
        self.root = root
        self.paths = {}
        self.cache = {}

    def rows(self, name):
        if name not in self.paths:
            raise SystemExit(f"inline value: no `<!-- let {name} = PATH -->` before its use")
        path = self.paths[name]
        if path not in self.cache:
            import os
            self.cache[path] = list(csv.DictReader(open(os.path.join(self.root, path))))
        return self.cache[path]

    def meta_json(self, name):
        """The path and content of the meta.json beside `name`'s runs.csv."""
        import json
        import os
        if name not in self.paths:
            raise SystemExit(f"inline value: no `<!-- let {name} = PATH -->` before its use")
        path = os.path.join(self.root, os.path.dirname(self.paths[name]), "meta.json")
        return path, json.load(open(path))

    def select(self, sel, verified=True):
        """The runs an arm selector names (verified ones only unless `verified` is False)."""
        try:
            name, payload, spec = sel.split(":", 2)
        except ValueError:
            raise SystemExit(f"inline value: `{sel}` is not NAME:PAYLOAD:ARM")
        parts = spec.split(",")
        pooled = parts[-1] == "*"
        if pooled:
            parts = parts[:-1]
        head, filters = parts[0], [p.partition("=") for p in parts[1:]]
        rows = [r for r in self.rows(name) if (payload == "*" or r["payload"] == payload)]
        if head != "*":
            rows = [r for r in rows if (r["kind"] == head) or
                    (r["kind"] == "shoal" and (r.get("param_mode") or r.get("mode")) == head)]
        for key, _, value in filters:
            col = f"param_{key}" if f"param_{key}" in (rows[0] if rows else {}) else key
            rows = [r for r in rows if r.get(col) == value]
        if not rows:
            raise SystemExit(f"inline value: `{sel}` matches no runs")
        configs = {r["config"] for r in rows}
        if len(configs) > 1 and not pooled:
            raise SystemExit(f"inline value: `{sel}` matches {len(configs)} configurations "
                             f"({'; '.join(sorted(configs))}); name one, or end with `,*`")
        return [r for r in rows if r["status"] == "ok"] if verified else rows

    @staticmethod
    def values(rows, col):
        f = DERIVED.get(col, lambda r: num(r.get(col)))
        xs = [f(r) for r in rows]
        xs = [x for x in xs if x is not None]
        if not xs:
            raise SystemExit(f"inline value: no `{col}` in the selected runs")
        return xs

    def evaluate(self, expr):
        words = expr.split()
        fn, args = words[0], [w for w in words[1:] if "=" not in w or w.count(":") >= 2]
        opts = dict(w.split("=", 1) for w in words[1:] if "=" in w and w.count(":") < 2)
        digits = int(opts.get("d", 2))
        col = opts.get("col", "mb_per_s")
        scale = float(opts.get("x", 1))
        stat = {"med": statistics.median, "min": min, "max": max,
                "mean": statistics.mean, "sum": sum}
        which = opts.get("rows", "ok")
        if which not in ("ok", "failed", "all"):
            raise SystemExit(f"inline value: rows={which} in `{expr}` (ok, failed or all)")

        # The denominator of a ratio may take other rows (`rows-den=ok` beside `rows=failed`:
        # a failed arm's completion-rate bound over a verified arm's rate, an upper bound).
        which_den = opts.get("rows-den", which)
        if which_den not in ("ok", "failed", "all"):
            raise SystemExit(f"inline value: rows-den={which_den} in `{expr}` (ok, failed or all)")

        def runs(sel, which=which):
            rs = self.select(sel, verified=which == "ok")
            return [r for r in rs if r["status"] != "ok"] if which == "failed" else rs

        if fn in stat:
            v = stat[fn](self.values(runs(args[0]), col)) * scale
            return f"{v:,.{digits}f}" if opts.get("sep") else f"{v:.{digits}f}"
        if fn in ("ratio", "ci", "ratio-ci"):
            a = self.values(runs(args[0]), col)
            b = self.values(runs(args[1], which_den), opts.get("col-den", col))
            x = statistics.median(a) / statistics.median(b)
            import random
            lo, hi = bootstrap_ratio(a, b, random.Random(BOOTSTRAP_SEED))
            if fn == "ratio":
                return f"{x:.{digits}f}"
            if fn == "ci":
                return f"{lo:.{digits}f}–{hi:.{digits}f}"
            return f"{x:.{digits}f} [{lo:.{digits}f}–{hi:.{digits}f}]"
        if fn in ("medrange", "best", "worst"):
            # Over the configurations a pooled selector (`...,*`) matches: the range of their
            # medians ("lo–hi"), or the arm with the highest / lowest median (its label).
            by = defaultdict(list)
            for r in runs(args[0]):
                by[r["config"]].append(r)
            meds = {c: statistics.median(self.values(rs, col)) for c, rs in by.items()}
            if not meds:
                raise SystemExit(f"inline value: `{args[0]}` has no runs with `{col}`")
            if fn == "medrange":
                return f"{min(meds.values()):.{digits}f}–{max(meds.values()):.{digits}f}"
            pick = (max if fn == "best" else min)(meds, key=meds.get)
            return arm(by[pick][0])
        if fn == "meta":
            # A value of the sweep's meta.json (beside its runs.csv), by dotted key path:
            # `meta T link_check.idle_rtt.median_ms d=2`, `meta T shoal.commit` (text as it is).
            path, v = self.meta_json(args[0])
            try:
                for key in args[1].split("."):
                    v = v[int(key)] if isinstance(v, list) else v[key]
            except (KeyError, IndexError, ValueError, TypeError):
                raise SystemExit(f"inline value: {path} has no `{args[1]}`")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                v = v * scale
                return f"{v:,.{digits}f}" if opts.get("sep") else f"{v:.{digits}f}"
            v = ("true" if v else "false") if isinstance(v, bool) else str(v)
            return v[:int(opts["chars"])] if "chars" in opts else v
        if fn == "minutes":
            # How long the sweep ran, from its meta.json's `started` and `finished`.
            import datetime
            _, meta = self.meta_json(args[0])
            t = [datetime.datetime.fromisoformat(meta[k].replace("Z", "+00:00"))
                 for k in ("started", "finished")]
            return f"{(t[1] - t[0]).total_seconds() / 60:.0f}"
        if fn == "ok":
            rows = self.select(args[0], verified=False)
            return f"{sum(r['status'] == 'ok' for r in rows)}/{len(rows)}"
        if fn == "runs":
            # Verified / all runs of a sweep, optionally of one kind (shoal, tar-ssh, ...).
            rows = [r for r in self.rows(args[0]) if len(args) < 2 or r["kind"] == args[1]]
            return f"{sum(r['status'] == 'ok' for r in rows)} of {len(rows)}"
        raise SystemExit(f"inline value: unknown function `{fn}` in `{expr}` "
                         "(med, min, max, mean, sum, ratio, ci, ratio-ci, medrange, best, worst, "
                         "meta, minutes, ok, runs)")

    def line(self, line):
        m = LET_RE.match(line)
        if m:
            self.paths[m.group(1)] = m.group(2)
            return line
        return INLINE_RE.sub(
            lambda m: f"<!--= {m.group(1)} -->{self.evaluate(m.group(1))}<!--/-->", line)


GENERATORS = {"tables": tables, "ratios": ratios, "ratio-table": ratio_table,
              "regimes": regime_table}
BEGIN = "<!-- generated: "
END = "<!-- end -->"


def render_page(text, root):
    """The page with every generated region rewritten from its data.

    A region is `<!-- generated: KIND PATH [ARG ...] -->` … `<!-- end -->`: KIND is `tables`,
    `ratios`, `ratio-table` or `regimes`, PATH a runs.csv relative to the repository root, ARGs
    a payload name (ratios) or a payload and NUM/DEN pairs (ratio-table); `regimes` takes
    several PATH[:PAYLOAD]. Every other line's inline values (`Inline`) are rewritten too."""
    import os
    lines = text.splitlines(keepends=True)
    inline = Inline(root)
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        out.append(inline.line(line))
        i += 1
        if not line.startswith(BEGIN):
            continue
        spec = line[len(BEGIN):].rsplit("-->", 1)[0].split()
        if len(spec) < 2 or spec[0] not in GENERATORS:
            raise SystemExit(f"{line.strip()}: expected {BEGIN}KIND PATH [ARG] --> "
                             f"with KIND one of {', '.join(GENERATORS)}")
        while i < len(lines) and lines[i].rstrip("\n") != END:
            i += 1
        if i == len(lines):
            raise SystemExit(f"{line.strip()}: no {END} after it")
        # `regimes` reads several sweeps; the others one sweep and then their arguments.
        paths = spec[1:] if spec[0] == "regimes" else spec[1:2]
        body = GENERATORS[spec[0]](*[os.path.join(root, p) for p in paths],
                                   *spec[1 + len(paths):])
        out.append(body.strip("\n") + "\n")
        out.append(lines[i])
        i += 1
    return "".join(out)


def main(args):
    """`study-tables.py RUNS_CSV` prints the tables; `--ratios RUNS_CSV [PAYLOAD]` the
    study's ratios; `--page PAGE [--check]` rewrites the page's generated regions (or, with
    --check, exits 1 and shows the difference when the page is not what its data give)."""
    import difflib
    import os
    if not args or args[0] in ("-h", "--help") or (args[0].startswith("-") and
                                                    args[0] not in ("--ratios", "--ratio-table", "--regimes", "--page")):
        print(__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n")[1],
              file=sys.stdout if args[:1] in (["-h"], ["--help"]) else sys.stderr)
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    if args[:1] == ["--ratios"]:
        sys.stdout.write(ratios(*args[1:3]))
        return 0
    if args[:1] == ["--regimes"] and len(args) >= 2:
        sys.stdout.write(regime_table(*args[1:]))
        return 0
    if args[:1] == ["--ratio-table"] and len(args) >= 4:
        sys.stdout.write(ratio_table(*args[1:]))
        return 0
    if args[:1] == ["--page"]:
        page = args[1]
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        old = open(page).read()
        new = render_page(old, root)
        if "--check" in args[2:]:
            if old != new:
                sys.stdout.writelines(difflib.unified_diff(
                    old.splitlines(keepends=True), new.splitlines(keepends=True),
                    page, page + " (regenerated)"))
                print(f"{page} differs from what its data give: run "
                      f"scripts/study-tables.py --page {page}", file=sys.stderr)
                return 1
            return 0
        if old != new:
            open(page, "w").write(new)
        return 0
    sys.stdout.write(tables(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
