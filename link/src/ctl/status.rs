//! A link's live state for `shoal link status` and the sweep's rows: settings, forwarder,
//! counters.

use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::ipc::{forwarder_stats, is_forwarder, ForwarderStats};
use crate::netns::ip;
use crate::parse::{format_duration, format_rate};
use crate::state::{self, Backend, LinkState};

/// TUN tx_dropped counters (packets the kernel dropped because the forwarder fell behind).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct TxDropped {
    pub snd: Option<u64>,
    pub rcv: Option<u64>,
}

/// The link as the sweep engine records it: settings, sysctls, forwarder, counters.
#[derive(Clone, Debug, Serialize)]
pub struct LinkInfo {
    #[serde(flatten)]
    pub state: LinkState,
    pub rtt: String,
    pub rate: String,
    pub down_rate: String,
    pub forwarder_alive: bool,
    /// Forwarder counters (TUN backend), as of its last write (≤ 250 ms old).
    pub counters: Option<ForwarderStats>,
    pub tun_tx_dropped: TxDropped,
}

/// The `tx_dropped` counter of `dev` inside `ns`.
pub fn tx_dropped(ns: &str, dev: &str) -> Result<u64> {
    let out = ip(&["-n", ns, "-s", "-j", "link", "show", "dev", dev])?;
    let v: serde_json::Value = serde_json::from_str(&out).context("parsing `ip -j` output")?;
    v[0]["stats64"]["tx"]["dropped"]
        .as_u64()
        .with_context(|| format!("no tx dropped counter for {dev} in {ns}"))
}

/// Everything known about link `name`, for status output and sweep rows.
pub fn link_info(name: &str) -> Result<LinkInfo> {
    state::validate_name(name)?;
    let st = LinkState::load(name)?;
    let alive = st.forwarder_pid.is_some_and(|p| is_forwarder(p, name));
    let (counters, tun_tx_dropped) = match st.backend {
        Backend::Tun => (
            forwarder_stats(name),
            TxDropped {
                snd: tx_dropped(&st.snd_ns, &st.device).ok(),
                rcv: tx_dropped(&st.rcv_ns, &st.device).ok(),
            },
        ),
        Backend::Netem => (None, TxDropped::default()),
    };
    Ok(LinkInfo {
        rtt: format_duration(Duration::from_nanos(st.rtt_ns)),
        rate: format_rate(st.rate_bps),
        down_rate: format_rate(st.down_rate_bps),
        forwarder_alive: alive,
        counters,
        tun_tx_dropped,
        state: st,
    })
}
