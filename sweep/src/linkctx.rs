//! The local emulated link as the runs use it: its namespaces and addresses, its static row
//! columns, its cumulative counters, and what each end had in effect.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use crate::options::Options;
use shoal_matrix::linkspec::EmulatedLink;
use shoal_report::columns::{col, f3, Row};
use shoal_report::legacy::loss_percent;

/// The local emulated link, as the runs use it.
pub struct LinkCtx {
    pub name: String,
    pub snd_ns: String,
    pub rcv_ns: String,
    pub rcv_addr: String,
    /// The sender's address (the receiver's route back, for `initrwnd`).
    pub snd_addr: String,
    /// The sender namespace's default TCP congestion controller: what the baselines' TCP
    /// connections (ssh, socat) use, since they do not choose one.
    pub default_cc: String,
    /// Static link columns of every row.
    pub cols: Row,
}

#[derive(Default, Clone, Copy)]
pub struct Counters {
    pub forwarder_alive: bool,
    pub tx_dropped_snd: u64,
    pub tx_dropped_rcv: u64,
    pub dropped_queue: u64,
    pub dropped_loss: u64,
    pub dropped_blackhole: u64,
    pub late_over_1ms: u64,
    pub late_max_us: u64,
    /// CPU seconds the userspace forwarder has used so far (none with netem).
    pub forwarder_cpu_s: Option<f64>,
}

pub fn counters(name: &str) -> Counters {
    let Ok(i) = shoal_link::link_info(name) else {
        return Counters::default();
    };
    let mut c = Counters {
        forwarder_alive: i.forwarder_alive || i.state.backend == shoal_link::Backend::Netem,
        tx_dropped_snd: i.tun_tx_dropped.snd.unwrap_or(0),
        tx_dropped_rcv: i.tun_tx_dropped.rcv.unwrap_or(0),
        forwarder_cpu_s: i
            .state
            .forwarder_pid
            .filter(|_| i.forwarder_alive)
            .and_then(shoal_link::check::process_cpu_s),
        ..Default::default()
    };
    if let Some(s) = i.counters {
        c.dropped_queue = s.up.dropped_queue + s.down.dropped_queue;
        c.dropped_loss = s.up.dropped_loss + s.down.dropped_loss;
        c.dropped_blackhole = s.up.dropped_blackhole + s.down.dropped_blackhole;
        c.late_over_1ms = s.up.late_over_1ms + s.down.late_over_1ms;
        c.late_max_us = s.up.late_max_us.max(s.down.late_max_us);
    }
    c
}

impl Counters {
    /// Puts this run's share of the link's counters in `row`: `self` read after the run,
    /// `before` before it.
    pub fn put_run_share(&self, before: &Counters, row: &mut Row) {
        // Counters are cumulative over the link's life: the run's share is the difference.
        for (key, now, then) in [
            (
                col::TUN_TX_DROPPED_SND,
                self.tx_dropped_snd,
                before.tx_dropped_snd,
            ),
            (
                col::TUN_TX_DROPPED_RCV,
                self.tx_dropped_rcv,
                before.tx_dropped_rcv,
            ),
            (
                col::LINK_DROPPED_QUEUE,
                self.dropped_queue,
                before.dropped_queue,
            ),
            (
                col::LINK_DROPPED_LOSS,
                self.dropped_loss,
                before.dropped_loss,
            ),
            (
                col::LINK_DROPPED_BLACKHOLE,
                self.dropped_blackhole,
                before.dropped_blackhole,
            ),
            (
                col::LINK_LATE_OVER_1MS,
                self.late_over_1ms,
                before.late_over_1ms,
            ),
        ] {
            row.set(key, now.saturating_sub(then).to_string());
        }
        row.set(col::LINK_LATE_MAX_SINCE_UP_US, self.late_max_us.to_string());
        if let (Some(after), Some(before)) = (self.forwarder_cpu_s, before.forwarder_cpu_s) {
            // The emulator shares the machine's cores with both ends.
            row.set(col::LINK_CPU_SECONDS, f3(after - before));
        }
        row.set(col::LINK_UP_AFTER, self.forwarder_alive.to_string());
    }
}

pub fn link_columns(i: &shoal_link::LinkInfo) -> Row {
    let s = &i.state;
    let mut row = Row::new();
    row.set(col::LINK_NAME, s.name.clone());
    row.set(col::LINK_BACKEND, s.backend.to_string());
    row.set(col::LINK_RTT_MS, format!("{}", s.rtt_ns as f64 / 1e6));
    row.set(col::LINK_RATE_BPS, s.rate_bps.to_string());
    row.set(col::LINK_DOWN_RATE_BPS, s.down_rate_bps.to_string());
    row.set(col::LINK_QUEUE_BYTES, s.queue_bytes.to_string());
    row.set(col::LINK_LOSS_PERCENT, loss_percent(s.loss));
    row.set(col::LINK_MTU, s.mtu.to_string());
    row.set(col::LINK_OFFLOAD, s.offload.describe());
    row.set_triple(col::LINK_SND_TCP_WMEM, &s.sysctls.snd_tcp_wmem);
    row.set_triple(col::LINK_SND_TCP_RMEM, &s.sysctls.snd_tcp_rmem);
    row.set_triple(col::LINK_RCV_TCP_RMEM, &s.sysctls.rcv_tcp_rmem);
    row.set_triple(col::LINK_RCV_TCP_WMEM, &s.sysctls.rcv_tcp_wmem);
    row.set(col::LINK_RMEM_MAX, s.sysctls.rmem_max.clone());
    row.set(col::LINK_WMEM_MAX, s.sysctls.wmem_max.clone());
    row
}

/// `shoal host-facts` inside namespace `ns` (towards `peer`; `dest`'s file system).
pub fn host_facts(bin: &Path, ns: &str, peer: &str, dest: Option<&Path>) -> serde_json::Value {
    let mut cmd = Command::new(bin);
    cmd.args(["host-facts", "--peer", peer]);
    if let Some(d) = dest {
        cmd.arg("--dest").arg(d);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = shoal_link::spawn_in_netns(ns, &mut cmd).and_then(|c| c.wait_with_output());
    match out {
        Ok(o) if o.status.success() => serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| serde_json::json!({ "error": format!("unreadable facts: {e}") })),
        Ok(o) => serde_json::json!({ "error": String::from_utf8_lossy(&o.stderr).trim() }),
        Err(e) => serde_json::json!({ "error": format!("{e:#}") }),
    }
}

/// The receiving end's counters at one moment (see `Sweep::receiver_counters`).
pub struct ReceiverCounters {
    pub drops: shoal_row::hostfacts::UdpDrops,
    pub steal: Option<f64>,
}

/// UDP drop counters of namespace `ns` now (`/proc/net/snmp` read inside it).
pub fn udp_drops_in(ns: &str) -> Option<shoal_row::hostfacts::UdpDrops> {
    let mut cmd = Command::new("cat");
    cmd.arg("/proc/net/snmp")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let out = shoal_link::spawn_in_netns(ns, &mut cmd)
        .ok()?
        .wait_with_output()
        .ok()?;
    shoal_row::hostfacts::parse_snmp_udp(&String::from_utf8_lossy(&out.stdout))
}

/// Brings the matrix's emulated link up, checks it unless told not to, and records it and what each end had in effect in `meta`.
pub fn bring_up(
    spec: &EmulatedLink,
    opts: &Options,
    dest_root: &Path,
    meta: &mut serde_json::Value,
) -> Result<(shoal_hostctl::owned::claim::OwnedLink, LinkCtx)> {
    let (name, check) = (&spec.name, &spec.check);
    let cfg = spec.up_config();
    let launcher = shoal_link::Launcher {
        exe: opts.shoal_bin.clone(),
        prefix: vec!["link".into(), "forward".into()],
    };
    let g = shoal_hostctl::owned::claim::OwnedLink::up(&cfg, &launcher)
        .with_context(|| format!("bringing link {name} up (needs root)"))?;
    let info = shoal_link::link_info(name)?;
    println!(
        "link {name}: {} RTT, {} up, {} down, queue {} B, loss {}, backend {}",
        info.rtt,
        info.rate,
        info.down_rate,
        info.state.queue_bytes,
        info.state.loss,
        info.state.backend
    );
    meta["link"] = serde_json::to_value(&info)?;
    let check_state = if opts.check.unwrap_or(*check) {
        check_link(name, opts, meta)?
    } else {
        meta["link_check"] = serde_json::json!("not run ([link] check = false or --no-check)");
        "not run"
    };
    let st = g.state().clone();
    // What each end had in effect, read inside its namespace.
    // Global settings (udp_mem) are visible only outside the namespaces: "host".
    meta["ends"] = serde_json::json!({
        "host": shoal_row::hostfacts::HostFacts::collect(None, None),
        "sender": host_facts(&opts.shoal_bin, &st.snd_ns, &st.rcv_addr, None),
        "receiver": host_facts(&opts.shoal_bin, &st.rcv_ns, &st.snd_addr, Some(dest_root)),
    });
    let ctx = LinkCtx {
        name: name.clone(),
        snd_ns: st.snd_ns.clone(),
        rcv_ns: st.rcv_ns.clone(),
        rcv_addr: st.rcv_addr.clone(),
        snd_addr: st.snd_addr.clone(),
        default_cc: shoal_link::netns::read_sysctl_in(
            &st.snd_ns,
            "net.ipv4.tcp_congestion_control",
        )
        .unwrap_or_default(),
        cols: {
            let mut cols = link_columns(&info);
            cols.set(col::LINK_CHECK, check_state);
            cols
        },
    };
    Ok((g, ctx))
}

/// Checks the link (after the quiet wait, so that the check sees the machine the runs will):
/// a failed check stops the sweep, its failing rows printed, unless `--accept-failed-check`,
/// which records that the runs went on (meta.json `link_check_accepted`, runs.csv
/// `link_check`). Returns the state for runs.csv.
fn check_link(name: &str, opts: &Options, meta: &mut serde_json::Value) -> Result<&'static str> {
    crate::quiet::wait_for_quiet(opts, |s| println!("{s}"));
    println!("checking link {name} (shoal link check; 12–20 s at 141 ms)…");
    let report = match std::env::var("SHOAL_SWEEP_TEST_CHECK") {
        // Test hook: a failing check without measuring (docs/sweep.md, "Test hooks").
        Ok(v) if v == "fail" => Ok(serde_json::json!({"pass": false, "rows": [{
            "metric": "idle RTT (median)", "expected": "as the matrix asks",
            "measured": "SHOAL_SWEEP_TEST_CHECK=fail", "tolerance": "", "verdict": "fail"}]})),
        _ => shoal_link::check(name, &shoal_link::CheckOptions::default())
            .map(|r| serde_json::to_value(&r).unwrap_or_default()),
    };
    let rep = match report {
        Ok(rep) => rep,
        Err(e) => {
            println!("link check could not run: {e:#}");
            meta["link_check"] = serde_json::json!({ "error": format!("{e:#}") });
            return Ok("could not run");
        }
    };
    meta["link_check"] = rep;
    let Some(rows) = shoal_report::warnings::failed_check_rows(meta) else {
        println!("link check: pass");
        return Ok("pass");
    };
    println!("link check: FAIL");
    for r in &rows {
        println!("  {r}");
    }
    if !opts.accept_failed_check {
        crate::meta::write_meta(&opts.out, meta)?;
        anyhow::bail!(
            "link check failed ({} failing row(s) above; meta.json → link_check): the link is not \
             what the matrix asks for, so no run was started; --accept-failed-check runs the \
             sweep anyway",
            rows.len()
        );
    }
    meta["link_check_accepted"] = serde_json::json!(true);
    println!(
        "link check FAILED; the sweep goes on (--accept-failed-check): runs.csv (link_check), \
         meta.json, the summary and report.html say so"
    );
    Ok("FAILED, accepted")
}
