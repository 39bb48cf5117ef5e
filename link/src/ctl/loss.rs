//! Changing a running link's random loss (the sweep's `loss` axis): the rate travels to the
//! forwarder as a queued signal ([`LOSS_SIGNAL`], value = parts per billion), both directions
//! read it before every packet, and the forwarder confirms it in its stats file (`loss`). The
//! link's state file is updated so `link_info` reports the loss in effect. TUN backend only.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::ipc::{forwarder_stats, is_forwarder, to_ppb, LossStats, LOSS_SIGNAL};
use crate::state::{Backend, LinkState};

/// Sets link `name`'s random loss to `p` (per wire packet and direction) while it runs, and
/// returns what the forwarder confirmed (within 2 s).
pub fn set_loss(name: &str, p: f64) -> Result<LossStats> {
    crate::state::validate_name(name)?;
    if !(0.0..=1.0).contains(&p) {
        bail!("loss {p} is not a probability");
    }
    let mut st = LinkState::load(name)?;
    if st.backend == Backend::Netem {
        bail!("link {name} uses the netem backend; changing its loss while it runs needs the tun backend");
    }
    let pid = st
        .forwarder_pid
        .with_context(|| format!("link {name} has no forwarder"))?;
    if !is_forwarder(pid, name) {
        bail!("the forwarder of link {name} (pid {pid}) is not running");
    }
    let before = forwarder_stats(name).and_then(|s| s.loss).with_context(|| {
        format!(
            "the forwarder of link {name} (pid {pid}) cannot change its loss (started by an older shoal?); recreate the link"
        )
    })?;
    // To a PID verified above to be this link's forwarder.
    shoal_sys::signal::queue_signal(pid, LOSS_SIGNAL, to_ppb(p) as usize)
        .with_context(|| format!("signalling forwarder {pid}"))?;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(2) {
        if let Some(now) = forwarder_stats(name).and_then(|s| s.loss) {
            if now.requests > before.requests {
                st.loss = now.loss();
                st.save()?;
                return Ok(now);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    bail!("forwarder {pid} of link {name} did not confirm the loss change within 2 s")
}
