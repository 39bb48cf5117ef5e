//! The kernel backend: a veth pair between the namespaces with a `netem` qdisc on each end.
//! Used where the kernel has `sch_netem`; `--backend auto` probes for it first.

use anyhow::{Context, Result};

use crate::netns::{self, ip, run_tool};
use crate::state::LinkState;

/// Whether `tc … netem` works here, tried on a dummy device in a throwaway namespace so the
/// probe leaves nothing behind on the host.
pub fn available() -> bool {
    let ns = format!("shoalprobe{}", std::process::id());
    if netns::add(&ns).is_err() {
        return false;
    }
    let ok = ip(&["-n", &ns, "link", "add", "probe0", "type", "dummy"]).is_ok()
        && run_tool(
            "tc",
            &[
                "-n", &ns, "qdisc", "add", "dev", "probe0", "root", "netem", "delay", "1ms",
            ],
        )
        .is_ok();
    let _ = netns::del(&ns);
    ok
}

/// netem's `limit` counts packets, and packets waiting out the delay count against it too.
/// So the limit is the packets in flight over the one-way delay plus the queue, in MTU-sized
/// packets.
pub fn limit_packets(rate_bps: u64, delay_ns: u64, queue_bytes: u64, mtu: u32) -> u64 {
    let in_flight = (rate_bps as u128 * delay_ns as u128 / 8 / 1_000_000_000) as u64;
    ((in_flight + queue_bytes) / mtu.max(1) as u64).max(1) + 1
}

/// Creates the veth pair and the two netem qdiscs described by `st`.
pub fn setup(st: &LinkState) -> Result<()> {
    ip(&[
        "-n", &st.snd_ns, "link", "add", &st.device, "type", "veth", "peer", "name", &st.device,
        "netns", &st.rcv_ns,
    ])
    .context("creating the veth pair")?;
    let delay_ns = st.rtt_ns / 2;
    for (ns, rate_bps, queue) in [
        (&st.snd_ns, st.rate_bps, st.queue_bytes),
        (&st.rcv_ns, st.down_rate_bps, st.down_queue_bytes),
    ] {
        let delay = format!("{}us", delay_ns as f64 / 1000.0);
        let rate = format!("{rate_bps}bit");
        let limit = limit_packets(rate_bps, delay_ns, queue, st.mtu).to_string();
        let loss = format!("{}%", st.loss * 100.0);
        let mut args = vec![
            "-n", ns, "qdisc", "add", "dev", &st.device, "root", "netem", "delay", &delay, "rate",
            &rate, "limit", &limit,
        ];
        if st.loss > 0.0 {
            args.extend(["loss", loss.as_str()]);
        }
        run_tool("tc", &args).with_context(|| format!("adding netem in {ns}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_covers_delay_line_and_queue() {
        // 300 Mbit/s, 70.5 ms one way: 2,643,750 bytes in flight + 1 BDP queue 5,287,500.
        let l = limit_packets(300_000_000, 70_500_000, 5_287_500, 1500);
        assert_eq!(l, (2_643_750 + 5_287_500) / 1500 + 1);
        assert_eq!(limit_packets(1000, 0, 0, 1500), 2);
    }
}
