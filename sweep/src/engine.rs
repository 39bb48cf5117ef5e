//! The sweep engine: expands the plan, shuffles it with a recorded seed, brings the link (and
//! sshd) up, runs every run into a fresh destination, verifies it from disk against the
//! source manifest, and writes one row per run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use shoal_common::metrics;

use crate::argv;
use crate::baseline::{self, Sshd};
use crate::columns::{self, Row, RunsCsv};
use crate::matrix::{AxisValue, Config, LinkSpec, Matrix};
use crate::payload::{self, Payload};
use crate::proc::{self, Proc};
use crate::progress::{fmt_duration, Progress};
use crate::remote::Remote;

/// What `shoal sweep` was asked to do, with every default resolved.
#[derive(Clone, Debug)]
pub struct Options {
    pub matrix_path: PathBuf,
    pub out: PathBuf,
    pub runs: u32,
    pub seed: u64,
    pub timeout: Duration,
    pub quiet_wait: bool,
    pub quiet_load: f64,
    pub quiet_max: Duration,
    /// Payload cache and this sweep's destinations live under here.
    pub work: PathBuf,
    /// The `shoal` binary that runs `recv`, `send` and the link forwarder.
    pub shoal_bin: PathBuf,
    /// Keep the destinations (default: deleted in bulk at the end).
    pub keep: bool,
    /// Override the matrix's `[link] check`.
    pub check: Option<bool>,
    /// Pause after a bulk delete of destinations before new files are written.
    pub settle: Duration,
}

/// How the sweep went.
#[derive(Debug)]
pub struct Summary {
    pub out: PathBuf,
    pub total: usize,
    pub done: usize,
    pub ok: usize,
    pub interrupted: bool,
}

/// One run of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Index into `Matrix::configs`.
    pub config: usize,
    /// 1-based run number within its configuration.
    pub run: u32,
}

/// SplitMix64: a tiny, fixed generator, so a seed reproduces the order in every version.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        // Rejection sampling: no modulo bias.
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next();
            if x < zone {
                return x % n;
            }
        }
    }
}

/// Every run of every configuration, shuffled (Fisher–Yates) with `seed`.
pub fn plan(configs: usize, runs: u32, seed: u64) -> Vec<Planned> {
    let mut v: Vec<Planned> = (0..configs)
        .flat_map(|c| (1..=runs).map(move |r| Planned { config: c, run: r }))
        .collect();
    let mut rng = SplitMix(seed);
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

/// A random seed when none was given (recorded in runs.csv and meta.json).
pub fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish() % 1_000_000_000
}

/// Test hooks, read from the environment only by the sweep (documented in docs/sweep.md):
/// `SHOAL_SWEEP_TEST_TAMPER=all|1,3` changes a destination file of those runs (by order)
/// after the transfer and before hashing; `SHOAL_SWEEP_TEST_KILL=2s@all|2s@1,3` kills the
/// sender of those runs that long after it started.
#[derive(Clone, Debug, Default)]
struct Hooks {
    tamper: Option<Vec<usize>>,
    kill: Option<(Duration, Option<Vec<usize>>)>,
}

fn parse_orders(s: &str) -> Option<Vec<usize>> {
    if s.trim() == "all" {
        None
    } else {
        Some(s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
    }
}

impl Hooks {
    fn from_env() -> Hooks {
        let mut h = Hooks::default();
        if let Ok(v) = std::env::var("SHOAL_SWEEP_TEST_TAMPER") {
            h.tamper = Some(parse_orders(&v).unwrap_or_default());
            if v.trim() == "all" {
                h.tamper = Some(Vec::new());
            }
        }
        if let Ok(v) = std::env::var("SHOAL_SWEEP_TEST_KILL") {
            let (d, which) = v.split_once('@').unwrap_or((v.as_str(), "all"));
            if let Ok(d) = shoal_common::units::parse_duration(d) {
                h.kill = Some((d, parse_orders(which)));
            }
        }
        h
    }

    fn tamper(&self, order: usize) -> bool {
        match &self.tamper {
            Some(v) => v.is_empty() || v.contains(&order),
            None => false,
        }
    }

    fn kill_after(&self, order: usize) -> Option<Duration> {
        match &self.kill {
            Some((d, None)) => Some(*d),
            Some((d, Some(v))) if v.contains(&order) => Some(*d),
            _ => None,
        }
    }
}

/// Changes the destination after a transfer (test hook): flips the first byte of the first
/// file, or creates a stray file when there is none.
fn tamper(dest: &Path) -> String {
    let mut files: Vec<PathBuf> = Vec::new();
    let mut stack = vec![dest.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                let p = e.path();
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push(p),
                    Ok(t) if t.is_file() => files.push(p),
                    _ => {}
                }
            }
        }
    }
    files.sort();
    match files.first() {
        Some(f) => {
            let mut b = std::fs::read(f).unwrap_or_default();
            if b.is_empty() {
                b.push(0);
            } else {
                b[0] ^= 0xff;
            }
            let _ = std::fs::write(f, b);
            format!("tampered {}", f.display())
        }
        None => {
            let _ = std::fs::create_dir_all(dest);
            let _ = std::fs::write(dest.join("tampered"), b"x");
            "tampered: added a stray file".into()
        }
    }
}

/// The local emulated link, as the runs use it.
struct LinkCtx {
    name: String,
    snd_ns: String,
    rcv_ns: String,
    rcv_addr: String,
    /// The sender namespace's default TCP congestion controller: what the baselines' TCP
    /// connections (ssh, socat) use, since they do not choose one.
    default_cc: String,
    /// Static link columns of every row.
    cols: Row,
}

#[derive(Default, Clone, Copy)]
struct Counters {
    forwarder_alive: bool,
    tx_dropped_snd: u64,
    tx_dropped_rcv: u64,
    dropped_queue: u64,
    dropped_loss: u64,
    dropped_blackhole: u64,
    late_over_1ms: u64,
    late_max_us: u64,
    /// CPU seconds the userspace forwarder has used so far (none with netem).
    forwarder_cpu_s: Option<f64>,
}

fn counters(name: &str) -> Counters {
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

fn link_columns(i: &shoal_link::LinkInfo) -> Row {
    let s = &i.state;
    let mut r = Row::new();
    let mut put = |k: &str, v: String| {
        r.insert(k.to_string(), v);
    };
    put("link_name", s.name.clone());
    put("link_backend", s.backend.to_string());
    put("link_rtt_ms", format!("{}", s.rtt_ns as f64 / 1e6));
    put("link_rate_bps", s.rate_bps.to_string());
    put("link_down_rate_bps", s.down_rate_bps.to_string());
    put("link_queue_bytes", s.queue_bytes.to_string());
    put("link_loss", s.loss.to_string());
    put("link_mtu", s.mtu.to_string());
    put("link_offload", s.offload.describe());
    put("link_snd_tcp_wmem", s.sysctls.snd_tcp_wmem.clone());
    put("link_snd_tcp_rmem", s.sysctls.snd_tcp_rmem.clone());
    put("link_rcv_tcp_rmem", s.sysctls.rcv_tcp_rmem.clone());
    put("link_rcv_tcp_wmem", s.sysctls.rcv_tcp_wmem.clone());
    put("link_rmem_max", s.sysctls.rmem_max.clone());
    put("link_wmem_max", s.sysctls.wmem_max.clone());
    r
}

/// The per-run result before it becomes a row.
#[derive(Default)]
struct Outcome {
    /// shoal send's JSON row, when it printed one.
    json: Option<serde_json::Value>,
    exit: Option<proc::Exit>,
    wall_seconds: f64,
    timed_out: bool,
    /// Why the transfer itself failed (empty when it reported ok).
    error: String,
    receiver_report: String,
    /// A baseline's receiving processes' peak RSS, when the sweep started them (tar-tcp).
    receiver_peak_rss_bytes: Option<u64>,
    /// CPU seconds of the receiving processes the sweep started (`shoal recv` for the whole
    /// of its one run, tar-tcp's `socat | tar`), from wait4.
    receiver_cpu_seconds: Option<f64>,
    command: String,
}

struct Sweep<'a> {
    opts: &'a Options,
    matrix: &'a Matrix,
    sweep_id: String,
    payloads: BTreeMap<String, Payload>,
    link: Option<LinkCtx>,
    sshd: Option<Sshd>,
    identity: PathBuf,
    dest_root: PathBuf,
    logs: PathBuf,
    hooks: Hooks,
    /// Two hosts without `tcp_no_metrics_save`: forget cached TCP metrics before each run.
    flush_tcp_metrics: bool,
    /// When destinations were last deleted in bulk (this sweep or an earlier one, from
    /// `WORK/.last-bulk-delete`).
    last_bulk_delete: std::cell::Cell<Option<SystemTime>>,
    /// A remote receiver's control channel (two-host sweeps), and the run folders prepared
    /// on it that still exist.
    remote: Option<RemoteCtx>,
}

struct RemoteCtx {
    control: Remote,
    runs: std::cell::RefCell<Vec<String>>,
    /// The receiving host's facts (`recv --control` info), put in every row.
    facts: BTreeMap<String, String>,
}

impl RemoteCtx {
    /// Removes every prepared run folder on the receiver (bulk, like local destinations).
    fn cleanup_all(&self) -> Result<()> {
        for id in self.runs.borrow_mut().drain(..) {
            self.control.cleanup(&id)?;
        }
        Ok(())
    }
}

/// Runs a whole sweep; see docs/sweep.md.
pub fn run(opts: &Options, matrix: &Matrix) -> Result<Summary> {
    proc::install_interrupt_handler();
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("cannot create {}", opts.out.display()))?;
    std::fs::copy(&opts.matrix_path, opts.out.join("matrix.toml")).context("copying the matrix")?;
    let sweep_id = opts
        .out
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sweep".into());
    let started_at = metrics::utc_timestamp();
    let the_plan = plan(matrix.configs.len(), opts.runs, opts.seed);
    let total = the_plan.len();
    println!(
        "sweep {sweep_id}: {} configurations × {} runs = {total} runs, order seed {}",
        matrix.configs.len(),
        opts.runs,
        opts.seed
    );

    // A remote receiver must take control connections: that is how every run gets a fresh
    // folder and is verified. Contacted before payloads are generated, its problems named as
    // what they are (address, pin, token, no --control).
    let remote_ctx = match &matrix.link {
        LinkSpec::Remote {
            receiver,
            pin,
            token_file,
        } => {
            let control = Remote::new(receiver, pin.as_deref(), token_file.as_deref())?;
            let info = crate::remote::first_contact(&control, token_file.as_deref())?;
            Some(RemoteCtx {
                control,
                runs: Default::default(),
                facts: info.facts,
            })
        }
        LinkSpec::Emulated { .. } => None,
    };

    // Work area: payload cache (kept) and this sweep's destinations (deleted at the end).
    let work_run = opts
        .work
        .join(format!("run-{sweep_id}-{}", std::process::id()));
    let dest_root = work_run.join("dest");
    let logs = opts.out.join("logs");
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
    let last_delete = last_bulk_delete(&opts.work);
    if let Some(age) = last_delete.and_then(|t| t.elapsed().ok()) {
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

    let mut meta = serde_json::json!({
        "sweep_id": sweep_id,
        "started": started_at,
        "shoal_version": env!("CARGO_PKG_VERSION"),
        // The build that ran the runs (not the git state of the folder the sweep started in).
        "shoal": binary_provenance(&opts.shoal_bin),
        "kernel": metrics::kernel_release(),
        "host": metrics::host_name(),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "matrix": opts.matrix_path.display().to_string(),
        "runs_per_config": opts.runs,
        "order_seed": opts.seed,
        "timeout_s": opts.timeout.as_secs_f64(),
        "quiet_wait": opts.quiet_wait,
        "quiet_load": opts.quiet_load,
        "work": work_run.display().to_string(),
        "shoal_bin": opts.shoal_bin.display().to_string(),
        "configs": matrix.configs.iter().map(|c| serde_json::json!({"id": c.id, "config": c.label()})).collect::<Vec<_>>(),
        "payloads": payloads.values().map(|p| serde_json::json!({
            "name": p.name, "files": p.files, "bytes": p.bytes, "root": p.root.display().to_string(), "origin": p.origin,
        })).collect::<Vec<_>>(),
        "link_spec": matrix.link,
        "order": the_plan.iter().map(|p| format!("{}#{}", matrix.configs[p.config].id, p.run)).collect::<Vec<_>>(),
        "preread": "every source file read in full right before each run (after the source manifest was built once per payload)",
        "destinations": "a new folder per run under the work area; none deleted during the sweep unless free space ran low (then in bulk, with a settle pause); all deleted in bulk at the end unless --keep, then sync",
        "settle_s": opts.settle.as_secs_f64(),
    });
    write_meta(&opts.out, &meta)?;

    let mut flush_metrics = false;
    if let Some(r) = &remote_ctx {
        meta["ends"] = serde_json::json!({
            "sender": shoal_common::hostfacts::HostFacts::collect(None, None),
            "receiver": r.facts,
        });
        flush_metrics = guard_tcp_metrics(&r.facts, &mut meta)?;
    }

    // The link (local) or the remote receiver.
    let mut guard = None;
    let link = match &matrix.link {
        LinkSpec::Emulated {
            name,
            rtt,
            rate,
            down_rate,
            queue,
            loss,
            backend,
            seed,
            offload,
            check,
        } => {
            let mut cfg = shoal_link::UpConfig::new(
                name,
                shoal_link::parse::parse_duration(rtt)?,
                shoal_link::parse::parse_rate(rate)?,
            );
            cfg.down_rate_bps = down_rate
                .as_deref()
                .map(shoal_link::parse::parse_rate)
                .transpose()?;
            cfg.queue = shoal_link::parse::parse_queue(queue)?;
            cfg.loss = shoal_link::parse::parse_loss(loss)?;
            cfg.backend = match backend.as_str() {
                "netem" => shoal_link::BackendChoice::Netem,
                "auto" => shoal_link::BackendChoice::Auto,
                _ => shoal_link::BackendChoice::Tun,
            };
            cfg.seed = *seed;
            cfg.offload = *offload;
            let launcher = shoal_link::Launcher {
                exe: opts.shoal_bin.clone(),
                prefix: vec!["link".into(), "forward".into()],
            };
            let g = shoal_link::LinkGuard::up_with(&cfg, &launcher)
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
            if opts.check.unwrap_or(*check) {
                println!("checking link {name} (shoal link check; 12–20 s at 141 ms)…");
                match shoal_link::check(name, &shoal_link::CheckOptions::default()) {
                    Ok(rep) => {
                        println!(
                            "link check: {}",
                            if rep.pass {
                                "pass"
                            } else {
                                "FAIL (see meta.json)"
                            }
                        );
                        meta["link_check"] = serde_json::to_value(&rep)?;
                    }
                    Err(e) => {
                        println!("link check could not run: {e:#}");
                        meta["link_check"] = serde_json::json!({ "error": format!("{e:#}") });
                    }
                }
            } else {
                meta["link_check"] =
                    serde_json::json!("not run ([link] check = false or --no-check)");
            }
            let st = g.state().clone();
            guard = Some(g);
            // What each end had in effect, read inside its namespace.
            // Global settings (udp_mem) are visible only outside the namespaces: "host".
            meta["ends"] = serde_json::json!({
                "host": shoal_common::hostfacts::HostFacts::collect(None, None),
                "sender": host_facts(&opts.shoal_bin, &st.snd_ns, &st.rcv_addr, None),
                "receiver": host_facts(&opts.shoal_bin, &st.rcv_ns, &st.snd_addr, Some(&dest_root)),
            });
            Some(LinkCtx {
                name: name.clone(),
                snd_ns: st.snd_ns.clone(),
                rcv_ns: st.rcv_ns.clone(),
                rcv_addr: st.rcv_addr.clone(),
                default_cc: shoal_link::netns::read_sysctl_in(
                    &st.snd_ns,
                    "net.ipv4.tcp_congestion_control",
                )
                .unwrap_or_default(),
                cols: link_columns(&info),
            })
        }
        LinkSpec::Remote { receiver, .. } => {
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

    let needs_ssh = matrix
        .configs
        .iter()
        .any(|c| crate::matrix::SSH_KINDS.contains(&c.kind()));
    let sshd = match (&link, needs_ssh) {
        (Some(l), true) => Some(Sshd::start(
            &work_run.join("ssh"),
            &l.rcv_ns,
            &l.snd_ns,
            &l.rcv_addr,
        )?),
        _ => None,
    };
    if matrix.configs.iter().any(|c| c.kind() != "shoal") {
        meta["baseline_tools"] = serde_json::to_value(
            baseline::tool_versions()
                .into_iter()
                .collect::<BTreeMap<_, _>>(),
        )?;
    }
    write_meta(&opts.out, &meta)?;

    let identity = work_run.join("identity");
    shoal_common::identity::Identity::load_or_create(&identity)?;

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
    let mut csv = RunsCsv::create(&opts.out.join("runs.csv"), header)?;
    let mut progress = Progress::new(total);
    let (mut done, mut ok) = (0, 0);
    for (i, p) in the_plan.iter().enumerate() {
        if proc::interrupted() {
            break;
        }
        let order = i + 1;
        let cfg = &matrix.configs[p.config];
        progress.start(order, &format!("{} {}", cfg.id, cfg.label()));
        let mut row = sw.one_run(order, *p, &mut progress)?;
        if proc::interrupted() && row.get("status").map(String::as_str) != Some("ok") {
            // The run was cut short by the user, not by the transfer: don't count it.
            progress.note("interrupted: the current run is not recorded");
            break;
        }
        row.insert(
            "reference".into(),
            (reference.get(cfg.payload()) == Some(&cfg.id)).to_string(),
        );
        csv.write(&row)?;
        done += 1;
        let is_ok = row.get("status").map(String::as_str) == Some("ok");
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
        if let Err(e) = bulk_delete(&work_run, &opts.work) {
            eprintln!(
                "shoal sweep: could not delete {}: {e:#}",
                work_run.display()
            );
        }
    } else {
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

    meta["finished"] = serde_json::json!(metrics::utc_timestamp());
    meta["runs_done"] = serde_json::json!(done);
    meta["runs_ok"] = serde_json::json!(ok);
    meta["interrupted"] = serde_json::json!(interrupted);
    write_meta(&opts.out, &meta)?;
    Ok(Summary {
        out: opts.out.clone(),
        total,
        done,
        ok,
        interrupted,
    })
}

const LAST_DELETE: &str = ".last-bulk-delete";

/// Deletes a tree of destinations in one go, syncs (so the freed inodes' table blocks are not
/// left dirty, which on journal-less ext4 extends the time new files avoid them), and records
/// the time in `WORK/.last-bulk-delete` for the next sweep's settle wait.
fn bulk_delete(dir: &Path, work: &Path) -> Result<()> {
    std::fs::remove_dir_all(dir).with_context(|| format!("deleting {}", dir.display()))?;
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    std::fs::write(work.join(LAST_DELETE), now.to_string())?;
    Ok(())
}

fn last_bulk_delete(work: &Path) -> Option<SystemTime> {
    let secs: u64 = std::fs::read_to_string(work.join(LAST_DELETE))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

fn write_meta(out: &Path, meta: &serde_json::Value) -> Result<()> {
    std::fs::write(out.join("meta.json"), serde_json::to_vec_pretty(meta)?)
        .context("writing meta.json")
}

/// The build of `bin`: what `bin --version` says it was built from, and its SHA-256.
fn binary_provenance(bin: &Path) -> serde_json::Value {
    let version = Command::new(bin)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    // "shoal 0.1.0 (commit <hex>[, dirty tree])"
    let commit = version.split("commit ").nth(1).map(|r| {
        r.trim_end_matches(')')
            .split(',')
            .next()
            .unwrap_or("")
            .to_string()
    });
    serde_json::json!({
        "binary": bin.display().to_string(),
        "version": version,
        "commit": commit,
        "dirty": version.contains("dirty tree"),
        "sha256": shoal_common::provenance::file_sha256(bin).ok(),
    })
}

/// `shoal host-facts` inside namespace `ns` (towards `peer`; `dest`'s file system).
fn host_facts(bin: &Path, ns: &str, peer: &str, dest: Option<&Path>) -> serde_json::Value {
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

/// Across two hosts nothing resets the kernel's per-destination TCP metrics (ssthresh, RTT)
/// between runs, so one run's slow start would depend on the run before it. The emulated link
/// sets `net.ipv4.tcp_no_metrics_save = 1` in its namespaces; across hosts the sending end
/// must have it, or be root so the sweep can flush the metrics before every run (else the
/// sweep refuses, naming the sysctl). The receiving end does the same for itself when it
/// prepares each run (`recv --control`). Returns whether to flush before each run.
fn guard_tcp_metrics(
    receiver_facts: &BTreeMap<String, String>,
    meta: &mut serde_json::Value,
) -> Result<bool> {
    let local = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_no_metrics_save")
        .map(|t| t.trim().to_string())
        .unwrap_or_default();
    let remote = receiver_facts
        .get("facts.tcp_no_metrics_save")
        .cloned()
        .unwrap_or_default();
    let flush = local != "1";
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self")?) == 0;
    if flush && !root {
        bail!(
            "net.ipv4.tcp_no_metrics_save is {local:?} on this sending host: the kernel would carry TCP metrics (ssthresh, RTT) from one run into the next; set it with `sysctl -w net.ipv4.tcp_no_metrics_save=1`, or run the sweep as root so it flushes them (`ip tcp_metrics flush`) before every run"
        );
    }
    meta["tcp_metrics"] = serde_json::json!({
        "sender_tcp_no_metrics_save": local,
        "receiver_tcp_no_metrics_save": remote,
        "flushed_at_sender_before_each_run": flush,
        "receiver": "flushed by the receiver before each run unless its tcp_no_metrics_save is 1; a receiver that cannot flush refuses the run",
    });
    Ok(flush)
}

/// Forgets the kernel's cached TCP metrics in this namespace (see `guard_tcp_metrics`).
fn flush_tcp_metrics() -> Result<()> {
    let st = Command::new("ip")
        .args(["tcp_metrics", "flush", "all"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("running ip tcp_metrics flush")?;
    // Exit 2 when there was nothing to flush is fine.
    if !st.success() && st.code() != Some(2) {
        bail!("ip tcp_metrics flush failed ({st})");
    }
    Ok(())
}

/// The receiving end's counters at one moment (see `Sweep::receiver_counters`).
struct ReceiverCounters {
    drops: shoal_common::hostfacts::UdpDrops,
    steal: Option<f64>,
}

/// UDP drop counters of namespace `ns` now (`/proc/net/snmp` read inside it).
fn udp_drops_in(ns: &str) -> Option<shoal_common::hostfacts::UdpDrops> {
    let mut cmd = Command::new("cat");
    cmd.arg("/proc/net/snmp")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let out = shoal_link::spawn_in_netns(ns, &mut cmd)
        .ok()?
        .wait_with_output()
        .ok()?;
    shoal_common::hostfacts::parse_snmp_udp(&String::from_utf8_lossy(&out.stdout))
}

fn result_line(cfg: &Config, row: &Row) -> String {
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

fn f3(x: f64) -> String {
    format!("{x:.3}")
}

impl Sweep<'_> {
    /// The receiving end's UDP drop counters (and, on another host, its CPU steal) now: read
    /// inside the receiver's namespace, or asked of a remote receiver's control channel.
    fn receiver_counters(&self) -> Option<ReceiverCounters> {
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

    fn one_run(&self, order: usize, p: Planned, progress: &mut Progress) -> Result<Row> {
        let cfg = &self.matrix.configs[p.config];
        let payload = &self.payloads[cfg.payload()];
        let timeout = crate::preflight::config_timeout(cfg, self.opts.timeout)?;

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
        put("kind", cfg.kind().to_string());
        put("payload", payload.name.clone());
        put("payload_files", payload.files.to_string());
        put("payload_bytes", payload.bytes.to_string());
        for (k, v) in &cfg.params {
            if k != "payload" && k != "kind" {
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
                self.make_remote_room(r, payload.bytes, progress)?;
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
                self.make_room(payload.bytes, progress)?;
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
        let out = if cfg.kind() == "shoal" {
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
                    match cfg.kind() {
                        "shoal" => cfg
                            .get("mode")
                            .map(|v| v.text())
                            .unwrap_or("tcp-bundle".into()),
                        k => k.to_string(),
                    },
                );
                row.insert(
                    "tls".into(),
                    (cfg.kind() != "shoal"
                        || !matches!(cfg.get("plain"), Some(AxisValue::Bool(true))))
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
                    if cfg.kind() != "shoal" && cfg.kind() != "tar-local" {
                        row.insert("cc".into(), l.default_cc.clone());
                    }
                    row.insert(
                        "receiver".into(),
                        match cfg.kind() {
                            "shoal" => l.rcv_addr.clone(),
                            "tar-local" => "local".into(),
                            "tar-tcp" => format!("{}:{}", l.rcv_addr, baseline::TAR_TCP_PORT),
                            _ => format!("{}:22", l.rcv_addr),
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

    /// The remote counterpart of [`Self::make_room`]: when the receiver's destination is low
    /// on space, removes the earlier run folders there in bulk and pauses.
    fn make_remote_room(&self, r: &RemoteCtx, need: u64, progress: &Progress) -> Result<()> {
        let free = r
            .control
            .info()?
            .facts
            .get("free_bytes")
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(u64::MAX);
        if free > need.saturating_mul(2) + (1 << 30) || r.runs.borrow().is_empty() {
            return Ok(());
        }
        progress.note(&format!(
            "remote receiver low on space ({} MB free): removing earlier run folders, then a {} s pause",
            free / 1_000_000,
            self.opts.settle.as_secs()
        ));
        r.cleanup_all()?;
        std::thread::sleep(self.opts.settle);
        Ok(())
    }

    /// When the work file system is low on space, deletes earlier destinations in bulk and
    /// pauses (freshly freed inodes slow the next writes on journal-less ext4).
    fn make_room(&self, need: u64, progress: &Progress) -> Result<()> {
        let free = payload::free_bytes(&self.dest_root).unwrap_or(u64::MAX);
        if free > need.saturating_mul(2) + (1 << 30) {
            return Ok(());
        }
        progress.note(&format!(
            "low on space ({} MB free): deleting earlier destinations in bulk, then a {} s pause",
            free / 1_000_000,
            self.opts.settle.as_secs()
        ));
        let old = self.dest_root.with_extension("old");
        std::fs::rename(&self.dest_root, &old)?;
        std::fs::create_dir_all(&self.dest_root)?;
        bulk_delete(&old, &self.opts.work)?;
        self.last_bulk_delete.set(Some(SystemTime::now()));
        std::thread::sleep(self.opts.settle);
        Ok(())
    }

    fn quiet_wait(&self, progress: &Progress) -> f64 {
        if !self.opts.quiet_wait {
            return 0.0;
        }
        let t0 = Instant::now();
        let mut said = false;
        loop {
            let load = metrics::load_avg_1m();
            if load < self.opts.quiet_load || proc::interrupted() {
                break;
            }
            if t0.elapsed() >= self.opts.quiet_max {
                progress.note(&format!(
                    "quiet wait: load {load:.2} still ≥ {} after {}; running anyway",
                    self.opts.quiet_load,
                    fmt_duration(self.opts.quiet_max)
                ));
                break;
            }
            if !said {
                progress.note(&format!(
                    "quiet wait: 1-minute load {load:.2} ≥ {}; waiting",
                    self.opts.quiet_load
                ));
                said = true;
            }
            std::thread::sleep(Duration::from_secs(2));
        }
        t0.elapsed().as_secs_f64()
    }

    fn log(&self, order: usize, what: &str) -> PathBuf {
        self.logs.join(format!("{order:05}-{what}.log"))
    }

    fn shoal_transfer(
        &self,
        order: usize,
        cfg: &Config,
        payload: &Payload,
        dest: &Path,
        run_id: Option<&str>,
        timeout: Duration,
    ) -> Result<Outcome> {
        let (send_flags, recv_flags) = argv::flags(cfg, &self.matrix.receiver_flags);
        let mut out = Outcome::default();

        // Receiver: one run, into this run's fresh destination, in the receiver namespace.
        let mut receiver = None;
        let to = match (&self.link, &self.matrix.link) {
            (Some(l), _) => {
                let mut cmd = Command::new(&self.opts.shoal_bin);
                cmd.args(argv::recv_argv(
                    &format!("{}:0", l.rcv_addr),
                    dest,
                    &self.identity,
                    &recv_flags,
                ))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(self.log(order, "recv"))?);
                let mut p = Proc::spawn(&mut cmd, Some(&l.rcv_ns), "shoal recv")?;
                let rx = proc::lines(p.child.stdout.take().expect("piped"));
                let first = rx.recv_timeout(Duration::from_secs(15)).unwrap_or_default();
                let Some(addr) = first.strip_prefix("listening on ") else {
                    let e = p.kill(Duration::from_secs(1));
                    bail!(
                        "shoal recv did not start ({}): {first:?} {}",
                        e.describe(),
                        proc::tail_of(&self.log(order, "recv"), 400)
                    );
                };
                let addr = addr.trim().to_string();
                receiver = Some((p, rx));
                addr
            }
            (None, LinkSpec::Remote { receiver, .. }) => receiver.clone(),
            (None, _) => unreachable!("an emulated link always has a context"),
        };

        let mut cmd = Command::new(&self.opts.shoal_bin);
        cmd.args(argv::send_argv(
            &self.matrix.link,
            &to,
            &payload.root,
            timeout,
            run_id,
            &self.identity,
            &send_flags,
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(self.log(order, "send"))?);
        out.command = command_line(&cmd);
        let t0 = Instant::now();
        let mut sender = Proc::spawn(
            &mut cmd,
            self.link.as_ref().map(|l| l.snd_ns.as_str()),
            "shoal send",
        )?;
        let srx = proc::lines(sender.child.stdout.take().expect("piped"));
        // shoal send enforces --timeout itself; the sweep's own limit is a backstop.
        let hard = t0 + timeout + Duration::from_secs(30);
        let kill_at = self.hooks.kill_after(order).map(|d| t0 + d);
        let exit = match sender.wait_until(kill_at.unwrap_or(hard).min(hard)) {
            Some(e) => e,
            None => {
                let e = sender.kill(Duration::from_millis(500));
                out.timed_out = true;
                out.error = if proc::interrupted() {
                    "interrupted".into()
                } else if kill_at.is_some() {
                    format!(
                        "killed after {:.1} s (test hook SHOAL_SWEEP_TEST_KILL)",
                        t0.elapsed().as_secs_f64()
                    )
                } else {
                    format!(
                        "killed: no result within the {} timeout",
                        fmt_duration(timeout)
                    )
                };
                e
            }
        };
        out.wall_seconds = t0.elapsed().as_secs_f64();
        let stdout: Vec<String> = srx.try_iter().collect();
        out.json = stdout
            .iter()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok());
        if out.error.is_empty() {
            match &out.json {
                Some(j) if j["status"] == "ok" && exit.success() => {}
                Some(j) => {
                    out.error = j["error"].as_str().unwrap_or("failed").to_string();
                    if out.error.is_empty() {
                        out.error = format!("shoal send: {}", exit.describe());
                    }
                    if j["error"]
                        .as_str()
                        .is_some_and(|e| e.contains("timed out") || e.contains("timeout"))
                    {
                        out.timed_out = true;
                    }
                }
                None => {
                    out.error = format!(
                        "shoal send printed no result ({}): {}",
                        exit.describe(),
                        proc::tail_of(&self.log(order, "send"), 300)
                    );
                }
            }
        }
        out.exit = Some(exit);

        // The receiver ends by itself after its one run; give it a moment, then end it.
        if let Some((mut p, rx)) = receiver {
            let grace = if out.error.is_empty() { 20 } else { 2 };
            let exit = p
                .wait_until(Instant::now() + Duration::from_secs(grace))
                .unwrap_or_else(|| p.kill(Duration::from_secs(1)));
            out.receiver_cpu_seconds = Some(exit.cpu_seconds);
            out.receiver_report = rx
                .try_iter()
                .filter(|l| l.starts_with("run "))
                .collect::<Vec<_>>()
                .join(" | ");
        }
        Ok(out)
    }

    fn baseline_transfer(
        &self,
        order: usize,
        cfg: &Config,
        payload: &Payload,
        dest: &Path,
        timeout: Duration,
    ) -> Result<Outcome> {
        let l = self
            .link
            .as_ref()
            .context("baseline arm without a local link")?;
        std::fs::create_dir_all(dest)?;
        // tar-tcp's receiving end, started (and listening) before the clock starts.
        let mut unpacker: Option<Proc> = None;
        let (pipeline, namespace) = match cfg.kind() {
            // No network: the local file-system bound the 1 Gbit/s target is set
            // against, measured in the same sweep as the arms it is compared with.
            "tar-local" => (baseline::tar_local(&payload.root, dest), None),
            "tar-tcp" => {
                unpacker =
                    Some(self.start_tar_tcp_receiver(order, &l.rcv_ns, &l.rcv_addr, dest)?);
                (
                    baseline::tar_tcp_sender(&payload.root, &l.rcv_addr, baseline::TAR_TCP_PORT),
                    Some(l.snd_ns.as_str()),
                )
            }
            _ => {
                let sshd = self.sshd.as_ref().context("baseline arm without sshd")?;
                let batch = self.logs.join(format!("{order:05}-sftp-batch"));
                (
                    sshd.command(cfg.kind(), &payload.root, dest, &batch)?,
                    Some(l.snd_ns.as_str()),
                )
            }
        };
        let mut out = Outcome {
            command: pipeline.clone(),
            ..Default::default()
        };
        let mut cmd = Command::new("bash");
        cmd.args(["-o", "pipefail", "-c", &pipeline])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.log(order, cfg.kind()))?);
        let t0 = Instant::now();
        let mut p = Proc::spawn(&mut cmd, namespace, cfg.kind())?;
        let kill_at = self.hooks.kill_after(order).map(|d| t0 + d);
        let deadline = kill_at.unwrap_or(t0 + timeout).min(t0 + timeout);
        let mut killed = false;
        let exit = match p.wait_until(deadline) {
            Some(e) => e,
            None => {
                killed = true;
                p.kill(Duration::from_millis(500))
            }
        };
        // tar-tcp is done when the receiving tar has written the last file, not when the
        // sending side has handed its last byte to the kernel.
        let mut unpacker_exit = None;
        if let Some(mut u) = unpacker {
            let e = if killed || !exit.success() {
                u.wait_until(Instant::now() + Duration::from_secs(2))
                    .unwrap_or_else(|| u.kill(Duration::from_millis(500)))
            } else {
                match u.wait_until(deadline) {
                    Some(e) => e,
                    None => {
                        killed = true;
                        u.kill(Duration::from_millis(500))
                    }
                }
            };
            unpacker_exit = Some(e);
        }
        if killed {
            out.timed_out = true;
            out.error = if proc::interrupted() {
                "interrupted".into()
            } else {
                format!(
                    "killed at the {} limit",
                    fmt_duration(t0.elapsed().min(timeout))
                )
            };
        }
        out.wall_seconds = t0.elapsed().as_secs_f64();
        if out.timed_out {
            // Let the receiving side finish the writes already under way before counting.
            std::thread::sleep(Duration::from_secs(1));
        }
        if out.error.is_empty() && !exit.success() {
            out.error = format!(
                "{} {}: {}",
                cfg.kind(),
                exit.describe(),
                proc::tail_of(&self.log(order, cfg.kind()), 300)
            );
        }
        if let Some(u) = &unpacker_exit {
            if out.error.is_empty() && !u.success() {
                out.error = format!(
                    "tar-tcp receiver {}: {}",
                    u.describe(),
                    proc::tail_of(&self.log(order, "tar-tcp-receiver"), 300)
                );
            }
            if u.max_rss_bytes > 0 {
                out.receiver_peak_rss_bytes = Some(u.max_rss_bytes);
                out.receiver_cpu_seconds = Some(u.cpu_seconds);
            }
        }
        out.exit = Some(exit);
        Ok(out)
    }

    /// Starts the `tar-tcp` receiver in `ns` and waits (at most 5 s) until it listens.
    fn start_tar_tcp_receiver(
        &self,
        order: usize,
        ns: &str,
        addr: &str,
        dest: &Path,
    ) -> Result<Proc> {
        let log = self.log(order, "tar-tcp-receiver");
        let mut cmd = Command::new("bash");
        cmd.args([
            "-o",
            "pipefail",
            "-c",
            &baseline::tar_tcp_receiver(dest, addr, baseline::TAR_TCP_PORT),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?);
        let mut p = Proc::spawn(&mut cmd, Some(ns), "tar-tcp receiver (socat | tar)")?;
        let give_up = Instant::now() + Duration::from_secs(5);
        loop {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            if said.contains(baseline::TAR_TCP_LISTENING) {
                return Ok(p);
            }
            if let Some(e) = p.wait_until(Instant::now() + Duration::from_millis(20)) {
                bail!(
                    "tar-tcp receiver {} before listening (is socat installed? scripts/setup.sh): {}",
                    e.describe(),
                    proc::tail_of(&log, 300)
                );
            }
            if Instant::now() >= give_up {
                p.kill(Duration::from_millis(500));
                bail!(
                    "tar-tcp receiver not listening on {addr}:{} after 5 s: {}",
                    baseline::TAR_TCP_PORT,
                    proc::tail_of(&log, 300)
                );
            }
        }
    }
}

fn random_u64() -> u64 {
    random_seed().wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ random_seed()
}

fn command_line(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| baseline::shell_quote(&s.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_is_a_seeded_permutation() {
        let a = plan(2, 3, 42);
        let b = plan(2, 3, 42);
        assert_eq!(a, b);
        assert_eq!(a.len(), 6);
        let in_order: Vec<Planned> = (0..2)
            .flat_map(|c| (1..=3).map(move |r| Planned { config: c, run: r }))
            .collect();
        let mut sorted = a.clone();
        sorted.sort_by_key(|p| (p.config, p.run));
        assert_eq!(sorted, in_order, "every run exactly once");
        assert_ne!(a, in_order);
        assert_ne!(plan(2, 3, 43), a);
    }
}
