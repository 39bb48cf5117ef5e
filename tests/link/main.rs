//! The emulated long link and two hosts (network namespaces; most tests need root): the link
//! itself, its check, the path probe, two-host sweeps with baselines, and the study's link tools.

#[path = "../support/mod.rs"]
mod support;

mod binaries;
mod diagnose;
mod diagnose_stop;
mod link;
mod link_check;
mod probe;
mod probe_fidelity;
mod quic_figures;
mod stall;
mod streams_large;
mod study_infra;
mod tools;
mod two_hosts;
mod two_hosts_baselines;
