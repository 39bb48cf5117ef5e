//! Shoal's emulated long link: two network namespaces (`NAME-snd`, `NAME-rcv`) joined by a
//! userspace TUN delay line (delay, rate, drop-tail queue, seeded loss) or by veth + netem.
//!
//! The `shoal` binary's `shoal link …` (cli/src/link.rs) drives it; the sweep engine and
//! tests use [`LinkGuard`], [`link_info`] and [`spawn_in_netns`]. See docs/link.md.
//!
#![forbid(unsafe_code)]

pub mod admit;
pub mod blackhole;
pub mod bulk_loss;
pub mod check;
pub mod control;
pub mod forwarder;
pub mod ipc;
pub mod liveloss;
pub mod netem;
pub mod netns;
pub mod parse;
pub mod report;
pub mod schedule;
pub mod segment;
pub mod state;
pub mod status;
pub mod tun;
pub mod verdict;
pub mod vnet;

pub use blackhole::{blackhole, BlackholeOutcome};
pub use check::{check, CheckOptions};
pub use control::{
    down, up, BackendChoice, Launcher, LinkGuard, UpConfig, UpOutcome, DEFAULT_NAME,
};
pub use liveloss::set_loss;
pub use netns::spawn_in_netns;
pub use state::{Backend, LinkState, Sysctls};
pub use status::{link_info, LinkInfo};
pub use verdict::CheckReport;
