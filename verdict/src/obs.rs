//! What `shoal diagnose` observed: the path, the ends' own floors, the sample and every
//! transfer arm. Every figure is `Option` where the stage did not measure it; the rules name
//! nothing from a figure that is absent. Names carry their unit: `_ms`, `_s` (seconds),
//! `_bits_per_s`, `_bytes_per_s`, `_files_per_s`, `_bytes`; fractions are 0..=1.

use serde::{Deserialize, Serialize};

/// Everything the stages measured, the input of [`crate::diagnose`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Observations {
    /// Stage 1: the path as the probe measured it.
    pub path: PathObs,
    /// Stage 2: each end's own floors and CPU, no network involved.
    pub ends: EndsObs,
    /// The sample the arms transferred and the whole tree it stands for.
    pub sample: SampleObs,
    /// Stage 3: one entry per transfer configuration, the base first by convention (the
    /// rules find it by kind, not by position). An arm that did not run has no runs and a
    /// `skipped` reason.
    pub arms: Vec<ArmObs>,
}

/// Loss in one direction, as a fraction of packets (0.01 = 1%).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LossObs {
    /// Lost over sent, everything counted.
    pub total: Option<f64>,
    /// The part the path drops on its own (the probe's paced phase below the measured rate),
    /// when the probe could tell.
    pub random: Option<f64>,
    /// The part the probe's own flow caused by overflowing the bottleneck queue, when known.
    pub queue_overflow: Option<f64>,
    /// The index of dispersion of the losses after the warm-up when they came in bursts: the
    /// probe's own flow overflowed the queue after its warm-up too, so `random` is not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_bursts: Option<f64>,
}

impl LossObs {
    /// Random loss when it was separated; else the total, unless the loss came in bursts
    /// (then the path's own loss is not known: none).
    pub fn path_loss(&self) -> Option<f64> {
        match (self.random, self.in_bursts) {
            (Some(r), _) => Some(r),
            (None, Some(_)) => None,
            (None, None) => self.total,
        }
    }
}

/// One host's kernel socket buffer limits, read back (bytes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BufferLimits {
    /// `net.ipv4.tcp_rmem`: min, default, max.
    pub tcp_rmem: Option<[u64; 3]>,
    /// `net.ipv4.tcp_wmem`: min, default, max.
    pub tcp_wmem: Option<[u64; 3]>,
    /// `net.core.rmem_max`.
    pub rmem_max: Option<u64>,
    /// `net.core.wmem_max`.
    pub wmem_max: Option<u64>,
}

/// Stage 1: what the probe measured, and the kernel limits at both ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathObs {
    /// Round-trip time with the path idle (median, ms).
    pub idle_rtt_ms: Option<f64>,
    /// Round-trip time while a bulk flow fills the path (median, ms).
    pub loaded_rtt_ms: Option<f64>,
    /// Bulk goodput sender → receiver (bit/s).
    pub goodput_to_receiver_bits_per_s: Option<f64>,
    /// Bulk goodput receiver → sender (bit/s).
    pub goodput_from_receiver_bits_per_s: Option<f64>,
    /// Loss sender → receiver.
    pub loss_to_receiver: LossObs,
    /// Loss receiver → sender.
    pub loss_from_receiver: LossObs,
    /// Bandwidth-delay product: goodput × idle RTT (bytes).
    pub bdp_bytes: Option<u64>,
    /// The sender's kernel buffer limits.
    pub sender_buffers: BufferLimits,
    /// The receiver's kernel buffer limits.
    pub receiver_buffers: BufferLimits,
    /// Congestion controllers the sender's kernel offers (`cubic`, `bbr`, …).
    pub controllers: Vec<String>,
    /// Share of the probe's flow sender → receiver (0..=1) its kernel counted held by the
    /// receiver's window or its own send buffer (`tcpi_rwnd_limited` + `tcpi_sndbuf_limited`
    /// over the flow's time): near 1, the probe measured a window's rate, not the path's.
    #[serde(default)]
    pub window_limited_fraction: Option<f64>,
    /// The probe's own doubts, each "what: reason" (a short window, a stalled flow, a single
    /// RTT sample); repeated in the verdict's evidence when a rule leans on that figure.
    pub unreliable: Vec<String>,
}

/// A rate of files and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FloorRate {
    pub files_per_s: f64,
    pub bytes_per_s: f64,
    /// CPU seconds the measuring end used over the measurement's wall time × its usable
    /// cores (0..=1), when counted: near 1, the floor is that end's CPU, not its disk.
    #[serde(default)]
    pub cpu_busy: Option<f64>,
}

impl FloorRate {
    /// Seconds this floor needs for `files` files of `bytes` bytes in all: the slower of the
    /// two limits (a floor of 0 counts as unmeasured).
    pub fn seconds_for(&self, files: u64, bytes: u64) -> Option<f64> {
        let f = (self.files_per_s > 0.0).then(|| files as f64 / self.files_per_s);
        let b = (self.bytes_per_s > 0.0).then(|| bytes as f64 / self.bytes_per_s);
        match (f, b) {
            (Some(f), Some(b)) => Some(f.max(b)),
            (f, b) => f.or(b),
        }
    }
}

/// One host's processors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuObs {
    /// Online CPUs.
    pub cpus: Option<u32>,
    /// The cgroup's CPU limit in cores (quota / period, cgroup v1 or v2), when there is one.
    pub quota_cores: Option<f64>,
    /// Fraction of CPU time stolen by the hypervisor during the stage.
    pub steal: Option<f64>,
}

impl CpuObs {
    /// Cores this host's processes can use: the quota when set, else the CPU count.
    pub fn usable_cores(&self) -> Option<f64> {
        self.quota_cores.or(self.cpus.map(f64::from))
    }
}

/// Stage 2: the ends' own floors, measured without the network.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EndsObs {
    /// Reading the source tree at the sender as found (cache as it was).
    pub source_read_found: Option<FloorRate>,
    /// Reading it again, warm (page cache filled).
    pub source_read_warm: Option<FloorRate>,
    /// The receiver's own writer creating files of this shape in the destination, no network.
    pub receiver_write: Option<FloorRate>,
    /// The sender's processors.
    pub sender_cpu: CpuObs,
    /// The receiver's processors.
    pub receiver_cpu: CpuObs,
}

/// File sizes of the tree (bytes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SizeSummary {
    pub min: u64,
    pub median: u64,
    pub p90: u64,
    pub max: u64,
    pub mean: f64,
}

/// The sample the arms moved and the tree it stands for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleObs {
    pub sample_files: u64,
    pub sample_bytes: u64,
    pub tree_files: u64,
    pub tree_bytes: u64,
    /// The tree's size distribution, when it was read (`--src`) or generated.
    pub sizes: Option<SizeSummary>,
}

/// What one arm changes from the base configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArmKind {
    /// The reference configuration every other arm is compared with.
    Base,
    /// Another congestion controller (its name), e.g. BBR against the base's CUBIC.
    OtherCc(String),
    /// This many parallel connections.
    Connections(u32),
    /// Socket buffers (and the window they allow) sized for the path's BDP.
    PathWindows,
    /// QUIC instead of TCP.
    Quic,
    /// QUIC starting from a saved window (no slow start).
    QuicStartWindow,
    /// TCP resuming a saved window (`--resume`: Careful Resume).
    Resume,
    /// The per-file-wait arm: the sender waits one round trip per file (`tcp-wait`), the
    /// cost a file-at-a-time tool pays.
    PerFileWait,
}

impl ArmKind {
    /// How the arm is named in evidence.
    pub fn label(&self) -> String {
        match self {
            ArmKind::Base => "the base".into(),
            ArmKind::OtherCc(cc) => format!("the {cc} arm"),
            ArmKind::Connections(n) => format!("the {n}-connection arm"),
            ArmKind::PathWindows => "the path-sized windows arm".into(),
            ArmKind::Quic => "the QUIC arm".into(),
            ArmKind::QuicStartWindow => "the QUIC saved-window arm".into(),
            ArmKind::Resume => "the resume arm".into(),
            ArmKind::PerFileWait => "the per-file-wait arm".into(),
        }
    }
}

/// Counters of one verified run; `None` where the run's row has no such figure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunObs {
    /// Wall time of the transfer (s).
    pub seconds: f64,
    /// Retransmitted over sent segments (or QUIC lost over sent packets).
    pub retrans_fraction: Option<f64>,
    /// UDP receive-buffer errors at the receiver during the run (`RcvbufErrors` delta).
    pub udp_rcvbuf_errors: Option<u64>,
    /// CPU seconds (user + system) of the sender's process.
    pub sender_cpu_s: Option<f64>,
    /// CPU seconds (user + system) of the receiver's process.
    pub receiver_cpu_s: Option<f64>,
    /// Seconds the receiver's network side waited on its writers.
    pub receiver_write_wait_s: Option<f64>,
    /// Times the sender stalled on the peer's flow-control window.
    pub flow_control_stalls: Option<u64>,
    /// Congestion events (loss or ECN reductions of the window).
    pub congestion_events: Option<u64>,
    /// Largest congestion window seen (bytes).
    pub max_cwnd_bytes: Option<u64>,
    /// Largest receive window the peer advertised (bytes).
    pub max_rwnd_bytes: Option<u64>,
    /// The send buffer the socket ended with (bytes).
    pub send_buffer_bytes: Option<u64>,
}

/// One transfer configuration on the sample, with its verified runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmObs {
    pub kind: ArmKind,
    /// The exact `shoal send` arguments of this arm, one token each (`198.18.0.2:7474`,
    /// `--cc`, `bbr`): positionals first, then `--name value` or `--name=value` options (a
    /// token after an option that does not start with `--` is read as its value).
    pub flags: Vec<String>,
    /// Verified runs, in the order they ran.
    pub runs: Vec<RunObs>,
    /// Runs that failed or did not verify (not in `runs`).
    pub failed: u32,
    /// Why the arm did not run (the budget, a missing controller); `None` when it ran.
    pub skipped: Option<String>,
}

impl ArmObs {
    /// A measured arm with these run times and no counters.
    pub fn with_seconds(kind: ArmKind, flags: &[&str], seconds: &[f64]) -> Self {
        ArmObs {
            kind,
            flags: flags.iter().map(|s| s.to_string()).collect(),
            runs: seconds
                .iter()
                .map(|&seconds| RunObs {
                    seconds,
                    ..RunObs::default()
                })
                .collect(),
            failed: 0,
            skipped: None,
        }
    }

    /// An arm that did not run, and why.
    pub fn skipped(kind: ArmKind, flags: &[&str], why: &str) -> Self {
        ArmObs {
            kind,
            flags: flags.iter().map(|s| s.to_string()).collect(),
            runs: Vec::new(),
            failed: 0,
            skipped: Some(why.to_string()),
        }
    }

    /// Whether it has at least one verified run and was not skipped.
    pub fn measured(&self) -> bool {
        self.skipped.is_none() && !self.runs.is_empty()
    }

    /// Median run time (s).
    pub fn median_s(&self) -> Option<f64> {
        median(self.runs.iter().map(|r| r.seconds))
    }

    /// Fastest and slowest run (s).
    pub fn range_s(&self) -> Option<(f64, f64)> {
        let mut it = self.runs.iter().map(|r| r.seconds);
        let first = it.next()?;
        Some(it.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v))))
    }

    /// Median of a per-run counter over the runs that have it.
    pub fn median_of(&self, f: impl Fn(&RunObs) -> Option<f64>) -> Option<f64> {
        median(self.runs.iter().filter_map(f))
    }
}

/// Median of the values (mean of the middle two for an even count).
pub fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}
