//! The `iperf3` arm: one bulk TCP flow of the payload's byte count (`-n BYTES`) with the
//! arm's controller (`-C`), from the sender namespace to `iperf3 -s -1` in the receiver
//! namespace (across two hosts: started on the receiving host through `[link] ssh`). It moves
//! no files: its row is the path's one-flow ceiling, iperf3's received rate from its JSON,
//! and verification does not apply (`verified` empty, `verify_result` says why).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use shoal_matrix::iperf3::{client_argv, parse, server_argv, Flow, PORT};

use crate::baseline::{command_line, shell_quote};
use crate::context::Sweep;
use crate::payload::Payload;
use crate::transfer::remote_baseline::ssh_words;
use crate::transfer::Outcome;
use shoal_hostctl::proc::{self, Proc};
use shoal_matrix::axis;
use shoal_matrix::linkspec::LinkSpec;
use shoal_matrix::matrix::Config;
use shoal_matrix::remote_arms::host_of;
use shoal_report::columns::{col, f3, Row};

/// What the row's `verify_result` says: no files moved, so there is nothing to verify.
pub const NOT_APPLICABLE: &str =
    "not applicable: iperf3 moves no files (one TCP flow of the payload's byte count)";

/// The flow's columns: its rate (MB/s, 10^6 bytes a second, as every arm's), the bytes the
/// server received, retransmits and the controller iperf3 says the flow ran.
pub fn put_flow(out: &mut Outcome, f: &Flow) {
    out.cols
        .push((col::MB_PER_S, f3(f.bits_per_second / 8.0 / 1e6)));
    out.cols
        .push((col::BYTES_READY, f.bytes_received.to_string()));
    if let Some(r) = f.retransmits {
        out.cols.push((col::RETRANSMITS, r.to_string()));
    }
    if let Some(cc) = &f.cc {
        out.cols.push((col::CC, cc.clone()));
    }
}

/// The verdict of a run that moves no files: ok when the flow completed, and verification
/// marked as not applicable (never a faked match).
pub fn put_verdict(row: &mut Row, out: &Outcome) {
    row.set(col::VERIFY_RESULT, NOT_APPLICABLE);
    row.set(col::FILES, "");
    let ok = out.error.is_empty();
    row.set(col::STATUS, if ok { "ok" } else { "failed" });
    row.set(col::ERROR, out.error.clone());
    if !ok {
        row.set(col::MB_PER_S, "0");
    }
}

impl Sweep<'_> {
    /// One iperf3 run: the server listening before the clock starts, then the client.
    pub fn iperf3_transfer(
        &self,
        order: usize,
        cfg: &Config,
        payload: &Payload,
        timeout: Duration,
    ) -> Result<Outcome> {
        let cc = cfg.get(axis::CC).map(|v| v.text());
        let log = self.log(order, "iperf3-server");
        // The server: in the receiver namespace, or on the receiving host through ssh (ended
        // by `timeout` there should this side lose it).
        let (mut server_cmd, ns, addr, client_ns) = match (&self.link, &self.matrix.link) {
            (Some(l), _) => {
                let mut c = Command::new("iperf3");
                c.args(server_argv(Some(&l.rcv_addr)));
                (
                    c,
                    Some(l.rcv_ns.as_str()),
                    l.rcv_addr.clone(),
                    Some(l.snd_ns.as_str()),
                )
            }
            (None, LinkSpec::Remote(r)) => {
                let target = r
                    .ssh
                    .as_deref()
                    .context("iperf3 across hosts needs [link] ssh")?;
                let limit = (timeout + Duration::from_secs(60)).as_secs();
                let remote = format!("timeout {limit} iperf3 {}", server_argv(None).join(" "));
                let mut c = Command::new("bash");
                c.args([
                    "-c",
                    &format!(
                        "exec {} {} {}",
                        ssh_words(&r.ssh_opts),
                        shell_quote(target),
                        shell_quote(&remote)
                    ),
                ]);
                (c, None, host_of(&r.receiver).to_string(), None)
            }
            (None, _) => bail!("iperf3 without a link or a remote receiver"),
        };
        server_cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log)?);
        let mut out = Outcome {
            receiver_report: command_line(&server_cmd),
            ..Default::default()
        };
        out.cols.push((col::RECEIVER, format!("{addr}:{PORT}")));
        out.cols.push((col::TLS, "false".into()));
        let mut server = Proc::spawn(&mut server_cmd, ns, "iperf3 -s")?;
        let said = proc::lines(server.child.stdout.take().expect("piped"));
        let give_up = Instant::now() + Duration::from_secs(30);
        loop {
            match said.recv_timeout(Duration::from_millis(50)) {
                Ok(l) if l.contains("listening") => break,
                Ok(_) => {}
                Err(_) => {
                    if let Some(e) = server.wait_until(Instant::now()) {
                        bail!(
                            "iperf3 -s {} before listening (is iperf3 installed? scripts/setup.sh): {}",
                            e.describe(),
                            proc::tail_of(&log, 300)
                        );
                    }
                    if Instant::now() >= give_up {
                        server.kill(Duration::from_millis(500));
                        bail!(
                            "iperf3 -s not listening after 30 s: {}",
                            proc::tail_of(&log, 300)
                        );
                    }
                }
            }
        }

        let json = self.logs.join(format!("{order:05}-iperf3.json"));
        let mut cmd = Command::new("iperf3");
        cmd.args(client_argv(&addr, payload.bytes, cc.as_deref()))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&json)?)
            .stderr(std::fs::File::create(self.log(order, "iperf3"))?);
        out.command = command_line(&cmd);
        let t0 = Instant::now();
        let mut client = Proc::spawn(&mut cmd, client_ns, "iperf3 -c")?;
        let kill_at = self.hooks.kill_after(order).map(|d| t0 + d);
        let deadline = kill_at.unwrap_or(t0 + timeout).min(t0 + timeout);
        let exit = match client.wait_until(deadline) {
            Some(e) => e,
            None => {
                out.timed_out = true;
                out.error = proc::killed_error(t0.elapsed(), timeout);
                client.kill(Duration::from_millis(500))
            }
        };
        out.wall_seconds = t0.elapsed().as_secs_f64();
        let server_exit = server
            .wait_until(Instant::now() + Duration::from_secs(if out.timed_out { 1 } else { 5 }))
            .unwrap_or_else(|| server.kill(Duration::from_millis(500)));
        out.receiver_peak_rss_bytes =
            (ns.is_some() && server_exit.max_rss_bytes > 0).then_some(server_exit.max_rss_bytes);
        out.receiver_cpu_seconds = ns.is_some().then_some(server_exit.cpu_seconds);
        if out.error.is_empty() {
            match parse(&std::fs::read_to_string(&json).unwrap_or_default()) {
                Ok(f) => {
                    // The row's time is the flow's, as the server measured it.
                    out.wall_seconds = f.seconds;
                    put_flow(&mut out, &f);
                }
                Err(e) => out.error = format!("{e:#} ({})", exit.describe()),
            }
        }
        out.exit = Some(exit);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_iperf3s_received_rate_in_mb_per_s() {
        let f = Flow {
            bytes_received: 268173312,
            seconds: 4.13,
            bits_per_second: 519464527.2,
            retransmits: Some(17),
            cc: Some("bbr".into()),
        };
        let mut out = Outcome::default();
        put_flow(&mut out, &f);
        assert!(out.cols.contains(&(col::MB_PER_S, "64.933".into())));
        assert!(out.cols.contains(&(col::CC, "bbr".into())));
    }
}
