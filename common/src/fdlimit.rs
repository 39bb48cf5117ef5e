//! The open-files limit. A receiver keeps a file open from its first byte to its last, so with
//! per-file streams it may hold `max_streams × connections` files open at once (8 × 4,096 =
//! 32,768 in the study's 8-connection arms, past this machine's default of 20,000).

/// Raises the soft open-files limit as far as allowed: to the hard limit, and with the
/// privilege to (root), the hard limit too, up to `want`. Returns the soft limit in effect.
pub fn raise_open_files_limit(want: u64) -> u64 {
    // SAFETY: getrlimit/setrlimit on our own process with structs we own.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        if r.rlim_max < want {
            let both = libc::rlimit {
                rlim_cur: want,
                rlim_max: want,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &both) == 0 {
                return want;
            }
        }
        // Unprivileged: the soft limit up to the hard one (never lowered).
        let soft = r.rlim_max.min(want).max(r.rlim_cur);
        if soft > r.rlim_cur {
            let raised = libc::rlimit {
                rlim_cur: soft,
                rlim_max: r.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return soft;
            }
        }
        r.rlim_cur
    }
}

/// The soft open-files limit in effect.
pub fn open_files_limit() -> u64 {
    // SAFETY: as above.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        r.rlim_cur
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_never_goes_down() {
        let before = open_files_limit();
        let after = raise_open_files_limit(before.saturating_sub(10).max(1));
        assert!(after >= before, "{before} → {after}");
        assert_eq!(open_files_limit(), after);
    }
}
