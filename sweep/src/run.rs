//! One run: a fresh destination, the transfer, the counters around it, verification from
//! disk against the source manifest, and the row that records it all.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use shoal_row::metrics;

use crate::assemble;
use crate::context::Sweep;
use crate::dest;
use crate::hooks::tamper;
use crate::linkctx::{counters, udp_drops_in, ReceiverCounters};
use crate::payload;
use crate::progress::Progress;
use crate::tcpmetrics::flush_tcp_metrics;
use crate::transfer::Outcome;
use shoal_matrix::arm::Arm;
use shoal_matrix::axis;
use shoal_matrix::matrix::Config;
use shoal_matrix::plan::{run_id, Planned};
use shoal_report::columns::{col, f3, Row};
use shoal_report::traces;

pub fn result_line(cfg: &Config, row: &Row) -> String {
    let g = |c| row.text(c);
    if g(col::STATUS) == "ok" {
        format!(
            "{} {}: ok {} MB/s in {} s ({})",
            cfg.id,
            cfg.label(),
            g(col::MB_PER_S),
            g(col::SECONDS),
            if g(col::VERIFIED) == "true" {
                "verified"
            } else if !cfg.arm.moves_files() {
                "no files: nothing to verify"
            } else {
                "NOT verified: remote receiver"
            }
        )
    } else if !cfg.arm.moves_files() {
        format!(
            "{} {}: FAILED after {} s: {}",
            cfg.id,
            cfg.label(),
            g(col::SECONDS),
            g(col::ERROR)
        )
    } else {
        format!(
            "{} {}: FAILED after {} s ({} of {} files verified): {}",
            cfg.id,
            cfg.label(),
            g(col::SECONDS),
            g(col::FILES_VERIFIED),
            g(col::PAYLOAD_FILES),
            g(col::ERROR)
        )
    }
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
            drops: shoal_row::hostfacts::UdpDrops {
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
        row.set(col::SWEEP_ID, self.sweep_id.clone());
        row.set(col::CONFIG_ID, cfg.id.clone());
        row.set(col::CONFIG, cfg.label());
        row.set(col::RUN, p.run.to_string());
        row.set(col::ORDER, order.to_string());
        row.set(col::ORDER_SEED, self.opts.seed.to_string());
        row.set(col::KIND, cfg.arm.name().to_string());
        row.set(col::PAYLOAD, payload.name.clone());
        row.set(col::PAYLOAD_FILES, payload.files.to_string());
        row.set(col::PAYLOAD_BYTES, payload.bytes.to_string());
        for (k, v) in &cfg.params {
            if k != axis::PAYLOAD && k != axis::KIND {
                row.set_param(k, v.text());
            }
        }
        row.set(col::TIMEOUT_S, timeout.as_secs_f64().to_string());
        if let Some(l) = &self.link {
            row.extend(&l.cols);
        }

        // A fresh destination: a new folder nobody wrote or deleted before (on a remote
        // receiver: one it creates for this run id over its control channel).
        let mut dest = self
            .dest_root
            .join(format!("{order:05}-{}-r{}", cfg.id, p.run));
        let remote_run = match &self.remote {
            Some(r) => {
                r.make_room(payload.bytes, self.opts.settle, progress)?;
                let run_id = run_id();
                // The configuration's receiver axes, for this run alone on the receiving
                // host (checked before the first run); the row records what it has in effect.
                let settings = shoal_matrix::recvaxes::settings(cfg, &self.matrix.receiver_flags)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", cfg.id))?;
                let prepared = r.control.prepare_run(&run_id, settings)?;
                let folder = prepared.dest;
                r.runs.borrow_mut().push(run_id.clone());
                row.set(col::DEST, folder.clone());
                // A baseline's receiving end is tar, ssh or sftp, not `shoal recv`: its
                // settings would describe a receiver the run never used.
                if let Some(s) = prepared.in_effect.filter(|_| cfg.arm == Arm::Shoal) {
                    row.set(col::RECEIVER_SETTINGS, s.describe());
                }
                row.set(col::RECEIVER_TCP_METRICS, prepared.tcp_metrics);
                row.set(
                    col::DEST_FS,
                    r.facts.get("dest_fs").cloned().unwrap_or_default(),
                );
                for (c, fact) in [
                    (col::RECEIVER_HOST, "host"),
                    (col::RECEIVER_KERNEL, "kernel"),
                    (col::RECEIVER_VERSION, "version"),
                ] {
                    if let Some(v) = r.facts.get(fact) {
                        row.set(c, v.clone());
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
                row.set(col::DEST, dest.display().to_string());
                None
            }
        };
        row.set(
            col::DEST_PREPARED,
            match self.last_bulk_delete.get() {
                // This host's deletes say nothing about the receiving host's file system.
                _ if remote_run.is_some() => {
                    "new folder, created by the receiving host for this run (its control channel)"
                        .into()
                }
                None => "new folder; no bulk delete recorded in the work folder".into(),
                Some(t) => format!(
                    "new folder; last bulk delete in the work folder {:.0} s before this run",
                    t.elapsed().unwrap_or_default().as_secs_f64()
                ),
            },
        );
        row.set(col::DEST_FS_KIND, self.matrix.dest_fs.name());
        if remote_run.is_none() {
            row.set(col::DEST_FS, payload::fs_type(&self.dest_root));
        }
        // A fresh volume for this run (dropped, so unmounted and deleted, when the run is
        // over or fails).
        let volume = if self.matrix.dest_fs.is_volume() && remote_run.is_none() {
            let size = self.matrix.dest_fs_size.unwrap_or_else(|| {
                shoal_matrix::conditions::dest_fs::default_size(
                    self.matrix.dest_fs,
                    payload.bytes,
                    payload.files,
                )
            });
            let images = self.dest_root.with_file_name("images");
            let v = crate::conditions::dest_fs::Volume::create(
                self.matrix.dest_fs,
                &images,
                &dest,
                size,
                self.opts.keep,
            )?;
            v.put(&mut row);
            dest = v.dest.clone();
            row.set(col::DEST, dest.display().to_string());
            Some(v)
        } else {
            None
        };
        // The host profile, in both namespaces for this run (restored when dropped).
        let profile = match (cfg.conditions.profile, &self.link) {
            (Some(prof), Some(l)) => {
                let a = crate::conditions::profile::apply(prof, &l.snd_ns, &l.rcv_ns)?;
                a.in_effect.put(&mut row);
                Some(a)
            }
            _ => None,
        };
        // The link's loss for this run (an axis: changed on the running link).
        if let (Some(p), Some(l)) = (cfg.conditions.loss, &self.link) {
            crate::conditions::loss::apply(&l.name, p, &mut row)?;
        }
        // The receiver's CPU cap: a cgroup of its own for this run (removed when dropped).
        let cpu_group = match cfg.conditions.recv_cpu_quota {
            Some(q) if cfg.arm == Arm::Shoal && self.link.is_some() => {
                Some(shoal_hostctl::cpu_quota::QuotaGroup::create(
                    &format!("shoal-{}-{order:05}", std::process::id()),
                    q,
                    cfg.conditions
                        .recv_cpu_period_us
                        .unwrap_or(shoal_matrix::conditions::cpu_quota::PERIOD_US),
                )?)
            }
            _ => None,
        };
        // Each end's stall group and the CPU hog (Shoal arms on the local link).
        let stalls = match cfg.arm == Arm::Shoal && self.link.is_some() {
            true => {
                shoal_hostctl::stall::RunStalls::create(&cfg.conditions, order, cpu_group.as_ref())?
            }
            false => Default::default(),
        };

        // Quiet wait, then pre-read the source into the page cache.
        let waited = self.quiet_wait(progress);
        row.set(col::QUIET_WAIT_SECONDS, format!("{waited:.1}"));
        let pre = payload::preread(payload)?;
        row.set(col::PREREAD_SECONDS, f3(pre));

        if self.flush_tcp_metrics {
            flush_tcp_metrics()?;
        }
        let before = self.link.as_ref().map(|l| counters(&l.name));
        let rcv_udp_before = self.receiver_counters();
        let load = metrics::load_avg_1m();
        row.set(col::SWEEP_LOAD_1M_START, format!("{load:.2}"));
        // Other work on the cores skews a run's speed: said per run, and per arm in the
        // summary and report.html.
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        if cores > 0 && load > cores as f64 {
            progress.note(&format!(
                "warning: run {order}: 1-minute load {load:.2} at its start exceeds the {cores} \
                 cores (--quiet-wait waits for a quiet machine)"
            ));
        }
        let timestamp = metrics::utc_timestamp();

        let started = Instant::now();
        // Sender, receiver and emulator share this machine's cores (with a remote receiver,
        // this is the sending host alone).
        let host_cpu = crate::hostcpu::Sampler::start(Duration::from_millis(100));
        // TCP's initial window on the emulated link's routes, for this run alone.
        let mut window = None;
        let out = if cfg.arm == Arm::Shoal {
            match crate::conditions::start_window::apply(self.link.as_ref(), &self.opts.out, cfg) {
                Ok(w) => window = w,
                Err(e) => bail!("{e:#}"),
            }
            if let Some(n) = window.as_ref().and_then(|w| w.note.as_ref()) {
                progress.note(n);
            }
            let run_id = remote_run.as_ref().map(|(id, _)| id.as_str());
            // The sender runs on this host (with a remote receiver too): its traces land here.
            let trace_dir = self
                .opts
                .traces
                .then(|| traces::run_dir(&self.opts.out, &cfg.id, &p.run.to_string()));
            self.shoal_transfer(
                order,
                cfg,
                payload,
                &dest,
                run_id,
                trace_dir.as_deref(),
                timeout,
                cpu_group.as_ref(),
                &stalls,
            )
        } else if cfg.arm == Arm::Iperf3 {
            self.iperf3_transfer(order, cfg, payload, timeout)
        } else if let Some((run_id, folder)) = &remote_run {
            self.remote_baseline_transfer(order, cfg, payload, run_id, folder, timeout)
        } else {
            self.baseline_transfer(order, cfg, payload, &dest, timeout)
        };
        if let (Some(a), Some(b)) = (rcv_udp_before, self.receiver_counters()) {
            let d = b.drops.since(a.drops);
            row.set(col::RECEIVER_UDP_RCVBUF_ERRORS, d.rcvbuf_errors.to_string());
            row.set(col::RECEIVER_UDP_IN_ERRORS, d.in_errors.to_string());
            if let (Some(x), Some(y)) = (a.steal, b.steal) {
                row.set(col::RECEIVER_CPU_STEAL_SECONDS, f3((y - x).max(0.0)));
            }
        }
        if let Ok(o) = &out {
            stalls.put(&o.stalls, &mut row);
        }
        drop(stalls);
        if let Some(g) = cpu_group {
            g.put(&mut row);
            g.restore();
        }
        // The initial window's buffer defaults first: they were raised from what the profile
        // set, which the profile then puts back.
        if let Some(w) = window.as_mut() {
            let log = w.restore_buffers()?;
            if !log.is_empty() {
                std::fs::write(self.log(order, "buffers"), log)?;
            }
        }
        if let Some(p) = profile {
            p.restore();
        }
        let host_samples = host_cpu.finish();
        if let Some(busy) = crate::hostcpu::summarise(&host_samples) {
            row.set(col::HOST_BUSY_CORES_P90, format!("{:.2}", busy.p90));
            row.set(col::HOST_BUSY_CORES_MEAN, format!("{:.2}", busy.mean));
            row.set(
                col::HOST_ALL_CORES_BUSY_SHARE,
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

        // The routes go back as they were before anything else can fail.
        if let Some(g) = window.as_mut().and_then(|w| w.guard.take()) {
            let log = g.restore()?;
            std::fs::write(self.log(order, "routes"), log)?;
        }
        if let (Some(l), Some(b)) = (&self.link, before) {
            counters(&l.name).put_run_share(&b, &mut row);
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
                row.put_send_json(j);
                if let Some(c) = self.remote.as_ref().and_then(|r| r.clock) {
                    row.correct_latency(c.offset_ms);
                    row.set(col::CLOCK_OFFSET_MS, format!("{:.3}", c.offset_ms));
                    row.set(col::CLOCK_OFFSET_RTT_MS, format!("{:.3}", c.rtt_ms));
                }
                j["seconds"].as_f64().unwrap_or(out.wall_seconds)
            }
            None => {
                assemble::put_unreported(
                    &mut row,
                    &assemble::Unreported {
                        cfg,
                        payload,
                        out: &out,
                        link: self.link.as_ref(),
                        timestamp,
                        load,
                    },
                );
                out.wall_seconds
            }
        };
        if let Some(w) = &window {
            w.put(&mut row);
        }
        row.set(col::SECONDS, format!("{seconds:.6}"));
        // The same samples over the run's timed window alone (Shoal arms: the row says when
        // its clock started).
        let clock_start = out
            .json
            .as_ref()
            .and_then(|j| j["clock_start_unix_us"].as_u64());
        if let Some(from) = clock_start {
            let timed = crate::hostcpu::within(&host_samples, from, seconds);
            if let Some(busy) = crate::hostcpu::summarise(&timed) {
                row.set(col::DATA_BUSY_CORES_MEAN, format!("{:.2}", busy.mean));
                row.set(
                    col::DATA_ALL_CORES_BUSY_SHARE,
                    format!("{:.2}", busy.all_busy_share),
                );
                row.set(col::DATA_CPU_SAMPLES, busy.samples.to_string());
            }
        }
        assemble::put_outcome(&mut row, &out);

        // Verification: hash the destination from disk, compare with the source manifest.
        // (A sweep has an emulated link, with local destinations, or a remote receiver that
        // hashes its own.)
        if !cfg.arm.moves_files() {
            crate::transfer::iperf3::put_verdict(&mut row, &out);
            return Ok(row);
        }
        let v = match (&self.remote, &remote_run) {
            (Some(r), Some((run_id, _))) => match r.control.hash(run_id) {
                Ok((m, secs)) => payload::compare_with(&payload.manifest, Ok(m), secs),
                Err(e) => payload::compare_with(&payload.manifest, Err(e), 0.0),
            },
            _ => payload::verify(&payload.manifest, &dest),
        };
        assemble::put_verdict(&mut row, &out, &v, payload, seconds);
        if let Some(v) = volume {
            v.restore();
        }
        if self.opts.traces {
            let dir = traces::run_dir(&self.opts.out, &cfg.id, &p.run.to_string());
            if let Err(e) = traces::compress_dir(&dir) {
                progress.note(&format!(
                    "traces of {} left uncompressed: {e:#}",
                    dir.display()
                ));
            }
        }
        Ok(row)
    }
}
