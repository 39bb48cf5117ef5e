//! The files of one run's traces, as `shoal send --trace-dir DIR` writes them and the sweep's
//! report reads them back (every row of each carries the run's `run_id`):
//! - [`SENDER_SERIES`]: the transport time series, per sample and connection;
//! - [`LATENCY`]: the per-file latency distribution;
//! - [`RECEIVER_SERIES`]: files and bytes the receiver reported ready, per sample.
//!
//! Their columns are in docs/csv-schema.md.

pub const SENDER_SERIES: &str = "sender-series.csv";
pub const LATENCY: &str = "latency.csv";
pub const RECEIVER_SERIES: &str = "receiver-series.csv";

/// How often the series are sampled when `--trace-dir` is given without `--stats-interval`.
pub const DEFAULT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);
