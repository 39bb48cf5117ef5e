//! Axis names the sweep itself reads (every other axis is a `shoal send` flag of its name), and
//! the defaults it assumes when a configuration has no such axis. Each defined here once. And
//! the values an axis takes.

use serde::Serialize;

/// The payload a configuration sends.
pub const PAYLOAD: &str = "payload";
/// The kind of arm ([`crate::arm::Arm`]).
pub const KIND: &str = "kind";
/// The run's time limit (else the sweep's).
pub const TIMEOUT: &str = "timeout";
/// `shoal send --mode`: the transport.
pub const MODE: &str = "mode";
/// `shoal send --cc`: the congestion controller.
pub const CC: &str = "cc";
/// `shoal send --plain`; a `true` also makes the receiver accept it (`--allow-plain`).
pub const PLAIN: &str = "plain";
/// The receiver's flag that accepts `--plain` transfers.
pub const ALLOW_PLAIN: &str = "allow-plain";
/// The host profile both ends run in (`tuned`, `stock`; see the profile module).
pub const PROFILE: &str = "profile";
/// The receiver's CPU cap, a fraction of one core (`conditions::cpu_quota`).
pub const RECV_CPU_QUOTA: &str = "recv-cpu-quota";
/// That cap's CFS period (`conditions::cpu_quota`).
pub const RECV_CPU_PERIOD: &str = "recv-cpu-period";
/// One end's freezer duty cycle (`conditions::stall`).
pub const RECV_STALL: &str = "recv-stall";
pub const SEND_STALL: &str = "send-stall";
/// A busy process in the receiver's CPU-capped group (`conditions::stall`).
pub const RECV_CPU_HOG: &str = "recv-cpu-hog";
/// The `shoal` binary both ends of a run use, by its `[binaries]` label (`crate::binaries`).
pub const SHOAL: &str = "shoal";
/// The emulated link's random loss, changed on the running link (`conditions::loss`).
pub const LOSS: &str = "loss";
/// `rclone copy --transfers N --checkers N` (the rclone arm alone; default rclone's 4).
pub const RCLONE_TRANSFERS: &str = "rclone-transfers";
/// Axes that belong to one baseline tool ([`crate::arm::Arm::own_axes`]): no other arm takes them.
pub const TOOL_AXES: &[&str] = &[RCLONE_TRANSFERS];
/// `recv.NAME` is `shoal recv --NAME` alone.
pub const RECV_PREFIX: &str = "recv.";

/// `shoal send` flags that name one output file: as axes every run would overwrite it. The
/// sweep keeps each run's traces in its own folder instead (`crate::traces::run_dir`).
pub const PER_RUN_FILE_FLAGS: &[&str] = &["stats-out", "latency-out", "trace-dir"];

/// Axes that are the sweep's own, never a flag of either end.
pub const SWEEP_AXES: &[&str] = &[
    PAYLOAD,
    KIND,
    TIMEOUT,
    PROFILE,
    RECV_CPU_QUOTA,
    RECV_CPU_PERIOD,
    LOSS,
    RECV_STALL,
    SEND_STALL,
    RECV_CPU_HOG,
    SHOAL,
];
/// Axes that act on the local namespaces, emulator or receiver process: a two-host sweep
/// refuses them.
pub const LOCAL_ONLY_AXES: &[&str] = &[
    LOSS,
    PROFILE,
    RECV_CPU_QUOTA,
    RECV_CPU_PERIOD,
    RECV_STALL,
    RECV_CPU_HOG,
    SHOAL,
];
/// Axes that apply to a baseline arm (all others are Shoal flags and are dropped): the
/// sweep's own, but for the receiver's CPU cap, hog and the stalls (the sweep caps and
/// freezes only Shoal's ends).
pub const BASELINE_AXES: &[&str] = &[PAYLOAD, KIND, TIMEOUT, PROFILE, LOSS];

/// The transport `shoal send` uses when no `mode` axis picks one (its `--mode` default).
pub const DEFAULT_MODE: &str = "tcp-bundle";
/// QUIC modes' names start so; their congestion controller is quinn's unless `cc` says.
pub const QUIC_MODE_PREFIX: &str = "quic";
/// The congestion controller a QUIC mode runs when no `cc` axis picks one.
pub const QUINN_DEFAULT_CC: &str = "quinn-cubic";

/// One value on an axis, as written in the matrix.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AxisValue {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl AxisValue {
    /// The value as text (a flag argument, a CSV cell).
    pub fn text(&self) -> String {
        match self {
            AxisValue::Str(s) => s.clone(),
            AxisValue::Int(i) => i.to_string(),
            AxisValue::Float(f) => f.to_string(),
            AxisValue::Bool(b) => b.to_string(),
        }
    }
}
