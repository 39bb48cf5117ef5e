//! Baseline arms across two hosts: `tar-tcp` against the receiving `tar -x` that a receiver
//! started with `--allow-baselines` runs for the run (its port from the control channel), and
//! `tar-ssh`, `rsync-ssh`, `sftp` over the user's own ssh login (`[link] ssh`) into the run
//! folder the control channel prepared. Each is verified afterwards like a Shoal run: the
//! receiving host hashes the folder from its disk.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use shoal_proto::control::{Reply, Request};

use crate::baseline::{shell_quote, tar_tcp_sender};
use crate::context::Sweep;
use crate::payload::Payload;
use crate::transfer::Outcome;
use shoal_hostctl::proc::{self, Exit, Proc};
use shoal_matrix::arm::Arm;
use shoal_matrix::linkspec::{LinkSpec, RemoteReceiver};
use shoal_matrix::matrix::Config;
use shoal_matrix::remote_arms::host_of;
use shoal_remote::Remote;
use shoal_report::columns::col;

/// The ssh client and its options as one shell word list: `ssh -o BatchMode=yes OPTS…`
/// (batch mode: a sweep must fail, not wait for a password).
pub(crate) fn ssh_words(opts: &[String]) -> String {
    ["ssh", "-o", "BatchMode=yes"]
        .into_iter()
        .map(String::from)
        .chain(opts.iter().cloned())
        .map(|w| shell_quote(&w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The shell pipeline of an ssh arm copying the contents of `src` into the existing folder
/// `dest` (as the receiving host names it) through `target`'s login.
pub fn ssh_command(
    arm: Arm,
    opts: &[String],
    target: &str,
    src: &Path,
    dest: &str,
    batch: &Path,
) -> Result<String> {
    let q = |p: &Path| shell_quote(&p.display().to_string());
    let target = shell_quote(target);
    Ok(match arm {
        Arm::TarSsh => format!(
            "tar -C {} -cf - . | {} {target} {}",
            q(src),
            ssh_words(opts),
            shell_quote(&format!("tar -C {} -xf -", shell_quote(dest)))
        ),
        Arm::RsyncSsh => format!(
            "rsync -a -e {} {}/ {target}:{}/",
            shell_quote(&ssh_words(opts)),
            q(src),
            shell_quote(dest)
        ),
        Arm::Sftp => {
            std::fs::write(
                batch,
                format!(
                    "put -r \"{}/.\" \"{}\"\n",
                    src.display().to_string().replace('"', "\\\""),
                    dest.replace('"', "\\\"")
                ),
            )
            .with_context(|| format!("writing {}", batch.display()))?;
            let sftp = ssh_words(opts).replacen("ssh", "sftp", 1);
            format!("{sftp} -b {} {target}", q(batch))
        }
        other => bail!("{other} does not run over ssh"),
    })
}

/// Logs in once through `[link] ssh` before the first run, so that a wrong login, key or
/// host key stops the sweep with ssh's own words instead of failing every run.
pub fn probe_ssh(r: &RemoteReceiver) -> Result<()> {
    let Some(target) = &r.ssh else {
        return Ok(());
    };
    let cmd = format!("{} {} true", ssh_words(&r.ssh_opts), shell_quote(target));
    let mut c = Command::new("bash");
    c.args(["-c", &cmd])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut p = Proc::spawn(&mut c, None, "ssh")?;
    let err = p.child.stderr.take().map(proc::lines);
    let exit = p
        .wait_until(Instant::now() + Duration::from_secs(30))
        .unwrap_or_else(|| p.kill(Duration::from_millis(500)));
    if !exit.success() {
        let said = err
            .map(|rx| proc::drain(&rx, Duration::from_secs(1)).join(" "))
            .unwrap_or_default();
        bail!(
            "[link] ssh {target:?}: `{cmd}` failed ({}): {said} — the ssh arms log in with it (docs/two-hosts.md)",
            exit.describe()
        );
    }
    Ok(())
}

/// The sending host's default TCP congestion controller: what the baselines' TCP uses.
fn default_cc() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Stops a `tar-tcp` run's receiving tar on the receiving host (the run failed here); what
/// it said, for the row.
fn stop_tar(control: &Remote, run_id: &str) -> String {
    let stop = Request::TarTcpWait {
        run_id: run_id.into(),
        stop: true,
    };
    match control
        .post(&stop, Duration::from_secs(30))
        .and_then(|p| p.reply())
    {
        Ok(r) => r.facts.get("report").cloned().unwrap_or_default(),
        Err(e) => format!("{e:#}"),
    }
}

impl Sweep<'_> {
    /// One baseline run into the remote receiver's prepared folder `folder` (run `run_id`).
    pub fn remote_baseline_transfer(
        &self,
        order: usize,
        cfg: &Config,
        payload: &Payload,
        run_id: &str,
        folder: &str,
        timeout: Duration,
    ) -> Result<Outcome> {
        let remote = self.remote.as_ref().context("no remote receiver")?;
        let LinkSpec::Remote(spec) = &self.matrix.link else {
            bail!("a remote baseline without a remote receiver");
        };
        let mut out = Outcome::default();
        out.cols.push((col::CC, default_cc()));
        out.cols
            .push((col::CC_IMPL, shoal_report::legacy::LINUX.into()));
        // tar-tcp: the receiving end listens before the clock starts, and the question "when
        // did it finish" is already on its way, on a connection opened before the clock.
        let mut waiting = None;
        let pipeline = match cfg.arm {
            Arm::TarTcp => {
                let start = remote
                    .control
                    .tar_tcp_start(run_id, timeout + Duration::from_secs(30))?;
                let host = host_of(&spec.receiver);
                out.cols
                    .push((col::RECEIVER, format!("{host}:{}", start.port)));
                out.receiver_report = format!(
                    "{} (listening on {})",
                    start.facts.get("command").map_or("", String::as_str),
                    start.facts.get("listen").map_or("", String::as_str)
                );
                let wait = Request::TarTcpWait {
                    run_id: run_id.into(),
                    stop: false,
                };
                let posted = match remote
                    .control
                    .post(&wait, timeout + Duration::from_secs(60))
                {
                    Ok(p) => p,
                    Err(e) => {
                        stop_tar(&remote.control, run_id);
                        return Err(e);
                    }
                };
                let (tx, rx) = mpsc::channel();
                std::thread::spawn(move || {
                    let _ = tx.send(posted.reply());
                });
                waiting = Some(rx);
                tar_tcp_sender(&payload.root, host, start.port)
            }
            Arm::Rclone => {
                let target = spec.ssh.as_deref().context("no [link] ssh")?;
                out.cols.push((col::RECEIVER, target.to_string()));
                super::rclone::remote(spec, target, cfg, &payload.root, folder)?
            }
            a if a.over_ssh() => {
                let target = spec.ssh.as_deref().context("no [link] ssh")?;
                out.cols.push((col::RECEIVER, target.to_string()));
                let batch = self.logs.join(format!("{order:05}-sftp-batch"));
                ssh_command(a, &spec.ssh_opts, target, &payload.root, folder, &batch)?
            }
            other => bail!("{other} cannot run across hosts"),
        };
        out.command = pipeline.clone();
        let log = self.log(order, cfg.arm.name());
        let mut cmd = Command::new("bash");
        cmd.args(["-o", "pipefail", "-c", &pipeline])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?);
        let t0 = Instant::now();
        let mut p = match Proc::spawn(&mut cmd, None, cfg.arm.name()) {
            Ok(p) => p,
            Err(e) => {
                if waiting.is_some() {
                    stop_tar(&remote.control, run_id);
                }
                return Err(e);
            }
        };
        let kill_at = self.hooks.kill_after(order).map(|d| t0 + d);
        let deadline = kill_at.unwrap_or(t0 + timeout).min(t0 + timeout);
        let (exit, mut killed) = match p.wait_until(deadline) {
            Some(e) => (e, false),
            None => (p.kill(Duration::from_millis(500)), true),
        };
        if let Some(rx) = waiting {
            let reply = if killed || !exit.success() {
                // The sending side failed: end the receiving tar now, then collect its report.
                let said = stop_tar(&remote.control, run_id);
                rx.recv_timeout(Duration::from_secs(10))
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("{said}")))
            } else {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(r) => r,
                    Err(_) => {
                        killed = true;
                        let said = stop_tar(&remote.control, run_id);
                        Err(anyhow::anyhow!("the receiving tar did not finish: {said}"))
                    }
                }
            };
            out.receiver_report = match reply {
                Ok(Reply { facts, .. }) => facts.get("report").cloned().unwrap_or_default(),
                Err(e) => {
                    let e = format!("{e:#}");
                    if !killed && exit.success() {
                        out.error = e.clone();
                    }
                    e
                }
            };
        }
        // The clock stops when the sending pipeline ended and, for tar-tcp, when the receiving
        // host said its tar had exited.
        out.wall_seconds = t0.elapsed().as_secs_f64();
        self.finish(&mut out, cfg.arm, exit, killed, timeout, &log);
        Ok(out)
    }

    /// The outcome's error for a run killed at its limit or a pipeline that failed.
    fn finish(
        &self,
        out: &mut Outcome,
        arm: Arm,
        exit: Exit,
        killed: bool,
        timeout: Duration,
        log: &Path,
    ) {
        if killed {
            out.timed_out = true;
            out.error = proc::killed_error(Duration::from_secs_f64(out.wall_seconds), timeout);
        } else if !exit.success() {
            out.error = format!("{arm} {}: {}", exit.describe(), proc::tail_of(log, 300));
        }
        out.exit = Some(exit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_pipelines_name_the_login_and_the_prepared_folder() {
        let opts = vec!["-i".to_string(), "/k/id key".to_string()];
        let t = tempfile::tempdir().unwrap();
        let batch = t.path().join("batch");
        let src = Path::new("/src");
        let tar = ssh_command(Arm::TarSsh, &opts, "me@b", src, "/in/0a", &batch).unwrap();
        assert_eq!(
            tar,
            "tar -C /src -cf - . | ssh -o BatchMode=yes -i '/k/id key' me@b 'tar -C /in/0a -xf -'"
        );
        let rsync = ssh_command(Arm::RsyncSsh, &opts, "me@b", src, "/in/0a", &batch).unwrap();
        assert_eq!(
            rsync,
            "rsync -a -e 'ssh -o BatchMode=yes -i '\\''/k/id key'\\''' /src/ me@b:/in/0a/"
        );
        let sftp = ssh_command(Arm::Sftp, &opts, "me@b", src, "/in/0a", &batch).unwrap();
        assert!(sftp.starts_with("sftp -o BatchMode=yes -i '/k/id key' -b "));
        assert!(sftp.ends_with(" me@b"));
        assert_eq!(
            std::fs::read_to_string(&batch).unwrap(),
            "put -r \"/src/.\" \"/in/0a\"\n"
        );
        assert!(ssh_command(Arm::TarTcp, &opts, "me@b", src, "/in", &batch).is_err());
    }
}
