//! The diagnosis of `shoal diagnose` as pure code: what the stages observed
//! ([`Observations`]), the rules that name the binding constraints with their share of the
//! time ([`diagnose`] → [`Verdict`]), the whole-tree predictions, and the human summary and
//! JSON report. No I/O and no runtime: the stages that measure live in the `shoal` binary.
//! docs/diagnose.md states the rules.
//!
//! ```
//! use shoal_verdict::*;
//!
//! let mut obs = Observations::default();
//! obs.path.idle_rtt_ms = Some(141.0);
//! obs.path.goodput_to_receiver_bits_per_s = Some(100e6);
//! obs.path.loss_to_receiver.random = Some(0.01);
//! obs.sample = SampleObs { sample_files: 4096, sample_bytes: 16 << 20, tree_files: 65536,
//!                          tree_bytes: 256 << 20, sizes: None };
//! let base = ["198.18.0.2:7474", "--cc", "cubic"];
//! obs.arms = vec![
//!     ArmObs::with_seconds(ArmKind::Base, &base, &[10.0, 10.3, 10.1]),
//!     ArmObs::with_seconds(ArmKind::OtherCc("bbr".into()), &["198.18.0.2:7474", "--cc", "bbr"],
//!                          &[4.0, 4.1, 4.2]),
//! ];
//! let verdict = diagnose(&obs);
//! assert_eq!(verdict.bottlenecks[0].kind, Kind::Loss);
//! assert_eq!(verdict.best_command, "shoal send 198.18.0.2:7474 --cc bbr");
//! let _text = render(&verdict, &obs);
//! let _json = report_json(&verdict, &obs, serde_json::Value::Null);
//! ```

#![forbid(unsafe_code)]

mod ctx;
mod dynamic;
pub mod flags;
pub mod fmt;
pub mod model;
pub mod noise;
pub mod obs;
pub mod render;
mod rules;
pub mod verdict;

pub use dynamic::{LOSS_MIN, PER_FILE_RTT_BAND, SLOW_START_MIN};
pub use noise::{MIN_GAIN, SINGLE_RUN_MIN_GAIN};
pub use obs::{
    ArmKind, ArmObs, BufferLimits, CpuObs, EndsObs, FloorRate, LossObs, Observations, PathObs,
    RunObs, SampleObs, SizeSummary,
};
pub use render::{render, report_json};
pub use rules::{diagnose, CPU_BUSY, FLOOR_CONTRADICTED, FLOOR_NEAR};
pub use verdict::{Bottleneck, Fix, Kind, ToolEstimate, Verdict};
