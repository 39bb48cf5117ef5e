#!/usr/bin/env python3
"""Tables for docs/benchmarks.md from the committed output of its benchmark commands.

    scripts/bench-tables.py --page docs/benchmarks.md [--check]
    scripts/bench-tables.py --print KIND PATH...      # one table, to the terminal

--page rewrites every `<!-- generated: KIND PATH [PATH ...] -->` … `<!-- end -->` region of the
page from the committed files it names; with --check it only compares and exits 1, showing the
difference (tests/sweep/study_page.rs). KIND is one of:

- loopback LOG…: scripts/bench/loopback.sh logs; per log, tar|tar's wall range and each mode's
  tar|tar wall / whole `send` wall (ratio of medians, then the min–max of the same ratio pass by
  pass), for the tree's binary (not `@base`).
- stream-anchor LOG: scripts/bench/stream-anchor.sh; each arm's median wall, CPU of both ends
  and tar|tar wall / wall.
- quinn-anchor LOG: scripts/bench/quinn-anchor.sh; CPU per GB of each arm and the ratios.
- quic-link-memory LOG…: scripts/bench/quic-link-memory.sh; per log and arm, MB/s and each
  end's peak RSS (range over the runs), and the idle processes' resident size.
- memory RUNS.CSV: a sweep of scripts/matrices/memory-1gbit.toml; per mode and payload, the
  rows, each end's peak RSS range, the ceiling and the rows over it (scripts/check/check-memory.py's
  ceilings).
- memory-vs-quinn RUNS.CSV LOG…: a sweep of scripts/matrices/memory-1gbit-quic.toml against
  scripts/bench/quic-link-memory.sh logs of the same day (one a connection count: `CONNECTIONS`);
  per payload and connection count, each end's peak RSS range against issue 42's ceilings:
  quinn's largest sender and receiver + 6 MB (from the log of the rows' connection count, else
  of one), and 32 MB for a small tree's receiver (its writer slower than the link) at one
  connection.
- blocks-link LOG, blocks-loopback LOG: scripts/bench/blocks-link.sh, scripts/bench/blocks.sh.
- create LOG: scripts/bench/create.sh; per file system each arm's median files/s, the ratios
  of shoal and of its writer alone to tar -x and cpz (ratio of medians, then pass by pass), and
  the CPU both ends of the loopback arm used.
- startup-floor RUNS.CSV: scripts/startup-floor.py's table of a sweep, with each median's
  seconds over its start-rule floor.
- streams-large LOG…: scripts/bench/streams-large-link.sh; per log (its binary) and pair of
  modes × connections, the streams and bundled medians and the median of the pairs' ratios.
- small-vs-large RUNS.CSV…: sweeps of scripts/matrices/btrfs-small-vs-large*.toml; per sweep
  (its volumes' size) each arm's median MB/s and the receiver's median wait on its writers, the
  small tree's best arm over the large file's best and over the same arm's large file
  (target ≥ 0.8), and `tar-local`.
- wchan FILE…: scripts/bench/wchan-sample.py's output; per file, the writer threads' samples
  (`shoal-writer-*`) by what they did: running, waiting for work, blocked on Btrfs's metadata
  reservations (`__reserve_bytes`), on its B-tree locks, elsewhere.
- link-cpu RUNS.CSV: a sweep on the emulated link (scripts/matrices/quic-gso-batch.toml); per
  configuration the median MB/s, the forwarder's CPU seconds (`link_cpu_seconds`) per GB of
  payload (median of the runs'), its ratio to TCP's (the tcp-bundle configuration's; target
  ≤ 1.1), and both ends' CPU seconds.
- code-pages LOG…: scripts/bench/code-pages.py's output (one or more programs a log); per
  program, medians over its runs of VmRSS and, for its own code and read-only data mappings,
  the pages it faulted on, the KiB resident and resident / faulted.
- callgrind FILE: scripts/bench/callgrind.sh's lines (`LABEL: MODE SIDE … per_file_without_selfhash=N`).
"""
import csv
import difflib
import re
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "check"))
from memory_ceilings import FLAT as CEILINGS, MB, RUN, SLOW_WRITER, against_quinn, quic_ceilings  # noqa: E402

MODES = ["tcp-bundle", "quic-bundle", "tcp-streams", "quic-streams"]


def med(xs):
    return statistics.median(xs)


def rng(xs, digits=1):
    lo, hi = min(xs), max(xs)
    return f"{lo:.{digits}f}" if f"{lo:.{digits}f}" == f"{hi:.{digits}f}" else f"{lo:.{digits}f}–{hi:.{digits}f}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


PASS = re.compile(r"^(\S+)\s+pass (\d+):\s+([\d.]+) s\b.*?(?:process wall ([\d.]+) s)?$")


def loopback(paths):
    rows = []
    for path in paths:
        tar, wall = {}, {m: {} for m in MODES}
        for line in open(path, encoding="utf-8"):
            m = PASS.match(line.strip())
            if not m:
                continue
            arm, n = m.group(1), int(m.group(2))
            if arm == "tar|tar":
                tar[n] = float(m.group(3))
            elif arm in wall and m.group(4):
                wall[arm][n] = float(m.group(4))
        cells = [f"`{path}`", f"{min(tar.values()):.3f}–{max(tar.values()):.3f} s"]
        for mode in MODES:
            w = wall[mode]
            if not w:
                cells.append("–")
                continue
            ratio = med(tar.values()) / med(w.values())
            per = [tar[n] / w[n] for n in w if n in tar]
            cells.append(f"{ratio:.2f} ({min(per):.2f}–{max(per):.2f})")
        rows.append(cells)
    header = ["log", "tar\\|tar wall"] + MODES
    return table(header, rows) + ["| target | | ≥ 1.0 | ≥ 0.85 | ≥ 0.75 | ≥ 0.6 |"]


def stream_anchor(paths):
    (path,) = paths
    arms = {}
    for line in open(path, encoding="utf-8"):
        f = line.split()
        if len(f) == 4 and not line.startswith(("#", "stream-anchor")):
            try:
                wall, cpu = float(f[1]), float(f[2]) + float(f[3])
            except ValueError:
                continue
            arms.setdefault(f[0], []).append((wall, cpu))
    names = {"tar": "tar \\| tar", "anchor-yamux": "yamux streams alone (anchor)",
             "anchor-quic": "QUIC streams alone (anchor)"}
    tar = med([w for w, _ in arms["tar"]])
    rows = []
    for arm in ["tar", "tcp-bundle", "anchor-yamux", "tcp-streams", "quic-bundle", "anchor-quic", "quic-streams"]:
        w = med([w for w, _ in arms[arm]])
        c = med([c for _, c in arms[arm]])
        rows.append([names.get(arm, arm), f"{w:.3f} s", "" if arm == "tar" else f"{c:.3f} s", f"{tar / w:.2f}"])
    return [f"`{path}`, medians of {len(arms['tar'])}:", ""] + table(
        ["arm", "wall", "CPU, both ends", "tar\\|tar / wall"], rows)


def quinn_anchor(paths):
    (path,) = paths
    text = open(path, encoding="utf-8").read()
    get = lambda pat: re.search(pat, text, re.M).group(1)
    anchor = get(r"^median CPU s/GB anchor\s*: ([\d.]+)")
    bench = get(r"^median CPU s/GB quinn-bench\s*: ([\d.]+)")
    shoal = get(r"^median CPU s/GB shoal\s*: ([\d.]+)")
    split = get(r"^median CPU s/GB shoal\s*: [\d.]+ \(send \+ recv: ([\d.]+ \+ [\d.]+)\)")
    runs = get(r"^median CPU s/GB shoal\s*: .* over (\d+) runs")
    payload = sorted({int(x) for x in re.findall(r"ok [\d.]+ (\d+) \d+ \d+ \d+", text)})
    rows = [["quinn's `benches/bench.rs` (`large_data_1_stream`)", bench, ""],
            ["single-stream anchor (`scripts/quinn-anchor`)", anchor, ""],
            [f"Shoal quic-bundle (`send` + `recv --once`), UDP payload {'/'.join(map(str, payload))}",
             f"{shoal} ({split})", ""],
            ["Shoal / quinn's bench", "", f"**{float(shoal) / float(bench):.2f}**"],
            ["Shoal / single-stream anchor", "", f"{float(shoal) / float(anchor):.2f}"]]
    return [f"`{path}`, medians of {runs} runs:", ""] + table(["arm", "CPU s/GB", "ratio (target ≤ 1.2)"], rows)




def quic_link_memory(paths):
    rows = []
    for path in paths:
        runs, idle = {}, ""
        for line in open(path, encoding="utf-8"):
            m = RUN.match(line)
            if m:
                runs.setdefault(m.group(1), []).append([float(x) for x in m.group(2, 3, 4)])
            i = re.match(r"^# idle resident KiB.*: shoal recv (\d+), anchor serve (\d+)", line)
            if i:
                idle = f"{int(i.group(1)):,} / {int(i.group(2)):,} KiB"
        for arm in ["anchor", "shoal quic-bundle"]:
            r = runs[arm]
            rows.append([f"`{path}`" if arm == "anchor" else "", "quinn alone" if arm == "anchor" else "quic-bundle",
                         rng([x[0] for x in r]), rng([x[1] for x in r]) + " MB", rng([x[2] for x in r]) + " MB",
                         idle if arm == "anchor" else ""])
    return table(["log", "arm", "MB/s", "sender peak RSS", "receiver peak RSS", "idle: shoal recv / anchor"], rows)


def memory_vs_quinn(paths):
    runs_csv, *logs = paths
    # Each connection count against quinn's own at that count where a log has it, else at one.
    ceilings = against_quinn(logs)
    groups = {}
    with open(runs_csv, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("mode") == "quic-bundle" and row.get("sender_peak_rss_bytes"):
                groups.setdefault((int(row["payload_files"]), int(row["connections"])), []).append(row)
    rows, over_all, total = [], 0, 0
    bold = lambda txt, n: f"**{txt}**" if n else txt
    for files, conns in sorted(groups, key=lambda k: (-k[0], k[1])):
        rs = groups[(files, conns)]
        send_c, rc = quic_ceilings(ceilings, files, conns)
        s = [int(r["sender_peak_rss_bytes"]) / MB for r in rs]
        v = [int(r["receiver_peak_rss_bytes"]) / MB for r in rs]
        over_s = sum(x > send_c for x in s)
        over_r = sum(x > rc for x in v) if rc is not None else 0
        over_all += sum(a > send_c or (rc is not None and b > rc) for a, b in zip(s, v))
        total += len(rs)
        ok = sum(r["status"] == "ok" for r in rs)
        payload = "65,536 × 4 KiB" if files == 65536 else ("one 256 MiB file" if files == 1 else f"{files:,} files")
        rows.append([payload, str(conns), f"{ok}/{len(rs)}", bold(rng(s), over_s), f"{send_c:.1f}",
                     bold(rng(v), over_r), "none named" if rc is None else f"{rc:.1f}",
                     f"{over_s} / {over_r}"])
    against = "; ".join(f"`{log}` ({n} connection{'s' if n > 1 else ''})"
                        for n, (_, _, log) in sorted(ceilings.items()))
    foot = (f"{over_all} of {total} rows over a ceiling (bold: over). Ceilings: quinn's largest sender and "
            f"receiver + 6 MB, at the rows' connection count where a log has it, else at one: {against}; "
            f"a small tree's receiver (its writer slower than the link) {SLOW_WRITER} MB at one connection.")
    return table(["payload", "connections", "verified", "sender MB", "ceiling", "receiver MB", "ceiling",
                  "rows over (sender / receiver)"], rows) + ["", foot]


def memory(paths):
    (path,) = paths
    groups = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            mode = row.get("mode") or row.get("param_mode", "")
            if mode not in CEILINGS or not row.get("sender_peak_rss_bytes"):
                continue
            files = int(row["payload_files"])
            key = (mode, files)
            groups.setdefault(key, []).append(row)
    rows, over_all, total = [], 0, 0
    for mode in MODES:
        for files in sorted({f for m, f in groups if m == mode}, reverse=True):
            rs = groups[(mode, files)]
            s = [int(r["sender_peak_rss_bytes"]) / MB for r in rs]
            v = [int(r["receiver_peak_rss_bytes"]) / MB for r in rs]
            c = CEILINGS[mode]
            over_s = sum(x > c for x in s)
            over_r = sum(x > c for x in v)
            over = sum(a > c or b > c for a, b in zip(s, v))
            ok = sum(r["status"] == "ok" for r in rs)
            over_all += over
            total += len(rs)
            payload = "65,536 × 4 KiB" if files == 65536 else ("one 256 MiB file" if files == 1 else f"{files:,} files")
            bold = lambda txt, n: f"**{txt}**" if n else txt
            rows.append([mode, payload, str(c), f"{ok}/{len(rs)}", bold(rng(s), over_s), bold(rng(v), over_r),
                         f"{over_s} / {over_r}"])
    foot = f"{over_all} of {total} rows over their ceiling (bold: over)."
    busy = [float(r["data_all_cores_busy_share"]) for rs in groups.values() for r in rs
            if r["payload_files"] == "65536" and r.get("data_all_cores_busy_share")]
    if busy:
        foot += (f" Largest `data_all_cores_busy_share` of the {len(busy)} small-file rows: {max(busy):.2f}"
                 " (the core-busy target: at most 0.5).")
    return table(["mode", "payload", "ceiling MB", "verified", "sender MB", "receiver MB", "rows over (sender / receiver)"],
                 rows) + ["", foot]


def blocks_link(paths):
    (path,) = paths
    meds = {}
    for line in open(path, encoding="utf-8"):
        m = re.match(r"^median (\S+)\s+(big|small) x(\d+)\s+([\d.]+) MB/s \(([\d. ]+)\)", line)
        if m:
            meds[(m.group(1), m.group(2), int(m.group(3)))] = (float(m.group(4)), m.group(5))
    rows = []
    for mode in ["tcp-bundle", "quic-bundle"]:
        b1, b8, s8 = meds[(mode, "big", 1)], meds[(mode, "big", 8)], meds[(mode, "small", 8)]
        r1, r2 = b8[0] / b1[0], b8[0] / s8[0]
        rows.append([mode, f"{b1[0]:.2f} ({b1[1]})", f"{b8[0]:.2f} ({b8[1]})", f"{s8[0]:.2f} ({s8[1]})",
                     f"**{r1:.3f}** ({'met' if r1 >= 1.15 else 'not met'})",
                     f"**{r2:.3f}** ({'met' if 0.95 <= r2 <= 1.05 else 'not met'})"])
    return [f"`{path}`, MB/s, medians (runs in order):", ""] + table(
        ["mode", "256 MiB ×1", "256 MiB ×8", "65,536 × 4 KiB ×8", "×8 / ×1 (target ≥ 1.15)",
         "large ×8 / small ×8 (target 0.95–1.05)"], rows)


def blocks_loopback(paths):
    (path,) = paths
    rows = []
    first = None
    for line in open(path, encoding="utf-8"):
        m = re.match(r"^median (--connections \d+)\s+([\d.]+) MB/s over (\d+) runs \(([\d. ]+)\)", line)
        if m:
            v = float(m.group(2))
            first = first or v
            rows.append([f"`{m.group(1)}`", f"{v:.2f} ({m.group(4)})", f"{v / first:.3f}"])
    return [f"`{path}`, one 1 GiB file, tcp-bundle, MB/s, medians (runs in order):", ""] + table(
        ["arm", "MB/s", "against one connection"], rows)


def callgrind(paths):
    (path,) = paths
    per = {}
    labels = []
    for line in open(path, encoding="utf-8"):
        m = re.match(r"^\s+(\S+): (\S+) (send|recv) Ir=\d+ files=(\d+) .*per_file_without_selfhash=(\d+)", line)
        if m:
            if m.group(1) not in labels:
                labels.append(m.group(1))
            per[(m.group(1), m.group(2), m.group(3))] = int(m.group(5))
    base, new = labels[0], labels[-1]
    rows = []
    for mode in MODES:
        cells = [mode]
        for side in ["recv", "send"]:
            a, b = per[(base, mode, side)], per[(new, mode, side)]
            cells.append(f"{a:,} → {b:,} ({(b - a) / a * 100:+.1f}%)")
        rows.append(cells)
    return [f"`{path}`, instructions per file, `{base}` → `{new}`:", ""] + table(["mode", "receiver", "sender"], rows)


def create(paths):
    (path,) = paths
    t = {}                          # (fs, arm) -> {pass: seconds}
    cpu = {}                        # fs -> [(sender s, receiver s, wall s)] of the shoal arm
    files = None
    failed = {}                     # (fs, arm) -> timed passes that failed (exit or verification)
    for line in open(path, encoding="utf-8"):
        f = re.match(r"(\S+) +(\S+) +pass (\d+): FAILED", line)
        if f:
            failed[(f.group(1), f.group(2))] = failed.get((f.group(1), f.group(2)), 0) + 1
        m = re.match(r"(\S+) +(\S+) +pass (\d+): +([\d.]+) s +([\d.]+) files/s", line)
        if m:
            t.setdefault((m.group(1), m.group(2)), {})[int(m.group(3))] = float(m.group(4))
            c = re.search(r"cpu sender ([\d.]+) s, receiver ([\d.]+) s", line)
            if c:
                cpu.setdefault(m.group(1), []).append((float(c.group(1)), float(c.group(2)), float(m.group(4))))
        m = re.match(r"payload: (\d+) files of (\S+)", line)
        if m:
            files, size = int(m.group(1)), m.group(2)
    fses = list(dict.fromkeys(fs for fs, _ in t))   # as the log ran them (FS or FS@SIZE)
    fses += [fs for fs, _ in failed if fs not in fses]
    arms = [a for a in ["tar-x", "cpz", "cp-r", "shoal", "writer"]
            if any((fs, a) in t or (fs, a) in failed for fs in fses)]

    def ratio(fs, ours, ref):
        if (fs, ours) not in t or (fs, ref) not in t:
            return "—"
        a, b = t[(fs, ours)], t[(fs, ref)]
        per = [b[p] / a[p] for p in sorted(set(a) & set(b))]
        return f"{med(b.values()) / med(a.values()):.2f} ({min(per):.2f}–{max(per):.2f})"

    def rate(fs, arm):
        bad = failed.get((fs, arm), 0)
        if (fs, arm) not in t:
            return f"**failed {bad}/{bad}**" if bad else "—"
        good = f"{files / med(t[(fs, arm)].values()):,.0f}"
        return f"{good} (**{bad} failed**)" if bad else good

    def used(fs):
        if not cpu.get(fs):
            return "—"
        snd, rcv, wall = (med([x[i] for x in cpu[fs]]) for i in range(3))
        return f"{snd:.2f} / {rcv:.2f} ({(snd + rcv) / wall:.2f} cores)"

    rows = [[fs] + [rate(fs, a) for a in arms] for fs in fses]
    ratios = [[fs, ratio(fs, "shoal", "tar-x"), ratio(fs, "shoal", "cpz"), ratio(fs, "writer", "tar-x"),
               ratio(fs, "writer", "cpz"), used(fs)] for fs in fses]
    return ([f"`{path}`, {files:,} × {size}, files/s (medians of the timed passes):", ""]
            + table(["file system"] + arms, rows)
            + ["", "Ratios of medians (the per-pass range), and the loopback arm's CPU, medians:", ""]
            + table(["file system", "shoal / tar-x (≥ 1.3)", "shoal / cpz (≥ 1.0)", "writer / tar-x",
                     "writer / cpz", "shoal CPU-s, sender / receiver"], ratios)
            + ([] if not failed else
               ["", "Failed: a run that exited with an error or whose destination did not verify is a failure "
                    "line in the log (its warm-up run included there), never a time; counted here over the "
                    "timed passes."]))


def startup_floor(paths):
    """scripts/startup-floor.py's table of RUNS.CSV (its last column: seconds over the
    start-rule floor; the target is within 5%, ≤ 1.05)."""
    import importlib.util
    import os
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "startup-floor.py")
    spec = importlib.util.spec_from_file_location("startup_floor", script)
    floor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(floor)
    (path,) = paths
    return [f"`{path}`, medians (scripts/startup-floor.py):", ""] + floor.table(path)


def streams_large(paths):
    rows = []
    for path in paths:
        binary = ""
        for line in open(path, encoding="utf-8"):
            b = re.match(r"^binary \S+ \((\w+)\), link (\S+) / (\S+), (\S+),", line)
            if b:
                binary = f"`{b.group(1)}` ({b.group(4)}, {b.group(2)} / {b.group(3)})"
            m = re.match(r"^median (\S+) x(\d+)\s+streams\s+([\d.]+) bundle\s+([\d.]+) MB/s, ratio ([\d.]+) \(([\d. ]+);", line)
            if m:
                r = float(m.group(5))
                rows.append([f"`{path}`", binary, m.group(1), m.group(2), m.group(3), m.group(4),
                             f"**{r:.3f}** ({m.group(6)}; {'met' if r >= 0.95 else 'not met'})"])
    return ["MB/s, medians; the ratio is the median of the alternating pairs' ratios (pass by pass):", ""] + table(
        ["log", "binary sha256 (file, link)", "streams / bundle", "connections", "streams MB/s", "bundle MB/s",
         "ratio (target ≥ 0.95)"], rows)


def verified_rows(path):
    """The rows of a sweep's runs.csv whose destination verified."""
    with open(path, encoding="utf-8", newline="") as f:
        return [r for r in csv.DictReader(f) if r["status"] == "ok"]


def small_vs_large(paths):
    out = []
    for path in paths:
        arms, sizes = {}, {}
        for r in verified_rows(path):
            label = "tar-local" if r["kind"] == "tar-local" else f"{r['mode']} ×{r['param_connections']}"
            a = arms.setdefault((r["payload"], label), {"mbps": [], "wait": []})
            a["mbps"].append(float(r["mb_per_s"]))
            if r.get("receiver_write_wait_seconds"):
                a["wait"].append(float(r["receiver_write_wait_seconds"]))
            if r.get("dest_fs_size_bytes"):
                sizes.setdefault(r["payload"], set()).add(int(r["dest_fs_size_bytes"]))
        size = ", ".join(f"{p} {'/'.join(f'{b / 2**30:.3g}' for b in sorted(v))} GiB"
                         for p, v in sorted(sizes.items(), reverse=True))

        def cell(payload, label):
            a = arms.get((payload, label))
            if not a:
                return "—"
            wait = f", wait {med(a['wait']):.2f} s" if a["wait"] else ""
            return f"{med(a['mbps']):.2f} ({len(a['mbps'])} runs{wait})"

        labels = sorted({k[1] for k in arms if k[1] != "tar-local"}) + ["tar-local"]
        shoal = {k: med(v["mbps"]) for k, v in arms.items() if k[1] != "tar-local"}
        small = {k[1]: v for k, v in shoal.items() if k[0] == "small"}
        large = {k[1]: v for k, v in shoal.items() if k[0] == "large"}
        bs, bl = max(small, key=small.get), max(large, key=large.get)
        same = f"; {bs} against its own large file **{small[bs] / large[bs]:.2f}**" if bs in large else ""
        out += [f"`{path}`, fresh Btrfs volumes of {size}; MB/s, medians (verified runs; the "
                "receiver's wait on its writers, summed over connections):", ""]
        out += table(["arm", "65,536 × 4 KiB", "one 256 MiB file"],
                     [[lab, cell("small", lab), cell("large", lab)] for lab in labels])
        out += ["", f"The small tree's best arm ({bs}) over the large file's best ({bl}): "
                f"**{small[bs] / large[bl]:.2f}** (target ≥ 0.8){same}.", ""]
    return out[:-1]


def wchan(paths):
    rows = []
    for path in paths:
        c = {"running": 0, "waiting for work": 0, "reservations": 0, "tree locks": 0, "elsewhere": 0}
        for line in open(path, encoding="utf-8"):
            f = line.split()
            if len(f) >= 4 and f[0] == "state" and f[2].startswith("shoal-writer") and f[3] == "R":
                c["running"] += int(f[1])
            elif len(f) >= 5 and f[0] == "wchan" and f[2].startswith("shoal-writer"):
                w = f[4]
                key = ("reservations" if w == "__reserve_bytes" else
                       "tree locks" if w.startswith("btrfs_tree") else
                       "waiting for work" if f[3] == "S" and w == "futex_do_wait" else "elsewhere")
                c[key] += int(f[1])
        total = sum(c.values())
        rows.append([f"`{path}`", f"{total:,}"] + [f"{v / total:.0%}" for v in c.values()])
    return (["The receiver's writer threads, share of their samples (every 10 ms):", ""]
            + table(["sample file", "writer samples", "running", "waiting for work",
                     "blocked: metadata reservations", "blocked: B-tree locks", "elsewhere"], rows))


def code_pages(paths):
    rows = []
    for path in paths:
        prog, runs = None, {}
        for line in open(path, encoding="utf-8"):
            h = re.match(r"^# scripts/bench/code-pages\.py \S+: (\S+) (\S+)", line)
            if h:
                prog = f"`{h.group(1)} {h.group(2)}`"
                runs[prog] = []
                continue
            cells = [c.strip() for c in line.split("|")]
            if prog and len(cells) == 8 and cells[0].isdigit():
                runs[prog].append(cells)
        for prog, cells in runs.items():
            per = {perm: [c for c in cells if c[2] == perm] for perm in ("r-xp", "r--p")}
            m = lambda rows, i: med([float(r[i]) for r in rows])
            code, data = per["r-xp"], per["r--p"]
            rows.append([f"`{path}`" if prog == next(iter(runs)) else "", prog, str(len(code)),
                         f"{m(code, 1):,.0f}", f"{m(code, 4):,.0f}", f"{m(code, 5):,.0f}",
                         f"{m(code, 6):,.0f}", f"{m(code, 6) / m(code, 5):.1f}",
                         f"{m(data, 5):,.0f} / {m(data, 6):,.0f}"])
    return table(["log", "program", "runs", "VmRSS KiB", "code: pages faulted", "KiB faulted",
                  "KiB resident", "resident / faulted", "read-only data: KiB faulted / resident"], rows)


def link_cpu(paths):
    (path,) = paths
    by = {}
    for r in verified_rows(path):
        if r.get("link_cpu_seconds"):
            # The configuration without its payload and kind (one of each in such a sweep).
            by.setdefault(re.sub(r"^payload=\S+ kind=\S+ ", "", r["config"]), []).append(r)

    def per_gb(r):
        return float(r["link_cpu_seconds"]) / (float(r["bytes"]) / 1e9)

    tcp = [k for k in by if "mode=tcp-bundle" in k]
    ref = med([per_gb(r) for r in by[tcp[0]]]) if tcp else None
    rows = []
    for k, rs in sorted(by.items()):
        g = med([per_gb(r) for r in rs])
        rows.append([k, str(len(rs)), f"{med([float(r['mb_per_s']) for r in rs]):.2f}",
                     f"{med([float(r['link_cpu_seconds']) for r in rs]):.2f}", f"{g:.2f}",
                     f"**{g / ref:.2f}**" if ref else "—",
                     f"{med([float(r['sender_cpu_seconds']) for r in rs]):.2f} / "
                     f"{med([float(r['receiver_run_cpu_seconds']) for r in rs]):.2f}"])
    return ([f"`{path}`, medians over the verified runs:", ""]
            + table(["configuration", "runs", "MB/s", "forwarder CPU-s", "forwarder CPU-s per GB",
                     "per GB / TCP's (≤ 1.1)", "CPU-s sender / receiver"], rows))


KINDS = {"code-pages": code_pages, "link-cpu": link_cpu, "wchan": wchan, "small-vs-large": small_vs_large, "create": create, "streams-large": streams_large, "startup-floor": startup_floor, "loopback": loopback, "stream-anchor": stream_anchor, "quinn-anchor": quinn_anchor,
         "quic-link-memory": quic_link_memory, "memory": memory, "memory-vs-quinn": memory_vs_quinn, "blocks-link": blocks_link,
         "blocks-loopback": blocks_loopback, "callgrind": callgrind}
REGION = re.compile(r"^<!-- generated: (\S+) (.*?) -->$")


def render(text):
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        out.append(lines[i])
        m = REGION.match(lines[i])
        if m:
            end = lines.index("<!-- end -->", i)
            out += KINDS[m.group(1)](m.group(2).split())
            out.append("<!-- end -->")
            i = end
        i += 1
    return "\n".join(out)


def main(argv):
    if len(argv) >= 3 and argv[0] == "--print" and argv[1] in KINDS:
        print("\n".join(KINDS[argv[1]](argv[2:])))
        return 0
    if len(argv) < 2 or argv[0] != "--page":
        print(__doc__.strip(), file=sys.stderr)
        return 2
    page, check = argv[1], "--check" in argv[2:]
    text = open(page, encoding="utf-8").read()
    new = render(text)
    if check:
        if new != text:
            sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True), page, "generated"))
            return 1
        return 0
    open(page, "w", encoding="utf-8").write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
