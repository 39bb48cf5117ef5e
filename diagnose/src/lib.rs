//! `shoal diagnose`: a short staged experiment against a `shoal recv --control` — the path
//! (stage 1), the ends' own floors (stage 2), verified transfers of a sample in several
//! configurations (stage 3) — whose observations the `shoal-verdict` crate turns into the
//! ranked constraints, the fixes and the best command (stage 4). docs/diagnose.md.

pub mod arms;
pub mod chart;
pub mod ends;
pub mod handoff;
pub mod path;
mod plan;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use shoal_remote::{first_contact, Remote};
use shoal_verdict::{EndsObs, Observations, SampleObs};

use crate::arms::Setup;
use crate::ends::Tree;

/// What `shoal diagnose` was asked.
#[derive(Debug, Clone)]
pub struct Options {
    pub receiver: String,
    pub pin: Option<String>,
    pub token_file: Option<PathBuf>,
    pub src: Option<PathBuf>,
    pub files: u64,
    pub size: u64,
    pub budget: Duration,
    pub json: bool,
    pub out: Option<PathBuf>,
    /// The `shoal` binary the arms' sweeps run.
    pub shoal: PathBuf,
}

/// Time kept back at the end of the budget for ending a sweep (it removes its folders on the
/// receiver), the verdict and the cleanup.
const RESERVE: Duration = Duration::from_secs(6);

/// Runs the stages and prints the verdict; `Ok(false)` when it was interrupted.
pub fn run(o: &Options) -> Result<bool> {
    let start = Instant::now();
    let deadline = start + o.budget.saturating_sub(RESERVE);
    shoal_hostctl::proc::install_interrupt_handler();
    let remote = Remote::new(&o.receiver, o.pin.as_deref(), o.token_file.as_deref())?;
    let info = first_contact(&remote, o.token_file.as_deref())?;
    let mut done: Vec<String> = Vec::new();
    let say = |what: &str| eprintln!("shoal diagnose: {what}");

    // Stage 1: the path.
    let flow = if o.budget >= Duration::from_secs(120) {
        Duration::from_secs(4)
    } else {
        Duration::from_secs(3)
    };
    say("stage 1, the path: probing…");
    let (path, probe) = path::measure(&remote, &info, flow)?;
    done.push(format!("path ({:.1} s)", start.elapsed().as_secs_f64()));
    if stopped(&done) {
        return Ok(false);
    }

    // Stage 2: the ends' floors, on a sample sized from the budget.
    let t2 = Instant::now();
    let steal0 = shoal_row::hostfacts::cpu_steal_seconds();
    let c0 = remote.counters().ok();
    let tree = match &o.src {
        Some(src) => Tree::read(src)?,
        None => Tree::generated(o.files, o.size),
    };
    let scout = ends::scout_write_floor(&remote, &tree).ok();
    let left = deadline.saturating_duration_since(Instant::now());
    let target_s = plan::base_target_s(left);
    let n = plan::sample_files(&tree, &path, scout.as_ref(), left);
    let picked = tree.pick(n);
    let scratch = tempfile::Builder::new()
        .prefix("shoal-diagnose-")
        .tempdir()
        .context("a work folder")?;
    let sample_dir = scratch.path().join("sample");
    say(&format!(
        "stage 2, the ends: a sample of {} of the tree's {} files…",
        picked.len(),
        tree.files.len()
    ));
    let found = ends::make_sample(&tree, &picked, &sample_dir)?;
    let warm = ends::read_floor(&sample_dir)?;
    let sample = SampleObs {
        sample_files: picked.len() as u64,
        sample_bytes: picked.iter().map(|f| f.1).sum(),
        tree_files: tree.files.len() as u64,
        tree_bytes: tree.bytes(),
        sizes: Some(tree.sizes()),
    };
    let write = ends::write_floor(&remote, &sample, Tree::dirs_of(&picked))
        .map_err(|e| {
            say(&format!(
                "the receiver's write floor was not measured: {e:#}"
            ))
        })
        .ok();
    let span = t2.elapsed().as_secs_f64();
    let c1 = remote.counters().ok();
    let ends = EndsObs {
        source_read_found: found.or(Some(warm)),
        source_read_warm: Some(warm),
        receiver_write: write,
        sender_cpu: ends::local_cpu(steal0, span),
        receiver_cpu: ends::remote_cpu(&info, c0.as_ref(), c1.as_ref(), span),
    };
    done.push(format!("ends ({:.1} s)", t2.elapsed().as_secs_f64()));
    let mut obs = Observations {
        path,
        ends,
        sample,
        arms: Vec::new(),
    };
    if stopped(&done) {
        return Ok(false);
    }

    // Stage 3: transfers of the sample, a pilot of the base first.
    let t3 = Instant::now();
    let keep = o.out.clone();
    let sweeps = match &keep {
        Some(out) => out.join("arms"),
        None => scratch.path().join("arms"),
    };
    let setup = Setup {
        shoal: o.shoal.clone(),
        receiver: o.receiver.clone(),
        pin: o.pin.clone(),
        token_file: o.token_file.clone(),
        sample: sample_dir.clone(),
        src_shown: match &o.src {
            Some(src) => src.display().to_string(),
            None => "TREE".into(),
        },
        out: sweeps,
        work: scratch.path().join("work"),
    };
    let mut stages = Vec::new();
    say("stage 3, transfers: the pilot (base: tcp-bundle, the default controller)…");
    let mut pilot = plan::pilot(&setup, "pilot", &mut stages, deadline)?;
    let grow = pilot.0.median_s().and_then(|s| {
        plan::grown_sample(picked.len() as u64, tree.files.len() as u64, s, target_s)
    });
    if let Some(n2) = grow.filter(|_| !shoal_hostctl::proc::interrupted()) {
        say(&format!(
            "the pilot ran in {:.2} s, under {:.0}% of the {target_s:.1} s its sample was sized for: it ended before its controller settled; the sample grows to {n2} files…",
            pilot.0.median_s().unwrap_or(0.0),
            plan::GROW_BELOW * 100.0
        ));
        let picked = tree.pick(n2);
        std::fs::remove_dir_all(&sample_dir)
            .with_context(|| format!("removing {}", sample_dir.display()))?;
        ends::make_sample(&tree, &picked, &sample_dir)?;
        obs.sample.sample_files = picked.len() as u64;
        obs.sample.sample_bytes = picked.iter().map(|f| f.1).sum();
        pilot = plan::pilot(&setup, "pilot-grown", &mut stages, deadline)?;
    }
    plan::run_arms(&setup, &mut obs, &mut stages, pilot, deadline, &say)?;
    done.push(format!(
        "transfers ({} arms, {:.1} s)",
        obs.arms.iter().filter(|a| a.measured()).count(),
        t3.elapsed().as_secs_f64()
    ));
    if stopped(&done) {
        return Ok(false);
    }

    // Stage 4: the verdict.
    let v = shoal_verdict::diagnose(&obs);
    let report = shoal_verdict::report_json(&v, &obs, serde_json::Value::Array(stages));
    let mut report = report;
    report["probe"] = serde_json::to_value(&probe)?;
    report["elapsed_seconds"] = serde_json::json!(start.elapsed().as_secs_f64());
    report["budget_seconds"] = serde_json::json!(o.budget.as_secs_f64());
    let store = shoal_sender::path_state::PathStore::new(
        shoal_sender::path_state::PathStore::default_dir(),
    );
    let saved = handoff::save_for_best(&setup.out, &o.receiver, &v.best_command, &store);
    let handed = match &saved {
        Ok(h) => h.text(),
        Err(e) => format!("\nPath state: not saved for the best command: {e:#}\n"),
    };
    // The record's file when one was saved for the best command, else null.
    report["path_state_saved"] = match &saved {
        Ok(handoff::Handoff::Saved(file)) => serde_json::json!(file.display().to_string()),
        _ => serde_json::Value::Null,
    };
    let text = format!(
        "{}{handed}\nstages: {}; {:.1} s of a {:.0} s budget\n",
        shoal_verdict::render(&v, &obs),
        done.join(", "),
        start.elapsed().as_secs_f64(),
        o.budget.as_secs_f64()
    );
    if let Some(out) = &keep {
        std::fs::create_dir_all(out)?;
        std::fs::write(
            out.join("diagnose.json"),
            serde_json::to_string_pretty(&report)?,
        )?;
        std::fs::write(out.join("summary.txt"), &text)?;
        if let Some(svg) = chart::svg(&obs) {
            std::fs::write(out.join("time.svg"), svg)?;
        }
    }
    if o.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{text}");
    }
    Ok(true)
}

/// After Ctrl-C: says which stages were done (the receiver's folders are removed by the
/// arms' sweeps and the write floor itself).
fn stopped(done: &[String]) -> bool {
    if !shoal_hostctl::proc::interrupted() {
        return false;
    }
    eprintln!(
        "shoal diagnose: interrupted; stages done: {}",
        if done.is_empty() {
            "none".to_string()
        } else {
            done.join(", ")
        }
    );
    true
}
