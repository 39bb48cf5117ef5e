//! The contract between the link's controller (`up`, `down`, `status`, `blackhole`, `set_loss`)
//! and its forwarder daemon: the configuration file `up` writes for it, the stats file it
//! writes back, the signals that carry requests to it, and how the controller finds it.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::state;

/// What the forwarder daemon needs to run; `up` writes it to the link's run folder
/// (`state::forwarder_config_path`) and starts `shoal link forward --config FILE`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ForwarderConfig {
    pub snd_ns: String,
    pub rcv_ns: String,
    pub device: String,
    pub offload: bool,
    pub up: DirectionConfig,
    pub down: DirectionConfig,
    pub stats_path: PathBuf,
    /// Hold `/dev/cpu_dma_latency` at 0 while running (see `forwarder::hold_cpu_latency_zero`).
    pub pm_qos: bool,
}

impl ForwarderConfig {
    /// The forwarder of link `st`, in raw units.
    pub fn from_state(st: &crate::state::LinkState, offload: bool, pm_qos: bool) -> Self {
        let dir = |rate_bps, queue_bytes, seed| DirectionConfig {
            rate_bps,
            delay_ns: st.rtt_ns / 2,
            queue_bytes,
            loss: st.loss,
            seed,
        };
        ForwarderConfig {
            snd_ns: st.snd_ns.clone(),
            rcv_ns: st.rcv_ns.clone(),
            device: st.device.clone(),
            offload,
            up: dir(st.rate_bps, st.queue_bytes, st.seed),
            // A different stream per direction, still fixed by the one seed.
            down: dir(
                st.down_rate_bps,
                st.down_queue_bytes,
                st.seed ^ 0x5DEE_CE66_D1CE_F00D,
            ),
            stats_path: crate::state::stats_path(&st.name),
            pm_qos,
        }
    }
}

/// Parameters of one direction.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DirectionConfig {
    pub rate_bps: u64,
    pub delay_ns: u64,
    pub queue_bytes: u64,
    pub loss: f64,
    pub seed: u64,
}

/// Both directions' counters, as the forwarder writes them to its stats file.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ForwarderStats {
    /// sender → receiver.
    pub up: DirStats,
    /// receiver → sender.
    pub down: DirStats,
    /// Whether the forwarder had stopped when this was written.
    pub stopped: bool,
    /// The blackhole state. Absent in files written by forwarders that predate
    /// `shoal link blackhole` (which would die of the signal that asks for one).
    #[serde(default)]
    pub blackhole: Option<BlackholeStats>,
    /// The random loss in effect (absent from forwarders that cannot change it).
    #[serde(default)]
    pub loss: Option<LossStats>,
}

/// Whether the link is black-holed (every packet dropped, both directions) and for how long.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct BlackholeStats {
    pub active: bool,
    /// Time left, in milliseconds (0 when not active).
    pub remaining_ms: u64,
    /// Blackhole requests taken so far (each `shoal link blackhole`, ends included).
    pub requests: u64,
}

/// The signal that carries a blackhole request: `sigqueue(pid, BLACKHOLE_SIGNAL, ms)`, where
/// the value is the duration in milliseconds (0 ends a blackhole now).
pub const BLACKHOLE_SIGNAL: i32 = libc::SIGUSR1;

/// A snapshot of one direction's live counters (`forwarder::DirCounters`), as written to the stats file. Frames are what crosses the
/// TUN (a TSO/USO super-packet, or a piece of one, counts once); every drop counter counts
/// wire packets (segments), like `forwarded_segments`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DirStats {
    /// Frames read from the TUN.
    pub received: u64,
    /// Frames written to the other TUN.
    pub forwarded: u64,
    /// Wire bytes and wire packets of the forwarded frames.
    pub forwarded_wire_bytes: u64,
    pub forwarded_segments: u64,
    /// Wire packets refused by the full drop-tail queue.
    pub dropped_queue: u64,
    /// Wire packets taken by random loss.
    pub dropped_loss: u64,
    /// Wire packets dropped because the link was black-holed (`shoal link blackhole`).
    #[serde(default)]
    pub dropped_blackhole: u64,
    /// Frames the receiving TUN refused.
    pub write_errors: u64,
    /// Worst lateness of a delivery against its deadline, in microseconds.
    pub late_max_us: u64,
    /// Deliveries (frames) more than 1 ms late.
    pub late_over_1ms: u64,
}

/// The signal that carries a loss change: `sigqueue(pid, LOSS_SIGNAL, ppb)`.
pub const LOSS_SIGNAL: i32 = libc::SIGUSR2;
/// Loss travels as an integer count of parts per billion (0.0000001% resolution).
pub(crate) const PPB: f64 = 1e9;

/// The loss in effect and how many changes the forwarder took, as in its stats file.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LossStats {
    /// Probability per wire packet and direction, in parts per billion.
    pub loss_ppb: u64,
    pub requests: u64,
}

impl LossStats {
    /// Probability per wire packet and direction.
    pub fn loss(&self) -> f64 {
        self.loss_ppb as f64 / PPB
    }
}

pub(crate) fn to_ppb(p: f64) -> u64 {
    (p.clamp(0.0, 1.0) * PPB).round() as u64
}

/// Reads the forwarder's stats file, if any.
pub fn forwarder_stats(name: &str) -> Option<ForwarderStats> {
    let text = std::fs::read_to_string(state::stats_path(name)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Whether `pid` is a live (not zombie) forwarder of link `name`; guards against signalling
/// an unrelated process that reused the PID.
pub fn is_forwarder(pid: u32, name: &str) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let has = |s: &str| args.contains(&s.as_bytes());
    if !(has("forward") && has(name)) {
        return false;
    }
    is_running(pid)
}

/// Whether `pid` exists and has not exited: field 3 of `/proc/PID/stat` (after the
/// parenthesised command name) is its state, and Z/X mean it has exited.
pub(crate) fn is_running(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|r| r.split_whitespace().next());
    !matches!(state, Some("Z") | Some("X") | None)
}

/// The forwarder's stats file is rewritten every 250 ms: wait for a fresh copy so deltas
/// line up with our own clock.
pub(crate) fn fresh_stats(name: &str) -> Option<ForwarderStats> {
    std::thread::sleep(Duration::from_millis(300));
    forwarder_stats(name)
}
