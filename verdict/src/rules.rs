//! The rules that turn observations into a verdict (docs/diagnose.md states them): a floor
//! binds only when the transfer runs near it, a dynamic constraint only when an arm that
//! removes it was faster beyond noise and a measured figure shows its cause.

use crate::ctx::{Ctx, Found};
use crate::dynamic::dynamic;
use crate::flags::Args;
use crate::fmt::{pct, rate, secs, size};
use crate::model::{self, PathFigures};
use crate::noise::{compare, half_range, Compare, MIN_GAIN};
use crate::obs::{ArmKind, ArmObs, FloorRate, Observations};
use crate::verdict::{Bottleneck, Fix, Kind, Verdict};

/// A floor binds when it needs at least this fraction of the base's time.
pub const FLOOR_NEAR: f64 = 0.85;
/// A floor is contradicted when a run was faster than this fraction of what it allows.
pub const FLOOR_CONTRADICTED: f64 = 0.95;
/// An end is CPU-bound when its CPU seconds reach this fraction of wall time × its cores.
pub const CPU_BUSY: f64 = 0.85;

/// Names the binding constraints, the fixes and the predictions from what was observed.
pub fn diagnose(obs: &Observations) -> Verdict {
    let mut v = Verdict::default();
    for arm in &obs.arms {
        if let Some(why) = &arm.skipped {
            v.skipped.push(format!(
                "{}: did not run ({why}); nothing is named from it",
                arm.kind.label()
            ));
        } else if arm.runs.is_empty() {
            v.skipped.push(format!(
                "{}: no verified run ({} failed); nothing is named from it",
                arm.kind.label(),
                arm.failed
            ));
        }
    }
    let base = obs.arms.iter().find(|a| a.kind == ArmKind::Base);
    let base_args = Args::parse(base.map_or(&[][..], |b| &b.flags[..]));
    let Some((base, t)) = base
        .and_then(|b| Some((b, b.median_s()?)))
        .filter(|(b, t)| b.measured() && *t > 0.0)
    else {
        v.skipped.push(
            "the base did not run: nothing is named from it, so no constraint can be named".into(),
        );
        v.best_command = command(&base_args);
        return v;
    };
    let cx = Ctx {
        obs,
        base,
        t,
        path: PathFigures::of(obs),
    };
    let mut found = Vec::new();
    let floors = floors(&cx, &mut found, &mut v.skipped);
    cpu(&cx, &mut found);
    let fix_arms = dynamic(&cx, &mut found, &mut v.skipped);
    supporting(&cx, &mut found);
    rank(&mut v, found);

    // Fixes: every arm faster than the base beyond noise, largest gain first.
    let mut fixes: Vec<(Fix, &ArmObs)> = Vec::new();
    for (arm, removes) in fix_arms {
        let Compare::Faster { gain } = compare(arm, base) else {
            continue;
        };
        let change = Args::parse(&arm.flags).changes_from(&base_args);
        let mut text = command_tail(&change);
        if let Some(extra) = sysctl_note(&cx, arm) {
            text = format!("{text} {extra}").trim().to_string();
        }
        let fix = Fix {
            change: text,
            removes,
            measured_gain: gain,
            predicted_seconds: model::predict_tree(obs, arm, cx.path.as_ref(), &floors),
        };
        if !fixes.iter().any(|(f, _)| f.change == fix.change) {
            fixes.push((fix, arm));
        }
    }
    fixes.sort_by(|a, b| b.0.measured_gain.total_cmp(&a.0.measured_gain));
    // The best command is one measured arm, word for word: the fix with the lowest predicted
    // whole-tree time (the larger gain on a tie or without a prediction). Fixes laid over each
    // other were never run together, nor the base's options over an arm that left them out
    // (the base's TCP `--cc` on a QUIC arm would pick quinn's controller of that name).
    let best = fixes
        .iter()
        .enumerate()
        .min_by(|(i, a), (j, b)| {
            let t = |f: &Fix| f.predicted_seconds.unwrap_or(f64::INFINITY);
            t(&a.0).total_cmp(&t(&b.0)).then(i.cmp(j))
        })
        .map(|(_, (f, a))| (f.predicted_seconds, *a));
    let args = best.map_or(base_args, |(_, arm)| Args::parse(&arm.flags));
    v.best_command = command(&args);
    v.predicted_seconds = match best {
        Some((t, _)) => t,
        None => model::predict_tree(obs, base, cx.path.as_ref(), &floors),
    };
    let predicting = best.map_or(base, |(_, a)| a);
    v.prediction_unreliable = v
        .predicted_seconds
        .and(cx.path.as_ref())
        .and_then(|p| model::prediction_doubt(predicting, p, &floors, obs));
    v.fixes = fixes.into_iter().map(|(f, _)| f).collect();
    if let Some(p) = &cx.path {
        v.common_tools = model::common_tools(obs, p, &floors);
    }
    v
}

fn command(args: &Args) -> String {
    let tail = args.render();
    if tail.is_empty() {
        "shoal send".into()
    } else {
        format!("shoal send {tail}")
    }
}

fn command_tail(args: &Args) -> String {
    args.render()
}

/// The sysctl a window fix needs when the kernel's maximum is below the path's BDP: the
/// socket option is capped by `rmem_max`/`wmem_max`.
fn sysctl_note(cx: &Ctx, arm: &ArmObs) -> Option<String> {
    if arm.kind != ArmKind::PathWindows {
        return None;
    }
    // The BDP rounded up to a power of two, as people write buffer sizes.
    let bdp = (cx.path.as_ref()?.bdp_bytes.ceil() as u64).next_power_of_two();
    let mut notes = Vec::new();
    let (r, s) = (&cx.obs.path.receiver_buffers, &cx.obs.path.sender_buffers);
    if r.rmem_max.is_some_and(|m| m < bdp) {
        notes.push(format!("net.core.rmem_max={bdp} at the receiver"));
    }
    if s.wmem_max.is_some_and(|m| m < bdp) {
        notes.push(format!("net.core.wmem_max={bdp} at the sender"));
    }
    (!notes.is_empty()).then(|| format!("(with sysctl {})", notes.join(", ")))
}

/// Floors: source read, receiver write and the link's rate. Returns the floors that stand
/// for the whole-tree prediction (reading as found, writing).
fn floors(cx: &Ctx, found: &mut Vec<Found>, skipped: &mut Vec<String>) -> Vec<FloorRate> {
    let (files, bytes) = (cx.obs.sample.sample_files, cx.obs.sample.sample_bytes);
    let fastest = cx
        .arms(|_| true)
        .filter_map(|a| a.range_s().map(|r| (r.0, a)))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let ends = &cx.obs.ends;
    let mut cands: Vec<(Kind, f64, String, Option<f64>)> = Vec::new();
    let mut tree_floors = Vec::new();
    if let Some(f) = ends.source_read_warm.or(ends.source_read_found) {
        if let Some(s) = f.seconds_for(files, bytes) {
            cands.push((
                Kind::SourceRead,
                s,
                floor_text("the source reads", &f),
                f.cpu_busy,
            ));
        }
    }
    if let Some(f) = ends.receiver_write {
        if let Some(s) = f.seconds_for(files, bytes) {
            cands.push((
                Kind::ReceiverFs,
                s,
                floor_text("the receiver's writer alone (no network) creates", &f),
                f.cpu_busy,
            ));
        }
    }
    // The probe's own figure: the arms' goodput would make the fastest arm its own floor.
    if let Some(probe) = cx
        .obs
        .path
        .goodput_to_receiver_bits_per_s
        .filter(|r| *r > 0.0)
    {
        let s = bytes as f64 * 8.0 / probe;
        let mut text = format!(
            "the probe's bulk goodput is {}: the sample's {} need {} at that rate",
            rate(probe),
            size(bytes),
            secs(s)
        );
        for u in &cx.obs.path.unreliable {
            text.push_str(&format!("; probe unreliable: {u}"));
        }
        cands.push((Kind::LinkRate, s, text, None));
    }
    let mut standing = Vec::new();
    for (kind, s, text, busy) in cands {
        match fastest {
            Some((run, arm)) if run < s * FLOOR_CONTRADICTED => skipped.push(format!(
                "{kind} floor left out: it allows no run under {}, but {} ran in {}, so the \
                 floor is contradicted",
                secs(s),
                arm.kind.label(),
                secs(run)
            )),
            _ => {
                match kind {
                    Kind::SourceRead => tree_floors.extend(ends.source_read_found),
                    Kind::ReceiverFs => tree_floors.extend(ends.receiver_write),
                    _ => {}
                }
                standing.push((kind, s, text, busy));
            }
        }
    }
    let slowest = standing.iter().map(|c| c.1).fold(0.0, f64::max);
    let noise = half_range(cx.base) / cx.t;
    for (kind, s, text, busy) in standing {
        let base_near = s >= FLOOR_NEAR * cx.t;
        // Only the ends' floors, measured with no network: the link's is the probe's own flow.
        // An end's floor the fastest verified run reached (and, as above, did not beat) binds
        // every configuration measured, though the base's median ran slower: the run shows
        // the floor is where transfers on this path end up.
        let reached = (kind != Kind::LinkRate)
            .then_some(fastest)
            .flatten()
            .filter(|(run, _)| !base_near && s >= FLOOR_NEAR * run);
        let near = base_near || reached.is_some();
        // The slowest floor binds; another within noise of it is reported with it (a tie).
        let tied = s >= slowest * (1.0 - MIN_GAIN.max(noise));
        if near && tied {
            let mut evidence = vec![
                format!("{text}; the base took {}", secs(cx.t)),
                format!(
                    "the floor is {} of the base's time (binds from {})",
                    pct(s / cx.t),
                    pct(FLOOR_NEAR)
                ),
            ];
            if let Some((m, arm)) = reached {
                evidence.push(format!(
                    "{}'s fastest run took {}: the floor is {} of it, so no configuration measured goes below it",
                    arm.kind.label(),
                    secs(m),
                    pct(s / m)
                ));
            }
            // A floor measured with its end's CPU full is that end's CPU.
            let kind = match (kind, busy) {
                (Kind::SourceRead, Some(b)) if b >= CPU_BUSY => {
                    evidence.push(cpu_floor_text("sender", b));
                    Kind::SenderCpu
                }
                (Kind::ReceiverFs, Some(b)) if b >= CPU_BUSY => {
                    evidence.push(cpu_floor_text("receiver", b));
                    Kind::ReceiverCpu
                }
                (k, _) => k,
            };
            found.push(Found {
                b: Bottleneck {
                    kind,
                    share: (s / cx.t).min(1.0),
                    evidence,
                    arm: None,
                },
                noise,
            });
        }
    }
    tree_floors
}

fn cpu_floor_text(who: &str, busy: f64) -> String {
    format!(
        "the {who} used {} of its usable cores while that floor was measured: the floor is \
         its CPU, not its disk",
        pct(busy)
    )
}

fn floor_text(what: &str, f: &FloorRate) -> String {
    format!(
        "{what} {:.0} files/s and {}/s",
        f.files_per_s,
        size(f.bytes_per_s as u64)
    )
}

/// CPU: an end whose CPU seconds in the base fill its wall time × usable cores is bound by
/// it, a direct measurement of the base itself.
fn cpu(cx: &Ctx, found: &mut Vec<Found>) {
    let ends = &cx.obs.ends;
    let sides = [
        (Kind::ReceiverCpu, "receiver", &ends.receiver_cpu, true),
        (Kind::SenderCpu, "sender", &ends.sender_cpu, false),
    ];
    for (kind, who, c, recv) in sides {
        let Some(cores) = c.usable_cores().filter(|c| *c > 0.0) else {
            continue;
        };
        let Some(used) = cx.base.median_of(|r| {
            if recv {
                r.receiver_cpu_s
            } else {
                r.sender_cpu_s
            }
        }) else {
            continue;
        };
        let busy = used / (cx.t * cores);
        if busy < CPU_BUSY {
            continue;
        }
        let limit = match c.quota_cores {
            Some(q) => format!("a cgroup quota of {q} cores"),
            None => format!("{cores} CPUs"),
        };
        let mut evidence = vec![format!(
            "the {who} used {} of CPU in a {} run: {} of {limit}",
            secs(used),
            secs(cx.t),
            pct(busy)
        )];
        if let Some(st) = c.steal.filter(|s| *s > 0.0) {
            evidence.push(format!(
                "{} of its CPU time was stolen by the hypervisor",
                pct(st)
            ));
        }
        // Already named from its floor: one constraint, both figures.
        if let Some(f) = found.iter_mut().find(|f| f.b.kind == kind) {
            f.b.share = f.b.share.max(busy.min(1.0));
            f.b.evidence.extend(evidence);
            continue;
        }
        found.push(Found {
            b: Bottleneck {
                kind,
                share: busy.min(1.0),
                evidence,
                arm: None,
            },
            noise: half_range(cx.base) / cx.t,
        });
    }
}

/// Ranks the named constraints: the base's by share, largest first, then those of other
/// arms; pairs of the base's whose shares are within noise of each other are ties.
fn rank(v: &mut Verdict, mut found: Vec<Found>) {
    found.sort_by(|a, b| {
        (a.b.arm.is_some())
            .cmp(&b.b.arm.is_some())
            .then(b.b.share.total_cmp(&a.b.share))
            .then(a.b.kind.cmp(&b.b.kind))
    });
    for (i, a) in found.iter().enumerate() {
        for b in &found[i + 1..] {
            if a.b.arm.is_none()
                && b.b.arm.is_none()
                && (a.b.share - b.b.share).abs() <= a.noise.max(b.noise).max(MIN_GAIN)
            {
                v.ties.push((a.b.kind, b.b.kind));
            }
        }
    }
    v.bottlenecks = found.into_iter().map(|f| f.b).collect();
}

/// Counters of the base that support a named constraint, added to its evidence (they name
/// nothing on their own).
fn supporting(cx: &Ctx, found: &mut [Found]) {
    let b = cx.base;
    for f in found.iter_mut().filter(|f| f.b.arm.is_none()) {
        let line = match f.b.kind {
            Kind::ReceiverFs => b.median_of(|r| r.receiver_write_wait_s).map(|w| {
                format!(
                    "the receiver's network side waited {} on its writers in the base ({} of \
                     its time)",
                    secs(w),
                    pct(w / cx.t)
                )
            }),
            Kind::Window => b
                .median_of(|r| r.flow_control_stalls.map(|n| n as f64))
                .filter(|n| *n > 0.0)
                .map(|n| format!("the sender stalled {n:.0} times on a full window in the base")),
            Kind::Loss => b
                .median_of(|r| r.congestion_events.map(|n| n as f64))
                .filter(|n| *n > 0.0)
                .map(|n| format!("{n:.0} congestion events per run in the base")),
            _ => None,
        };
        f.b.evidence.extend(line);
    }
}
