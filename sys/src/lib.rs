//! Every `unsafe` of Shoal, each behind a safe function: the system calls and socket options
//! rustix does not wrap (`getrusage`, `wait4`, `TCP_INFO`, `TCP_MAXSEG`, `SO_MAX_PACING_RATE`,
//! the TUN ioctls, `SCHED_FIFO`, signal masks and queued signals), `pre_exec` hooks, glibc's
//! allocator settings and a read into a buffer's uninitialised spare capacity. Every other
//! crate forbids `unsafe`.

pub mod io;
pub mod process;
pub mod rusage;
pub mod signal;
pub mod tcp;
pub mod tun;
