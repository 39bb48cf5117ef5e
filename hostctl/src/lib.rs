//! A sweep's hold on the host's processes: child processes started in their own process group,
//! waited for with a deadline and their resource usage read (`proc`, with Ctrl-C), the
//! receiver's CPU quota group (`cpu_quota`), and each end's stalls — a freezer group driven by
//! a real-time timer process, and a CPU hog beside a quota (`stall`). Used by the sweep, by
//! `shoal link exec --stall` and by `shoal diagnose`.
#![forbid(unsafe_code)]

pub mod cpu_quota;
pub mod owned;
pub mod proc;
pub mod shell;
pub mod stall;
pub mod work;
