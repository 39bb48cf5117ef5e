//! Shoal's sweep engine: expands a parameter matrix (TOML), runs every configuration N times in
//! shuffled order over an emulated link (or against a remote receiver), verifies every run from
//! disk before its time counts, and writes `runs.csv`, `medians.csv` and charts. `shoal report`
//! regenerates the medians and charts from `runs.csv` alone. See docs/sweep.md.
#![deny(unsafe_code)]

pub mod argv;
pub mod arm;
mod assemble;
pub mod axis;
pub mod baseline;
pub mod chart;
pub mod cli;
pub mod columns;
pub mod compare;
mod context;
mod cpuquota;
mod dest;
mod destfs;
pub mod engine;
mod hooks;
pub mod hostcpu;
mod initcwnd;
mod linkctx;
pub mod linkspec;
mod lossaxis;
pub mod matrix;
mod meta;
pub mod options;
pub mod pathcheck;
pub mod pathreport;
pub mod payload;
mod plan;
pub mod preflight;
pub mod probe;
pub mod probe_cli;
pub mod proc;
mod product;
mod profile;
pub mod progress;
pub mod quantity;
pub mod recvaxes;
pub mod remote;
mod remote_arms;
mod remote_baseline;
pub mod report;
mod run;
mod schema;
pub mod spread;
mod startbuf;
mod startwin;
mod sys;
mod table;
mod tcpmetrics;
pub mod trace_chart;
pub mod traces;
mod transfer;

pub use table::{medians_table, write_report};
