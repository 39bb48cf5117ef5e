//! The receiving end of the `tar-tcp` baseline across two hosts (`recv --control
//! --allow-baselines`): for a run prepared over the control channel, one listening socket on
//! an ephemeral port, bound to this host's address towards the sweep's host, takes exactly one
//! connection from that host and feeds it to `tar -x` in the run's folder. Nothing the peer
//! sends is executed: the command line is fixed here, the peer only supplies the archive's
//! bytes (GNU tar refuses absolute names and `..`, and delays symbolic links that point out).
//! Every run has a time limit: past it, or when the sweep says the run failed, tar is killed
//! and reaped.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use shoal_pipeline::writer::open_subfolder;
use std::os::fd::AsRawFd;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::process::Command;
use tokio::sync::{oneshot, watch};

/// Longest limit a sweep may ask for (a run longer than this is not a baseline).
const MAX_LIMIT: Duration = Duration::from_secs(24 * 3600);
/// What a receiver without `--allow-baselines` answers (the sweep looks for the flag's name).
pub(crate) const NOT_ALLOWED: &str =
    "this receiver does not run baselines (start it with --control --allow-baselines)";
/// Bytes of tar's error output kept for the report.
const STDERR_KEEP: usize = 2048;

/// How one `tar-tcp` run ended on this host.
#[derive(Debug, Clone, Default)]
pub(crate) struct TarReport {
    pub ok: bool,
    /// What happened, for the sweep's row: the exit, bytes, peer and seconds, or the cause.
    pub summary: String,
}

/// One run's receiving tar: its result once known, and the way to stop it.
struct Pending {
    result: watch::Receiver<Option<TarReport>>,
    stop: Option<oneshot::Sender<()>>,
}

/// The `tar-tcp` runs this receiver serves, by run id.
#[derive(Default)]
pub(crate) struct Baselines {
    runs: Mutex<HashMap<[u8; 16], Pending>>,
}

/// The fixed command that unpacks one run (shown to the sweep, and in `recv`'s log).
pub(crate) fn tar_command(folder: &Path) -> Vec<String> {
    [
        "tar",
        "-x",
        "--no-same-owner",
        "--no-same-permissions",
        "-f",
        "-",
        "-C",
    ]
    .into_iter()
    .map(String::from)
    .chain([folder.display().to_string()])
    .collect()
}

/// This host's address on the route towards `peer`: the address the sweep's host reaches us
/// on (a UDP socket's `connect` only picks the route; nothing is sent).
fn local_address_towards(peer: IpAddr) -> Result<IpAddr> {
    let any: SocketAddr = match peer {
        IpAddr::V4(_) => "0.0.0.0:0".parse().expect("literal"),
        IpAddr::V6(_) => "[::]:0".parse().expect("literal"),
    };
    let sock = std::net::UdpSocket::bind(any).context("cannot open a socket to find a route")?;
    sock.connect(SocketAddr::new(peer, 9))
        .with_context(|| format!("no route towards {peer}"))?;
    Ok(sock.local_addr()?.ip())
}

impl Baselines {
    /// Whether a `tar-tcp` run is still listening or unpacking into `run_id`'s folder.
    pub(crate) fn running(&self, run_id: &[u8; 16]) -> bool {
        self.runs
            .lock()
            .expect("baselines lock")
            .get(run_id)
            .is_some_and(|p| p.result.borrow().is_none())
    }

    /// Starts listening for run `run_id` (folder `folder`), for one connection from `peer`'s
    /// address; returns the address it listens on.
    pub(crate) async fn start(
        &self,
        run_id: [u8; 16],
        folder: PathBuf,
        peer: IpAddr,
        limit: Duration,
    ) -> Result<SocketAddr> {
        if self
            .runs
            .lock()
            .expect("baselines lock")
            .contains_key(&run_id)
        {
            bail!("run {} has a tar-tcp receiver already", hex::encode(run_id));
        }
        let limit = limit.clamp(Duration::from_secs(1), MAX_LIMIT);
        let local = local_address_towards(peer)?;
        let listener = TcpListener::bind(SocketAddr::new(local, 0))
            .await
            .with_context(|| format!("cannot listen on {local}"))?;
        let addr = listener.local_addr()?;
        let (tx, rx) = watch::channel(None);
        let (stop_tx, stop_rx) = oneshot::channel();
        self.runs.lock().expect("baselines lock").insert(
            run_id,
            Pending {
                result: rx,
                stop: Some(stop_tx),
            },
        );
        let name = hex::encode(&run_id[..4]);
        tokio::spawn(async move {
            let report = receive(listener, &folder, peer, limit, stop_rx).await;
            eprintln!(
                "tar-tcp {name} into {}: {}",
                folder.display(),
                report.summary
            );
            let _ = tx.send(Some(report));
        });
        Ok(addr)
    }

    /// Waits for run `run_id`'s tar to end (stopping it first if `stop`), and forgets it.
    pub(crate) async fn wait(&self, run_id: &[u8; 16], stop: bool) -> Result<TarReport> {
        let mut result = {
            let mut runs = self.runs.lock().expect("baselines lock");
            let Some(p) = runs.get_mut(run_id) else {
                bail!("run {} has no tar-tcp receiver", hex::encode(run_id));
            };
            if stop {
                if let Some(s) = p.stop.take() {
                    let _ = s.send(());
                }
            }
            p.result.clone()
        };
        let report = loop {
            if let Some(r) = result.borrow_and_update().clone() {
                break r;
            }
            // The task always sends before it ends; a closed channel means it panicked.
            if result.changed().await.is_err() {
                break TarReport {
                    ok: false,
                    summary: "the tar-tcp receiver ended without a report".into(),
                };
            }
        };
        self.runs.lock().expect("baselines lock").remove(run_id);
        Ok(report)
    }

    /// Stops run `run_id`'s tar, if it has one, and waits until it is reaped.
    pub(crate) async fn stop(&self, run_id: &[u8; 16]) {
        let has = self
            .runs
            .lock()
            .expect("baselines lock")
            .contains_key(run_id);
        if has {
            let _ = self.wait(run_id, true).await;
        }
    }
}

/// Why a run ended before tar did.
enum Cut {
    Limit,
    Stopped,
}

impl Cut {
    fn describe(&self, limit: Duration) -> String {
        match self {
            Cut::Limit => format!("killed at its {} s limit", limit.as_secs()),
            Cut::Stopped => "stopped: the sweep ended the run".into(),
        }
    }
}

/// The whole run: one accepted connection from `peer`, its bytes into `tar -x`, tar's exit.
async fn receive(
    listener: TcpListener,
    folder: &Path,
    peer: IpAddr,
    limit: Duration,
    mut stop: oneshot::Receiver<()>,
) -> TarReport {
    let deadline = tokio::time::Instant::now() + limit;
    let failed = |summary: String| TarReport { ok: false, summary };
    // Only the sweep's host may connect; anyone else is closed and the wait goes on.
    let accepted = loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((s, from)) if from.ip() == peer => break s,
                Ok((_, from)) => eprintln!("tar-tcp: refused a connection from {from} (expected {peer})"),
                Err(e) => return failed(format!("accept failed: {e}")),
            },
            _ = tokio::time::sleep_until(deadline) => {
                return failed(format!("no connection from {peer} within {} s", limit.as_secs()));
            }
            _ = &mut stop => return failed("stopped before any connection".into()),
        }
    };
    // One connection only: nobody else can connect from here on.
    drop(listener);
    let t0 = Instant::now();
    // The run's folder is opened without following a symbolic link swapped in for it, and tar
    // unpacks through that descriptor (as `hash` reads it), so it cannot be sent elsewhere.
    let held = match open_run_folder(folder) {
        Ok(fd) => fd,
        Err(e) => return failed(format!("{e:#}")),
    };
    let through = PathBuf::from(format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        held.as_raw_fd()
    ));
    let argv = tar_command(&through);
    let mut child = match Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot start tar: {e}")),
    };
    let stdin = child.stdin.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let errors = tokio::spawn(keep_tail(stderr));
    let copied = tokio::select! {
        r = feed(accepted, stdin) => Ok(r),
        _ = tokio::time::sleep_until(deadline) => Err(Cut::Limit),
        _ = &mut stop => Err(Cut::Stopped),
    };
    let (bytes, exit) = match copied {
        Ok(bytes) => {
            let exit = tokio::select! {
                e = child.wait() => Ok(e),
                _ = tokio::time::sleep_until(deadline) => Err(Cut::Limit),
                _ = &mut stop => Err(Cut::Stopped),
            };
            (bytes, exit)
        }
        Err(cut) => (Ok(0), Err(cut)),
    };
    let secs = t0.elapsed().as_secs_f64();
    match exit {
        Err(cut) => {
            // Kill and reap before the folder is reported on.
            let _ = child.kill().await;
            failed(cut.describe(limit))
        }
        Ok(Err(e)) => failed(format!("waiting for tar failed: {e}")),
        Ok(Ok(status)) => {
            let tail = errors.await.unwrap_or_default();
            match bytes {
                Ok(n) if status.success() => TarReport {
                    ok: true,
                    summary: format!("tar -x exited 0 after {n} bytes from {peer} in {secs:.3} s"),
                },
                Ok(n) => failed(format!(
                    "tar -x {status} after {n} bytes from {peer}: {}",
                    tail.trim()
                )),
                Err(e) => failed(format!(
                    "the connection from {peer} failed ({e}); tar -x {status}: {}",
                    tail.trim()
                )),
            }
        }
    }
}

fn open_run_folder(folder: &Path) -> Result<std::os::fd::OwnedFd> {
    let name = folder
        .file_name()
        .and_then(|n| n.to_str())
        .context("a run folder has a name")?;
    open_subfolder(folder.parent().unwrap_or(folder), name)
}

/// Copies the connection into tar's input until the sender closes it, then closes tar's input
/// (its end of archive); the bytes copied.
async fn feed(mut from: TcpStream, mut to: tokio::process::ChildStdin) -> std::io::Result<u64> {
    let n = tokio::io::copy(&mut from, &mut to).await?;
    drop(to);
    Ok(n)
}

/// tar's error output: all of it is read (so tar never blocks on it), the last bytes kept.
async fn keep_tail(mut from: tokio::process::ChildStderr) -> String {
    let mut kept = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = from.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&chunk[..n]);
        if kept.len() > STDERR_KEEP {
            kept.drain(..kept.len() - STDERR_KEEP);
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_is_fixed_and_names_only_the_folder() {
        assert_eq!(
            tar_command(Path::new("/d/0123")).join(" "),
            "tar -x --no-same-owner --no-same-permissions -f - -C /d/0123"
        );
    }

    #[test]
    fn the_route_towards_loopback_is_loopback() {
        assert_eq!(
            local_address_towards("127.0.0.1".parse().unwrap()).unwrap(),
            "127.0.0.1".parse::<IpAddr>().unwrap()
        );
    }
}
