//! The state file that `up` writes and `down`, `status`, `check` and the sweep engine read:
//! `/run/shoal/link-NAME.json`. It holds the settings, the sysctls in effect and the
//! forwarder's PID, so `down` ends exactly that process.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::tun::Offload;

/// Run-time files live on tmpfs: they describe kernel objects that do not survive a reboot.
pub const RUN_DIR: &str = "/run/shoal";

pub fn state_path(name: &str) -> PathBuf {
    PathBuf::from(RUN_DIR).join(format!("link-{name}.json"))
}

pub fn stats_path(name: &str) -> PathBuf {
    PathBuf::from(RUN_DIR).join(format!("link-{name}.stats.json"))
}

/// The forwarder's configuration (`ipc::ForwarderConfig`, JSON), written by `up`.
pub fn forwarder_config_path(name: &str) -> PathBuf {
    PathBuf::from(RUN_DIR).join(format!("link-{name}.forwarder.json"))
}

pub fn log_path(name: &str) -> PathBuf {
    PathBuf::from(RUN_DIR).join(format!("link-{name}.log"))
}

/// Name of the sender-side namespace.
pub fn snd_ns(name: &str) -> String {
    format!("{name}-snd")
}

/// Name of the receiver-side namespace.
pub fn rcv_ns(name: &str) -> String {
    format!("{name}-rcv")
}

/// Link names become namespace names (`NAME-snd`) and appear in file names, so keep them
/// short and plain: 1–11 of `[A-Za-z0-9_-]`, so `NAME-snd` fits in an interface name too.
pub fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 11 {
        bail!("link name {name:?} must be 1 to 11 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        bail!("link name {name:?} may hold only letters, digits, '-' and '_'");
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Tun,
    Netem,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Tun => "tun",
            Backend::Netem => "netem",
        })
    }
}

/// Socket-buffer sysctls in effect for the link (each value as the kernel prints it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sysctls {
    pub snd_tcp_rmem: String,
    pub snd_tcp_wmem: String,
    pub rcv_tcp_rmem: String,
    pub rcv_tcp_wmem: String,
    /// Global (host-wide) caps for SO_RCVBUF / SO_SNDBUF.
    pub rmem_max: String,
    pub wmem_max: String,
}

/// Everything `up` set up, as recorded in the state file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkState {
    pub name: String,
    pub backend: Backend,
    pub snd_ns: String,
    pub rcv_ns: String,
    /// Interface name on both sides (TUN or veth).
    pub device: String,
    pub snd_addr: String,
    pub rcv_addr: String,
    pub prefix_len: u8,
    pub rtt_ns: u64,
    /// sender → receiver.
    pub rate_bps: u64,
    /// receiver → sender.
    pub down_rate_bps: u64,
    /// The queue as given (`1bdp`, `375000`).
    pub queue_spec: String,
    /// Drop-tail limit of the sender → receiver queue.
    pub queue_bytes: u64,
    /// Drop-tail limit of the receiver → sender queue.
    pub down_queue_bytes: u64,
    /// Random loss probability per packet and direction (fraction).
    pub loss: f64,
    pub mtu: u32,
    pub seed: u64,
    /// Offloads on the TUN devices (all false for netem).
    pub offload: Offload,
    /// Whether the forwarder holds /dev/cpu_dma_latency at 0 (idle CPUs poll).
    #[serde(default)]
    pub pm_qos: bool,
    pub sysctls: Sysctls,
    /// The TUN forwarder daemon, if any.
    pub forwarder_pid: Option<u32>,
    pub created_unix_s: u64,
}

impl LinkState {
    pub fn load(name: &str) -> Result<LinkState> {
        let p = state_path(name);
        let text = std::fs::read_to_string(&p)
            .with_context(|| format!("no link named {name:?} ({} unreadable)", p.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))
    }

    pub fn save(&self) -> Result<()> {
        std::fs::create_dir_all(RUN_DIR).with_context(|| format!("creating {RUN_DIR}"))?;
        let p = state_path(&self.name);
        let tmp = p.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &p).with_context(|| format!("renaming to {}", p.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name("shoal").is_ok());
        assert!(validate_name("t-1_a").is_ok());
        assert!(validate_name("").is_err());
        assert!(validate_name("waytoolongname").is_err());
        assert!(validate_name("a/b").is_err());
        assert_eq!(snd_ns("shoal"), "shoal-snd");
        assert!(snd_ns("abcdefghijk").len() <= 15);
    }
}
