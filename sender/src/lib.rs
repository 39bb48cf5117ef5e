//! Shoal sender: walks a source tree, runs the shared read-ahead pipeline, and moves the files
//! over one of the transports; returns one result row whether the run succeeded or failed.

#![forbid(unsafe_code)]

mod bundle;
mod clock;
mod config;
mod finish;
pub mod net;
pub mod path_state;
mod peak;
mod pool;
mod progress;
mod ready;
mod replies;
mod row_figures;
mod run;
mod sampler;
mod sink;
mod sniff;
pub mod start_window;
mod stats_handle;
mod streams;
mod waits;

pub use config::{default_read_ahead, SendConfig, TestHooks, DEFAULT_BLOCK_SIZE};
pub use progress::ProgressConfig;
pub use run::{run, send, Interrupted, RunOutcome};
