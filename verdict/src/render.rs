//! The verdict for people (the default output) and as one JSON object (`--json`).

use crate::fmt::{pct, rate, secs, size};
use crate::obs::{CpuObs, FloorRate, LossObs, Observations};
use crate::verdict::Verdict;
use serde_json::{json, Value};
use std::fmt::Write;

/// The JSON report: the verdict's fields, then `path`, `ends`, `sample` as observed and
/// `stages`: every transfer with its row, as the caller has them (`Value::Null` puts the
/// observed arms there instead).
pub fn report_json(v: &Verdict, obs: &Observations, stages: Value) -> Value {
    let stages = if stages.is_null() {
        json!(obs.arms)
    } else {
        stages
    };
    json!({
        "bottlenecks": v.bottlenecks,
        "ties": v.ties,
        "fixes": v.fixes,
        "best_command": v.best_command,
        "predicted_seconds": v.predicted_seconds,
        "prediction_unreliable": v.prediction_unreliable,
        "common_tools": v.common_tools,
        "skipped": v.skipped,
        "path": obs.path,
        "ends": obs.ends,
        "sample": obs.sample,
        "stages": stages,
    })
}

/// The human summary of a verdict.
pub fn render(v: &Verdict, obs: &Observations) -> String {
    let mut o = String::new();
    let s = &obs.sample;
    let _ = writeln!(
        o,
        "Sample: {} files, {} of a tree of {} files, {}",
        s.sample_files,
        size(s.sample_bytes),
        s.tree_files,
        size(s.tree_bytes)
    );
    path(&mut o, obs);
    ends(&mut o, obs);
    let base_t = obs
        .arms
        .iter()
        .find(|a| a.kind == crate::obs::ArmKind::Base)
        .and_then(|a| a.median_s());
    o.push('\n');
    let (own, others): (Vec<_>, Vec<_>) = v.bottlenecks.iter().partition(|b| b.arm.is_none());
    if own.is_empty() {
        o.push_str(
            "No constraint was measured to bind: no floor is near the transfer's time and no arm \
             that removes a constraint was faster beyond noise.\n",
        );
    } else {
        let _ = writeln!(
            o,
            "What holds it back (share of the base's {}):",
            base_t.map_or("?".into(), secs)
        );
        for (i, b) in own.iter().enumerate() {
            let _ = writeln!(o, "  {}. {}  {}", i + 1, b.kind, pct(b.share));
            for e in &b.evidence {
                let _ = writeln!(o, "     - {e}");
            }
        }
        for (a, b) in &v.ties {
            let _ = writeln!(
                o,
                "  {a} and {b}: shares within noise of each other; neither is picked"
            );
        }
    }
    if !others.is_empty() {
        o.push_str("\nWhat holds other configurations back (share of that arm's time):\n");
        for b in others {
            let arm = b.arm.as_ref().map_or(String::new(), |a| a.label());
            let _ = writeln!(o, "  {} in {arm}  {}", b.kind, pct(b.share));
            for e in &b.evidence {
                let _ = writeln!(o, "     - {e}");
            }
        }
    }
    o.push('\n');
    if v.fixes.is_empty() {
        o.push_str("Fixes: no arm was faster than the base beyond noise.\n");
    } else {
        o.push_str("Fixes (gain measured on the sample; whole tree predicted by the model):\n");
        for f in &v.fixes {
            let removes = f
                .removes
                .map_or("no constraint named".into(), |k| k.to_string());
            let _ = writeln!(
                o,
                "  {}  ({removes}): {} faster; whole tree {}",
                f.change,
                pct(f.measured_gain),
                f.predicted_seconds.map_or("not predicted".into(), secs)
            );
        }
    }
    let _ = writeln!(o, "\nBest command:\n  {}", v.best_command);
    if let Some(t) = v.predicted_seconds {
        let note = if v.fixes.len() > 1 {
            " (the measured fix with the lowest predicted time; fixes are not combined)"
        } else {
            ""
        };
        let _ = writeln!(o, "  predicted for the whole tree: {}{note}", secs(t));
        if let Some(why) = &v.prediction_unreliable {
            let _ = writeln!(o, "  the prediction is unreliable: {why}");
        }
    }
    if !v.common_tools.is_empty() {
        o.push_str("\nCommon tools on this path (estimates from the model, not runs):\n");
        for t in &v.common_tools {
            let _ = writeln!(o, "  {}: {}", t.tool, secs(t.predicted_seconds));
            let _ = writeln!(o, "     {}", t.why);
        }
    }
    if !v.skipped.is_empty() {
        o.push_str("\nNot measured or not used:\n");
        for s in &v.skipped {
            let _ = writeln!(o, "  - {s}");
        }
    }
    o.push_str("\nStages:\n");
    for a in &obs.arms {
        let runs = match (a.median_s(), a.range_s()) {
            (Some(m), Some((lo, hi))) => format!(
                "{} median, {}–{} ({} runs, {} failed)",
                secs(m),
                secs(lo),
                secs(hi),
                a.runs.len(),
                a.failed
            ),
            _ => match &a.skipped {
                Some(why) => format!("did not run: {why}"),
                None => format!("no verified run ({} failed)", a.failed),
            },
        };
        let _ = writeln!(o, "  {}: {}", a.kind.label(), runs);
        let _ = writeln!(o, "     shoal send {}", a.flags.join(" "));
    }
    o
}

fn path(o: &mut String, obs: &Observations) {
    let p = &obs.path;
    let ms = |v: Option<f64>| v.map_or("?".into(), |ms| secs(ms / 1000.0));
    let r = |v: Option<f64>| v.map_or("?".into(), rate);
    let _ = writeln!(
        o,
        "Path: RTT {} idle, {} under load; goodput {} to the receiver, {} back; BDP {}",
        ms(p.idle_rtt_ms),
        ms(p.loaded_rtt_ms),
        r(p.goodput_to_receiver_bits_per_s),
        r(p.goodput_from_receiver_bits_per_s),
        p.bdp_bytes.map_or("?".into(), size)
    );
    let _ = writeln!(
        o,
        "  loss {} to the receiver, {} back",
        loss(&p.loss_to_receiver),
        loss(&p.loss_from_receiver)
    );
    if let Some(w) = p.window_limited_fraction {
        let _ = writeln!(
            o,
            "  the probe's flow to the receiver was held by the receive window or the send buffer {} of its time",
            pct(w)
        );
    }
    let b =
        |name: &str, m: Option<[u64; 3]>| m.map(|m| format!("{name} {} {} {}", m[0], m[1], m[2]));
    for (who, l) in [
        ("sender", &p.sender_buffers),
        ("receiver", &p.receiver_buffers),
    ] {
        let parts: Vec<String> = [
            b("tcp_rmem", l.tcp_rmem),
            b("tcp_wmem", l.tcp_wmem),
            l.rmem_max.map(|v| format!("rmem_max {v}")),
            l.wmem_max.map(|v| format!("wmem_max {v}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !parts.is_empty() {
            let _ = writeln!(o, "  {who} buffers: {}", parts.join(", "));
        }
    }
    if !p.controllers.is_empty() {
        let _ = writeln!(
            o,
            "  controllers at the sender: {}",
            p.controllers.join(", ")
        );
    }
    for u in &p.unreliable {
        let _ = writeln!(o, "  unreliable: {u}");
    }
}

fn loss(l: &LossObs) -> String {
    let mut s = l.total.map_or("?".into(), pct);
    if let Some(r) = l.random {
        let _ = write!(s, " ({} random", pct(r));
        if let Some(q) = l.queue_overflow {
            let _ = write!(s, ", {} the probe's own queue overflow", pct(q));
        }
        s.push(')');
    } else if let Some(d) = l.in_bursts {
        let _ = write!(
            s,
            " (in bursts after the warm-up, dispersion {d:.0}: the probe's own queue overflow; \
             the path's random loss not separated)"
        );
    }
    s
}

fn ends(o: &mut String, obs: &Observations) {
    let e = &obs.ends;
    let f = |r: &Option<FloorRate>| {
        r.map_or("not measured".into(), |r| {
            format!(
                "{:.0} files/s, {}/s",
                r.files_per_s,
                size(r.bytes_per_s as u64)
            )
        })
    };
    let _ = writeln!(
        o,
        "Ends: source reads {} as found, {} warm; the receiver writes {} (no network)",
        f(&e.source_read_found),
        f(&e.source_read_warm),
        f(&e.receiver_write)
    );
    let c = |c: &CpuObs| {
        let mut s = c.cpus.map_or("? CPUs".into(), |n| format!("{n} CPUs"));
        if let Some(q) = c.quota_cores {
            let _ = write!(s, ", quota {q} cores");
        }
        if let Some(st) = c.steal {
            let _ = write!(s, ", steal {}", pct(st));
        }
        s
    };
    let _ = writeln!(
        o,
        "  sender {}; receiver {}",
        c(&e.sender_cpu),
        c(&e.receiver_cpu)
    );
}
