//! The host conditions of one run, each applied before the run and restored after it: the host
//! profile's sysctls, the receiver's CPU quota (a cgroup), each end's stalls (a freezer cgroup), the link's loss, the destination
//! file system (a fresh volume) and the start window (routes and buffer defaults). What each
//! asks for is typed in shoal-matrix's `conditions`; here it is done to the host.
//!
//! | condition | apply | restore |
//! |---|---|---|
//! | host profile | [`profile::apply`] | [`profile::Applied::restore`] (or drop) |
//! | receiver CPU quota | `shoal_hostctl::cpu_quota::QuotaGroup::create` | `QuotaGroup::restore` (or drop) |
//! | destination file system | [`dest_fs::Volume::create`] | [`dest_fs::Volume::restore`] (or drop) |
//! | start window | [`start_window::apply`] | `Applied::restore_buffers`, then its routes' `RouteGuard::restore` (or drop) |
//! | stalls, CPU hog | `shoal_hostctl::stall::RunStalls::create`, `place`, `start` | `stall::Running::stop`, then drop (thaw, remove) |
//! | link loss | [`loss::apply`] | none: every run of a `loss` axis sets its own rate, and the link goes down with the sweep |
//!
//! What outlives the link's namespaces (a volume, a cgroup, a host-wide sysctl) is listed in
//! the sweep's list of what it owns (`shoal_hostctl::owned::acquire`) before it is applied and marked
//! released once restored, so a sweep killed mid-run leaves it to the next sweep to release.

pub mod dest_fs;
pub mod loss;
pub mod profile;
pub mod start_window;
