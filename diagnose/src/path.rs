//! Stage 1, the path: the path probe (idle RTT, goodput, loaded RTT and loss each way), the
//! bandwidth-delay product, and both ends' kernel buffer limits read back (this host from
//! /proc, the receiver from its `info` reply's host facts), with the controllers this host
//! offers.

use std::time::Duration;

use anyhow::Result;
use shoal_proto::control::Reply;
use shoal_remote::probe::{probe, ProbeOptions};
use shoal_remote::Remote;
use shoal_report::pathreport::{Direction, PathProbe};
use shoal_verdict::{BufferLimits, LossObs, PathObs};

/// Probes the path; flows of `flow` each way (a 1 s warm-up included).
pub fn measure(remote: &Remote, info: &Reply, flow: Duration) -> Result<(PathObs, PathProbe)> {
    let opts = ProbeOptions {
        duration: flow,
        warmup: Duration::from_secs(1).min(flow / 2),
        ..Default::default()
    };
    let p = probe(remote, &opts)?;
    Ok((observe(&p, local_buffers(), remote_buffers(info)), p))
}

/// The verdict's view of a probe and the two ends' limits.
pub fn observe(p: &PathProbe, sender: BufferLimits, receiver: BufferLimits) -> PathObs {
    let up = p.up.goodput_bit_s;
    let rtt = p.idle_rtt.median_ms;
    let mut unreliable = Vec::new();
    for (what, d) in [("to the receiver", &p.up), ("from the receiver", &p.down)] {
        for why in &d.unreliable {
            unreliable.push(format!("goodput {what}: {why}"));
        }
        // Bursty loss leaves the goodput standing but not the loss figure the verdict reads
        // as random loss, so the doubt is still the probe's.
        if let Some(why) = d.loss_note() {
            unreliable.push(format!("loss {what}: {why}"));
        }
    }
    let loaded = [&p.up, &p.down]
        .iter()
        .map(|d| d.loaded_rtt.median_ms)
        .filter(|x| *x > 0.0)
        .fold(f64::NAN, f64::max);
    PathObs {
        idle_rtt_ms: (rtt > 0.0).then_some(rtt),
        loaded_rtt_ms: loaded.is_finite().then_some(loaded),
        goodput_to_receiver_bits_per_s: (up > 0.0).then_some(up),
        goodput_from_receiver_bits_per_s: (p.down.goodput_bit_s > 0.0)
            .then_some(p.down.goodput_bit_s),
        loss_to_receiver: loss(&p.up),
        loss_from_receiver: loss(&p.down),
        bdp_bytes: (up > 0.0 && rtt > 0.0).then(|| (up / 8.0 * rtt / 1e3) as u64),
        sender_buffers: sender,
        receiver_buffers: receiver,
        controllers: shoal_transport::stats::available_tcp_cc(),
        window_limited_fraction: window_limited(&p.up),
        unreliable,
    }
}

/// The share of the flow's time its sending kernel counted held by the receiver's window or
/// its own send buffer (the two are exclusive states of TCP_INFO's timers).
fn window_limited(d: &Direction) -> Option<f64> {
    let t = d.bulk.sender_tcp.as_ref()?;
    let flow_ms = d.bulk.seconds * 1e3;
    (flow_ms > 0.0).then(|| ((t.rwnd_limited_ms + t.sndbuf_limited_ms) / flow_ms).min(1.0))
}

/// Loss after the probe's warm-up is the path's own; during it, mostly the probe's slow start
/// overflowing the bottleneck queue. Loss after the warm-up in bursts is that overflow too (a
/// controller whose start outlasts the warm-up, BBR at 141 ms): the path's random loss is then
/// not separated, and not claimed.
fn loss(d: &Direction) -> LossObs {
    let total = d.bulk.sender_tcp.as_ref().map(|t| t.loss());
    LossObs {
        total,
        random: d.loss_fraction.filter(|_| d.loss_in_bursts.is_none()),
        queue_overflow: d.warmup_loss_fraction,
        in_bursts: d.loss_in_bursts,
    }
}

/// This host's limits, from /proc/sys.
pub fn local_buffers() -> BufferLimits {
    let read = |p: &str| std::fs::read_to_string(format!("/proc/sys/{p}")).ok();
    BufferLimits {
        tcp_rmem: read("net/ipv4/tcp_rmem").and_then(|s| triple(&s)),
        tcp_wmem: read("net/ipv4/tcp_wmem").and_then(|s| triple(&s)),
        rmem_max: read("net/core/rmem_max").and_then(|s| s.trim().parse().ok()),
        wmem_max: read("net/core/wmem_max").and_then(|s| s.trim().parse().ok()),
    }
}

/// The receiver's limits, from its `info` reply (`facts.tcp_rmem`, …).
pub fn remote_buffers(info: &Reply) -> BufferLimits {
    let fact = |k: &str| info.facts.get(&format!("facts.{k}"));
    BufferLimits {
        tcp_rmem: fact("tcp_rmem").and_then(|s| triple(s)),
        tcp_wmem: fact("tcp_wmem").and_then(|s| triple(s)),
        rmem_max: fact("rmem_max").and_then(|s| s.trim().parse().ok()),
        wmem_max: fact("wmem_max").and_then(|s| s.trim().parse().ok()),
    }
}

/// `"4096 131072 6291456"` → the three numbers.
fn triple(s: &str) -> Option<[u64; 3]> {
    let v: Vec<u64> = s
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    (v.len() == 3).then(|| [v[0], v[1], v[2]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_read_from_the_receivers_facts() {
        let mut info = Reply::default();
        info.facts
            .insert("facts.tcp_rmem".into(), "4096 131072 1048576".into());
        info.facts.insert("facts.rmem_max".into(), "212992".into());
        let b = remote_buffers(&info);
        assert_eq!(b.tcp_rmem, Some([4096, 131072, 1048576]));
        assert_eq!(b.rmem_max, Some(212992));
        assert_eq!(b.tcp_wmem, None);
        assert_eq!(triple("1 2"), None);
    }

    #[test]
    fn loss_in_bursts_after_the_warm_up_is_not_the_paths_random_loss() {
        // BBR's start at 141 ms outlasting the 1 s warm-up on a lossless link: 7% lost after
        // the warm-up, in bursts.
        let mut d = Direction {
            loss_fraction: Some(0.07),
            warmup_loss_fraction: Some(0.0),
            loss_in_bursts: Some(1072.2),
            ..Direction::default()
        };
        let l = loss(&d);
        assert_eq!((l.random, l.in_bursts), (None, Some(1072.2)));
        assert_eq!(l.path_loss(), None);
        // Spread evenly, the same loss is the path's.
        d.loss_in_bursts = None;
        assert_eq!(loss(&d).path_loss(), Some(0.07));
    }

    #[test]
    fn the_window_held_share_adds_the_receive_window_and_the_send_buffer() {
        let mut d = Direction::default();
        assert_eq!(window_limited(&d), None);
        d.bulk.seconds = 10.0;
        d.bulk.sender_tcp = Some(shoal_proto::probe::SenderTcp {
            rwnd_limited_ms: 6000.0,
            sndbuf_limited_ms: 1000.0,
            ..Default::default()
        });
        assert_eq!(window_limited(&d), Some(0.7));
    }
}
