//! Shoal's emulated long link: two network namespaces (`NAME-snd`, `NAME-rcv`) joined by a
//! userspace TUN delay line (delay, rate, drop-tail queue, seeded loss) or by veth + netem.
//!
//! The `shoal` binary's `shoal link …` (cli/src/link.rs) drives it; the sweep engine and
//! tests use [`LinkGuard`], [`link_info`] and [`spawn_in_netns`]. See docs/link.md.

#![forbid(unsafe_code)]

pub mod bulk_loss;
pub mod check;
pub mod ctl;
pub mod forwarder;
pub mod ipc;
pub mod netem;
pub mod netns;
pub mod parse;
pub mod ranges;
pub mod report;
pub mod state;
pub mod tun;
pub mod verdict;
pub mod vnet;

pub use check::{check, CheckOptions};
pub use ctl::blackhole::{blackhole, BlackholeOutcome};
pub use ctl::loss::set_loss;
pub use ctl::status::{link_info, LinkInfo};
pub use ctl::up::{
    down, up, BackendChoice, Launcher, LinkGuard, UpConfig, UpOutcome, DEFAULT_NAME,
};
pub use netns::spawn_in_netns;
pub use state::{Backend, LinkState, Sysctls};
pub use verdict::CheckReport;
