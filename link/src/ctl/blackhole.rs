//! `shoal link blackhole`: an outage mid-run, asked of the forwarder over its signal.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::ipc::{forwarder_stats, is_forwarder};
use crate::state::{self, Backend, LinkState};

/// What `blackhole` did.
#[derive(Debug)]
pub struct BlackholeOutcome {
    /// The forwarder's blackhole state right after it took the request.
    pub state: crate::ipc::BlackholeStats,
    pub forwarder_pid: u32,
}

/// Black-holes link `name` for `duration` (zero ends a blackhole now): the forwarder drops
/// every packet that enters the link, both directions, and counts them (`dropped_blackhole`).
/// The request travels as a queued signal to the forwarder recorded in the state file; this
/// returns once the forwarder's stats show it was taken (within 2 s). TUN backend only.
pub fn blackhole(name: &str, duration: Duration) -> Result<BlackholeOutcome> {
    state::validate_name(name)?;
    let st = LinkState::load(name)?;
    if st.backend == Backend::Netem {
        bail!("link {name} uses the netem backend; blackhole is supported by the tun backend only");
    }
    let pid = st
        .forwarder_pid
        .with_context(|| format!("link {name} has no forwarder"))?;
    if !is_forwarder(pid, name) {
        bail!("the forwarder of link {name} (pid {pid}) is not running");
    }
    // A forwarder that predates blackholes does not take the signal, and it would end it.
    let before = forwarder_stats(name)
        .and_then(|s| s.blackhole)
        .with_context(|| {
            format!(
                "the forwarder of link {name} (pid {pid}) does not support blackholes (started by an older shoal?); recreate the link"
            )
        })?;
    // At least 1 ms for any non-zero duration: 0 means "end now".
    let ms = match duration.as_millis() {
        0 if !duration.is_zero() => 1,
        n => usize::try_from(n).unwrap_or(usize::MAX),
    };
    // To a PID verified above to be this link's forwarder.
    shoal_sys::signal::queue_signal(pid, crate::ipc::BLACKHOLE_SIGNAL, ms)
        .with_context(|| format!("signalling forwarder {pid}"))?;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(2) {
        if let Some(now) = forwarder_stats(name).and_then(|s| s.blackhole) {
            if now.requests > before.requests {
                return Ok(BlackholeOutcome {
                    state: now,
                    forwarder_pid: pid,
                });
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    bail!("forwarder {pid} of link {name} did not confirm the blackhole within 2 s")
}
