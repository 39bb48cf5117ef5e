//! The diagnosis of `shoal diagnose` as pure code: what the stages observed
//! ([`Observations`]), the rules that name the binding constraints with their share of the
//! time ([`diagnose`] → [`Verdict`]), the whole-tree predictions, and the human summary and
//! JSON report. No I/O and no runtime: the stages that measure live in the `shoal` binary.
//! docs/diagnose.md states the rules.

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
