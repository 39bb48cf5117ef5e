//! The text tables for `check` and `status` (the verdicts they show are judged in
//! `verdict`).

use std::fmt::Write as _;
use std::time::Duration;

use crate::ctl::status::LinkInfo;
use crate::parse::{format_duration, format_rate, Loss};
use crate::verdict::{CheckReport, Verdict};

impl CheckReport {
    /// The fidelity table as text.
    pub fn table(&self) -> String {
        let st = &self.link.state;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "link {} ({} backend, offload {}): rtt {}, rate {} / {}, queue {} B, loss {}, mtu {}",
            st.name,
            st.backend,
            st.offload.describe(),
            format_duration(Duration::from_nanos(st.rtt_ns)),
            format_rate(st.rate_bps),
            format_rate(st.down_rate_bps),
            st.queue_bytes,
            Loss(st.loss),
            st.mtu
        );
        let w0 = self
            .rows
            .iter()
            .map(|r| r.metric.chars().count())
            .max()
            .unwrap_or(0);
        let w1 = self
            .rows
            .iter()
            .map(|r| r.expected.chars().count())
            .max()
            .unwrap_or(0);
        let w2 = self
            .rows
            .iter()
            .map(|r| r.tolerance.chars().count())
            .max()
            .unwrap_or(0);
        for r in &self.rows {
            let v = match r.verdict {
                Verdict::Pass => "PASS",
                Verdict::Fail => "FAIL",
                Verdict::Info => "    ",
            };
            let _ = writeln!(
                s,
                "{v}  {:w0$}  {:w1$}  {:w2$}  {}",
                r.metric,
                r.expected,
                r.tolerance,
                r.measured,
                w0 = w0,
                w1 = w1,
                w2 = w2
            );
        }
        let series: Vec<String> = self
            .throughput
            .series_mbps
            .iter()
            .map(|m| format!("{m:.0}"))
            .collect();
        let _ = writeln!(s, "goodput per 0.5 s (Mbit/s): {}", series.join(" "));
        let _ = writeln!(
            s,
            "{}",
            if self.pass {
                "check: PASS"
            } else {
                "check: FAIL"
            }
        );
        s
    }
}

/// `shoal link status` as text.
pub fn status_text(i: &LinkInfo) -> String {
    let st = &i.state;
    let mut s = String::new();
    let _ = writeln!(s, "link {} ({} backend)", st.name, st.backend);
    let _ = writeln!(
        s,
        "  {} {} <-> {} {} on {}/{}",
        st.snd_ns, st.snd_addr, st.rcv_ns, st.rcv_addr, st.device, st.prefix_len
    );
    let _ = writeln!(
        s,
        "  rtt {}, rate {} up / {} down, queue {} ({} B / {} B), loss {}, mtu {}, seed {}",
        i.rtt,
        i.rate,
        i.down_rate,
        st.queue_spec,
        st.queue_bytes,
        st.down_queue_bytes,
        Loss(st.loss),
        st.mtu,
        st.seed
    );
    let _ = writeln!(
        s,
        "  sysctls: snd tcp_rmem [{}] tcp_wmem [{}]; rcv tcp_rmem [{}] tcp_wmem [{}]; global rmem_max {} wmem_max {}",
        st.sysctls.snd_tcp_rmem, st.sysctls.snd_tcp_wmem, st.sysctls.rcv_tcp_rmem,
        st.sysctls.rcv_tcp_wmem, st.sysctls.rmem_max, st.sysctls.wmem_max
    );
    if let Some(pid) = st.forwarder_pid {
        let _ = writeln!(
            s,
            "  forwarder pid {pid} ({}), offload {}",
            if i.forwarder_alive {
                "running"
            } else {
                "NOT RUNNING"
            },
            st.offload.describe()
        );
    }
    if let Some(c) = &i.counters {
        for (dir, d) in [("up  ", &c.up), ("down", &c.down)] {
            let _ = writeln!(
                s,
                "  {dir}: forwarded {} pkts ({} wire segs, {} B), dropped queue {} loss {} blackhole {}, write errors {}, late max {} us, >1 ms late {}",
                d.forwarded, d.forwarded_segments, d.forwarded_wire_bytes, d.dropped_queue,
                d.dropped_loss, d.dropped_blackhole, d.write_errors, d.late_max_us, d.late_over_1ms
            );
        }
        if let Some(b) = &c.blackhole {
            let _ = writeln!(
                s,
                "  blackhole: {} ({} request(s) so far)",
                if b.active {
                    format!("ACTIVE, {:.1} s left", b.remaining_ms as f64 / 1000.0)
                } else {
                    "off".to_string()
                },
                b.requests
            );
        }
    }
    let show = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_else(|| "?".into());
    if st.forwarder_pid.is_some() {
        let _ = writeln!(
            s,
            "  TUN tx_dropped: snd {}, rcv {}",
            show(i.tun_tx_dropped.snd),
            show(i.tun_tx_dropped.rcv)
        );
    }
    s
}
