//! Charts of the per-run traces (SVG and PNG), one panel per payload, one line per Shoal
//! configuration:
//! - `latency-cdf`: the per-file latency distribution of each configuration's median run;
//! - `timeseries`: cwnd (summed over connections), RTT (averaged) and goodput (bytes the
//!   receiver reported ready per interval, or acknowledged where it reports only at the end:
//!   `traces::read_series`) over time, for each configuration's median run.
//!
//! Runs without traces (baselines, sweeps with traces off) are left out; a payload with no
//! trace gets no panel, and no file is written when nothing has a trace.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::chart::{register_font, PALETTE};
use crate::report::{ConfigSummary, Report};
use crate::traces::{self, SeriesPoint};

const WIDTH: u32 = 1100;
const CDF_PANEL_PX: u32 = 420;
const SERIES_PANEL_PX: u32 = 760;

/// A payload's panel: its name and one line per configuration.
type Panel<T> = (String, Vec<Line<T>>);
/// (latency ms, percentile).
type CdfPoint = (f64, f64);

/// A configuration's median-run trace.
struct Line<T> {
    label: String,
    points: Vec<T>,
}

fn short_label(rep: &Report, c: &ConfigSummary) -> String {
    // The axes' values, without the payload (the panel names it).
    let parts: Vec<String> = rep
        .param_columns
        .iter()
        .zip(&c.params)
        .filter(|(col, (_, v))| col.as_str() != "param_payload" && !v.is_empty())
        .map(|(col, (_, v))| format!("{}={v}", col.trim_start_matches("param_")))
        .collect();
    let label = if parts.is_empty() {
        c.config.clone()
    } else {
        parts.join(" ")
    };
    // Every legend names the controller in effect, where no axis does.
    if label.contains("cc=") || c.cc.is_empty() {
        label
    } else {
        format!("{label} cc={}", c.cc)
    }
}

/// The link's TCP goodput ceiling in Mbit/s for a payload's runs (emulated links only).
fn ceiling_mbit(rep: &Report, payload: &str) -> Option<f64> {
    rep.configs
        .iter()
        .filter(|c| c.payload == payload)
        .find_map(|c| c.goodput_ceiling_mb_per_s)
        .map(|mb| mb * 8.0)
}

fn payloads(rep: &Report) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in &rep.configs {
        if !out.contains(&c.payload) {
            out.push(c.payload.clone());
        }
    }
    out
}

fn lines<T>(
    rep: &Report,
    dir: &Path,
    payload: &str,
    read: impl Fn(&Path) -> Result<Vec<T>>,
) -> Vec<Line<T>> {
    rep.configs
        .iter()
        .filter(|c| c.payload == payload && c.kind == "shoal")
        .filter_map(|c| {
            let run = traces::median_run(c)?;
            let points = read(&traces::run_dir(dir, &c.id, run)).ok()?;
            (!points.is_empty()).then(|| Line {
                label: format!("{} (run {run})", short_label(rep, c)),
                points,
            })
        })
        .collect()
}

fn write_both(
    dir: &Path,
    stem: &str,
    height: u32,
    draw: impl Fn(&DrawingArea<SVGBackend, Shift>) -> Result<()>,
    draw_png: impl Fn(&DrawingArea<BitMapBackend, Shift>) -> Result<()>,
) -> Result<Vec<PathBuf>> {
    let svg = dir.join(format!("{stem}.svg"));
    let png = dir.join(format!("{stem}.png"));
    {
        let root = SVGBackend::new(&svg, (WIDTH, height)).into_drawing_area();
        draw(&root)?;
        root.present()
            .map_err(|e| anyhow!("writing {}: {e}", svg.display()))?;
    }
    {
        let root = BitMapBackend::new(&png, (WIDTH, height)).into_drawing_area();
        draw_png(&root)?;
        root.present()
            .map_err(|e| anyhow!("writing {}: {e}", png.display()))?;
    }
    Ok(vec![svg, png])
}

/// Every payload's panel of `read` traces (payloads without any left out).
fn panels_of<T>(
    rep: &Report,
    dir: &Path,
    read: impl Fn(&Path) -> Result<Vec<T>> + Copy,
) -> Vec<Panel<T>> {
    payloads(rep)
        .into_iter()
        .map(|p| {
            let l = lines(rep, dir, &p, read);
            (p, l)
        })
        .filter(|(_, l)| !l.is_empty())
        .collect()
}

/// Writes `latency-cdf.svg|png` and `timeseries.svg|png` when the sweep kept traces.
pub fn write_trace_charts(rep: &Report, dir: &Path) -> Result<Vec<PathBuf>> {
    register_font();
    let mut files = Vec::new();
    let cdfs = panels_of(rep, dir, traces::read_latency);
    if !cdfs.is_empty() {
        let h = CDF_PANEL_PX * cdfs.len() as u32;
        files.extend(write_both(
            dir,
            "latency-cdf",
            h,
            |root| draw_cdfs(root, &cdfs),
            |root| draw_cdfs(root, &cdfs),
        )?);
    }
    let series = panels_of(rep, dir, traces::read_series);
    if !series.is_empty() {
        let h = SERIES_PANEL_PX * series.len() as u32;
        files.extend(write_both(
            dir,
            "timeseries",
            h,
            |root| draw_series(root, &series, rep),
            |root| draw_series(root, &series, rep),
        )?);
    }
    Ok(files)
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing: {e:?}")
}

fn draw_cdfs<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    panels: &[Panel<CdfPoint>],
) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((panels.len(), 1));
    for ((payload, lines), area) in panels.iter().zip(areas.iter()) {
        let x_max = lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .fold(0.0f64, f64::max)
            .max(1.0)
            * 1.05;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("Per-file latency, payload {payload} (median run of each configuration)"),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..x_max, 0.0..100.0)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("latency from first byte sent to file ready (ms)")
            .y_desc("files at or below (%)")
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        for (i, l) in lines.iter().enumerate() {
            let colour = PALETTE[i % PALETTE.len()];
            // An empirical CDF is 0% below its lowest value: the line rises from there (a run
            // of one file is then a vertical step, not an invisible single point).
            let start = l.points.first().map(|p| (p.0, 0.0));
            chart
                .draw_series(LineSeries::new(
                    start.into_iter().chain(l.points.iter().copied()),
                    colour.stroke_width(2),
                ))
                .map_err(err)?
                .label(l.label.clone())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

fn draw_series<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    panels: &[Panel<SeriesPoint>],
    rep: &Report,
) -> Result<()> {
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((panels.len(), 1));
    type Pick = fn(&SeriesPoint) -> f64;
    let metrics: [(&str, Pick); 3] = [
        ("cwnd, all connections (MB)", |p| p.cwnd_bytes / 1e6),
        ("smoothed RTT (ms)", |p| p.rtt_ms),
        ("goodput (Mbit/s)", |p| p.goodput_mbit_s),
    ];
    for ((payload, lines), area) in panels.iter().zip(areas.iter()) {
        let (title, rest) = area.split_vertically(30);
        title
            .draw(&Text::new(
                format!("Payload {payload}: median run of each configuration over time"),
                (10, 6),
                ("sans-serif", 18).into_font(),
            ))
            .map_err(err)?;
        let t_max = lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.t_s))
            .fold(0.0f64, f64::max)
            .max(0.1)
            * 1.02;
        let rows = rest.split_evenly((3, 1));
        let ceiling = ceiling_mbit(rep, payload);
        for (m, (desc, pick)) in metrics.iter().enumerate() {
            let goodput = m == 2;
            let y_max = lines
                .iter()
                .flat_map(|l| l.points.iter().map(pick))
                .fold(0.0f64, f64::max)
                .max(if goodput { ceiling.unwrap_or(0.0) } else { 0.0 })
                .max(1e-3)
                * 1.1;
            let mut chart = ChartBuilder::on(&rows[m])
                .margin(8)
                .x_label_area_size(if m == 2 { 35 } else { 20 })
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..t_max, 0.0..y_max)
                .map_err(err)?;
            let mut mesh = chart.configure_mesh();
            mesh.y_desc(*desc).label_style(("sans-serif", 12));
            if m == 2 {
                mesh.x_desc("time since the sender started (s)");
            }
            mesh.draw().map_err(err)?;
            // The goodput panel's reference: what the link can carry of TCP file content.
            if let Some(c) = ceiling.filter(|_| goodput) {
                chart
                    .draw_series(DashedLineSeries::new(
                        [(0.0, c), (t_max, c)],
                        6,
                        4,
                        BLACK.mix(0.6).stroke_width(1),
                    ))
                    .map_err(err)?;
                chart
                    .draw_series(std::iter::once(Text::new(
                        format!("link's TCP goodput ceiling {c:.0} Mbit/s"),
                        (t_max * 0.01, c),
                        ("sans-serif", 11).into_font(),
                    )))
                    .map_err(err)?;
            }
            for (i, l) in lines.iter().enumerate() {
                let colour = PALETTE[i % PALETTE.len()];
                let s = chart
                    .draw_series(LineSeries::new(
                        l.points.iter().map(|p| (p.t_s, pick(p))),
                        colour.stroke_width(2),
                    ))
                    .map_err(err)?;
                if m == 0 {
                    s.label(l.label.clone()).legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2))
                    });
                }
            }
            if m == 0 {
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::UpperRight)
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK.mix(0.3))
                    .label_font(("sans-serif", 12))
                    .draw()
                    .map_err(err)?;
            }
        }
    }
    Ok(())
}
