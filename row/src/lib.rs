//! Shoal's run row ([`RunRow`], one line of runs.csv or one `--json` object) and what fills
//! it: process and host figures (`metrics`, `hostfacts`), the per-file latency distribution
//! (`latency`), the binary's provenance and the per-run trace files (`traces`).

#![forbid(unsafe_code)]

pub mod hostfacts;
pub mod latency;
mod lines;
pub mod metrics;
pub mod provenance;
pub mod row;
pub mod traces;

pub use row::RunRow;
