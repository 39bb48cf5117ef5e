//! The sweep's only `unsafe` code, for what rustix has no safe call for: a signal handler and
//! wait4 (the child's resource usage).
#![allow(unsafe_code)]

/// Runs `handler` on SIGINT and SIGTERM.
pub fn on_interrupt(handler: extern "C" fn(libc::c_int)) {
    // SAFETY: the caller's handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, handler as *const () as libc::sighandler_t);
    }
}

/// `wait4(pid, WNOHANG)`: its return value, the wait status and the child's resource usage.
pub fn wait4_nohang(pid: i32) -> (i32, i32, libc::rusage) {
    let mut status = 0;
    // SAFETY: wait4 on our own child's pid, writing into locals we own; rusage is plain data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
    (r, status, ru)
}
