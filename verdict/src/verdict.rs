//! What the diagnosis concludes: the binding constraints ranked by their share of the time,
//! the fixes that measured a gain, the best command and what common tools would take.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The fixed vocabulary of constraints (docs/diagnose.md explains each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The sender waits a round trip per file.
    PerFileRtt,
    /// A receive or send buffer below the path's BDP caps the window.
    Window,
    /// The transfer is short next to the rounds slow start needs to reach the path's rate.
    SlowStart,
    /// Random loss on the path keeps the congestion window small.
    Loss,
    /// The path itself is full: nothing left to fix.
    LinkRate,
    /// The destination file system creates files no faster.
    ReceiverFs,
    /// The source tree reads no faster.
    SourceRead,
    /// The receiver's processes have no more CPU.
    ReceiverCpu,
    /// The sender's processes have no more CPU.
    SenderCpu,
    /// The receiver's UDP socket buffer overflows (QUIC).
    UdpDrops,
}

impl Kind {
    /// The name as written in JSON and docs (`per-file-rtt`, …).
    pub fn name(self) -> &'static str {
        match self {
            Kind::PerFileRtt => "per-file-rtt",
            Kind::Window => "window",
            Kind::SlowStart => "slow-start",
            Kind::Loss => "loss",
            Kind::LinkRate => "link-rate",
            Kind::ReceiverFs => "receiver-fs",
            Kind::SourceRead => "source-read",
            Kind::ReceiverCpu => "receiver-cpu",
            Kind::SenderCpu => "sender-cpu",
            Kind::UdpDrops => "udp-drops",
        }
    }

    /// Every kind, in the documented order.
    pub const ALL: [Kind; 10] = [
        Kind::PerFileRtt,
        Kind::Window,
        Kind::SlowStart,
        Kind::Loss,
        Kind::LinkRate,
        Kind::ReceiverFs,
        Kind::SourceRead,
        Kind::ReceiverCpu,
        Kind::SenderCpu,
        Kind::UdpDrops,
    ];
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One binding constraint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bottleneck {
    pub kind: Kind,
    /// Fraction of the base configuration's time attributed to it (0..=1).
    pub share: f64,
    /// The measured figures that show it, one sentence each, with units.
    pub evidence: Vec<String>,
    /// Set when the constraint holds back an alternative arm rather than the base (the
    /// QUIC arm's UDP drops, the per-file-wait arm's round trips): why that arm is not the
    /// fix. Its share is then of that arm's time, and it ranks after the base's constraints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<crate::obs::ArmKind>,
}

/// A change that measured a gain on the sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fix {
    /// What to change: `shoal send` flags (`--cc bbr`), or a sysctl with its value.
    pub change: String,
    /// The constraint it removes; `None` when the arm was faster but no measured figure
    /// showed why.
    pub removes: Option<Kind>,
    /// Time saved on the sample over the base's time (0.3 = 30% faster), from medians.
    pub measured_gain: f64,
    /// Predicted time for the whole tree with this change alone (s), when the model fits.
    pub predicted_seconds: Option<f64>,
}

/// What a common tool would take on this path: an estimate from the model, not a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolEstimate {
    /// `sftp`-like, `tar | ssh`, `rsync` …
    pub tool: String,
    /// Whole tree (s).
    pub predicted_seconds: f64,
    /// The model's terms, in words.
    pub why: String,
}

/// The conclusion of a diagnosis.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Binding constraints, largest share first; the first is the primary one.
    pub bottlenecks: Vec<Bottleneck>,
    /// Pairs of constraints whose shares are within noise of each other: neither is
    /// picked over the other.
    pub ties: Vec<(Kind, Kind)>,
    /// Fixes that measured a gain beyond noise, largest first.
    pub fixes: Vec<Fix>,
    /// `shoal send` with the base's arguments and every fix's flags.
    pub best_command: String,
    /// Predicted whole-tree time with `best_command` (s), when the model fits.
    pub predicted_seconds: Option<f64>,
    /// Why that prediction cannot be trusted, when it cannot (`model::prediction_doubt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction_unreliable: Option<String>,
    /// What common tools would take (model estimates).
    pub common_tools: Vec<ToolEstimate>,
    /// What was not measured or not used, and why: arms that did not run, floors the
    /// transfer contradicted, gains within noise.
    pub skipped: Vec<String>,
}
