//! Shoal's sweep engine: runs a matrix's plan (shoal-matrix) on a host — every configuration N
//! times in shuffled order over an emulated link (or against a remote receiver), each run's host
//! conditions applied and restored around it, every run verified from disk before its time
//! counts — and writes `runs.csv`, from which shoal-report makes the medians and charts. See
//! docs/sweep.md.
#![forbid(unsafe_code)]

mod assemble;
pub mod baseline;
pub mod conditions;
mod context;
pub mod continuation;
mod dest;
pub mod engine;
mod hooks;
pub mod hostcpu;
mod linkctx;
mod meta;
pub mod options;
pub mod payload;
pub mod progress;
mod quiet;
pub mod request;
mod run;
mod tcpmetrics;
mod transfer;
