//! `medians.csv` (and the same table as `medians.json`) from `runs.csv` alone: per
//! configuration, runs ok/total, median/min/max MB/s and seconds over the verified runs, their
//! quartiles and an interval for the median, outliers, median peak RSS of each side, the
//! completion-rate upper bound of failed runs, and the ratio of median seconds against a
//! reference configuration with its bootstrap interval (methods: `spread`). Deterministic:
//! the same runs.csv always gives the same bytes.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};

use shoal_matrix::arm::Arm;
use shoal_matrix::axis;

use crate::columns::col as column;

/// A configuration ran on a saturated machine when, in the median run, every core was busy in
/// at least this share of the samples.
pub const SATURATED_SHARE: f64 = 0.5;

/// One run as the report sees it.
#[derive(Clone, Debug)]
pub struct RunPoint {
    pub run: String,
    pub ok: bool,
    pub mb_per_s: f64,
    pub seconds: f64,
    /// Failed runs: verified bytes / seconds (an upper bound on the rate at which the whole
    /// payload would have completed).
    pub partial_mb_per_s: Option<f64>,
    pub error: String,
}

/// One configuration's runs and summary.
#[derive(Clone, Debug)]
pub struct ConfigSummary {
    pub id: String,
    pub config: String,
    pub kind: String,
    pub payload: String,
    pub payload_files: String,
    pub payload_bytes: String,
    /// Parameter columns (`param_…`) → value.
    pub params: Vec<(String, String)>,
    pub runs: Vec<RunPoint>,
    pub median_mb_per_s: Option<f64>,
    /// The congestion controller(s) in effect, from the runs' `cc` column (`/`-joined when
    /// they differ).
    pub cc: String,
    pub is_reference: bool,
    /// A few link settings, for chart subtitles.
    pub link: String,
    /// The emulated link's goodput ceiling for TCP file content (MB/s): its rate × the TCP
    /// payload share of a full packet, (MTU − 52) / MTU (IPv4 20 + TCP 20 + timestamps 12);
    /// `None` off an emulated link.
    pub goodput_ceiling_mb_per_s: Option<f64>,
}

/// The emulated link's TCP goodput ceiling in MB/s, from a row's `link_rate_bps` and
/// `link_mtu` (1448 of 1500 bytes per packet carry data: 300 Mbit/s → 36.2 MB/s).
pub fn goodput_ceiling_mb_per_s(row: &BTreeMap<String, String>) -> Option<f64> {
    let rate: f64 = row.get(column::LINK_RATE_BPS.name())?.parse().ok()?;
    let mtu: f64 = row
        .get(column::LINK_MTU.name())
        .and_then(|m| m.parse().ok())
        .unwrap_or(1500.0);
    (rate > 0.0 && mtu > 52.0).then(|| rate / 8.0 * (mtu - 52.0) / mtu / 1e6)
}

/// Everything the report produced.
pub struct Report {
    pub configs: Vec<ConfigSummary>,
    /// Parameter column names, in runs.csv order.
    pub param_columns: Vec<String>,
    pub runs_per_config_max: usize,
    /// Every row of runs.csv, column → cell.
    pub raw: Vec<BTreeMap<String, String>>,
}

use crate::spread;
pub use crate::spread::median;

fn minmax(v: &[f64]) -> Option<(f64, f64)> {
    let min = v.iter().copied().reduce(f64::min)?;
    let max = v.iter().copied().reduce(f64::max)?;
    Some((min, max))
}

fn f3(x: Option<f64>) -> String {
    x.map(|x| format!("{x:.3}")).unwrap_or_default()
}

fn int(x: Option<f64>) -> String {
    x.map(|x| format!("{:.0}", x.round())).unwrap_or_default()
}

/// A `k=v,k=v` selector (axis names as in the matrix, or column names).
pub fn parse_selector(s: &str) -> Result<Vec<(String, String)>> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (k, v) = p
                .split_once('=')
                .with_context(|| format!("reference selector {p:?}: expected name=value"))?;
            Ok((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

/// Reads runs.csv and groups it by configuration.
pub fn load(runs_csv: &Path, reference: Option<&[(String, String)]>) -> Result<Report> {
    let mut r = csv::Reader::from_path(runs_csv)
        .with_context(|| format!("cannot read {}", runs_csv.display()))?;
    let headers = r.headers()?.clone();
    for need in [
        column::CONFIG_ID.name(),
        column::CONFIG.name(),
        column::STATUS.name(),
        column::SECONDS.name(),
        column::MB_PER_S.name(),
        column::PAYLOAD.name(),
    ] {
        if !headers.iter().any(|h| h == need) {
            bail!(
                "{} has no {need} column: not a sweep runs.csv",
                runs_csv.display()
            );
        }
    }
    let param_columns: Vec<String> = headers
        .iter()
        .filter(|h| h.starts_with(crate::columns::PARAM_PREFIX))
        .map(str::to_string)
        .collect();
    let mut by_id: BTreeMap<String, ConfigSummary> = BTreeMap::new();
    let mut extra: BTreeMap<String, Vec<BTreeMap<String, String>>> = BTreeMap::new();
    let mut raw = Vec::new();
    for rec in r.records() {
        let rec = rec?;
        let row: BTreeMap<String, String> = headers
            .iter()
            .zip(rec.iter())
            .map(|(h, v)| (h.to_string(), v.to_string()))
            .collect();
        let mut row = row;
        crate::legacy::upgrade(&mut row);
        let g = |k: &str| row.get(k).cloned().unwrap_or_default();
        let num = |k: &str| g(k).parse::<f64>().ok();
        let id = g(column::CONFIG_ID.name());
        let entry = by_id.entry(id.clone()).or_insert_with(|| ConfigSummary {
            id: id.clone(),
            config: g(column::CONFIG.name()),
            kind: g(column::KIND.name()),
            payload: g(column::PAYLOAD.name()),
            payload_files: g(column::PAYLOAD_FILES.name()),
            payload_bytes: g(column::PAYLOAD_BYTES.name()),
            params: param_columns.iter().map(|c| (c.clone(), g(c))).collect(),
            runs: Vec::new(),
            median_mb_per_s: None,
            cc: String::new(),
            is_reference: g(column::REFERENCE.name()) == "true",
            link: link_text(&row),
            goodput_ceiling_mb_per_s: goodput_ceiling_mb_per_s(&row),
        });
        let cc = crate::legacy::cc_label(&row);
        if !cc.is_empty() && !entry.cc.split('/').any(|x| x == cc) {
            if !entry.cc.is_empty() {
                entry.cc.push('/');
            }
            entry.cc.push_str(&cc);
        }
        let ok = g(column::STATUS.name()) == "ok";
        entry.runs.push(RunPoint {
            run: g(column::RUN.name()),
            ok,
            mb_per_s: num(column::MB_PER_S.name()).unwrap_or(0.0),
            seconds: num(column::SECONDS.name()).unwrap_or(f64::NAN),
            partial_mb_per_s: if ok {
                None
            } else {
                num(column::PARTIAL_MB_PER_S.name())
            },
            error: g(column::ERROR.name()),
        });
        extra.entry(id).or_default().push(row.clone());
        raw.push(row);
    }
    if let Some(sel) = reference {
        for c in by_id.values_mut() {
            let row = &extra[&c.id][0];
            c.is_reference = selects(sel, row);
        }
        let chosen: Vec<&ConfigSummary> = by_id.values().filter(|c| c.is_reference).collect();
        if chosen.is_empty() {
            bail!(
                "reference {}: no configuration matches",
                sel.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            );
        }
        // One reference per payload, or the ratio column would depend on the order.
        let mut per_payload: BTreeMap<&str, Vec<&ConfigSummary>> = BTreeMap::new();
        for c in chosen {
            per_payload.entry(&c.payload).or_default().push(c);
        }
        for (payload, cs) in per_payload {
            if cs.len() > 1 {
                bail!(
                    "reference {}: {} configurations match for payload {payload} ({}); name more \
                     axes so that one remains",
                    sel.iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(","),
                    cs.len(),
                    cs.iter()
                        .map(|c| format!("{} {}", c.id, c.config))
                        .collect::<Vec<_>>()
                        .join("; ")
                );
            }
        }
    }
    let mut configs: Vec<ConfigSummary> = by_id.into_values().collect();
    let mut max_runs = 0;
    for c in &mut configs {
        let ok: Vec<f64> = c.runs.iter().filter(|r| r.ok).map(|r| r.mb_per_s).collect();
        c.median_mb_per_s = median(&ok);
        max_runs = max_runs.max(c.runs.len());
    }
    Ok(Report {
        configs,
        param_columns,
        runs_per_config_max: max_runs,
        raw,
    })
}

/// Whether a row's configuration matches every `name=value` of a reference selector. A name
/// is an axis first: when runs.csv has the axis (`cc=bbr` → `param_cc`), it is compared with
/// the axis value as given, so it matches QUIC's BBR rows, whose `cc` column reads
/// `quinn-bbr`, and a configuration without the axis does not match. Only a name that is no
/// axis of the sweep is a column of runs.csv (`kind`, `payload`, `cc` in a sweep without a cc
/// axis, …). `kind=shoal` also matches rows without a kind.
pub fn selects(sel: &[(String, String)], row: &BTreeMap<String, String>) -> bool {
    sel.iter().all(|(k, v)| {
        let param = crate::columns::param_column(k);
        let label;
        let cell = if row.contains_key(&param) {
            row.get(&param)
        } else if k == column::CC.name() {
            // Without a cc axis, `cc=quinn-bbr` names QUIC's BBR as the report labels it.
            label = crate::legacy::cc_label(row);
            Some(&label)
        } else {
            row.get(k)
        };
        match cell {
            Some(x) if !x.is_empty() => x == v,
            _ => k == axis::KIND && v == Arm::Shoal.name(),
        }
    })
}

fn link_text(row: &BTreeMap<String, String>) -> String {
    let g = |k: &str| row.get(k).cloned().unwrap_or_default();
    if g(column::LINK_RTT_MS.name()).is_empty() {
        return String::new();
    }
    let rate: f64 = g(column::LINK_RATE_BPS.name()).parse().unwrap_or(0.0);
    let rate = if rate >= 1e9 {
        format!("{} Gbit/s", rate / 1e9)
    } else {
        format!("{} Mbit/s", rate / 1e6)
    };
    let loss = g(column::LINK_LOSS_PERCENT.name());
    format!(
        "link {} ms RTT, {rate}, queue {} B{}{}",
        g(column::LINK_RTT_MS.name()),
        g(column::LINK_QUEUE_BYTES.name()),
        if loss.is_empty() || loss == "0" {
            String::new()
        } else {
            format!(", loss {loss}%")
        },
        // A sweep run on after a failed check says so wherever the link is named.
        if g(column::LINK_CHECK.name()).starts_with("FAILED") {
            " — LINK CHECK FAILED"
        } else {
            ""
        }
    )
}

/// Writes medians.csv.
pub fn write_medians(rep: &Report, path: &Path) -> Result<()> {
    let mut header: Vec<String> = [
        column::CONFIG_ID.name(),
        column::CONFIG.name(),
        column::KIND.name(),
        column::PAYLOAD.name(),
        column::CC.name(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.extend(rep.param_columns.iter().cloned());
    header.extend(
        [
            "runs",
            "runs_ok",
            "runs_failed",
            "runs_timed_out",
            "runs_verified",
            "median_mb_per_s",
            "min_mb_per_s",
            "max_mb_per_s",
            "q1_mb_per_s",
            "q3_mb_per_s",
            "median_mb_per_s_ci_low",
            "median_mb_per_s_ci_high",
            "median_ci_coverage",
            "relative_iqr",
            "outlier_runs",
            "median_seconds",
            "min_seconds",
            "max_seconds",
            "median_seconds_ci_low",
            "median_seconds_ci_high",
            "median_files_per_s",
            "median_sender_peak_rss_bytes",
            "median_receiver_peak_rss_bytes",
            "median_sender_cpu_seconds",
            "min_load_1m_start",
            "max_load_1m_start",
            "tun_tx_dropped",
            "failed_median_partial_mb_per_s",
            "failures",
            "median_host_all_cores_busy_share",
            "median_data_all_cores_busy_share",
            "host_saturated",
            "reference_config",
            "speedup_vs_reference",
            "speedup_ci_low",
            "speedup_ci_high",
            "link_check",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("cannot write {}", path.display()))?;
    w.write_record(&header)?;
    let mut records: Vec<Vec<String>> = Vec::new();
    let raw = &rep.raw;
    let reference: BTreeMap<&str, &ConfigSummary> = rep
        .configs
        .iter()
        .filter(|c| c.is_reference)
        .map(|c| (c.payload.as_str(), c))
        .collect();
    let ok_seconds = |c: &ConfigSummary| -> Vec<f64> {
        c.runs.iter().filter(|r| r.ok).map(|r| r.seconds).collect()
    };
    let median_seconds = |c: &ConfigSummary| median(&ok_seconds(c));
    for c in &rep.configs {
        let rows: Vec<&BTreeMap<String, String>> = raw
            .iter()
            .filter(|r| r.get(column::CONFIG_ID.name()) == Some(&c.id))
            .collect();
        let ok_rows: Vec<&&BTreeMap<String, String>> = rows
            .iter()
            .filter(|r| r.get(column::STATUS.name()).map(String::as_str) == Some("ok"))
            .collect();
        let col = |rs: &[&&BTreeMap<String, String>], k: &str| -> Vec<f64> {
            rs.iter()
                .filter_map(|r| r.get(k)?.parse::<f64>().ok())
                .filter(|x| x.is_finite())
                .collect()
        };
        let all_rows: Vec<&&BTreeMap<String, String>> = rows.iter().collect();
        let ok_mb: Vec<f64> = c.runs.iter().filter(|r| r.ok).map(|r| r.mb_per_s).collect();
        let ok_s: Vec<f64> = c.runs.iter().filter(|r| r.ok).map(|r| r.seconds).collect();
        let n_ok = ok_mb.len();
        let partial: Vec<f64> = c.runs.iter().filter_map(|r| r.partial_mb_per_s).collect();
        let loads = col(&all_rows, column::SWEEP_LOAD_1M_START.name());
        let dropped: f64 = col(&all_rows, column::TUN_TX_DROPPED_SND.name())
            .iter()
            .chain(col(&all_rows, column::TUN_TX_DROPPED_RCV.name()).iter())
            .sum();
        let timed_out = rows
            .iter()
            .filter(|r| r.get(column::TIMED_OUT.name()).map(String::as_str) == Some("true"))
            .count();
        let mut failures: Vec<String> = Vec::new();
        for r in c.runs.iter().filter(|r| !r.ok) {
            let e: String = r.error.chars().take(160).collect();
            if !failures.contains(&e) {
                failures.push(e);
            }
        }
        // Whether the transfers ran on a saturated machine: the median run's share of 100 ms
        // samples in which every core was busy (over all runs: a failed run shared the cores
        // too), over the runs' timed windows where the rows have them (Shoal arms), else over
        // the whole transfer.
        let host_share = median(&col(&all_rows, column::HOST_ALL_CORES_BUSY_SHARE.name()));
        let data_share = median(&col(&all_rows, column::DATA_ALL_CORES_BUSY_SHARE.name()));
        let busy_share = data_share.or(host_share);
        let refc = reference.get(c.payload.as_str());
        let speedup = match (refc.and_then(|r| median_seconds(r)), median_seconds(c)) {
            (Some(rs), Some(s)) if s > 0.0 => Some(rs / s),
            _ => None,
        };
        let speedup_ci = refc
            .filter(|_| speedup.is_some())
            .and_then(|r| spread::ratio_of_medians_interval(&ok_seconds(r), &ok_s));
        let quart = spread::quartiles(&ok_mb);
        let mb_ci = spread::median_interval(&ok_mb);
        let s_ci = spread::median_interval(&ok_s);
        let relative_iqr = match (quart, median(&ok_mb)) {
            (Some((q1, q3)), Some(m)) if m > 0.0 => Some((q3 - q1) / m),
            _ => None,
        };
        let mut rec: Vec<String> = vec![
            c.id.clone(),
            c.config.clone(),
            c.kind.clone(),
            c.payload.clone(),
            c.cc.clone(),
        ];
        rec.extend(c.params.iter().map(|(_, v)| v.clone()));
        let (mn, mx) = minmax(&ok_mb).unzip();
        let (smn, smx) = minmax(&ok_s).unzip();
        let (lmn, lmx) = minmax(&loads).unzip();
        rec.extend([
            c.runs.len().to_string(),
            n_ok.to_string(),
            (c.runs.len() - n_ok).to_string(),
            timed_out.to_string(),
            rows.iter()
                .filter(|r| r.get(column::VERIFIED.name()).map(String::as_str) == Some("true"))
                .count()
                .to_string(),
            f3(median(&ok_mb)),
            f3(mn),
            f3(mx),
            f3(quart.map(|q| q.0)),
            f3(quart.map(|q| q.1)),
            f3(mb_ci.map(|i| i.low)),
            f3(mb_ci.map(|i| i.high)),
            mb_ci
                .map(|i| format!("{:.4}", i.coverage))
                .unwrap_or_default(),
            f3(relative_iqr),
            if n_ok > 0 {
                spread::outliers(&ok_mb).to_string()
            } else {
                String::new()
            },
            f3(median(&ok_s)),
            f3(smn),
            f3(smx),
            f3(s_ci.map(|i| i.low)),
            f3(s_ci.map(|i| i.high)),
            f3(median(&col(&ok_rows, column::FILES_PER_S.name()))),
            int(median(&col(&ok_rows, column::SENDER_PEAK_RSS_BYTES.name()))),
            int(median(&col(
                &ok_rows,
                column::RECEIVER_PEAK_RSS_BYTES.name(),
            ))),
            f3(median(&col(&ok_rows, column::SENDER_CPU_SECONDS.name()))),
            lmn.map(|x| format!("{x:.2}")).unwrap_or_default(),
            lmx.map(|x| format!("{x:.2}")).unwrap_or_default(),
            format!("{dropped:.0}"),
            f3(median(&partial)),
            failures.join(" || "),
            host_share.map(|x| format!("{x:.2}")).unwrap_or_default(),
            data_share.map(|x| format!("{x:.2}")).unwrap_or_default(),
            busy_share
                .map(|x| (x >= SATURATED_SHARE).to_string())
                .unwrap_or_default(),
            refc.map(|r| r.id.clone()).unwrap_or_default(),
            f3(speedup),
            f3(speedup_ci.map(|i| i.0)),
            f3(speedup_ci.map(|i| i.1)),
            // The link check the runs followed (`FAILED, accepted` after a failed one).
            {
                let mut states: Vec<&str> = Vec::new();
                for r in &rows {
                    let s = r.get(column::LINK_CHECK.name()).map_or("", |s| s.as_str());
                    if !s.is_empty() && !states.contains(&s) {
                        states.push(s);
                    }
                }
                states.join("/")
            },
        ]);
        w.write_record(&rec)?;
        records.push(rec);
    }
    w.flush()?;
    write_json_table(&header, &records, &path.with_extension("json"))
}

/// The medians table as JSON: an array of objects, numbers as numbers, empty cells as null.
fn write_json_table(header: &[String], records: &[Vec<String>], path: &Path) -> Result<()> {
    let rows: Vec<serde_json::Value> = records
        .iter()
        .map(|rec| {
            let obj: serde_json::Map<String, serde_json::Value> = header
                .iter()
                .zip(rec)
                .map(|(k, v)| {
                    let value = if v.is_empty() {
                        serde_json::Value::Null
                    } else if k.starts_with(crate::columns::PARAM_PREFIX)
                        || k == column::CONFIG_ID.name()
                        || k == "reference_config"
                    {
                        serde_json::Value::String(v.clone())
                    } else if let Ok(i) = v.parse::<i64>() {
                        serde_json::Value::Number(i.into())
                    } else if let Some(n) = v
                        .parse::<f64>()
                        .ok()
                        .filter(|x| x.is_finite())
                        .and_then(serde_json::Number::from_f64)
                    {
                        serde_json::Value::Number(n)
                    } else if v == "true" || v == "false" {
                        serde_json::Value::Bool(v == "true")
                    } else {
                        serde_json::Value::String(v.clone())
                    };
                    (k.clone(), value)
                })
                .collect();
            serde_json::Value::Object(obj)
        })
        .collect();
    let text = serde_json::to_string_pretty(&rows)? + "\n";
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Warnings for the summary: arms with outliers or a relative spread (IQR / median of MB/s)
/// over 10%, from a medians.csv.
pub fn spread_warnings(medians_csv: &Path) -> Result<Vec<String>> {
    let mut r = csv::Reader::from_path(medians_csv)
        .with_context(|| format!("cannot read {}", medians_csv.display()))?;
    let h = r.headers()?.clone();
    let idx = |name: &str| h.iter().position(|c| c == name);
    let (Some(ci), Some(ri), Some(oi), Some(ni)) = (
        idx(column::CONFIG.name()),
        idx("relative_iqr"),
        idx("outlier_runs"),
        idx("runs_ok"),
    ) else {
        return Ok(Vec::new());
    };
    let pi = idx(column::PAYLOAD.name());
    let mut out = Vec::new();
    for rec in r.records() {
        let rec = rec?;
        let name = match pi.and_then(|i| rec.get(i)) {
            Some(p) if !p.is_empty() => format!("{} [{p}]", &rec[ci]),
            _ => rec[ci].to_string(),
        };
        if let Ok(rel) = rec[ri].parse::<f64>() {
            if rel > RELATIVE_SPREAD_WARNING {
                out.push(format!(
                    "{name}: MB/s spread (IQR / median) {:.0}% over {} verified runs; more runs or a quieter machine would narrow it",
                    rel * 100.0,
                    &rec[ni]
                ));
            }
        }
        if let Ok(n) = rec[oi].parse::<u64>() {
            if n > 0 {
                out.push(format!(
                    "{name}: {n} outlier run(s) beyond 1.5 × IQR (see runs.csv)"
                ));
            }
        }
    }
    Ok(out)
}

/// Relative spread above which the summary warns.
pub const RELATIVE_SPREAD_WARNING: f64 = 0.10;

#[cfg(test)]
mod tests;
