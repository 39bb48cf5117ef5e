//! Shoal's sweep report: from a sweep folder's `runs.csv` alone, the medians with their spread
//! and intervals (`medians.csv`, `medians.json`), the comparison of two sweeps, and the charts
//! (the crate that draws them). Pure: reads and writes files, starts nothing. See
//! docs/sweep.md.
#![deny(unsafe_code)]

pub mod chart;
pub mod columns;
pub mod compare;
pub mod facts;
pub mod html;
pub mod legacy;
pub mod pathreport;
pub mod report;
pub mod request;
pub mod spread;
mod table;
pub mod trace_chart;
pub mod traces;
pub mod warnings;

pub use table::{medians_table, write_report};
