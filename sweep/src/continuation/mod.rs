//! `shoal sweep --continue DIR`: the runs of an interrupted sweep not yet in its runs.csv, run
//! in the plan's seeded order into the same folder — after checking that the matrix, the
//! `shoal` binary and the link are those the sweep began with (or, with `--force`, recording in
//! meta.json how they differ). See docs/sweep.md, "Continuing a sweep".

pub mod rows;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::payload::Payload;
use shoal_matrix::matrix::{Config, Matrix};
use shoal_matrix::plan::Planned;
use shoal_matrix::start_window::WARMUP_RUN;

/// What the sweep resolved for this start, to be checked against what DIR began with.
pub struct Expect {
    pub runs: u32,
    pub seed: u64,
    pub timeout: std::time::Duration,
    /// The `shoal` binary's provenance (meta.json's `shoal`).
    pub binary: Value,
}

/// A sweep folder taken up again.
#[derive(Clone, Debug)]
pub struct Continuation {
    pub dir: PathBuf,
    /// meta.json as the sweep left it.
    pub meta: Value,
    pub recovered: rows::Recovered,
    pub force: bool,
    /// What differs from the sweep that wrote the folder (accepted with `--force`).
    pub differences: Vec<String>,
    /// The running binary's provenance, as checked (meta.json takes it rather than hashing
    /// the binary again).
    pub binary: Value,
}

/// DIR's meta.json.
pub fn read_meta(dir: &Path) -> Result<Value> {
    let p = dir.join("meta.json");
    let text = std::fs::read(&p).with_context(|| {
        format!(
            "{} has no readable meta.json: not a sweep folder, or its sweep stopped before its \
             first run (start it again instead)",
            dir.display()
        )
    })?;
    serde_json::from_slice(&text).with_context(|| format!("parsing {}", p.display()))
}

fn differs(what: &str, was: impl std::fmt::Display, now: impl std::fmt::Display) -> String {
    format!("{what}: was {was}, is now {now}")
}

/// The differences between two JSON objects, key by key (`prefix.key: was …, is now …`),
/// leaving out `skip`.
fn object_diff(prefix: &str, was: &Value, now: &Value, skip: &[&str]) -> Vec<String> {
    let keys: BTreeSet<&String> = was
        .as_object()
        .into_iter()
        .chain(now.as_object())
        .flat_map(|o| o.keys())
        .collect();
    if keys.is_empty() && was != now {
        return vec![differs(prefix, was, now)];
    }
    keys.into_iter()
        .filter(|k| !skip.contains(&k.as_str()))
        .filter(|k| was.get(k.as_str()) != now.get(k.as_str()))
        .map(|k| {
            let show = |v: Option<&Value>| v.map_or("absent".to_string(), Value::to_string);
            differs(
                &format!("{prefix}.{k}"),
                show(was.get(k.as_str())),
                show(now.get(k.as_str())),
            )
        })
        .collect()
}

impl Continuation {
    /// Checks DIR against the matrix and options resolved for it (the same configurations,
    /// runs, order seed, time limit, link settings and binary) and reads its runs.csv.
    pub fn prepare(dir: &Path, matrix: &Matrix, opts: &Expect, force: bool) -> Result<Self> {
        let meta = read_meta(dir)?;
        let mut d = Vec::new();
        let was: Vec<(String, String)> = meta["configs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                (s("id"), s("config"))
            })
            .collect();
        let now: Vec<(String, String)> = matrix
            .configs
            .iter()
            .map(|c| (c.id.clone(), c.label()))
            .collect();
        if was.len() != now.len() {
            d.push(differs("configurations", was.len(), now.len()));
        }
        for ((id, a), (_, b)) in was.iter().zip(&now).filter(|(a, b)| a != b) {
            d.push(differs(&format!("configuration {id}"), a, b));
        }
        let num = |k: &str| meta[k].as_f64().unwrap_or(f64::NAN);
        if num("runs_per_config") != f64::from(opts.runs) {
            d.push(differs(
                "runs per configuration",
                &meta["runs_per_config"],
                opts.runs,
            ));
        }
        if meta["order_seed"].as_u64() != Some(opts.seed) {
            d.push(differs("order seed", &meta["order_seed"], opts.seed));
        }
        if num("timeout_s") != opts.timeout.as_secs_f64() {
            d.push(differs(
                "time limit (s)",
                num("timeout_s"),
                opts.timeout.as_secs_f64(),
            ));
        }
        d.extend(object_diff(
            "link",
            &meta["link_spec"],
            &serde_json::to_value(&matrix.link)?,
            &[],
        ));
        let bin = &opts.binary;
        if meta["shoal"]["sha256"] != bin["sha256"] {
            d.push(differs(
                "shoal binary (SHA-256)",
                &meta["shoal"]["sha256"],
                &bin["sha256"],
            ));
        }
        let header = shoal_report::columns::header(&matrix.axes);
        let recovered = rows::recover(&dir.join("runs.csv"), &header)?;
        let mut c = Continuation {
            dir: dir.to_path_buf(),
            meta,
            recovered,
            force,
            differences: Vec::new(),
            binary: opts.binary.clone(),
        };
        c.differences = c.accept(d)?;
        Ok(c)
    }

    /// Refuses differences unless forced; forced, they are said and returned to be recorded.
    fn accept(&self, d: Vec<String>) -> Result<Vec<String>> {
        if d.is_empty() {
            return Ok(d);
        }
        if !self.force {
            bail!(
                "cannot continue {}: it differs from the sweep that wrote it:\n  {}\n\
                 (--force continues anyway and records the differences in meta.json)",
                self.dir.display(),
                d.join("\n  ")
            );
        }
        for x in &d {
            println!("continuing despite a difference (--force): {x}");
        }
        Ok(d)
    }

    /// Accepts (with `--force`) or refuses what the running sweep found different later (the
    /// payloads, the link as brought up, the remote receiver); accepted ones go into
    /// meta.json's record of this continuation.
    pub fn check(&self, meta: &mut Value, d: Vec<String>) -> Result<()> {
        let d = self.accept(d)?;
        if let Some(last) = meta["continued"].as_array_mut().and_then(|a| a.last_mut()) {
            if let Some(list) = last["forced_differences"].as_array_mut() {
                list.extend(d.into_iter().map(Value::from));
            }
        }
        Ok(())
    }

    /// The payloads as prepared now against those the sweep ran.
    pub fn payload_differences(
        &self,
        payloads: &std::collections::BTreeMap<String, Payload>,
    ) -> Vec<String> {
        let was = &self.meta["payloads"];
        let now: Vec<Value> = payloads
            .values()
            .map(|p| json!({"name": p.name, "files": p.files, "bytes": p.bytes}))
            .collect();
        let pick = |v: &Value| json!({"name": v["name"], "files": v["files"], "bytes": v["bytes"]});
        let was: Vec<Value> = was.as_array().into_iter().flatten().map(pick).collect();
        if was == now {
            return Vec::new();
        }
        vec![differs("payloads", Value::from(was), Value::from(now))]
    }

    /// The link as brought up now (meta.json's `link`) against the sweep's: every setting,
    /// not its forwarder's PID or creation time. Or a remote receiver's facts
    /// (`remote_receiver`) that name the host, its build and its destination.
    pub fn link_differences(&self, key: &str, now: &Value) -> Vec<String> {
        let was = &self.meta[key];
        match key {
            "link" => object_diff(
                "link",
                &was["state"],
                &now["state"],
                &["forwarder_pid", "created_unix_s"],
            ),
            _ => {
                let pick = |v: &Value| {
                    json!({
                        "host": v["host"], "kernel": v["kernel"], "version": v["version"],
                        "dest": v["dest"], "dest_fs": v["dest_fs"],
                    })
                };
                object_diff("receiver", &pick(was), &pick(now), &[])
            }
        }
    }

    /// meta.json to go on with: as the sweep left it, with a record of this continuation.
    pub fn meta(&self, fresh: &Value) -> Value {
        let mut m = self.meta.clone();
        let rec = json!({
            "started": fresh["started"],
            "shoal": fresh["shoal"],
            "work": fresh["work"],
            "runs_recorded_before": self.recovered.rows.len(),
            "torn_row_dropped_bytes": self.recovered.torn,
            "forced_differences": self.differences,
        });
        match m["continued"].as_array_mut() {
            Some(a) => a.push(rec),
            None => m["continued"] = json!([rec]),
        }
        m
    }

    /// Whether the plan's entry `p` of `cfg` was recorded already. A warm-up (unrecorded) is
    /// run again only when none of its configuration's runs is recorded: the runs it prepares
    /// for found the path state it left.
    pub fn done(&self, cfg: &Config, p: Planned) -> bool {
        let rows = &self.recovered.rows;
        if p.run == WARMUP_RUN {
            return rows.iter().any(|r| r.config_id == cfg.id);
        }
        rows.iter().any(|r| r.config_id == cfg.id && r.run == p.run)
    }

    /// Rows recorded and ok rows among them.
    pub fn counts(&self) -> (usize, usize) {
        let rows = &self.recovered.rows;
        (rows.len(), rows.iter().filter(|r| r.ok).count())
    }

    /// What is said before going on.
    pub fn announce(&self, plan_len: usize) {
        let (done, ok) = self.counts();
        println!(
            "continuing {}: {done} of {plan_len} runs recorded ({ok} ok); the others run in the plan's order",
            self.dir.display()
        );
        if self.recovered.torn > 0 {
            println!(
                "runs.csv: a torn last row ({} bytes, cut when the sweep was killed) was dropped; its run is run again",
                self.recovered.torn
            );
        }
    }
}
