//! Process orchestration for one run: `shoal recv` and `shoal send`, or a baseline pipeline,
//! started in their namespaces, timed, killed at their limit; their result as an [`Outcome`].

pub mod iperf3;
pub mod rclone;
pub mod remote_baseline;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::baseline;
use crate::context::Sweep;
use crate::payload::Payload;
use crate::progress::fmt_duration;
use shoal_hostctl::proc::{self, Proc};
use shoal_matrix::argv;
use shoal_matrix::arm::Arm;
use shoal_matrix::linkspec::LinkSpec;
use shoal_matrix::matrix::Config;

/// The per-run result before it becomes a row.
#[derive(Default)]
pub struct Outcome {
    /// shoal send's JSON row, when it printed one.
    pub json: Option<serde_json::Value>,
    pub exit: Option<proc::Exit>,
    pub wall_seconds: f64,
    pub timed_out: bool,
    /// Why the transfer itself failed (empty when it reported ok).
    pub error: String,
    pub receiver_report: String,
    /// A baseline's receiving processes' peak RSS, when the sweep started them (tar-tcp).
    pub receiver_peak_rss_bytes: Option<u64>,
    /// CPU seconds of the receiving processes the sweep started (`shoal recv` for the whole
    /// of its one run, tar-tcp's `socat | tar`), from wait4.
    pub receiver_cpu_seconds: Option<f64>,
    pub command: String,
    /// Columns the transfer knows best (a remote baseline's receiver and controller).
    pub cols: Vec<(shoal_report::columns::Col, String)>,
    /// What the run's stall timers and CPU hog did.
    pub stalls: shoal_hostctl::stall::Applied,
}

impl Sweep<'_> {
    #[allow(clippy::too_many_arguments)]
    pub fn shoal_transfer(
        &self,
        order: usize,
        cfg: &Config,
        payload: &Payload,
        dest: &Path,
        run_id: Option<&str>,
        trace_dir: Option<&Path>,
        timeout: Duration,
        cpu_group: Option<&shoal_hostctl::cpu_quota::QuotaGroup>,
        stalls: &shoal_hostctl::stall::RunStalls,
    ) -> Result<Outcome> {
        use shoal_hostctl::stall::End;
        let (mut send_flags, recv_flags) = argv::flags(cfg, &self.matrix.receiver_flags);
        send_flags.extend(shoal_matrix::start_window::send_flags(&self.opts.out, cfg));
        let mut out = Outcome::default();
        // Both ends run the configuration's build (the `shoal` axis), else the sweep's own.
        let bin = self.matrix.binary(cfg).unwrap_or(&self.opts.shoal_bin);

        // Receiver: one run, into this run's fresh destination, in the receiver namespace.
        let mut receiver = None;
        let to = match (&self.link, &self.matrix.link) {
            (Some(l), _) => {
                let mut cmd = Command::new(bin);
                cmd.args(argv::recv_argv(
                    &format!("{}:0", l.rcv_addr),
                    dest,
                    &self.identity,
                    &recv_flags,
                ))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(self.log(order, "recv"))?);
                let mut p = Proc::spawn(&mut cmd, Some(&l.rcv_ns), "shoal recv")?;
                // Capped before the sender starts: the receiver only listens until then.
                if let Some(g) = cpu_group {
                    if let Err(e) = g.add(p.pid) {
                        p.kill(Duration::from_secs(1));
                        return Err(e.context("moving shoal recv into its CPU-capped cgroup"));
                    }
                }
                if let Err(e) = stalls.place(End::Receiver, p.pid) {
                    p.kill(Duration::from_secs(1));
                    return Err(e.context("moving shoal recv into its stall cgroup"));
                }
                let rx = proc::lines(p.child.stdout.take().expect("piped"));
                let first = rx.recv_timeout(Duration::from_secs(15)).unwrap_or_default();
                let Some(addr) = first.strip_prefix("listening on ") else {
                    let e = p.kill(Duration::from_secs(1));
                    bail!(
                        "shoal recv did not start ({}): {first:?} {}",
                        e.describe(),
                        proc::tail_of(&self.log(order, "recv"), 400)
                    );
                };
                let addr = addr.trim().to_string();
                receiver = Some((p, rx));
                addr
            }
            (None, LinkSpec::Remote(r)) => r.receiver.clone(),
            (None, _) => unreachable!("an emulated link always has a context"),
        };

        let mut cmd = Command::new(bin);
        cmd.args(argv::send_argv(
            &self.matrix.link,
            &to,
            &payload.root,
            timeout,
            run_id,
            &self.identity,
            trace_dir,
            &send_flags,
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(self.log(order, "send"))?);
        out.command = baseline::command_line(&cmd);
        let hog = stalls.start_hog(&self.opts.shoal_bin, cpu_group)?;
        let t0 = Instant::now();
        let mut sender = Proc::spawn(
            &mut cmd,
            self.link.as_ref().map(|l| l.snd_ns.as_str()),
            "shoal send",
        )?;
        // The stalls run from the sender's start to its exit.
        stalls.place(End::Sender, sender.pid)?;
        let running = stalls.start(&self.opts.shoal_bin, hog)?;
        let srx = proc::lines(sender.child.stdout.take().expect("piped"));
        // shoal send enforces --timeout itself; the sweep's own limit is a backstop.
        let hard = t0 + timeout + Duration::from_secs(30);
        let kill_at = self.hooks.kill_after(order).map(|d| t0 + d);
        let exit = match sender.wait_until(kill_at.unwrap_or(hard).min(hard)) {
            Some(e) => e,
            None => {
                let e = sender.kill(Duration::from_millis(500));
                out.timed_out = true;
                out.error = if proc::interrupted() {
                    "interrupted".into()
                } else if kill_at.is_some() {
                    format!(
                        "killed after {:.1} s (test hook SHOAL_SWEEP_TEST_KILL)",
                        t0.elapsed().as_secs_f64()
                    )
                } else {
                    format!(
                        "killed: no result within the {} timeout",
                        fmt_duration(timeout)
                    )
                };
                e
            }
        };
        out.wall_seconds = t0.elapsed().as_secs_f64();
        out.stalls = running.stop();
        let stdout = proc::drain(&srx, Duration::from_secs(5));
        out.json = stdout
            .iter()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok());
        if out.error.is_empty() {
            match &out.json {
                Some(j) if j["status"] == "ok" && exit.success() => {}
                Some(j) => {
                    out.error = j["error"].as_str().unwrap_or("failed").to_string();
                    if out.error.is_empty() {
                        out.error = format!("shoal send: {}", exit.describe());
                    }
                    if j["error"]
                        .as_str()
                        .is_some_and(|e| e.contains("timed out") || e.contains("timeout"))
                    {
                        out.timed_out = true;
                    }
                }
                None => {
                    out.error = format!(
                        "shoal send printed no result ({}): {}",
                        exit.describe(),
                        proc::tail_of(&self.log(order, "send"), 300)
                    );
                }
            }
        }
        out.exit = Some(exit);

        // The receiver ends by itself after its one run; give it a moment, then end it.
        if let Some((mut p, rx)) = receiver {
            let grace = if out.error.is_empty() { 20 } else { 2 };
            let exit = p
                .wait_until(Instant::now() + Duration::from_secs(grace))
                .unwrap_or_else(|| p.kill(Duration::from_secs(1)));
            out.receiver_cpu_seconds = Some(exit.cpu_seconds);
            out.receiver_report = rx
                .try_iter()
                .filter(|l| l.starts_with("run "))
                .collect::<Vec<_>>()
                .join(" | ");
        }
        Ok(out)
    }

    pub fn baseline_transfer(
        &self,
        order: usize,
        cfg: &Config,
        payload: &Payload,
        dest: &Path,
        timeout: Duration,
    ) -> Result<Outcome> {
        let l = self
            .link
            .as_ref()
            .context("baseline arm without a local link")?;
        std::fs::create_dir_all(dest)?;
        // tar-tcp's receiving end, started (and listening) before the clock starts.
        let mut unpacker: Option<Proc> = None;
        let (pipeline, namespace) = match cfg.arm {
            // No network: the local file-system bound the 1 Gbit/s target is set
            // against, measured in the same sweep as the arms it is compared with.
            Arm::TarLocal => (baseline::tar_local(&payload.root, dest), None),
            Arm::TarTcp => {
                unpacker =
                    Some(self.start_tar_tcp_receiver(order, &l.rcv_ns, &l.rcv_addr, dest)?);
                (
                    baseline::tar_tcp_sender(&payload.root, &l.rcv_addr, baseline::TAR_TCP_PORT),
                    Some(l.snd_ns.as_str()),
                )
            }
            Arm::Rclone => {
                let sshd = self.sshd.as_ref().context("rclone without sshd")?;
                let src = &payload.root;
                (
                    rclone::local(sshd, cfg, src, &l.rcv_addr, dest),
                    Some(l.snd_ns.as_str()),
                )
            }
            _ => {
                let sshd = self.sshd.as_ref().context("baseline arm without sshd")?;
                let batch = self.logs.join(format!("{order:05}-sftp-batch"));
                (
                    sshd.command(cfg.arm, &payload.root, dest, &batch)?,
                    Some(l.snd_ns.as_str()),
                )
            }
        };
        let mut out = Outcome {
            command: pipeline.clone(),
            ..Default::default()
        };
        let mut cmd = Command::new("bash");
        cmd.args(["-o", "pipefail", "-c", &pipeline])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.log(order, cfg.arm.name()))?);
        let t0 = Instant::now();
        let mut p = Proc::spawn(&mut cmd, namespace, cfg.arm.name())?;
        let kill_at = self.hooks.kill_after(order).map(|d| t0 + d);
        let deadline = kill_at.unwrap_or(t0 + timeout).min(t0 + timeout);
        let mut killed = false;
        let exit = match p.wait_until(deadline) {
            Some(e) => e,
            None => {
                killed = true;
                p.kill(Duration::from_millis(500))
            }
        };
        // tar-tcp is done when the receiving tar has written the last file, not when the
        // sending side has handed its last byte to the kernel.
        let mut unpacker_exit = None;
        if let Some(mut u) = unpacker {
            let e = if killed || !exit.success() {
                u.wait_until(Instant::now() + Duration::from_secs(2))
                    .unwrap_or_else(|| u.kill(Duration::from_millis(500)))
            } else {
                match u.wait_until(deadline) {
                    Some(e) => e,
                    None => {
                        killed = true;
                        u.kill(Duration::from_millis(500))
                    }
                }
            };
            unpacker_exit = Some(e);
        }
        if killed {
            out.timed_out = true;
            out.error = proc::killed_error(t0.elapsed(), timeout);
        }
        out.wall_seconds = t0.elapsed().as_secs_f64();
        if out.timed_out {
            // Let the receiving side finish the writes already under way before counting.
            std::thread::sleep(Duration::from_secs(1));
        }
        if out.error.is_empty() && !exit.success() {
            out.error = format!(
                "{} {}: {}",
                cfg.arm,
                exit.describe(),
                proc::tail_of(&self.log(order, cfg.arm.name()), 300)
            );
        }
        if let Some(u) = &unpacker_exit {
            if out.error.is_empty() && !u.success() {
                out.error = format!(
                    "tar-tcp receiver {}: {}",
                    u.describe(),
                    proc::tail_of(&self.log(order, "tar-tcp-receiver"), 300)
                );
            }
            if u.max_rss_bytes > 0 {
                out.receiver_peak_rss_bytes = Some(u.max_rss_bytes);
                out.receiver_cpu_seconds = Some(u.cpu_seconds);
            }
        }
        out.exit = Some(exit);
        Ok(out)
    }

    /// Starts the `tar-tcp` receiver in `ns` and waits (at most 5 s) until it listens.
    pub fn start_tar_tcp_receiver(
        &self,
        order: usize,
        ns: &str,
        addr: &str,
        dest: &Path,
    ) -> Result<Proc> {
        let log = self.log(order, "tar-tcp-receiver");
        let mut cmd = Command::new("bash");
        cmd.args([
            "-o",
            "pipefail",
            "-c",
            &baseline::tar_tcp_receiver(dest, addr, baseline::TAR_TCP_PORT),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?);
        let mut p = Proc::spawn(&mut cmd, Some(ns), "tar-tcp receiver (socat | tar)")?;
        let give_up = Instant::now() + Duration::from_secs(5);
        loop {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            if said.contains(baseline::TAR_TCP_LISTENING) {
                return Ok(p);
            }
            if let Some(e) = p.wait_until(Instant::now() + Duration::from_millis(20)) {
                bail!(
                    "tar-tcp receiver {} before listening (is socat installed? scripts/setup.sh): {}",
                    e.describe(),
                    proc::tail_of(&log, 300)
                );
            }
            if Instant::now() >= give_up {
                p.kill(Duration::from_millis(500));
                bail!(
                    "tar-tcp receiver not listening on {addr}:{} after 5 s: {}",
                    baseline::TAR_TCP_PORT,
                    proc::tail_of(&log, 300)
                );
            }
        }
    }
}
