//! The open-files limit. A receiver keeps a file open from its first byte to its last, so with
//! per-file streams it may hold `max_streams × connections` files open at once (8 × 4,096 =
//! 32,768 in the study's 8-connection arms, past this machine's default of 20,000).

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// A limit as a number (`None`, unlimited, is `RLIM_INFINITY`: all ones).
fn value(limit: Option<u64>) -> u64 {
    limit.unwrap_or(u64::MAX)
}

/// The inverse of [`value`].
fn limit(value: u64) -> Option<u64> {
    (value != u64::MAX).then_some(value)
}

/// Raises the soft open-files limit as far as allowed: to the hard limit, and with the
/// privilege to (root), the hard limit too, up to `want`. Returns the soft limit in effect.
pub fn raise_open_files_limit(want: u64) -> u64 {
    let r = getrlimit(Resource::Nofile);
    let (cur, max) = (value(r.current), value(r.maximum));
    if max < want {
        let both = Rlimit {
            current: limit(want),
            maximum: limit(want),
        };
        if setrlimit(Resource::Nofile, both).is_ok() {
            return want;
        }
    }
    // Unprivileged: the soft limit up to the hard one (never lowered).
    let soft = max.min(want).max(cur);
    if soft > cur {
        let raised = Rlimit {
            current: limit(soft),
            maximum: r.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return soft;
        }
    }
    cur
}

/// The soft open-files limit in effect.
pub fn open_files_limit() -> u64 {
    value(getrlimit(Resource::Nofile).current)
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
