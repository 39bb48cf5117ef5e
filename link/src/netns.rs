//! Network namespaces: creating and removing them, running code or commands inside them,
//! and their per-namespace sysctls.
//!
//! `setns(CLONE_NEWNET)` switches only the calling thread, and sockets or TUN fds stay in the
//! namespace where they were created. So code that needs a namespace runs on a short-lived
//! thread that enters it, creates its fds and hands them back ([`run_in`]); the caller's own
//! thread never changes namespace.

use std::fs::File;
use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rustix::thread::LinkNameSpaceType;

/// Where `ip netns` keeps its named namespaces.
pub fn netns_path(ns: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(ns)
}

pub fn exists(ns: &str) -> bool {
    netns_path(ns).exists()
}

/// Runs `ip ARGS…`, failing with its stderr on a non-zero exit.
pub fn ip(args: &[&str]) -> Result<String> {
    run_tool("ip", args)
}

/// Runs a tool, returning stdout, failing with the command line and stderr.
pub fn run_tool(tool: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {tool} (is it installed?)"))?;
    if !out.status.success() {
        bail!(
            "`{tool} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn add(ns: &str) -> Result<()> {
    ip(&["netns", "add", ns]).map(|_| ())
}

/// A process whose network namespace is a given named one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NsProcess {
    pub pid: u32,
    /// The program's name (`/proc/PID/comm`).
    pub comm: String,
}

impl std::fmt::Display for NsProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.pid, self.comm)
    }
}

/// The processes living in namespace `ns` (their `/proc/PID/ns/net` is the namespace's
/// inode), this process excluded. Processes that exit while being read are skipped.
pub fn processes_in(ns: &str) -> Result<Vec<NsProcess>> {
    use std::os::unix::fs::MetadataExt;
    let target =
        std::fs::metadata(netns_path(ns)).with_context(|| format!("reading namespace {ns}"))?;
    let me = std::process::id();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").context("listing /proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(m) = std::fs::metadata(entry.path().join("ns/net")) else {
            continue;
        };
        if m.ino() == target.ino() && m.dev() == target.dev() {
            let comm = std::fs::read_to_string(entry.path().join("comm"))
                .map(|c| c.trim().to_string())
                .unwrap_or_default();
            out.push(NsProcess { pid, comm });
        }
    }
    Ok(out)
}

pub fn del(ns: &str) -> Result<()> {
    ip(&["netns", "del", ns]).map(|_| ())
}

fn open_ns(ns: &str) -> io::Result<File> {
    File::open(netns_path(ns))
        .map_err(|e| io::Error::new(e.kind(), format!("network namespace {ns}: {e}")))
}

/// Moves the *calling thread* into namespace `ns`. Meant for threads that live in that
/// namespace for good; prefer [`run_in`] elsewhere.
pub fn enter_current_thread(ns: &str) -> Result<()> {
    let f = open_ns(ns)?;
    // Affects only this thread's network namespace.
    rustix::thread::move_into_link_name_space(f.as_fd(), Some(LinkNameSpaceType::Network))
        .map_err(io::Error::from)
        .with_context(|| format!("setns into {ns}"))
}

/// Runs `f` on a fresh thread inside namespace `ns` and returns its result. Sockets and TUN
/// devices that `f` creates belong to `ns` and may be used from any thread afterwards.
pub fn run_in<T, F>(ns: &str, f: F) -> Result<T>
where
    T: Send,
    F: FnOnce() -> Result<T> + Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            enter_current_thread(ns)?;
            f()
        })
        .join()
        .map_err(|_| anyhow::anyhow!("thread in namespace {ns} panicked"))?
    })
}

/// Makes `cmd` enter namespace `ns` between fork and exec.
pub fn command_in_netns(ns: &str, cmd: &mut Command) -> io::Result<()> {
    shoal_sys::process::setns_before_exec(cmd, open_ns(ns)?);
    Ok(())
}

/// Spawns `cmd` inside network namespace `ns` (e.g. `"shoal-snd"`).
pub fn spawn_in_netns(ns: &str, cmd: &mut Command) -> io::Result<Child> {
    command_in_netns(ns, cmd)?;
    cmd.spawn()
}

fn sysctl_path(key: &str) -> PathBuf {
    PathBuf::from("/proc/sys").join(key.replace('.', "/"))
}

/// Reads a sysctl as the calling thread's namespace sees it.
pub fn read_sysctl(key: &str) -> Result<String> {
    let v = std::fs::read_to_string(sysctl_path(key)).with_context(|| format!("reading {key}"))?;
    Ok(v.split_whitespace().collect::<Vec<_>>().join(" "))
}

pub fn write_sysctl(key: &str, value: &str) -> Result<()> {
    std::fs::write(sysctl_path(key), value).with_context(|| format!("setting {key} = {value}"))
}

/// Reads a sysctl inside namespace `ns`.
pub fn read_sysctl_in(ns: &str, key: &str) -> Result<String> {
    let key = key.to_string();
    run_in(ns, move || read_sysctl(&key))
}

/// Sets a per-namespace sysctl inside `ns` and returns the value read back.
pub fn set_sysctl_in(ns: &str, key: &str, value: &str) -> Result<String> {
    let (key, value) = (key.to_string(), value.to_string());
    run_in(ns, move || {
        write_sysctl(&key, &value)?;
        read_sysctl(&key)
    })
}

/// One TCP connection from a socket in `snd_ns` to a listener on `rcv_ip` in `rcv_ns`:
/// `(sender, receiver)`, both blocking. Accepting is bounded by 5 s.
pub(crate) fn tcp_pair(snd_ns: &str, rcv_ns: &str, rcv_ip: &str) -> Result<(TcpStream, TcpStream)> {
    let ip = rcv_ip.to_string();
    let listener = run_in(rcv_ns, move || {
        TcpListener::bind((ip.as_str(), 0)).context("binding the bulk listener")
    })?;
    let dst = listener.local_addr()?;
    let sender = run_in(snd_ns, move || {
        TcpStream::connect_timeout(&dst, Duration::from_secs(5)).context("connecting bulk flow")
    })?;
    listener.set_nonblocking(true)?;
    let t_accept = Instant::now();
    loop {
        match listener.accept() {
            Ok((receiver, _)) => {
                receiver.set_nonblocking(false)?;
                return Ok((sender, receiver));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if t_accept.elapsed() > Duration::from_secs(5) {
                    bail!("bulk flow not accepted within 5 s");
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e).context("accepting bulk flow"),
        }
    }
}
