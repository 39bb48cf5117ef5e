//! Resource usage the kernel counts for this process and its children.

/// User and system CPU time this process has used, in seconds (`getrusage(RUSAGE_SELF)`).
pub fn cpu_times() -> Option<(f64, f64)> {
    // SAFETY: getrusage writes into the zeroed struct we pass and has no other effects.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut u) != 0 {
            return None;
        }
        u
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some((tv(usage.ru_utime), tv(usage.ru_stime)))
}

/// `wait4(pid, WNOHANG)`: its return value, the wait status and the child's resource usage.
pub fn wait4_nohang(pid: i32) -> (i32, i32, libc::rusage) {
    let mut status = 0;
    // SAFETY: wait4 on our own child's pid, writing into locals we own; rusage is plain data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
    (r, status, ru)
}
