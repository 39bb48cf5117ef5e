//! One run: a fresh destination, the transfer, the counters around it, verification from
//! disk against the source manifest, and the row that records it all.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use shoal_common::metrics;

use crate::arm::Arm;
use crate::axis::{self, AxisValue};
use crate::baseline;
use crate::columns::{self, Row};
use crate::context::Sweep;
use crate::dest;
use crate::hooks::tamper;
use crate::linkctx::{counters, udp_drops_in, ReceiverCounters};
use crate::matrix::Config;
use crate::payload;
use crate::plan::{random_u64, Planned};
use crate::progress::Progress;
use crate::tcpmetrics::flush_tcp_metrics;
use crate::transfer::Outcome;

pub fn result_line(cfg: &Config, row: &Row) -> String {
    let g = |k: &str| row.get(k).cloned().unwrap_or_default();
    if g("status") == "ok" {
        format!(
            "{} {}: ok {} MB/s in {} s ({})",
            cfg.id,
            cfg.label(),
            g("mb_per_s"),
            g("seconds"),
            if g("verified") == "true" {
                "verified"
            } else {
                "NOT verified: remote receiver"
            }
        )
    } else {
        format!(
            "{} {}: FAILED after {} s ({} of {} files verified): {}",
            cfg.id,
            cfg.label(),
            g("seconds"),
            g("files_verified"),
            g("payload_files"),
            g("error")
        )
    }
}

pub fn f3(x: f64) -> String {
    format!("{x:.3}")
}

impl Sweep<'_> {
    /// The receiving end's UDP drop counters (and, on another host, its CPU steal) now: read
    /// inside the receiver's namespace, or asked of a remote receiver's control channel.
    pub fn receiver_counters(&self) -> Option<ReceiverCounters> {
        if let Some(l) = &self.link {
            return Some(ReceiverCounters {
                drops: udp_drops_in(&l.rcv_ns)?,
                // One host: the sender's row has the machine's steal.
                steal: None,
            });
        }
        let facts = self.remote.as_ref()?.control.counters().ok()?.facts;
        let num = |k: &str| facts.get(k).and_then(|v| v.parse::<u64>().ok());
        Some(ReceiverCounters {
            drops: shoal_common::hostfacts::UdpDrops {
                rcvbuf_errors: num("udp_rcvbuf_errors")?,
                in_errors: num("udp_in_errors")?,
            },
            steal: facts
                .get("cpu_steal_seconds")
                .and_then(|v| v.parse::<f64>().ok()),
        })
    }

    pub fn one_run(&self, order: usize, p: Planned, progress: &mut Progress) -> Result<Row> {
        let cfg = &self.matrix.configs[p.config];
        let payload = &self.payloads[cfg.payload()];
        let timeout = cfg.time_limit(self.opts.timeout);

        let mut row = Row::new();
        let mut put = |k: &str, v: String| {
            row.insert(k.to_string(), v);
        };
        put("sweep_id", self.sweep_id.clone());
        put("config_id", cfg.id.clone());
        put("config", cfg.label());
        put("run", p.run.to_string());
        put("order", order.to_string());
        put("order_seed", self.opts.seed.to_string());
        put("kind", cfg.arm.name().to_string());
        put("payload", payload.name.clone());
        put("payload_files", payload.files.to_string());
        put("payload_bytes", payload.bytes.to_string());
        for (k, v) in &cfg.params {
            if k != axis::PAYLOAD && k != axis::KIND {
                put(&columns::param_column(k), v.text());
            }
        }
        put("timeout_s", timeout.as_secs_f64().to_string());
        if let Some(l) = &self.link {
            row.extend(l.cols.clone());
        }

        // A fresh destination: a new folder nobody wrote or deleted before (on a remote
        // receiver: one it creates for this run id over its control channel).
        let dest = self
            .dest_root
            .join(format!("{order:05}-{}-r{}", cfg.id, p.run));
        let remote_run = match &self.remote {
            Some(r) => {
                r.make_room(payload.bytes, self.opts.settle, progress)?;
                let run_id = format!("{:016x}{:016x}", random_u64(), random_u64());
                let folder = r.control.prepare(&run_id)?;
                r.runs.borrow_mut().push(run_id.clone());
                row.insert("dest".into(), folder.clone());
                row.insert(
                    "dest_fs".into(),
                    r.facts.get("dest_fs").cloned().unwrap_or_default(),
                );
                for (k, v) in &r.facts {
                    if matches!(k.as_str(), "host" | "kernel" | "version") {
                        row.insert(format!("receiver_{k}"), v.clone());
                    }
                }
                Some((run_id, folder))
            }
            None => {
                dest::make_room(
                    &self.dest_root,
                    &self.opts.work,
                    self.opts.settle,
                    &self.last_bulk_delete,
                    payload.bytes,
                    progress,
                )?;
                row.insert("dest".into(), dest.display().to_string());
                None
            }
        };
        row.insert(
            "dest_prepared".into(),
            match self.last_bulk_delete.get() {
                None => "new folder; no bulk delete recorded in the work folder".into(),
                Some(t) => format!(
                    "new folder; last bulk delete in the work folder {:.0} s before this run",
                    t.elapsed().unwrap_or_default().as_secs_f64()
                ),
            },
        );
        if remote_run.is_none() {
            row.insert("dest_fs".into(), payload::fs_type(&self.dest_root));
        }

        // Quiet wait, then pre-read the source into the page cache.
        let waited = self.quiet_wait(progress);
        row.insert("quiet_wait_seconds".into(), format!("{waited:.1}"));
        let pre = payload::preread(payload)?;
        row.insert("preread_seconds".into(), f3(pre));

        if self.flush_tcp_metrics {
            flush_tcp_metrics()?;
        }
        let before = self.link.as_ref().map(|l| counters(&l.name));
        let rcv_udp_before = self.receiver_counters();
        let load = metrics::load_avg_1m();
        row.insert("sweep_load_1m_start".into(), format!("{load:.2}"));
        let timestamp = metrics::utc_timestamp();

        let started = Instant::now();
        // Sender, receiver and emulator share this machine's cores (with a remote receiver,
        // this is the sending host alone).
        let host_cpu = crate::hostcpu::Sampler::start(Duration::from_millis(100));
        let out = if cfg.arm == Arm::Shoal {
            let run_id = remote_run.as_ref().map(|(id, _)| id.as_str());
            self.shoal_transfer(order, cfg, payload, &dest, run_id, timeout)
        } else {
            self.baseline_transfer(order, cfg, payload, &dest, timeout)
        };
        if let (Some(a), Some(b)) = (rcv_udp_before, self.receiver_counters()) {
            let d = b.drops.since(a.drops);
            row.insert(
                "receiver_udp_rcvbuf_errors".into(),
                d.rcvbuf_errors.to_string(),
            );
            row.insert("receiver_udp_in_errors".into(), d.in_errors.to_string());
            if let (Some(x), Some(y)) = (a.steal, b.steal) {
                row.insert("receiver_cpu_steal_seconds".into(), f3((y - x).max(0.0)));
            }
        }
        if let Some(busy) = host_cpu.finish() {
            row.insert("host_busy_cores_p90".into(), format!("{:.2}", busy.p90));
            row.insert("host_busy_cores_mean".into(), format!("{:.2}", busy.mean));
            row.insert(
                "host_all_cores_busy_share".into(),
                format!("{:.2}", busy.all_busy_share),
            );
        }
        // A run that could not even start (e.g. the receiver did not come up) is a failure
        // row too, and the sweep goes on.
        let out = out.unwrap_or_else(|e| Outcome {
            error: format!("{e:#}"),
            wall_seconds: started.elapsed().as_secs_f64(),
            ..Default::default()
        });

        if let (Some(l), Some(b)) = (&self.link, before) {
            let a = counters(&l.name);
            // Counters are cumulative over the link's life: the run's share is the difference.
            for (key, after, before) in [
                ("tun_tx_dropped_snd", a.tx_dropped_snd, b.tx_dropped_snd),
                ("tun_tx_dropped_rcv", a.tx_dropped_rcv, b.tx_dropped_rcv),
                ("link_dropped_queue", a.dropped_queue, b.dropped_queue),
                ("link_dropped_loss", a.dropped_loss, b.dropped_loss),
                (
                    "link_dropped_blackhole",
                    a.dropped_blackhole,
                    b.dropped_blackhole,
                ),
                ("link_late_over_1ms", a.late_over_1ms, b.late_over_1ms),
            ] {
                row.insert(key.into(), after.saturating_sub(before).to_string());
            }
            row.insert("link_late_max_us".into(), a.late_max_us.to_string());
            if let (Some(after), Some(before)) = (a.forwarder_cpu_s, b.forwarder_cpu_s) {
                // The emulator shares the machine's cores with both ends.
                row.insert("link_cpu_seconds".into(), f3(after - before));
            }
            row.insert("link_up_after".into(), a.forwarder_alive.to_string());
        }

        // Test hook: change the destination between the transfer and the hashing.
        if self.hooks.tamper(order) {
            // A remote folder can be reached only when the "remote" receiver is this host.
            let target = match &remote_run {
                Some((_, folder)) => PathBuf::from(folder),
                None => dest.clone(),
            };
            let what = tamper(&target);
            progress.note(&format!("test hook: {what}"));
        }

        // The RunRow fields: from shoal send's JSON, or filled here for baselines and for
        // runs that printed nothing (killed).
        let seconds = match &out.json {
            Some(j) => {
                columns::put_send_json(&mut row, j);
                j["seconds"].as_f64().unwrap_or(out.wall_seconds)
            }
            None => {
                row.insert("timestamp".into(), timestamp);
                row.insert(
                    "run_id".into(),
                    format!("{:016x}{:016x}", random_u64(), random_u64()),
                );
                row.insert(
                    "mode".into(),
                    match cfg.arm {
                        Arm::Shoal => cfg.shoal_mode(),
                        a => a.name().to_string(),
                    },
                );
                row.insert(
                    "tls".into(),
                    (cfg.arm.is_baseline()
                        || !matches!(cfg.get(axis::PLAIN), Some(AxisValue::Bool(true))))
                    .to_string(),
                );
                row.insert("files".into(), payload.files.to_string());
                row.insert("bytes".into(), payload.bytes.to_string());
                row.insert("load_1m_start".into(), format!("{load:.2}"));
                row.insert("kernel".into(), metrics::kernel_release());
                row.insert("host".into(), metrics::host_name());
                if let Some(e) = &out.exit {
                    if e.max_rss_bytes > 0 {
                        row.insert("sender_peak_rss_bytes".into(), e.max_rss_bytes.to_string());
                        row.insert("sender_cpu_seconds".into(), f3(e.cpu_seconds));
                    }
                }
                if let Some(rss) = out.receiver_peak_rss_bytes {
                    row.insert("receiver_peak_rss_bytes".into(), rss.to_string());
                }
                if let Some(l) = &self.link {
                    if cfg.arm.is_baseline() && cfg.arm.crosses_link() {
                        row.insert("cc".into(), l.default_cc.clone());
                    }
                    row.insert(
                        "receiver".into(),
                        match cfg.arm {
                            Arm::Shoal => l.rcv_addr.clone(),
                            Arm::TarLocal => "local".into(),
                            Arm::TarTcp => format!("{}:{}", l.rcv_addr, baseline::TAR_TCP_PORT),
                            Arm::TarSsh | Arm::RsyncSsh | Arm::Sftp => {
                                format!("{}:22", l.rcv_addr)
                            }
                        },
                    );
                }
                out.wall_seconds
            }
        };
        row.insert("seconds".into(), format!("{seconds:.6}"));
        row.insert(
            "send_status".into(),
            row.get("status")
                .cloned()
                .unwrap_or_else(|| if out.error.is_empty() { "ok" } else { "failed" }.into()),
        );
        row.insert("send_error".into(), out.error.clone());
        row.insert(
            "exit_code".into(),
            out.exit.as_ref().map(|e| e.describe()).unwrap_or_default(),
        );
        row.insert("timed_out".into(), out.timed_out.to_string());
        row.insert("receiver_report".into(), out.receiver_report.clone());
        if let Some(cpu) = out.receiver_cpu_seconds {
            row.insert("receiver_cpu_seconds".into(), f3(cpu));
        }
        row.insert("command".into(), out.command.clone());

        // Verification: hash the destination from disk, compare with the source manifest.
        // (A sweep has an emulated link, with local destinations, or a remote receiver that
        // hashes its own.)
        let (verified_ok, verify_note) = {
            let v = match (&self.remote, &remote_run) {
                (Some(r), Some((run_id, _))) => match r.control.hash(run_id) {
                    Ok((m, secs)) => payload::compare_with(&payload.manifest, Ok(m), secs),
                    Err(e) => payload::compare_with(&payload.manifest, Err(e), 0.0),
                },
                _ => payload::verify(&payload.manifest, &dest),
            };
            row.insert("verified".into(), v.identical.to_string());
            row.insert("verify_result".into(), v.summary.clone());
            row.insert("verify_seconds".into(), f3(v.seconds));
            row.insert("files_verified".into(), v.files_ok.to_string());
            row.insert("bytes_verified".into(), v.bytes_ok.to_string());
            if !out.error.is_empty() || !v.identical {
                row.insert(
                    "partial_mb_per_s".into(),
                    f3(if seconds > 0.0 {
                        v.bytes_ok as f64 / 1e6 / seconds
                    } else {
                        0.0
                    }),
                );
            }
            (v.identical, v.summary)
        };

        let ok = out.error.is_empty() && verified_ok;
        row.insert("status".into(), if ok { "ok" } else { "failed" }.into());
        let error = if !out.error.is_empty() {
            if verified_ok {
                out.error.clone()
            } else {
                format!("{}; destination: {verify_note}", out.error)
            }
        } else if !verified_ok {
            format!("verification failed: {verify_note}")
        } else {
            String::new()
        };
        row.insert("error".into(), error);
        if ok {
            let f = payload.files as f64;
            if out.json.is_none() {
                row.insert("files_ready".into(), payload.files.to_string());
                row.insert("bytes_ready".into(), payload.bytes.to_string());
            }
            row.insert("mb_per_s".into(), f3(payload.bytes as f64 / 1e6 / seconds));
            row.insert("files_per_s".into(), format!("{:.1}", f / seconds));
        } else {
            // A failed run never carries a speed.
            row.insert("mb_per_s".into(), "0".into());
            row.insert("files_per_s".into(), "0".into());
        }
        Ok(row)
    }
}
