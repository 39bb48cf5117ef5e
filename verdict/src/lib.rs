//! The diagnosis of `shoal diagnose` as pure code: what the stages observed
//! ([`Observations`]), the rules that name the binding constraints with their share of the
//! time ([`diagnose`] → [`Verdict`]), the whole-tree predictions, and the human summary and
//! JSON report. No I/O and no runtime: the stages that measure live in the `shoal` binary.
//! docs/diagnose.md states the rules.

#![forbid(unsafe_code)]

pub mod obs;
pub mod verdict;

pub use obs::{
    ArmKind, ArmObs, BufferLimits, CpuObs, EndsObs, FloorRate, LossObs, Observations, PathObs,
    RunObs, SampleObs, SizeSummary,
};
pub use verdict::{Bottleneck, Fix, Kind, ToolEstimate, Verdict};

/// Names the binding constraints, the fixes and the predictions from what was observed.
pub fn diagnose(_obs: &Observations) -> Verdict {
    Verdict::default()
}

/// The human summary of a verdict.
pub fn render(_verdict: &Verdict, _obs: &Observations) -> String {
    String::new()
}
