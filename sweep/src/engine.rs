//! The sweep's lifecycle: contacts the receiver or brings the link (and sshd) up, prepares
//! the payloads, runs the shuffled plan one run at a time, writes one row per run, and tears
//! everything down.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result};
use shoal_row::metrics;

use crate::baseline::{self, Sshd};
use crate::context::Sweep;
use crate::continuation::rows::RowLog;
use crate::dest::{bulk_delete, last_bulk_delete, RemoteCtx};
use crate::hooks::Hooks;
use crate::linkctx;
use crate::meta::{self, write_meta};
use crate::options::{Options, Summary};
use crate::payload;
use crate::progress::Progress;
use crate::run::result_line;
use crate::tcpmetrics::guard_tcp_metrics;
use shoal_hostctl::proc;
use shoal_matrix::arm::Arm;
use shoal_matrix::linkspec::{LinkSpec, RemoteReceiver};
use shoal_matrix::matrix::Matrix;
use shoal_matrix::plan::plan;
use shoal_remote::Remote;
use shoal_report::columns::{self, col};

/// Runs a whole sweep; see docs/sweep.md.
pub fn run(opts: &Options, matrix: &Matrix) -> Result<Summary> {
    proc::install_interrupt_handler();
    // Before anything is created: the tools a destination volume needs.
    crate::conditions::dest_fs::check_tools(matrix.dest_fs)?;
    baseline::check_tools(matrix.configs.iter().map(|c| c.arm))?;
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("cannot create {}", opts.out.display()))?;
    // Refuses a folder a running sweep writes; releases what a killed one left.
    shoal_hostctl::owned::begin(&opts.out)?;
    if let LinkSpec::Emulated(l) = &matrix.link {
        // Claimed before anything else is acquired, so the next sweep on this link finds
        // whatever this one leaves.
        shoal_hostctl::owned::claim::take(
            &l.name,
            &shoal_hostctl::owned::current().unwrap_or_default(),
        )?;
    }
    if opts.continuation.is_none() {
        std::fs::copy(&opts.matrix_path, opts.out.join("matrix.toml"))
            .context("copying the matrix")?;
    }
    let sweep_id = opts
        .out
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sweep".into());
    let started_at = metrics::utc_timestamp();
    /// Clock probes per estimate of a remote receiver's clock offset.
    const CLOCK_PROBES: usize = 8;
    let the_plan = shoal_matrix::start_window::with_warmups(
        plan(matrix.configs.len(), opts.runs, opts.seed),
        &matrix.configs,
    );
    let warmup_count = the_plan
        .iter()
        .filter(|p| p.run == shoal_matrix::start_window::WARMUP_RUN)
        .count();
    let total = the_plan.len() - warmup_count;
    println!(
        "sweep {sweep_id}: {} configurations × {} runs = {total} runs, order seed {}{}",
        matrix.configs.len(),
        opts.runs,
        opts.seed,
        if warmup_count > 0 {
            format!(" (and {warmup_count} unrecorded warm-up runs)")
        } else {
            String::new()
        }
    );
    if let Some(c) = &opts.continuation {
        c.announce(total);
    }

    // A remote receiver must take control connections: that is how every run gets a fresh
    // folder and is verified. Contacted before payloads are generated, its problems named as
    // what they are (address, pin, token, no --control).
    let mut path_start = None;
    let remote_ctx = match &matrix.link {
        LinkSpec::Remote(r) => {
            let control = Remote::new(&r.receiver, r.pin.as_deref(), r.token_file.as_deref())?;
            let info = shoal_remote::first_contact(&control, r.token_file.as_deref())?;
            shoal_matrix::remote_arms::check_receiver(
                matrix.configs.iter().map(|c| c.arm),
                &r.receiver,
                &info.facts,
            )?;
            // iperf3 starts its server on B through the same login.
            if matrix
                .configs
                .iter()
                .any(|c| c.arm.over_ssh() || c.arm == Arm::Iperf3)
            {
                crate::transfer::remote_baseline::probe_ssh(r)?;
            }
            let clock = control.clock_offset(CLOCK_PROBES)?;
            println!(
                "receiver clock: {:+.3} ms from this host's (probe round trip {:.3} ms; per-file latency is corrected by it)",
                clock.offset_ms, clock.rtt_ms
            );
            if opts.probe {
                path_start = Some(shoal_remote::pathcheck::measure(
                    &control,
                    "before the first run",
                ));
            }
            Some(RemoteCtx {
                control,
                runs: Default::default(),
                facts: info.facts,
                clock: Some(clock),
            })
        }
        LinkSpec::Emulated(_) => None,
    };

    // Work area: payload cache (kept) and this sweep's destinations (deleted at the end).
    let work_run = opts
        .work
        .join(format!("run-{sweep_id}-{}", std::process::id()));
    let dest_root = work_run.join("dest");
    let logs = opts.out.join("logs");
    let work_owned = (!opts.keep).then(|| {
        shoal_hostctl::owned::acquire(shoal_hostctl::owned::Item::WorkDir {
            path: work_run.clone(),
        })
    });
    for d in [&dest_root, &logs] {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }

    // Payloads: generated once, hashed once.
    let mut payloads = BTreeMap::new();
    for name in matrix
        .configs
        .iter()
        .map(|c| c.payload().to_string())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let spec = matrix.payload(&name).expect("checked by the matrix");
        let t0 = Instant::now();
        let p = payload::prepare(spec, &opts.work.join("payloads"))?;
        println!(
            "payload {name}: {} files, {} bytes at {} ({}; hashed in {:.1} s)",
            p.files,
            p.bytes,
            p.root.display(),
            p.origin,
            t0.elapsed().as_secs_f64()
        );
        payloads.insert(name, p);
    }

    // Settle: files deleted less than `settle` ago (e.g. the previous sweep's destinations)
    // slow new-inode allocation on journal-less ext4; wait out the rest before the first run.
    // (Only where the destinations are: a two-host sweep writes on the receiving host, which
    // an earlier delete here does not slow.)
    let last_delete = last_bulk_delete(&opts.work);
    if let Some(age) = last_delete
        .filter(|_| remote_ctx.is_none())
        .and_then(|t| t.elapsed().ok())
    {
        if age < opts.settle {
            let wait = opts.settle - age;
            println!(
                "settle: destinations were deleted in bulk {} s ago; waiting {} s before the first run",
                age.as_secs(),
                wait.as_secs()
            );
            std::thread::sleep(wait);
        }
    }

    let mut meta = meta::initial(&meta::Start {
        opts,
        matrix,
        sweep_id: &sweep_id,
        started_at: &started_at,
        work_run: &work_run,
        payloads: &payloads,
        plan: &the_plan,
    });
    if let Some(c) = &opts.continuation {
        meta = c.meta(&meta);
        c.check(&mut meta, c.payload_differences(&payloads))?;
    }
    write_meta(&opts.out, &meta)?;

    let mut flush_metrics = false;
    if let Some(r) = &remote_ctx {
        meta["ends"] = serde_json::json!({
            "sender": shoal_row::hostfacts::HostFacts::collect(None, None),
            "receiver": r.facts,
        });
        flush_metrics = guard_tcp_metrics(&r.facts, &mut meta)?;
    }
    if let Some(start) = &path_start {
        // Kept from the start: a sweep that never reaches its end still says what path it began on.
        let end = Err("not measured: the sweep did not reach its end".to_string());
        meta["path_probe"] = shoal_remote::pathcheck::to_meta(start, &end);
    }

    // The link (local) or the remote receiver.
    let mut guard = None;
    let link = match &matrix.link {
        LinkSpec::Emulated(spec) => {
            let (g, ctx) = linkctx::bring_up(spec, opts, &dest_root, &mut meta)?;
            guard = Some(g);
            Some(ctx)
        }
        LinkSpec::Remote(RemoteReceiver { receiver, .. }) => {
            let control = remote_ctx.as_ref().expect("remote matrix").facts.clone();
            println!(
                "remote receiver {receiver} ({} on {}, destination {} on {}): a fresh folder per run, hashed there after each run",
                control.get("host").map_or("?", String::as_str),
                control.get("kernel").map_or("?", String::as_str),
                control.get("dest").map_or("?", String::as_str),
                control.get("dest_fs").map_or("?", String::as_str),
            );
            meta["remote_receiver"] = serde_json::to_value(&control)?;
            None
        }
    };

    if let Some(c) = &opts.continuation {
        let key = if link.is_some() {
            "link"
        } else {
            "remote_receiver"
        };
        let d = c.link_differences(key, &meta[key]);
        c.check(&mut meta, d)?;
    }

    let needs_ssh = matrix.configs.iter().any(|c| c.arm.over_ssh());
    let sshd = match (&link, needs_ssh) {
        (Some(l), true) => Some(Sshd::start(
            &work_run.join("ssh"),
            &l.rcv_ns,
            &l.snd_ns,
            &l.rcv_addr,
        )?),
        _ => None,
    };
    if matrix.configs.iter().any(|c| c.arm.is_baseline()) {
        meta["baseline_tools"] = serde_json::to_value(
            baseline::tool_versions()
                .into_iter()
                .collect::<BTreeMap<_, _>>(),
        )?;
    }
    write_meta(&opts.out, &meta)?;

    let identity = work_run.join("identity");
    shoal_transport::identity::Identity::load_or_create(&identity)?;

    let mut sw = Sweep {
        opts,
        matrix,
        sweep_id,
        payloads,
        link,
        sshd,
        identity,
        dest_root,
        logs,
        flush_tcp_metrics: flush_metrics,
        hooks: Hooks::from_env(),
        last_bulk_delete: std::cell::Cell::new(last_delete),
        remote: remote_ctx,
    };

    // Reference configuration per payload (ratio columns).
    let mut reference: BTreeMap<String, String> = BTreeMap::new();
    if !matrix.reference.is_empty() {
        for c in &matrix.configs {
            if c.matches(&matrix.reference) {
                reference
                    .entry(c.payload().to_string())
                    .or_insert_with(|| c.id.clone());
            }
        }
    }

    let header = columns::header(&matrix.axes);
    let runs_csv = opts.out.join("runs.csv");
    let mut csv = match &opts.continuation {
        Some(c) if c.recovered.whole > 0 => RowLog::resume(&runs_csv, header, c.recovered.whole)?,
        _ => RowLog::create(&runs_csv, header)?,
    };
    // A continuation runs only what its runs.csv lacks, each under its order in the plan.
    let recorded = |p: &shoal_matrix::plan::Planned| {
        let c = opts.continuation.as_ref();
        c.is_some_and(|c| c.done(&matrix.configs[p.config], *p))
    };
    let mut progress = Progress::new(the_plan.len());
    let (mut done, mut ok) = opts.continuation.as_ref().map_or((0, 0), |c| c.counts());
    progress.recorded_before(done, ok);
    let mut warmups = Vec::new();
    for (i, p) in the_plan.iter().enumerate() {
        if proc::interrupted() {
            break;
        }
        if recorded(p) {
            continue;
        }
        let order = i + 1;
        let cfg = &matrix.configs[p.config];
        progress.start(order, &format!("{} {}", cfg.id, cfg.label()));
        let mut row = sw.one_run(order, *p, &mut progress)?;
        if proc::interrupted() && row.get(col::STATUS) != Some("ok") {
            // The run was cut short by the user, not by the transfer: don't count it.
            progress.note("interrupted: the current run is not recorded");
            break;
        }
        if p.run == shoal_matrix::start_window::WARMUP_RUN {
            // Leaves path state for the configuration's recorded runs; never a row.
            let is_ok = row.get(col::STATUS) == Some("ok");
            warmups.push(serde_json::json!({
                "config": cfg.id, "order": order, "status": row.text(col::STATUS),
                "verified": row.text(col::VERIFIED), "error": row.text(col::ERROR),
            }));
            progress.finish(
                is_ok,
                &format!("warm-up, not recorded: {}", result_line(cfg, &row)),
            );
            continue;
        }
        row.set(
            col::REFERENCE,
            (reference.get(cfg.payload()) == Some(&cfg.id)).to_string(),
        );
        csv.write(&row)?;
        done += 1;
        let is_ok = row.get(col::STATUS) == Some("ok");
        if is_ok {
            ok += 1;
        }
        progress.finish(is_ok, &result_line(cfg, &row));
    }
    progress.close();
    let interrupted = proc::interrupted();

    // Tear down: sshd, link, destinations (in bulk, after the last run).
    if let Some(s) = sw.sshd.take() {
        s.stop();
    }
    if let Some(g) = guard.take() {
        if let Err(e) = g.down() {
            eprintln!("shoal sweep: tearing the link down: {e:#}");
        }
    }
    if !opts.keep {
        match bulk_delete(&work_run, &opts.work) {
            Ok(()) => shoal_hostctl::owned::release(work_owned.flatten()),
            Err(e) => eprintln!(
                "shoal sweep: could not delete {}: {e:#}",
                work_run.display()
            ),
        }
    } else if sw.remote.is_none() {
        // (A two-host sweep's destinations are on the receiving host: said below.)
        println!("destinations kept under {}", sw.dest_root.display());
    }
    if let Some(r) = &sw.remote {
        if opts.keep {
            println!(
                "run folders kept on the remote receiver under {}",
                r.facts.get("dest").map_or("its --dest", String::as_str)
            );
        } else if let Err(e) = r.cleanup_all() {
            eprintln!("shoal sweep: removing run folders on the remote receiver: {e:#}");
        }
    }

    // The receiving host's clock again: a drift between start and end shows how far the
    // latency correction (made with the start's offset) can be off for the last runs.
    if let Some(r) = &sw.remote {
        let end = r.control.clock_offset(CLOCK_PROBES);
        let start = r.clock;
        if let (Some(s), Ok(e)) = (start, &end) {
            let drift = e.offset_ms - s.offset_ms;
            println!(
                "receiver clock at the end: {:+.3} ms (drift {drift:+.3} ms since the start{})",
                e.offset_ms,
                if drift.abs() > 1.0 {
                    "; over 1 ms: per-file latency of late runs is off by up to that much"
                } else {
                    ""
                }
            );
        }
        meta["clock_offset"] = serde_json::json!({
            "method": "control-channel clock probes; the probe with the shortest round trip",
            "start": start,
            "end": end.ok(),
        });
    }
    if let (Some(r), Some(start)) = (&sw.remote, &path_start) {
        let end = shoal_remote::pathcheck::measure(&r.control, "after the last run");
        meta["path_probe"] = shoal_remote::pathcheck::to_meta(start, &end);
    }
    if !warmups.is_empty() {
        println!(
            "{} warm-up run(s), not recorded: one cold run before the first run of each \
             configuration with resume = true or initial-window = \"saved\" (meta.json \"warmups\")",
            warmups.len()
        );
        meta["warmups"] = serde_json::json!(warmups);
    }
    meta["finished"] = serde_json::json!(metrics::utc_timestamp());
    meta["runs_done"] = serde_json::json!(done);
    meta["runs_ok"] = serde_json::json!(ok);
    meta["interrupted"] = serde_json::json!(interrupted);
    write_meta(&opts.out, &meta)?;
    shoal_hostctl::owned::finish();
    Ok(Summary {
        out: opts.out.clone(),
        total,
        done,
        ok,
        interrupted,
    })
}
