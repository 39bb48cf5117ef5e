//! The host conditions of one run, each applied before the run and restored after it: the host
//! profile's sysctls, the receiver's CPU quota (a cgroup), the link's loss, the destination
//! file system (a fresh volume) and the start window (routes and buffer defaults). What each
//! asks for is typed in shoal-matrix's `conditions`; here it is done to the host.

pub mod cpu_quota;
pub mod dest_fs;
pub mod loss;
pub mod profile;
pub mod start_window;
