//! Stage 3, transfers on the sample: each arm is a one-configuration two-host `shoal sweep`
//! run as a child process against the receiver, so every run is prepared in a fresh folder,
//! verified from the receiver's disk and recorded with its counters in runs.csv. The child is
//! ended (SIGTERM, by its id) at the diagnosis's deadline or on Ctrl-C.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use shoal_verdict::{ArmKind, ArmObs, RunObs};

/// Where and against whom the arms run.
pub struct Setup {
    pub shoal: PathBuf,
    pub receiver: String,
    pub pin: Option<String>,
    pub token_file: Option<PathBuf>,
    pub sample: PathBuf,
    /// The `--src` the arms' `shoal send` commands show: the user's tree, or a placeholder.
    pub src_shown: String,
    /// The sweeps' out folders go under here, one per arm.
    pub out: PathBuf,
    pub work: PathBuf,
}

/// One arm to run: its kind, its axes (`name`, TOML value) and its `shoal send` options.
#[derive(Debug, Clone)]
pub struct Arm {
    pub kind: ArmKind,
    pub name: String,
    pub axes: Vec<(String, String)>,
}

impl Arm {
    pub fn new(kind: ArmKind, name: &str, axes: &[(&str, &str)]) -> Arm {
        Arm {
            kind,
            name: name.into(),
            axes: axes
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// Whether a runs.csv row is this arm's: each of `keys` (every arm's axes) has this arm's
    /// value, or is empty where this arm does not set it.
    pub fn matches(&self, row: &HashMap<String, String>, keys: &[String]) -> bool {
        keys.iter().all(|k| {
            let cell = row
                .get(&format!("param_{}", k.replace('-', "_")))
                .map_or("", String::as_str);
            let want = self
                .axes
                .iter()
                .find(|(n, _)| n == k)
                .map_or("", |(_, v)| v.trim_matches('"'));
            cell == want
        })
    }

    /// The `shoal send` arguments of this arm (what the verdict's best command is made of).
    pub fn flags(&self, setup: &Setup) -> Vec<String> {
        let mut f = vec![
            "--to".to_string(),
            setup.receiver.clone(),
            "--src".into(),
            setup.src_shown.clone(),
        ];
        if let (Some(pin), Some(token)) = (&setup.pin, &setup.token_file) {
            f.extend(["--pin".into(), pin.clone()]);
            f.extend(["--token-file".into(), token.display().to_string()]);
        }
        for (k, v) in &self.axes {
            let v = v.trim_matches('"');
            if v == "true" {
                f.push(format!("--{k}"));
            } else {
                f.extend([format!("--{k}"), v.to_string()]);
            }
        }
        f
    }
}

/// Runs every arm `runs` times in one sweep (its fixed costs paid once) under `name`; gives
/// up, ending the sweep, at `deadline` or on Ctrl-C. One observation per arm, in order.
pub fn run(
    setup: &Setup,
    name: &str,
    arms: &[Arm],
    runs: u32,
    deadline: Instant,
) -> Result<(Vec<ArmObs>, serde_json::Value)> {
    let out = setup.out.join(name);
    let left = deadline.saturating_duration_since(Instant::now());
    std::fs::create_dir_all(&setup.out)?;
    let mpath = setup.out.join(format!("{name}.toml"));
    std::fs::write(&mpath, matrix(setup, arms, runs, left))?;
    let log = std::fs::File::create(setup.out.join(format!("{name}.log")))?;
    let mut child = Command::new(&setup.shoal)
        .arg("sweep")
        .arg("--matrix")
        .arg(&mpath)
        .arg("--out")
        .arg(&out)
        .arg("--work")
        .arg(&setup.work)
        .args(["--settle", "0s", "--no-traces"])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting shoal sweep")?;
    let mut ended_early = None;
    while child.try_wait()?.is_none() {
        let why = if shoal_hostctl::proc::interrupted() {
            Some("interrupted")
        } else if Instant::now() >= deadline {
            Some("the budget ran out before it ran")
        } else {
            None
        };
        if let Some(why) = why {
            ended_early = Some(why);
            stop(&mut child)?;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let rows = read_rows(&out.join("runs.csv"));
    let keys: Vec<String> = arms
        .iter()
        .flat_map(|a| a.axes.iter().map(|(k, _)| k.clone()))
        .collect();
    let mut obs = Vec::new();
    let mut stages = Vec::new();
    for arm in arms {
        let mine: Vec<&HashMap<String, String>> =
            rows.iter().filter(|r| arm.matches(r, &keys)).collect();
        let mut o = ArmObs {
            kind: arm.kind.clone(),
            flags: arm.flags(setup),
            runs: Vec::new(),
            failed: 0,
            skipped: None,
        };
        for r in &mine {
            if r.get("status").map(String::as_str) == Some("ok") {
                o.runs.push(run_obs(r));
            } else {
                o.failed += 1;
            }
        }
        if o.runs.is_empty() {
            o.skipped = Some(match ended_early {
                Some(why) if o.failed == 0 => why.to_string(),
                _ => format!(
                    "no verified run ({} failed; see {})",
                    o.failed,
                    out.join("runs.csv").display()
                ),
            });
        }
        stages.push(serde_json::json!({
            "arm": arm.name,
            "kind": arm.kind,
            "flags": o.flags,
            "rows": mine,
        }));
        obs.push(o);
    }
    let stage = serde_json::json!({ "sweep": name, "arms": stages, "ended_early": ended_early });
    Ok((obs, stage))
}

/// How long a sweep may take to end its run and remove its folders on the receiver after
/// SIGTERM before it is killed (the budget is a deadline).
const STOP_GRACE: Duration = Duration::from_secs(4);

/// Ends the sweep: SIGTERM (it removes its folders on the receiver), then, after
/// [`STOP_GRACE`], kill.
fn stop(child: &mut std::process::Child) -> Result<()> {
    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    let t = Instant::now();
    while child.try_wait()?.is_none() && t.elapsed() < STOP_GRACE {
        std::thread::sleep(Duration::from_millis(100));
    }
    if child.try_wait()?.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    Ok(())
}

/// The sweep's matrix: one configuration per arm against the remote receiver, no path probe.
fn matrix(setup: &Setup, arms: &[Arm], runs: u32, left: Duration) -> String {
    let mut m = format!(
        "[sweep]\nruns = {runs}\ntimeout = \"{}s\"\nprobe = false\ntraces = false\n\n[link]\nreceiver = \"{}\"\n",
        left.as_secs().max(5),
        setup.receiver
    );
    if let (Some(pin), Some(token)) = (&setup.pin, &setup.token_file) {
        m += &format!(
            "pin = \"{pin}\"\ntoken_file = {:?}\n",
            token.display().to_string()
        );
    }
    m += &format!(
        "\n[payload.sample]\npath = {:?}\n",
        setup.sample.display().to_string()
    );
    for (i, arm) in arms.iter().enumerate() {
        m += if i == 0 { "\n[axes]\n" } else { "\n[[also]]\n" };
        m += "payload = [\"sample\"]\n";
        for (k, v) in &arm.axes {
            m += &format!("{k} = [{v}]\n");
        }
    }
    m
}

/// runs.csv as maps from column to cell (none when it is missing).
pub fn read_rows(path: &Path) -> Vec<HashMap<String, String>> {
    let Ok(mut r) = csv::Reader::from_path(path) else {
        return Vec::new();
    };
    r.deserialize().filter_map(Result::ok).collect()
}

/// One verified row's figures.
pub fn run_obs(r: &HashMap<String, String>) -> RunObs {
    let f = |k: &str| r.get(k).and_then(|v| v.parse::<f64>().ok());
    let u = |k: &str| r.get(k).and_then(|v| v.parse::<u64>().ok());
    let retrans = match (f("retransmits"), f("sent_packets")) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    RunObs {
        seconds: f("seconds").unwrap_or(0.0),
        retrans_fraction: retrans,
        udp_rcvbuf_errors: u("receiver_udp_rcvbuf_errors"),
        sender_cpu_s: f("sender_cpu_seconds"),
        receiver_cpu_s: f("receiver_cpu_seconds").or(f("receiver_run_cpu_seconds")),
        receiver_write_wait_s: f("receiver_write_wait_seconds"),
        // QUIC: the frames the sender sent when a window held it (stream or connection);
        // TCP rows have no count (their receive-window share is `rwnd_limited_ms`).
        flow_control_stalls: match (u("stream_data_blocked_frames"), u("data_blocked_frames")) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        },
        congestion_events: u("congestion_events"),
        max_cwnd_bytes: u("cwnd_bytes"),
        max_rwnd_bytes: None,
        send_buffer_bytes: u("sndbuf_bytes").filter(|&b| b > 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arm_is_a_one_configuration_matrix_and_its_send_flags() {
        let setup = Setup {
            shoal: "shoal".into(),
            receiver: "198.18.0.2:7474".into(),
            pin: Some("sha256:ab".into()),
            token_file: Some("/t/token".into()),
            sample: "/w/sample".into(),
            src_shown: "/data".into(),
            out: "/o".into(),
            work: "/w".into(),
        };
        let arm = Arm::new(
            ArmKind::Resume,
            "resume",
            &[("mode", "\"tcp-bundle\""), ("resume", "true")],
        );
        let base = Arm::new(ArmKind::Base, "base", &[("mode", "\"tcp-bundle\"")]);
        let m = matrix(
            &setup,
            &[base.clone(), arm.clone()],
            2,
            Duration::from_secs(30),
        );
        assert!(
            m.contains("runs = 2\ntimeout = \"30s\"\nprobe = false"),
            "{m}"
        );
        assert!(
            m.contains("pin = \"sha256:ab\"\ntoken_file = \"/t/token\""),
            "{m}"
        );
        assert!(
            m.contains("[axes]\npayload = [\"sample\"]\nmode = [\"tcp-bundle\"]\n"),
            "{m}"
        );
        assert!(
            m.contains(
                "[[also]]\npayload = [\"sample\"]\nmode = [\"tcp-bundle\"]\nresume = [true]\n"
            ),
            "{m}"
        );
        let f = arm.flags(&setup).join(" ");
        assert_eq!(
            f,
            "--to 198.18.0.2:7474 --src /data --pin sha256:ab --token-file /t/token --mode tcp-bundle --resume"
        );
        let keys = vec!["mode".to_string(), "resume".to_string()];
        let row = |mode: &str, resume: &str| {
            HashMap::from([
                ("param_mode".to_string(), mode.to_string()),
                ("param_resume".to_string(), resume.to_string()),
            ])
        };
        assert!(arm.matches(&row("tcp-bundle", "true"), &keys));
        assert!(!arm.matches(&row("tcp-bundle", ""), &keys));
        assert!(base.matches(&row("tcp-bundle", ""), &keys));
    }
}
