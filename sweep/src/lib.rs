//! Shoal's sweep engine: expands a parameter matrix (TOML), runs every configuration N times in
//! shuffled order over an emulated link (or against a remote receiver), verifies every run from
//! disk before its time counts, and writes `runs.csv`, `medians.csv` and charts. `shoal report`
//! regenerates the medians and charts from `runs.csv` alone. See docs/sweep.md.
#![deny(unsafe_code)]

#[path = "../../matrix/src/argv.rs"]
pub mod argv;
#[path = "../../matrix/src/arm.rs"]
pub mod arm;
mod assemble;
#[path = "../../matrix/src/axis.rs"]
pub mod axis;
pub mod baseline;
#[path = "../../report/src/chart.rs"]
pub mod chart;
#[path = "request.rs"]
pub mod cli;
#[path = "../../report/src/columns.rs"]
pub mod columns;
#[path = "../../report/src/compare.rs"]
pub mod compare;
mod context;
#[path = "conditions/cpu_quota.rs"]
mod cpuquota;
mod dest;
#[path = "conditions/dest_fs.rs"]
mod destfs;
pub mod engine;
mod hooks;
pub mod hostcpu;
#[path = "conditions/start_window/routes.rs"]
mod initcwnd;
mod linkctx;
#[path = "../../matrix/src/linkspec.rs"]
pub mod linkspec;
#[path = "conditions/loss.rs"]
mod lossaxis;
#[path = "../../matrix/src/matrix.rs"]
pub mod matrix;
mod meta;
pub mod options;
pub mod pathcheck;
pub mod pathreport;
pub mod payload;
#[path = "../../matrix/src/plan.rs"]
mod plan;
#[path = "../../matrix/src/preflight.rs"]
pub mod preflight;
pub mod probe;
#[path = "probe_request.rs"]
pub mod probe_cli;
pub mod proc;
#[path = "../../matrix/src/product.rs"]
mod product;
#[path = "conditions/profile.rs"]
mod profile;
pub mod progress;
#[path = "../../matrix/src/quantity.rs"]
pub mod quantity;
#[path = "../../matrix/src/recvaxes.rs"]
pub mod recvaxes;
#[path = "remote/client.rs"]
pub mod remote;
#[path = "../../matrix/src/remote_arms.rs"]
mod remote_arms;
#[path = "remote/baseline.rs"]
mod remote_baseline;
#[path = "../../report/src/report.rs"]
pub mod report;
mod run;
#[path = "../../matrix/src/schema.rs"]
mod schema;
#[path = "../../report/src/spread.rs"]
pub mod spread;
#[path = "conditions/start_window/buffers.rs"]
mod startbuf;
#[path = "conditions/start_window/mod.rs"]
mod startwin;
mod sys;
#[path = "../../report/src/table.rs"]
mod table;
mod tcpmetrics;
#[path = "../../report/src/trace_chart.rs"]
pub mod trace_chart;
#[path = "../../report/src/traces.rs"]
pub mod traces;
mod transfer;

pub use table::{medians_table, write_report};
