//! What a sweep checks before it touches the link, a payload or a receiver: every
//! configuration's `shoal send` and `shoal recv` command line, parsed by the real argument
//! parsers (the `shoal` binary hands them in as an [`ArgCheck`]); the run count; axes that a
//! remote receiver would never see. `shoal sweep --dry-run` stops after this and prints the
//! plan ([`plan_text`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};

use crate::argv;
use crate::arm::Arm;
use crate::linkspec::{LinkSpec, RemoteReceiver};
use crate::matrix::{Matrix, PayloadSource};
use crate::plan::fmt_duration;

/// Parses a complete `shoal` command line (without the program name, e.g. `["send", "--to",
/// …]`) with the binary's own parsers; `Err` holds the parser's message.
pub type ArgCheck<'a> = &'a dyn Fn(&[OsString]) -> Result<(), String>;

/// A run id of the right form, for checking a two-host sweep's `send --run-id`.
const PLACEHOLDER_RUN_ID: &str = "0123456789abcdef0123456789abcdef";

/// The parser's message without its usage block: `error: unexpected argument '--mdoe'
/// found; tip: a similar argument exists: '--mode'`.
fn tidy(msg: &str) -> String {
    msg.lines()
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Every check that needs neither the link, nor a payload, nor a receiver. Every problem is
/// reported, each naming its configuration.
/// With `traces`, every run's `shoal send` gets `--trace-dir`.
pub fn check(
    matrix: &Matrix,
    runs: u32,
    timeout: Duration,
    traces: bool,
    parse: ArgCheck,
) -> Result<()> {
    if runs == 0 {
        bail!("0 runs per configuration: nothing to run (--runs must be at least 1)");
    }
    let mut problems = Vec::new();
    let identity = PathBuf::from("identity");
    for cfg in &matrix.configs {
        let name = format!("{} ({})", cfg.id, cfg.label());
        let timeout = cfg.time_limit(timeout);
        if cfg.arm.is_baseline() {
            continue;
        }
        let (send_flags, recv_flags) = argv::flags(cfg, &matrix.receiver_flags);
        let (to, run_id) = match &matrix.link {
            LinkSpec::Remote(r) => (r.receiver.clone(), Some(PLACEHOLDER_RUN_ID)),
            LinkSpec::Emulated(_) => ("198.18.0.2:7474".to_string(), None),
        };
        let src = match matrix.payload(cfg.payload()).map(|p| &p.source) {
            Some(PayloadSource::Existing { path }) => path.clone(),
            _ => PathBuf::from("payload"),
        };
        let send = argv::send_argv(
            &matrix.link,
            &to,
            &src,
            timeout,
            run_id,
            &identity,
            traces.then_some(Path::new("traces/run")),
            &send_flags,
        );
        if let Err(e) = parse(&send) {
            problems.push(format!("{name}: shoal send: {}", tidy(&e)));
        }
        match &matrix.link {
            LinkSpec::Emulated(_) => {
                let recv =
                    argv::recv_argv("198.18.0.2:0", Path::new("dest"), &identity, &recv_flags);
                if let Err(e) = parse(&recv) {
                    problems.push(format!("{name}: shoal recv: {}", tidy(&e)));
                }
            }
            LinkSpec::Remote(RemoteReceiver { receiver, .. }) => {
                // Receiver axes travel with each run's prepare request; what the remote
                // receiver cannot set for one run is refused here, before anything runs.
                if let Err(e) = crate::recvaxes::settings(cfg, &matrix.receiver_flags) {
                    problems.push(format!(
                        "{name}: the receiver at {receiver} cannot take this run's receiver \
                         settings: {e}"
                    ));
                }
                if crate::start_window::on_routes(cfg) {
                    problems.push(format!(
                        "{name}: initial-window in a TCP mode needs the emulated link (the sweep \
                         sets initcwnd on routes it owns); across two hosts set it by hand as \
                         root on both (docs/two-hosts.md) and drop the axis"
                    ));
                }
            }
        }
    }
    match problems.len() {
        0 => Ok(()),
        1 => bail!("the matrix cannot run: {}", problems[0]),
        n => bail!(
            "the matrix cannot run ({n} problems):\n  {}",
            problems.join("\n  ")
        ),
    }
}

/// Files and bytes of a folder (regular files, symbolic links not followed).
fn tree_size(root: &Path) -> Option<(u64, u64)> {
    let (mut files, mut bytes) = (0, 0);
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).ok()?.flatten() {
            let t = e.file_type().ok()?;
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                files += 1;
                bytes += e.metadata().ok()?.len();
            }
        }
    }
    Some((files, bytes))
}

/// Files and bytes of a payload as the matrix defines it (an existing folder is walked).
fn payload_size(source: &PayloadSource) -> Option<(u64, u64)> {
    match source {
        PayloadSource::Generated { files, size, .. } => Some((*files, files * size)),
        PayloadSource::Existing { path } => tree_size(path),
    }
}

/// Per run, on top of the transfer: process start, pre-read of the source and hashing of
/// the destination (a rough allowance for the estimate).
const PER_RUN_OVERHEAD: Duration = Duration::from_secs(2);
/// `shoal link check` before the first run.
const LINK_CHECK: Duration = Duration::from_secs(20);

/// The plan `--dry-run` prints: configurations, runs, and the time it should take.
/// The controllers in effect among a payload's Shoal arms when no `cc` axis names them and
/// they differ (TCP's host default, BBR, against quinn's CUBIC): `(payload, controllers)`.
pub fn mixed_controllers(matrix: &Matrix) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for c in matrix.configs.iter().filter(|c| c.arm == Arm::Shoal) {
        for (_, cc) in c.implied.iter().filter(|(k, _)| k == crate::axis::CC) {
            let p = c.payload().to_string();
            let i = match out.iter().position(|(q, _)| *q == p) {
                Some(i) => i,
                None => {
                    out.push((p, Vec::new()));
                    out.len() - 1
                }
            };
            if !out[i].1.contains(cc) {
                out[i].1.push(cc.clone());
            }
        }
    }
    out.retain(|(_, ccs)| {
        let mut base: Vec<&str> = ccs.iter().map(|c| c.trim_start_matches("quinn-")).collect();
        base.sort();
        base.dedup();
        base.len() > 1
    });
    out
}

/// What the dry run, the summary and report.html say of [`mixed_controllers`].
pub fn mixed_controllers_text(payload: &str, ccs: &[String]) -> String {
    format!(
        "payload {payload}: the Shoal arms run under different congestion controllers ({}): \
         TCP takes the host's default, QUIC quinn's CUBIC; add a cc axis (cc = [\"cubic\", \
         \"bbr\"]) to compare the modes under the same controller",
        ccs.join(", ")
    )
}

pub fn plan_text(matrix: &Matrix, runs: u32, seed: u64, timeout: Duration, check: bool) -> String {
    let mut out = String::new();
    let total = matrix.configs.len() as u64 * u64::from(runs);
    out.push_str(&format!(
        "plan: {} configurations × {runs} runs = {total} runs in one shuffled order (seed {seed})\n",
        matrix.configs.len()
    ));
    for c in &matrix.configs {
        let t = c.time_limit(timeout);
        let warm = if crate::start_window::wants_state(c) {
            " + 1 unrecorded warm-up run"
        } else {
            ""
        };
        out.push_str(&format!(
            "  {}  {}  (limit {}){warm}\n",
            c.id,
            c.label(),
            fmt_duration(t)
        ));
    }
    for (payload, ccs) in mixed_controllers(matrix) {
        out.push_str(&format!(
            "warning: {}\n",
            mixed_controllers_text(&payload, &ccs)
        ));
    }
    for p in &matrix.payloads {
        let size = payload_size(&p.source);
        let what = match &p.source {
            PayloadSource::Generated { .. } => "generated, cached".to_string(),
            PayloadSource::Existing { path } => format!("existing folder {}", path.display()),
        };
        match size {
            Some((f, b)) => out.push_str(&format!(
                "payload {}: {f} files, {b} bytes ({what})\n",
                p.name
            )),
            None => out.push_str(&format!("payload {}: size unknown ({what})\n", p.name)),
        }
    }
    // Estimate: each run moves its payload at the link rate, plus a few round trips and the
    // per-run overhead; the upper bound is every run at its time limit.
    let mut upper = Duration::ZERO;
    let mut estimate = Some(Duration::ZERO);
    let link = match &matrix.link {
        LinkSpec::Emulated(l) => {
            let c = &l.check;
            out.push_str(&format!(
                "link: emulated, brought up by the sweep{}\n",
                if check && *c {
                    ", checked before the first run"
                } else {
                    ""
                }
            ));
            if check && *c {
                estimate = estimate.map(|e| e + LINK_CHECK);
            }
            Some((l.rtt.value, l.rate.value))
        }
        LinkSpec::Remote(RemoteReceiver { receiver, .. }) => {
            out.push_str(&format!("link: the remote receiver at {receiver}\n"));
            None
        }
    };
    for c in &matrix.configs {
        let t = c.time_limit(timeout);
        upper += t * runs;
        let bytes = matrix
            .payload(c.payload())
            .and_then(|p| payload_size(&p.source))
            .map(|(_, b)| b);
        let one = match (c.arm, link, bytes) {
            (Arm::TarLocal, _, Some(_)) => Some(PER_RUN_OVERHEAD),
            (_, Some((rtt, rate)), Some(b)) if rate > 0 => Some(
                Duration::from_secs_f64(b as f64 * 8.0 / rate as f64) + rtt * 4 + PER_RUN_OVERHEAD,
            ),
            _ => None,
        };
        estimate = estimate.zip(one).map(|(e, o)| e + o.min(t) * runs);
    }
    match estimate {
        Some(e) => out.push_str(&format!(
            "estimated time: about {} if every transfer runs at the link rate (payload bytes at \
             the rate + 4 RTT + {} s per run{}); at most {} (every run at its limit)\n",
            fmt_duration(e),
            PER_RUN_OVERHEAD.as_secs(),
            if check {
                ", and the link check"
            } else {
                ""
            },
            fmt_duration(upper)
        )),
        None => out.push_str(&format!(
            "estimated time: not known (no link rate to go by); at most {} (every run at its limit)\n",
            fmt_duration(upper)
        )),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: &str = r#"
[link]
rtt = "20ms"
rate = "100mbit"
[payload.p]
files = 10
size = "1MB"
[axes]
mode = ["tcp-bundle", "quic-bundle"]
max-streams = [64]
"#;

    fn remote(axes: &str) -> String {
        format!(
            "[link]\nreceiver = \"hostb:7474\"\npin = \"sha256:00\"\ntoken_file = \"t\"\n\
             [payload.p]\nfiles = 1\nsize = 1\n[axes]\n{axes}"
        )
    }

    /// Accepts every command line, recording them.
    fn accept_all(
        seen: &std::cell::RefCell<Vec<String>>,
    ) -> impl Fn(&[OsString]) -> Result<(), String> + '_ {
        move |argv: &[OsString]| {
            seen.borrow_mut().push(
                argv.iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(" "),
            );
            Ok(())
        }
    }

    #[test]
    fn every_configuration_is_parsed_at_both_ends() {
        let m = Matrix::parse(LOCAL).unwrap();
        let seen = std::cell::RefCell::new(Vec::new());
        check(&m, 3, Duration::from_secs(60), true, &accept_all(&seen)).unwrap();
        let seen = seen.into_inner();
        assert_eq!(seen.len(), 4, "{seen:#?}");
        assert!(seen[0].starts_with("send --to 198.18.0.2:7474 --src payload --json --timeout 60s --trace-dir traces/run --identity identity --mode tcp-bundle --max-streams 64"), "{seen:#?}");
        assert_eq!(
            seen[1],
            "recv --listen 198.18.0.2:0 --dest dest --identity identity --once --flat --max-streams 64"
        );
    }

    #[test]
    fn parser_errors_name_the_configuration() {
        let m = Matrix::parse(&LOCAL.replace("max-streams", "mdoe")).unwrap();
        let parse = |argv: &[OsString]| -> Result<(), String> {
            match argv.iter().any(|a| a == "--mdoe") {
                true => Err("error: unexpected argument '--mdoe' found\n\n  tip: a similar argument exists: '--mode'\n\nUsage: shoal send --to <TO>\n\nFor more information, try '--help'.\n".into()),
                false => Ok(()),
            }
        };
        let e = format!(
            "{:#}",
            check(&m, 1, Duration::from_secs(60), true, &parse).unwrap_err()
        );
        assert!(e.contains("2 problems"), "{e}");
        assert!(
            e.contains("c01 (payload=p kind=shoal mode=tcp-bundle mdoe=64): shoal send: error: unexpected argument '--mdoe' found; tip: a similar argument exists: '--mode'\n  c02 ("),
            "{e}"
        );
        assert!(!e.contains("Usage"), "{e}");
    }

    #[test]
    fn zero_runs_are_refused() {
        let m = Matrix::parse(LOCAL).unwrap();
        let e = check(&m, 0, Duration::from_secs(60), true, &|_| Ok(())).unwrap_err();
        assert!(format!("{e:#}").contains("--runs"), "{e:#}");
    }

    #[test]
    fn two_host_receiver_axes_are_carried_or_refused_up_front() {
        let ok = |_: &[OsString]| Ok(());
        let t = Duration::from_secs(60);
        // Receiver axes the remote receiver can set per run travel with each run.
        let m = Matrix::parse(&remote(
            "max-streams = [64, 128]\n\"recv.fsync\" = [true]\n",
        ))
        .unwrap();
        check(&m, 1, t, true, &ok).unwrap();
        // One it cannot is refused, naming the configuration and the axis.
        let m = Matrix::parse(&remote("\"recv.max-connections\" = [4, 8]\n")).unwrap();
        let e = format!("{:#}", check(&m, 1, t, true, &ok).unwrap_err());
        assert!(e.contains("2 problems"), "{e}");
        assert!(
            e.contains("c01 (payload=p kind=shoal recv.max-connections=4): the receiver at hostb:7474 cannot take this run's receiver settings: recv.max-connections=4: recv --max-connections cannot be set per run"),
            "{e}"
        );
        // Sender-only axes, plain (the receiver must allow it) and a flag taken out of
        // [flags] receiver are fine.
        let m = Matrix::parse(&remote("cc = [\"bbr\"]\nplain = [true]\n")).unwrap();
        check(&m, 1, t, true, &ok).unwrap();
        let m = Matrix::parse(&format!(
            "{}[flags]\nreceiver = []\n",
            remote("stream-window = [\"1MiB\"]\n")
        ))
        .unwrap();
        check(&m, 1, t, true, &ok).unwrap();
    }

    #[test]
    fn the_plan_counts_runs_and_estimates_time() {
        let m = Matrix::parse(LOCAL).unwrap();
        let p = plan_text(&m, 3, 7, Duration::from_secs(60), true);
        assert!(
            p.starts_with(
                "plan: 2 configurations × 3 runs = 6 runs in one shuffled order (seed 7)\n"
            ),
            "{p}"
        );
        assert!(
            p.contains(
                "  c02  payload=p kind=shoal mode=quic-bundle max-streams=64  (limit 1m00s)"
            ),
            "{p}"
        );
        assert!(p.contains("payload p: 10 files, 10000000 bytes"), "{p}");
        // 10 MB at 100 Mbit/s = 0.8 s + 4 × 20 ms + 2 s = 2.88 s per run, 6 runs, + 20 s check.
        assert!(p.contains("estimated time: about 37s"), "{p}");
        assert!(p.contains("at most 6m00s"), "{p}");
    }
}
