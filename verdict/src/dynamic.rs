//! Dynamic constraints: named only when an arm that removes one was measured faster beyond
//! noise AND a measured figure shows its cause.

use crate::ctx::{Ctx, Found};
use crate::fmt::{pct, secs, size};
use crate::model::{kernel_window_cap, usable_tcp_window};
use crate::noise::{compare, half_range, Compare};
use crate::obs::{ArmKind, ArmObs};
use crate::verdict::{Bottleneck, Kind};

/// Retransmitted (or path-lost) fraction above which loss is a cause.
pub const LOSS_MIN: f64 = 0.001;
/// The per-file-wait arm's extra time must be within these multiples of files × RTT.
pub const PER_FILE_RTT_BAND: (f64, f64) = (0.5, 1.5);
/// The probe's flow held by a window (receive window or send buffer) this share of its time
/// shows the window as a cause.
pub const WINDOW_HELD_MIN: f64 = 0.5;
/// Slow start is a cause when its estimated cost is at least this fraction of the base's time.
pub const SLOW_START_MIN: f64 = 0.1;

/// Names the dynamic constraints into `found`; returns every arm faster than the base beyond
/// noise with the constraint it removes (none when no figure showed why), for the fixes.
pub fn dynamic<'a>(
    cx: &Ctx<'a>,
    found: &mut Vec<Found>,
    skipped: &mut Vec<String>,
) -> Vec<(&'a ArmObs, Option<Kind>)> {
    let loss = loss_cause(cx);
    let mut window = window_cause(cx);
    if window.is_some() {
        if let Some(why) = path_windows_refute(cx) {
            skipped.push(why);
            window = None;
        }
    }
    let slow = slow_start_cause(cx);
    let mut faster = Vec::new();
    // Per kind: the arm with the largest gain that removes it.
    let mut best: Vec<(Kind, &ArmObs, f64, Vec<String>)> = Vec::new();
    for arm in cx.arms(|k| !matches!(k, ArmKind::Base | ArmKind::PerFileWait)) {
        let gain = match compare(arm, cx.base) {
            Compare::Faster { gain } => gain,
            Compare::Slower { .. } => continue,
            Compare::Noise(why) => {
                skipped.push(format!(
                    "{}: {} against the base's {}, within noise ({why}); no gain claimed",
                    arm.kind.label(),
                    secs(arm.median_s().unwrap_or(0.0)),
                    secs(cx.t)
                ));
                continue;
            }
        };
        let causes: Vec<(Kind, &Option<Vec<String>>)> = match arm.kind {
            ArmKind::OtherCc(_) => vec![(Kind::Loss, &loss)],
            ArmKind::Connections(_) => vec![(Kind::Loss, &loss), (Kind::Window, &window)],
            ArmKind::PathWindows | ArmKind::Quic => vec![(Kind::Window, &window)],
            ArmKind::Resume => vec![(Kind::SlowStart, &slow)],
            _ => Vec::new(),
        };
        let mut named = false;
        for (kind, cause) in causes {
            let Some(evidence) = cause else { continue };
            named = true;
            faster.push((arm, Some(kind)));
            if !best.iter().any(|b| b.0 == kind && b.2 >= gain) {
                best.retain(|b| b.0 != kind);
                best.push((kind, arm, gain, evidence.clone()));
            }
        }
        if !named {
            faster.push((arm, None));
        }
        // The saved-window arm's cause is judged against the QUIC arm (quic_slow_start).
        if !named && arm.kind != ArmKind::QuicStartWindow {
            skipped.push(format!(
                "{}: {} faster than the base beyond noise, but no measured figure shows why; \
                 kept as a fix, no constraint named from it",
                arm.kind.label(),
                pct(gain)
            ));
        }
    }
    for (kind, arm, gain, mut evidence) in best {
        evidence.push(ran(arm, cx.base, gain));
        found.push(Found {
            b: Bottleneck {
                kind,
                share: gain,
                evidence,
                arm: None,
            },
            noise: (half_range(arm) + half_range(cx.base)) / cx.t,
        });
    }
    quic_slow_start(cx, &slow, found, &mut faster, skipped);
    per_file_rtt(cx, found, skipped);
    udp_drops(cx, found);
    faster
}

fn ran(arm: &ArmObs, reference: &ArmObs, gain: f64) -> String {
    format!(
        "{} ran in {} ({} runs) against {}'s {} ({} runs): {} faster",
        arm.kind.label(),
        secs(arm.median_s().unwrap_or(0.0)),
        arm.runs.len(),
        reference.kind.label(),
        secs(reference.median_s().unwrap_or(0.0)),
        reference.runs.len(),
        pct(gain)
    )
}

fn loss_cause(cx: &Ctx) -> Option<Vec<String>> {
    let mut ev = Vec::new();
    if let Some(r) = cx.base.median_of(|r| r.retrans_fraction) {
        if r >= LOSS_MIN {
            ev.push(format!(
                "the base retransmitted {} of its segments (cause from {})",
                pct(r),
                pct(LOSS_MIN)
            ));
        }
    }
    let l = &cx.obs.path.loss_to_receiver;
    if let Some(r) = l.random.filter(|r| *r >= LOSS_MIN) {
        ev.push(format!(
            "the probe measured {} random loss sender → receiver",
            pct(r)
        ));
    }
    if let Some(q) = l.queue_overflow.filter(|q| *q > 0.0) {
        ev.push(format!(
            "(the probe's own queue overflow, {}, is not counted as path loss)",
            pct(q)
        ));
    }
    let shown = ev.iter().any(|e| !e.starts_with('('));
    shown.then_some(ev)
}

fn window_cause(cx: &Ctx) -> Option<Vec<String>> {
    let p = cx.path.as_ref()?;
    let bdp = p.bdp_bytes;
    let mut ev = Vec::new();
    if let Some(arm) = &p.raised_by {
        ev.push(format!(
            "the path carries at least {} ({} on the sample, above the probe's goodput): a BDP \
             of {} at {} RTT",
            crate::fmt::rate(p.rate_bps),
            arm.label(),
            size(bdp as u64),
            secs(p.rtt_s)
        ));
    }
    if let Some(w) = usable_tcp_window(cx.obs).filter(|w| (*w as f64) < bdp) {
        let p = &cx.obs.path;
        ev.push(format!(
            "the kernels let one TCP flow keep at most {} in flight (half the receiver's \
             tcp_rmem max {}, the sender's tcp_wmem max {}), below the path's BDP of {}",
            size(w),
            p.receiver_buffers
                .tcp_rmem
                .map_or("?".into(), |m| size(m[2])),
            p.sender_buffers.tcp_wmem.map_or("?".into(), |m| size(m[2])),
            size(bdp as u64)
        ));
    }
    if let Some(f) = cx
        .obs
        .path
        .window_limited_fraction
        .filter(|f| *f >= WINDOW_HELD_MIN)
    {
        ev.push(format!(
            "the probe's flow was held by the receive window or the send buffer {} of its \
             time: its goodput was a window's rate, not the path's",
            pct(f)
        ));
    }
    let rwnd = cx.base.median_of(|r| r.max_rwnd_bytes.map(|b| b as f64));
    if let Some(w) = rwnd.filter(|w| *w < bdp) {
        ev.push(format!(
            "the receiver advertised at most {} in the base, below the BDP of {}",
            size(w as u64),
            size(bdp as u64)
        ));
    }
    let sndbuf = cx.base.median_of(|r| r.send_buffer_bytes.map(|b| b as f64));
    if let Some(w) = sndbuf.filter(|w| *w < bdp) {
        ev.push(format!(
            "the sender's socket buffer ended at {} in the base, below the BDP of {}",
            size(w as u64),
            size(bdp as u64)
        ));
    }
    // The line on the BDP is context, not a cause.
    (ev.len() > usize::from(p.raised_by.is_some())).then_some(ev)
}

/// The path-sized windows arm measured and not faster, with the kernels letting it set
/// windows of the BDP: the window is then not what holds the transfer back, whatever another
/// arm (more connections, QUIC) gained.
fn path_windows_refute(cx: &Ctx) -> Option<String> {
    let arm = cx.arms(|k| *k == ArmKind::PathWindows).next()?;
    if matches!(compare(arm, cx.base), Compare::Faster { .. }) {
        return None;
    }
    let bdp = cx.path.as_ref()?.bdp_bytes;
    let (r, s) = (&cx.obs.path.receiver_buffers, &cx.obs.path.sender_buffers);
    let allowed =
        r.rmem_max.is_some_and(|m| m as f64 >= bdp) && s.wmem_max.is_some_and(|m| m as f64 >= bdp);
    allowed.then(|| {
        format!(
            "window not named: {} (rmem_max and wmem_max allow the BDP of {}) was not faster \
             than the base",
            arm.kind.label(),
            size(bdp as u64)
        )
    })
}

fn slow_start_cause(cx: &Ctx) -> Option<Vec<String>> {
    let p = cx.path.as_ref()?;
    let bytes = cx.obs.sample.sample_bytes as f64;
    let window = kernel_window_cap(cx.obs).map_or(p.bdp_bytes, |c| p.bdp_bytes.min(c as f64));
    let rounds = p.slow_start_rounds(window.min(bytes));
    let cost = crate::model::HANDSHAKE_RTTS * p.rtt_s + p.slow_start_extra_s(bytes, window);
    let at_rate = bytes * 8.0 / p.rate_bps;
    (cost >= SLOW_START_MIN * cx.t).then(|| {
        vec![format!(
            "handshake and slow start to a {} window (~{rounds:.0} round trips of {}) cost \
             about {}, against {} for the sample's bytes at the link's rate and the base's {}",
            size(window as u64),
            secs(p.rtt_s),
            secs(cost),
            secs(at_rate),
            secs(cx.t)
        )]
    })
}

/// Slow start measured on QUIC: the saved-window arm against the plain QUIC arm.
fn quic_slow_start<'a>(
    cx: &Ctx<'a>,
    cause: &Option<Vec<String>>,
    found: &mut Vec<Found>,
    faster: &mut [(&'a ArmObs, Option<Kind>)],
    skipped: &mut Vec<String>,
) {
    let (Some(saved), Some(quic)) = (
        cx.arms(|k| *k == ArmKind::QuicStartWindow).next(),
        cx.arms(|k| *k == ArmKind::Quic).next(),
    ) else {
        return;
    };
    let gain = match compare(saved, quic) {
        Compare::Faster { gain } => gain,
        Compare::Noise(why) => {
            skipped.push(format!(
                "{} against {}: within noise ({why}); no slow-start cost claimed",
                saved.kind.label(),
                quic.kind.label()
            ));
            return;
        }
        Compare::Slower { .. } => return,
    };
    let Some(cause) = cause else { return };
    for f in faster
        .iter_mut()
        .filter(|f| f.0.kind == ArmKind::QuicStartWindow)
    {
        f.1 = Some(Kind::SlowStart);
    }
    if found
        .iter()
        .any(|f| f.b.kind == Kind::SlowStart && f.b.share >= gain)
    {
        return;
    }
    found.retain(|f| f.b.kind != Kind::SlowStart);
    let mut evidence = cause.clone();
    evidence.push(ran(saved, quic, gain));
    found.push(Found {
        b: Bottleneck {
            kind: Kind::SlowStart,
            share: gain,
            evidence,
            arm: None,
        },
        noise: (half_range(saved) + half_range(quic)) / quic.median_s().unwrap_or(cx.t),
    });
}

/// Per-file round trips: the per-file-wait arm's extra time over the bundled base ≈ files ×
/// RTT. It holds back that arm (and any file-at-a-time tool), not the bundled base.
fn per_file_rtt(cx: &Ctx, found: &mut Vec<Found>, skipped: &mut Vec<String>) {
    let Some(wait) = cx.arms(|k| *k == ArmKind::PerFileWait).next() else {
        return;
    };
    let (Some(p), Some(tw)) = (cx.path.as_ref(), wait.median_s()) else {
        return;
    };
    let files = cx.obs.sample.sample_files as f64;
    let expected = files * p.rtt_s;
    match compare(cx.base, wait) {
        Compare::Faster { gain } => {
            let excess = tw - cx.t;
            let ratio = excess / expected.max(f64::MIN_POSITIVE);
            if ratio < PER_FILE_RTT_BAND.0 || ratio > PER_FILE_RTT_BAND.1 {
                skipped.push(format!(
                    "{}: {} over the base, {:.2} × files × RTT ({}): outside {}–{} ×, \
                     per-file-rtt not named",
                    wait.kind.label(),
                    secs(excess),
                    ratio,
                    secs(expected),
                    PER_FILE_RTT_BAND.0,
                    PER_FILE_RTT_BAND.1
                ));
                return;
            }
            found.push(Found {
                b: Bottleneck {
                    kind: Kind::PerFileRtt,
                    share: gain,
                    evidence: vec![
                        format!(
                            "{} took {} over the base: {:.2} × the sample's {} files × {} RTT \
                             ({})",
                            wait.kind.label(),
                            secs(excess),
                            ratio,
                            cx.obs.sample.sample_files,
                            secs(p.rtt_s),
                            secs(expected)
                        ),
                        format!(
                            "the base (no wait per file) ran in {} against {}: {} of a \
                             file-at-a-time transfer's time is the per-file round trips",
                            secs(cx.t),
                            secs(tw),
                            pct(gain)
                        ),
                    ],
                    arm: Some(ArmKind::PerFileWait),
                },
                noise: (half_range(wait) + half_range(cx.base)) / tw,
            });
        }
        _ => skipped.push(format!(
            "{} ran in {}, not slower than the base ({}) beyond noise: the base may wait per \
             file itself; no arm removed it, per-file-rtt not named",
            wait.kind.label(),
            secs(tw),
            secs(cx.t)
        )),
    }
}

/// UDP drops: the QUIC arm slower than the base beyond noise while the receiver counted UDP
/// receive-buffer errors. It explains why QUIC is not the fix.
fn udp_drops(cx: &Ctx, found: &mut Vec<Found>) {
    for quic in cx.arms(|k| matches!(k, ArmKind::Quic | ArmKind::QuicStartWindow)) {
        let Compare::Slower { loss } = compare(quic, cx.base) else {
            continue;
        };
        let Some(errors) = quic
            .median_of(|r| r.udp_rcvbuf_errors.map(|e| e as f64))
            .filter(|e| *e > 0.0)
        else {
            continue;
        };
        if found.iter().any(|f| f.b.kind == Kind::UdpDrops) {
            continue;
        }
        let mut evidence = vec![
            format!(
                "the receiver counted {errors:.0} UDP receive-buffer errors per run (median) in {}",
                quic.kind.label()
            ),
            format!(
                "{} ran in {} against the base's {}: {} slower",
                quic.kind.label(),
                secs(quic.median_s().unwrap_or(0.0)),
                secs(cx.t),
                pct(loss)
            ),
        ];
        let bdp = cx.path.as_ref().map_or(0.0, |p| p.bdp_bytes);
        if let Some(m) = cx
            .obs
            .path
            .receiver_buffers
            .rmem_max
            .filter(|m| (*m as f64) < bdp)
        {
            evidence.push(format!(
                "the receiver's net.core.rmem_max is {}, below the BDP of {}: raising it lets \
                 the UDP socket buffer hold a window's burst",
                size(m),
                size(bdp as u64)
            ));
        }
        found.push(Found {
            b: Bottleneck {
                kind: Kind::UdpDrops,
                share: loss,
                evidence,
                arm: Some(quic.kind.clone()),
            },
            noise: (half_range(quic) + half_range(cx.base)) / quic.median_s().unwrap_or(cx.t),
        });
    }
}
