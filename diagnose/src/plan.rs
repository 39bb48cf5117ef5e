//! How much to transfer and which arms fit the budget: the sample's size from the probe's
//! goodput, a pilot run of the base, an early stop when the base already runs at its slowest
//! floor, then the arms in order of what they can reveal, each only when its estimated time
//! fits what is left.

use std::time::{Duration, Instant};

use anyhow::Result;
use shoal_verdict::{
    ArmKind, ArmObs, FloorRate, Observations, PathObs, FLOOR_CONTRADICTED, FLOOR_NEAR, LOSS_MIN,
};

use crate::arms::{self, Arm, Setup};
use crate::ends::Tree;

/// The sample's base run aims at this share of the budget left after stage 1.
const BASE_SHARE: f64 = 1.0 / 20.0;
/// Files per second any end manages at least (per-file cost in the sample's sizing).
const FILES_PER_S: f64 = 20_000.0;

/// Files in the sample: as many as a base run of about [`BASE_SHARE`] of `left` moves at the
/// probe's goodput, or the receiver writes at its scouted floor (`writes`) when that is slower,
/// 200 at least, the whole tree at most.
pub fn sample_files(
    tree: &Tree,
    path: &PathObs,
    writes: Option<&FloorRate>,
    left: Duration,
) -> u64 {
    let total = tree.files.len() as u64;
    let g = path.goodput_to_receiver_bits_per_s.unwrap_or(10e6).max(1e5);
    let mean = tree.bytes() as f64 / total.max(1) as f64;
    let target = base_target_s(left);
    let net = mean * 8.0 / g + 1.0 / FILES_PER_S;
    // A slow destination would make the sample's write floor and every arm outlast the budget.
    let write = writes
        .and_then(|w| w.seconds_for(1, mean as u64))
        .unwrap_or(0.0);
    let per_file = net.max(write);
    let mut n = (target / per_file) as u64;
    // On a lossy path, enough packets that the controller meets its losses: a sample that
    // carries only a few may dodge them in slow start and run as fast as any fix (CUBIC at
    // 1% loss, 40 ms: 1.0 MiB ran in 0.43 s to 3.76 s, as fast as BBR in its lucky runs).
    if let Some(loss) = path.loss_to_receiver.path_loss().filter(|l| *l >= LOSS_MIN) {
        let packets = LOSSY_SAMPLE_LOSSES / loss;
        let wanted = (packets * MSS / mean.max(1.0)).ceil() as u64;
        let cap = (left.as_secs_f64() * LOSSY_SHARE / per_file) as u64;
        n = n.max(wanted.min(cap));
    }
    n.clamp(200.min(total), total.min(50_000))
}

/// Losses a sample of a lossy path is sized to meet, at the probe's loss rate.
const LOSSY_SAMPLE_LOSSES: f64 = 30.0;
/// Bytes a full-sized TCP segment carries on a 1500-byte path.
const MSS: f64 = 1448.0;
/// On a lossy path the base run may take up to this share of the budget left (the pilot and
/// the base again then take a third; the arms removing loss run faster).
const LOSSY_SHARE: f64 = 1.0 / 6.0;

/// The base run's aim in seconds when `left` remains after stage 1 (what [`sample_files`]
/// sizes the sample for).
pub fn base_target_s(left: Duration) -> f64 {
    (left.as_secs_f64() * BASE_SHARE - 0.5).max(0.5)
}

/// The base: tcp-bundle with this host's default controller.
pub fn base_arm() -> Arm {
    let cc = default_cc();
    Arm::new(
        ArmKind::Base,
        "base",
        &[("mode", "\"tcp-bundle\""), ("cc", &format!("\"{cc}\""))],
    )
}

/// A pilot run of the base under `name`: its observation and the sweep's wall time (s).
pub fn pilot(
    setup: &Setup,
    name: &str,
    stages: &mut Vec<serde_json::Value>,
    deadline: Instant,
) -> Result<(ArmObs, f64)> {
    let t = Instant::now();
    let (mut got, stage) = arms::run(setup, name, &[base_arm()], 1, deadline)?;
    stages.push(stage);
    Ok((got.remove(0), t.elapsed().as_secs_f64()))
}

/// A pilot that ran in under this share of the time its sample was sized for ended before its
/// controller reached the rate the probe's longer flow settled at (on a lossy path CUBIC's
/// slow start outruns its steady rate): its arms would compare slow starts, and one run that
/// met no early loss would equal any fix.
pub const GROW_BELOW: f64 = 0.5;
/// The most a sample grows after its pilot.
pub const GROW_MAX: f64 = 4.0;

/// The sample's new file count when the pilot ran in `pilot_s`, under [`GROW_BELOW`] of the
/// `target_s` its `files` were sized for: grown toward the target by at most [`GROW_MAX`], to
/// the tree's `total` (and 50,000) at most. `None` when it need not or cannot grow.
pub fn grown_sample(files: u64, total: u64, pilot_s: f64, target_s: f64) -> Option<u64> {
    if pilot_s <= 0.0 || pilot_s >= GROW_BELOW * target_s || files >= total.min(50_000) {
        return None;
    }
    let factor = (target_s / pilot_s).min(GROW_MAX);
    Some(((files as f64 * factor) as u64).min(total.min(50_000)))
}

/// Runs the arms that fit before `deadline` after the base's `pilot` (whose sweep took
/// `wall` seconds).
pub fn run_arms(
    setup: &Setup,
    obs: &mut Observations,
    stages: &mut Vec<serde_json::Value>,
    (pilot, wall): (ArmObs, f64),
    deadline: Instant,
    say: &dyn Fn(&str),
) -> Result<()> {
    let cc = default_cc();
    let base = base_arm();
    let all = candidates(obs, &cc);
    let skip = |a: &Arm, why: &str| ArmObs {
        kind: a.kind.clone(),
        flags: a.flags(setup),
        runs: Vec::new(),
        failed: 0,
        skipped: Some(why.to_string()),
    };
    let Some(base_s) = pilot.median_s() else {
        let why = format!(
            "not run: the pilot of the base has no verified run ({})",
            pilot.skipped.clone().unwrap_or_default()
        );
        say(&why);
        obs.arms.push(pilot);
        obs.arms.extend(all.iter().map(|a| skip(a, &why)));
        return Ok(());
    };
    obs.arms.push(pilot);
    // The sweep's own costs: part paid once per sweep, part per run (prepare, hash, verify).
    // Estimated low on purpose: the deadline ends the sweep anyway, and an arm cut short is
    // named as such.
    let overhead = (wall - base_s).max(1.0);
    let (fixed, per_run) = ((0.5 * overhead).min(10.0), (0.25 * overhead).min(5.0));
    if let Some(why) = near_floor(obs, base_s) {
        say(&why);
        obs.arms.extend(all.iter().map(|a| skip(a, &why)));
        return Ok(());
    }
    let rtt = obs.path.idle_rtt_ms.unwrap_or(0.0) / 1e3;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .as_secs_f64();
    let mut planned = fixed;
    let mut chosen = Vec::new();
    for a in all {
        if a.kind == ArmKind::PathWindows {
            say(&format!("{}: {PER_RUN_RCVBUF}", a.name));
            obs.arms.push(skip(&a, PER_RUN_RCVBUF));
            continue;
        }
        let mut est = per_run + base_s;
        match a.kind {
            ArmKind::PerFileWait => est += obs.sample.sample_files as f64 * rtt,
            ArmKind::Quic | ArmKind::QuicStartWindow => est += base_s * 0.5,
            _ => {}
        }
        if planned + est > left {
            let why = format!(
                "not run: its estimated {est:.0} s did not fit the budget ({left:.0} s left for the arms)"
            );
            say(&format!("{}: {why}", a.name));
            obs.arms.push(skip(&a, &why));
        } else {
            planned += est;
            chosen.push(a);
        }
    }
    // The base again when it fits: its spread is the noise a gain must beat.
    if planned + per_run + base_s < left {
        chosen.push(base.clone());
    }
    if chosen.is_empty() || shoal_hostctl::proc::interrupted() {
        return Ok(());
    }
    say(&format!(
        "the arms: {}…",
        chosen
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let (got, stage) = arms::run(setup, "arms", &chosen, 1, deadline)?;
    stages.push(stage);
    merge(obs, got);
    if !shoal_hostctl::proc::interrupted() {
        refine(setup, obs, stages, &chosen, (fixed, per_run), deadline, say)?;
    }
    Ok(())
}

/// Adds each observation's runs to the arm of its kind already observed, or adds the arm.
fn merge(obs: &mut Observations, got: Vec<ArmObs>) {
    for o in got {
        match obs.arms.iter_mut().find(|a| a.kind == o.kind) {
            Some(a) => {
                a.runs.extend(o.runs);
                a.failed += o.failed;
            }
            None => obs.arms.push(o),
        }
    }
}

/// Most rounds the refinement runs: the base then has up to 7 runs, an arm 6.
const REFINE_MAX_ROUNDS: u32 = 5;

/// Spends what is left of the budget on the arms whose median beat the base's but within
/// noise (one lucky or unlucky run of a lossy path hides a gain on one run each): the base and
/// those arms again, interleaved, until each has the runs the rank test needs
/// ([`shoal_verdict::noise::RANK_MIN_RUNS`]) or more. Arms that do not fit are left as they
/// were, most promising first; nothing runs when not even one fits.
fn refine(
    setup: &Setup,
    obs: &mut Observations,
    stages: &mut Vec<serde_json::Value>,
    chosen: &[Arm],
    (fixed, per_run): (f64, f64),
    deadline: Instant,
    say: &dyn Fn(&str),
) -> Result<()> {
    use shoal_verdict::noise::{compare, Compare, RANK_MIN_RUNS};
    let Some(base_obs) = obs.arms.iter().find(|a| a.kind == ArmKind::Base) else {
        return Ok(());
    };
    let Some(base_s) = base_obs.median_s() else {
        return Ok(());
    };
    let mut doubtful: Vec<(&Arm, f64, usize)> = chosen
        .iter()
        .filter(|a| !matches!(a.kind, ArmKind::Base | ArmKind::PerFileWait))
        .filter_map(|a| {
            let o = obs.arms.iter().find(|o| o.kind == a.kind)?;
            let m = o.median_s()?;
            (m < base_s && matches!(compare(o, base_obs), Compare::Noise(_))).then_some((
                a,
                m,
                o.runs.len(),
            ))
        })
        .collect();
    doubtful.sort_by(|a, b| a.1.total_cmp(&b.1));
    let base_runs = base_obs.runs.len();
    while !doubtful.is_empty() {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
            - fixed;
        let round = base_s + per_run + doubtful.iter().map(|d| d.1 + per_run).sum::<f64>();
        let fewest = doubtful
            .iter()
            .map(|d| d.2)
            .min()
            .unwrap_or(0)
            .min(base_runs);
        let needed = RANK_MIN_RUNS.saturating_sub(fewest).max(1) as u32;
        let fits = (left / round).floor().max(0.0) as u32;
        if fits >= needed {
            let rounds = fits.min(REFINE_MAX_ROUNDS).max(needed);
            let mut set: Vec<Arm> = doubtful.iter().map(|d| d.0.clone()).collect();
            set.push(base_arm());
            say(&format!(
                "within noise of the base: {}; {rounds} more rounds with the base…",
                doubtful
                    .iter()
                    .map(|d| d.0.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            let (got, stage) = arms::run(setup, "refine", &set, rounds, deadline)?;
            stages.push(stage);
            merge(obs, got);
            return Ok(());
        }
        doubtful.pop();
    }
    Ok(())
}

/// Why the path-sized windows arm is not run: a receive buffer the receiver gets per run is
/// set on the accepted socket, after the handshake fixed its window scale and with autotuning
/// then off, so it measured a smaller window than the kernel's own (15.1 s against 2.6 s on a
/// 100 ms link with 1 MiB maxima; `recv --rcvbuf`, set before listen, gained 31%).
const PER_RUN_RCVBUF: &str = "not run: the receiver applies a run's own rcvbuf after the handshake, which holds the window below the kernel's; start the receiver with --rcvbuf to test windows sized for the path";

/// Why no arm can gain: a floor binds the base by the verdict's own rule (it needs at least
/// [`FLOOR_NEAR`] of the base's time and the base did not beat it, [`FLOOR_CONTRADICTED`]). The
/// link's floor counts only on a path whose probe was neither lossy nor possibly held by a
/// window (either makes the probe's rate, and so that floor, too low); the ends' floors are
/// measured with no network and count whatever the probe saw. `None` when arms are worth running.
fn near_floor(obs: &Observations, base_s: f64) -> Option<String> {
    let p = &obs.path;
    let (files, bytes) = (obs.sample.sample_files, obs.sample.sample_bytes);
    let lossy = [&p.loss_to_receiver, &p.loss_from_receiver]
        .iter()
        .any(|l| l.path_loss().unwrap_or(0.0) >= LOSS_MIN);
    let cap = window_cap(p);
    let bdp = p.bdp_bytes.unwrap_or(0);
    let windowed = cap.is_none_or(|c| c < 2 * bdp);
    let link = p
        .goodput_to_receiver_bits_per_s
        .filter(|_| !lossy && !windowed && p.unreliable.is_empty())
        .map(|g| (bytes as f64 * 8.0 / g, "the link's rate"));
    let read = obs
        .ends
        .source_read_warm
        .and_then(|f| f.seconds_for(files, bytes))
        .map(|s| (s, "reading the source"));
    let write = obs
        .ends
        .receiver_write
        .and_then(|f| f.seconds_for(files, bytes))
        .map(|s| (s, "the receiver's writes"));
    // A floor the base ran faster than is contradicted, as the verdict leaves it out.
    let (floor, what) = [link, read, write]
        .into_iter()
        .flatten()
        .filter(|(s, _)| base_s >= FLOOR_CONTRADICTED * s)
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    (floor >= FLOOR_NEAR * base_s).then(|| {
        format!(
            "not run: the base took {base_s:.2} s and its slowest floor ({what}) needs {floor:.2} s, at least {:.0}% of it",
            FLOOR_NEAR * 100.0
        )
    })
}

/// The smaller of the sender's `tcp_wmem` and the receiver's `tcp_rmem` maxima.
fn window_cap(p: &PathObs) -> Option<u64> {
    let s = p.sender_buffers.tcp_wmem.map(|t| t[2]);
    let r = p.receiver_buffers.tcp_rmem.map(|t| t[2]);
    match (s, r) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The arms after the pilot, in the order they are worth their time.
fn candidates(obs: &Observations, cc: &str) -> Vec<Arm> {
    let q = |s: &str| format!("\"{s}\"");
    let other = if cc == "bbr" { "cubic" } else { "bbr" };
    let mut v = Vec::new();
    if obs.path.controllers.iter().any(|c| c == other) {
        v.push(Arm::new(
            ArmKind::OtherCc(other.into()),
            &format!("cc-{other}"),
            &[("mode", &q("tcp-bundle")), ("cc", &q(other))],
        ));
    }
    v.push(Arm::new(
        ArmKind::Connections(8),
        "connections-8",
        &[
            ("mode", &q("tcp-bundle")),
            ("cc", &q(cc)),
            ("connections", "8"),
        ],
    ));
    // Windows for the path: 2 × BDP; when the kernels' cap is below that, the probe itself
    // may have been held by the cap (its BDP no larger than the cap), so 4 × the cap at least.
    let bdp = obs.path.bdp_bytes.unwrap_or(0);
    let cap = window_cap(&obs.path).unwrap_or(0);
    let w = if cap < 2 * bdp {
        (2 * bdp).max(4 * cap)
    } else {
        2 * bdp
    };
    let w = w.clamp(4 << 20, 256 << 20);
    let w = q(&format!("{}MiB", w.div_ceil(1 << 20)));
    v.push(Arm::new(
        ArmKind::PathWindows,
        "path-windows",
        &[
            ("mode", &q("tcp-bundle")),
            ("cc", &q(cc)),
            ("sndbuf", &w),
            ("rcvbuf", &w),
        ],
    ));
    v.push(Arm::new(
        ArmKind::Quic,
        "quic",
        &[("mode", &q("quic-bundle"))],
    ));
    v.push(Arm::new(
        ArmKind::QuicStartWindow,
        "quic-resume",
        &[("mode", &q("quic-bundle")), ("resume", "true")],
    ));
    v.push(Arm::new(
        ArmKind::PerFileWait,
        "tcp-wait",
        &[("mode", &q("tcp-wait")), ("cc", &q(cc))],
    ));
    v
}

/// This host's default congestion controller.
fn default_cc() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "cubic".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_verdict::BufferLimits;

    #[test]
    fn a_lossy_path_gets_a_sample_that_meets_its_losses() {
        let tree = Tree::generated(20_000, 4096);
        let mut path = PathObs {
            goodput_to_receiver_bits_per_s: Some(3e6),
            ..PathObs::default()
        };
        let left = Duration::from_secs(78);
        let clean = sample_files(&tree, &path, None, left);
        path.loss_to_receiver.random = Some(0.006);
        let lossy = sample_files(&tree, &path, None, left);
        // 30 losses at 0.6% are 5,000 segments (1,768 files), capped at a sixth of 78 s at
        // 3 Mbit/s (1,190 files).
        assert!(clean < 400, "{clean}");
        assert!((1150..1200).contains(&lossy), "{lossy}");
        path.loss_to_receiver.random = Some(0.05);
        assert!(sample_files(&tree, &path, None, left) < 400);
    }

    #[test]
    fn a_pilot_far_under_its_aim_grows_the_sample_at_most_fourfold() {
        // 1% loss at 40 ms: sized for 3.9 s, the pilot ran in 0.69 s.
        assert_eq!(grown_sample(253, 20_000, 0.69, 3.9), Some(1012));
        assert_eq!(grown_sample(253, 20_000, 1.3, 3.9), Some(759));
        // Near its aim, or the whole tree already: as it is.
        assert_eq!(grown_sample(253, 20_000, 2.0, 3.9), None);
        assert_eq!(grown_sample(500, 500, 0.1, 3.9), None);
        assert_eq!(grown_sample(400, 1000, 0.1, 3.9), Some(1000));
    }

    #[test]
    fn the_sample_fits_a_sixteenth_of_the_budget_at_the_probes_goodput() {
        let tree = Tree::generated(65_536, 4096);
        let path = PathObs {
            goodput_to_receiver_bits_per_s: Some(20e6),
            ..PathObs::default()
        };
        // 75 s left → a 3.25 s base; 4 KiB at 20 Mbit/s is 1.64 ms a file, + 50 µs.
        let n = sample_files(&tree, &path, None, Duration::from_secs(75));
        assert!((1850..2000).contains(&n), "{n}");
        assert_eq!(
            sample_files(
                &Tree::generated(50, 4096),
                &path,
                None,
                Duration::from_secs(75)
            ),
            50
        );
        assert_eq!(sample_files(&tree, &path, None, Duration::ZERO), 296);
        // A destination creating 200 files/s: a 3.25 s base writes 650 of them.
        let slow = FloorRate {
            files_per_s: 200.0,
            bytes_per_s: 200.0 * 4096.0,
            cpu_busy: None,
        };
        let n = sample_files(&tree, &path, Some(&slow), Duration::from_secs(75));
        assert_eq!(n, 650);
        let fast = FloorRate {
            files_per_s: 50_000.0,
            bytes_per_s: 200e6,
            cpu_busy: None,
        };
        let n = sample_files(&tree, &path, Some(&fast), Duration::from_secs(75));
        assert!((1850..2000).contains(&n), "{n}");
    }

    #[test]
    fn a_base_at_its_floor_stops_unless_loss_or_a_window_may_hold_the_probe() {
        let big = BufferLimits {
            tcp_rmem: Some([4096, 131072, 6 << 20]),
            tcp_wmem: Some([4096, 16384, 4 << 20]),
            ..BufferLimits::default()
        };
        let mut obs = Observations::default();
        obs.sample.sample_files = 1000;
        obs.sample.sample_bytes = 10_000_000;
        obs.path.goodput_to_receiver_bits_per_s = Some(20e6);
        obs.path.bdp_bytes = Some(25_000);
        obs.path.sender_buffers = big.clone();
        obs.path.receiver_buffers = big;
        assert!(near_floor(&obs, 4.4).is_some());
        assert!(near_floor(&obs, 5.0).is_none());
        // Faster than the 4 s the link's floor allows: the floor is contradicted, not binding.
        assert!(near_floor(&obs, 3.5).is_none());
        obs.path.loss_to_receiver.random = Some(0.01);
        assert!(near_floor(&obs, 4.4).is_none());
        // The receiver's writes are measured with no network: the probe's loss does not
        // touch them, and they bind.
        obs.ends.receiver_write = Some(FloorRate {
            files_per_s: 240.0,
            bytes_per_s: 1e9,
            cpu_busy: None,
        });
        let why = near_floor(&obs, 4.4).expect("the write floor binds");
        assert!(why.contains("the receiver's writes"), "{why}");
        obs.ends.receiver_write = None;
        obs.path.loss_to_receiver.random = Some(0.0);
        obs.path.bdp_bytes = Some(3 << 20);
        assert!(near_floor(&obs, 4.4).is_none());
    }
}
