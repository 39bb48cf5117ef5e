//! Charts (SVG and PNG) of a sweep, from the report alone: one panel per payload, one row of
//! bars per configuration group (e.g. mode × controller), one bar per colour value (e.g. 1 vs 8
//! connections) at the median MB/s of the verified runs, every verified run as a dot, every
//! failed run as a red cross at its partial rate (an upper bound). Text uses DejaVu Sans
//! embedded in the binary: no system fonts needed.

use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::{ConfigSummary, Report};
use shoal_matrix::arm::Arm;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

pub(crate) fn register_font() {
    REGISTER.call_once(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            let _ = plotters::style::register_font("sans-serif", style, FONT);
        }
    });
}

pub(crate) const PALETTE: &[RGBColor] = &[
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
const BASELINE_GREY: RGBColor = RGBColor(150, 150, 150);
const FAIL_RED: RGBColor = RGBColor(214, 39, 40);

const WIDTH: u32 = 1100;
const ROW_PX: u32 = 30;
const PANEL_FIXED_PX: u32 = 175;

/// Axes preferred as the colour (second) grouping, in order.
const COLOUR_AXES: &[&str] = &["param_connections", "param_cc", "param_plain"];

/// A panel: one payload.
struct Panel<'a> {
    title: String,
    link: String,
    /// Category label → bars (colour key, config).
    rows: Vec<(String, Vec<(String, &'a ConfigSummary)>)>,
    colour_axis: Option<String>,
    colour_keys: Vec<String>,
}

fn human_bytes(b: &str) -> String {
    let Ok(b) = b.parse::<f64>() else {
        return b.to_string();
    };
    for (unit, div) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        let d = div as f64;
        if b >= d && (b / d).fract() == 0.0 || b >= 10.0 * d {
            return format!("{} {unit}", trim(b / d));
        }
    }
    format!("{b} B")
}

fn trim(x: f64) -> String {
    let s = format!("{x:.1}");
    s.trim_end_matches(".0").to_string()
}

fn axis_name(col: &str) -> String {
    col.trim_start_matches("param_").replace('_', "-")
}

fn panels(rep: &Report) -> Vec<Panel<'_>> {
    let mut payloads: Vec<&str> = Vec::new();
    for c in &rep.configs {
        if !payloads.contains(&c.payload.as_str()) {
            payloads.push(&c.payload);
        }
    }
    payloads
        .into_iter()
        .map(|p| {
            let cs: Vec<&ConfigSummary> = rep.configs.iter().filter(|c| c.payload == p).collect();
            let shoal: Vec<&&ConfigSummary> =
                cs.iter().filter(|c| c.kind == Arm::Shoal.name()).collect();
            // Parameters that vary among this payload's Shoal configurations.
            let varying: Vec<String> = rep
                .param_columns
                .iter()
                .filter(|col| {
                    let mut vals: Vec<&str> = shoal.iter().map(|c| value(c, col)).collect();
                    vals.sort();
                    vals.dedup();
                    vals.len() > 1
                })
                .cloned()
                .collect();
            // The controller in effect, where no cc axis names it, when it differs among
            // them (TCP's host default against quinn's CUBIC).
            let cc_differs = {
                let mut ccs: Vec<&str> = shoal
                    .iter()
                    .filter(|c| value(c, "param_cc").is_empty())
                    .map(|c| c.cc.as_str())
                    .collect();
                ccs.sort();
                ccs.dedup();
                ccs.len() > 1
            };
            let colour_axis = COLOUR_AXES
                .iter()
                .find(|a| varying.iter().any(|v| v == *a))
                .map(|s| s.to_string());
            let mut rows: Vec<(String, Vec<(String, &ConfigSummary)>)> = Vec::new();
            let mut colour_keys: Vec<String> = Vec::new();
            for c in &cs {
                let (label, key) = if c.kind != Arm::Shoal.name() {
                    (baseline_label(c), String::new())
                } else {
                    let mut parts: Vec<String> = varying
                        .iter()
                        .filter(|v| Some(*v) != colour_axis.as_ref())
                        .map(|v| {
                            let val = value(c, v);
                            if v == "param_mode" {
                                val.to_string()
                            } else {
                                format!("{} {val}", axis_name(v))
                            }
                        })
                        .collect();
                    if cc_differs && value(c, "param_cc").is_empty() && !c.cc.is_empty() {
                        if parts.is_empty() {
                            parts.push(value(c, "param_mode").to_string());
                        }
                        parts.push(format!("cc {}", c.cc));
                    }
                    let label = if parts.is_empty() {
                        value(c, "param_mode").to_string()
                    } else {
                        parts.join(" · ")
                    };
                    let label = if label.is_empty() {
                        Arm::Shoal.name().to_string()
                    } else {
                        label
                    };
                    let key = colour_axis
                        .as_ref()
                        .map(|a| value(c, a).to_string())
                        .unwrap_or_default();
                    (label, key)
                };
                if c.kind == Arm::Shoal.name() && !colour_keys.contains(&key) {
                    colour_keys.push(key.clone());
                }
                match rows.iter_mut().find(|(l, _)| *l == label) {
                    Some((_, bars)) => bars.push((key, c)),
                    None => rows.push((label, vec![(key, c)])),
                }
            }
            let first = cs[0];
            let files = if first.payload_files == "1" {
                "1 file".to_string()
            } else {
                format!("{} files", first.payload_files)
            };
            let title = format!(
                "Transfer speed: payload {p} ({files}, {})",
                human_bytes(&first.payload_bytes)
            );
            Panel {
                title,
                link: first.link.clone(),
                rows,
                colour_axis,
                colour_keys,
            }
        })
        .collect()
}

/// A baseline's row: its kind, and the values of the axes of its own (`rclone · transfers
/// 16`, `iperf3 · cc bbr`).
fn baseline_label(c: &ConfigSummary) -> String {
    let own = Arm::from_name(&c.kind).map_or(&[][..], |a| a.own_axes());
    std::iter::once(c.kind.clone())
        .chain(own.iter().filter_map(|a| {
            let v = value(c, &crate::columns::param_column(a));
            (!v.is_empty()).then(|| format!("{} {v}", a.trim_start_matches("rclone-")))
        }))
        .collect::<Vec<_>>()
        .join(" · ")
}

fn value<'a>(c: &'a ConfigSummary, col: &str) -> &'a str {
    c.params
        .iter()
        .find(|(k, _)| k == col)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

fn panel_height(p: &Panel) -> u32 {
    let bars: usize = p.rows.iter().map(|(_, b)| b.len()).sum();
    PANEL_FIXED_PX + ROW_PX * bars as u32 + 8 * p.rows.len() as u32
}

/// How the bar chart is drawn.
#[derive(Clone, Copy, Debug, Default)]
pub struct ChartOptions {
    /// The x axis in Mbit/s (10^6 bits of file content per second) instead of MB/s.
    pub mbit: bool,
    /// Also write `report.html` (the sweep's report in one self-contained page).
    pub html: bool,
}

/// Writes `stem.svg` and `stem.png`.
pub fn write_charts(
    rep: &Report,
    dir: &Path,
    stem: &str,
    opts: ChartOptions,
) -> Result<Vec<std::path::PathBuf>> {
    let svg = dir.join(format!("{stem}.svg"));
    let png = dir.join(format!("{stem}.png"));
    std::fs::write(&svg, throughput_svg(rep, opts)?)
        .map_err(|e| anyhow!("writing {}: {e}", svg.display()))?;
    let ps = panels(rep);
    let height: u32 = ps.iter().map(panel_height).sum::<u32>().max(200);
    {
        let root = BitMapBackend::new(&png, (WIDTH, height)).into_drawing_area();
        draw(&root, &ps, rep, opts)?;
        root.present()
            .map_err(|e| anyhow!("writing {}: {e}", png.display()))?;
    }
    Ok(vec![svg, png])
}

/// The bar chart as an SVG document.
pub fn throughput_svg(rep: &Report, opts: ChartOptions) -> Result<String> {
    register_font();
    let ps = panels(rep);
    let height: u32 = ps.iter().map(panel_height).sum::<u32>().max(200);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        draw(&root, &ps, rep, opts)?;
        root.present().map_err(|e| anyhow!("drawing: {e}"))?;
    }
    Ok(out)
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    ps: &[Panel],
    rep: &Report,
    opts: ChartOptions,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing: {e:?}");
    root.fill(&WHITE).map_err(e)?;
    let mut breaks = Vec::new();
    let mut y = 0;
    for p in ps.iter().take(ps.len().saturating_sub(1)) {
        y += panel_height(p) as i32;
        breaks.push(y);
    }
    let areas = root.split_by_breakpoints(Vec::<i32>::new(), breaks);
    for (p, area) in ps.iter().zip(areas.iter()) {
        draw_panel(area, p, rep, opts).map_err(e)?;
    }
    Ok(())
}

fn colour_of(p: &Panel, c: &ConfigSummary, key: &str) -> RGBColor {
    if c.kind != Arm::Shoal.name() {
        return BASELINE_GREY;
    }
    let i = p.colour_keys.iter().position(|k| k == key).unwrap_or(0);
    PALETTE[i % PALETTE.len()]
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    rep: &Report,
    opts: ChartOptions,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    // Every x value is MB/s × k in the axis's unit.
    let (k, unit) = if opts.mbit {
        (8.0, "Mbit/s")
    } else {
        (1.0, "MB/s")
    };
    let font = |size: u32| ("sans-serif", size).into_font();
    // Layout: title, subtitle, then the chart.
    let (w, _) = area.dim_in_pixel();
    area.draw(&Text::new(
        p.title.clone(),
        (w as i32 / 2, 10),
        font(20)
            .style(FontStyle::Bold)
            .into_text_style(area)
            .pos(Pos::new(HPos::Center, VPos::Top)),
    ))?;
    let runs = rep.runs_per_config_max;
    let sub = format!(
        "Bars: median of the verified runs (up to {runs} per configuration); dots: every verified run{}",
        if p.link.is_empty() {
            String::new()
        } else {
            format!("; {}", p.link)
        }
    );
    area.draw(&Text::new(
        sub,
        (w as i32 / 2, 36),
        font(13)
            .into_text_style(area)
            .pos(Pos::new(HPos::Center, VPos::Top)),
    ))?;
    draw_legend(area, p, 60)?;
    let body = area.margin(82, 6, 10, 24);

    let nbars: usize = p.rows.iter().map(|(_, b)| b.len()).sum();
    let mut xmax: f64 = 0.0;
    for (_, bars) in &p.rows {
        for (_, c) in bars {
            for r in &c.runs {
                xmax = xmax.max(if r.ok {
                    r.mb_per_s
                } else {
                    r.partial_mb_per_s.unwrap_or(0.0)
                });
            }
        }
    }
    let ceiling = p
        .rows
        .iter()
        .flat_map(|(_, bars)| bars.iter())
        .find_map(|(_, c)| c.goodput_ceiling_mb_per_s);
    let xmax = xmax.max(ceiling.unwrap_or(0.0));
    let xmax = if xmax <= 0.0 { k } else { xmax * 1.25 * k };
    let label_w = p
        .rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(8)
        .clamp(6, 48) as u32
        * 8
        + 16;
    // y: one unit per bar, plus a gap between category rows.
    let gap = 0.3;
    let ymax = nbars as f64 + gap * p.rows.len() as f64;
    let mut chart = ChartBuilder::on(&body)
        .x_label_area_size(44)
        .y_label_area_size(label_w)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc(if opts.mbit {
            "Mbit/s (10^6 bits of file content per second, verified runs)"
        } else {
            "MB/s (10^6 bytes of file content per second, verified runs)"
        })
        .axis_desc_style(font(14))
        .label_style(font(13))
        .light_line_style(RGBColor(238, 238, 238))
        .max_light_lines(2)
        .draw()?;

    // The link's TCP goodput ceiling: a dashed line, labelled at the top.
    if let Some(c) = ceiling {
        let x = c * k;
        chart.draw_series(DashedLineSeries::new(
            [(x, 0.0), (x, ymax)],
            6,
            4,
            BLACK.mix(0.6).stroke_width(1),
        ))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("link's TCP goodput ceiling {x:.1} {unit} "),
            (x, ymax),
            font(11)
                .into_text_style(&body)
                .pos(Pos::new(HPos::Right, VPos::Top)),
        )))?;
    }

    // Bars, top to bottom in matrix order.
    let mut y = ymax - gap / 2.0;
    for (label, bars) in &p.rows {
        let top = y;
        for (key, c) in bars {
            let (y1, y0) = (y - 0.1, y - 0.9);
            let col = colour_of(p, c, key);
            if let Some(m) = c.median_mb_per_s {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(0.0, y0), (m * k, y1)],
                    col.mix(0.75).filled(),
                )))?;
                let ok = c.runs.iter().filter(|r| r.ok).count();
                let right = c
                    .runs
                    .iter()
                    .map(|r| {
                        if r.ok {
                            r.mb_per_s
                        } else {
                            r.partial_mb_per_s.unwrap_or(0.0)
                        }
                    })
                    .fold(m, f64::max);
                // Two runs: the median is their mean, a speed neither run had.
                let what = if ok == 2 { "mean of 2, " } else { "" };
                chart.draw_series(std::iter::once(Text::new(
                    format!("   {:.2} {unit}  ({what}{ok}/{} ok)", m * k, c.runs.len()),
                    (right * k, (y0 + y1) / 2.0),
                    font(12)
                        .into_text_style(&body)
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                )))?;
            } else {
                let right = c
                    .runs
                    .iter()
                    .map(|r| r.partial_mb_per_s.unwrap_or(0.0))
                    .fold(0.0, f64::max);
                chart.draw_series(std::iter::once(Text::new(
                    if c.runs.len() == 1 {
                        "   the run failed".to_string()
                    } else {
                        format!("   all {} runs failed", c.runs.len())
                    },
                    (right * k, (y0 + y1) / 2.0),
                    font(12)
                        .color(&FAIL_RED)
                        .into_text_style(&body)
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                )))?;
            }
            // Every run: dots (verified) or crosses (failed, at the partial rate).
            let n = c.runs.len().max(1) as f64;
            for (i, r) in c.runs.iter().enumerate() {
                let yy = y0 + 0.15 + 0.5 * (i as f64 + 0.5) / n;
                if r.ok {
                    chart.draw_series(std::iter::once(Circle::new(
                        (r.mb_per_s * k, yy),
                        3,
                        BLACK.filled(),
                    )))?;
                } else {
                    chart.draw_series(std::iter::once(Cross::new(
                        (r.partial_mb_per_s.unwrap_or(0.0) * k, yy),
                        4,
                        FAIL_RED.stroke_width(2),
                    )))?;
                }
            }
            y -= 1.0;
        }
        // Category label, centred on its bars.
        let mid = (top + y) / 2.0;
        let (px, py) = chart.backend_coord(&(0.0, mid));
        let short: String = if label.chars().count() > 48 {
            label.chars().take(47).collect::<String>() + "…"
        } else {
            label.clone()
        };
        area.draw(&Text::new(
            short,
            (
                px - 8 - area.get_base_pixel().0,
                py - area.get_base_pixel().1,
            ),
            font(13)
                .into_text_style(area)
                .pos(Pos::new(HPos::Right, VPos::Center)),
        ))?;
        y -= gap;
    }
    Ok(())
}

enum Swatch {
    Bar(RGBColor),
    Dot,
    Cross,
}

/// One legend row under the subtitle: the bar colours, then the run markers.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    y: i32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let all: Vec<&ConfigSummary> = p
        .rows
        .iter()
        .flat_map(|(_, b)| b.iter().map(|(_, c)| *c))
        .collect();
    let mut entries: Vec<(Swatch, String)> = Vec::new();
    if all.iter().any(|c| c.kind == Arm::Shoal.name()) {
        match &p.colour_axis {
            Some(a) => {
                for (i, k) in p.colour_keys.iter().enumerate() {
                    entries.push((
                        Swatch::Bar(PALETTE[i % PALETTE.len()]),
                        format!("Shoal, {} = {k}", axis_name(a)),
                    ));
                }
            }
            None => entries.push((Swatch::Bar(PALETTE[0]), "Shoal".into())),
        }
    }
    let mut tools: Vec<&str> = Vec::new();
    for c in all.iter().filter(|c| c.kind != Arm::Shoal.name()) {
        if !tools.contains(&c.kind.as_str()) {
            tools.push(&c.kind);
        }
    }
    if !tools.is_empty() {
        entries.push((
            Swatch::Bar(BASELINE_GREY),
            format!("existing tool: {}", tools.join(", ")),
        ));
    }
    // iperf3 moves no files, so its runs have nothing to verify.
    let dot = if tools.contains(&"iperf3") {
        "one run (verified; iperf3: no files)"
    } else {
        "one verified run"
    };
    entries.push((Swatch::Dot, dot.into()));
    if all.iter().any(|c| c.runs.iter().any(|r| !r.ok)) {
        entries.push((
            Swatch::Cross,
            "failed run, at its partial rate (upper bound)".into(),
        ));
    }
    let style = ("sans-serif", 13).into_font().into_text_style(area);
    let widths: Vec<i32> = entries
        .iter()
        .map(|(_, t)| {
            area.estimate_text_size(t, &style)
                .map(|(w, _)| w as i32)
                .unwrap_or(8 * t.len() as i32)
        })
        .collect();
    let total: i32 = widths.iter().map(|w| w + 20 + 22).sum::<i32>() - 22;
    let (w, _) = area.dim_in_pixel();
    let mut x = ((w as i32 - total) / 2).max(8);
    for ((sw, text), tw) in entries.iter().zip(widths) {
        match sw {
            Swatch::Bar(c) => area.draw(&Rectangle::new(
                [(x, y - 6), (x + 14, y + 6)],
                c.mix(0.75).filled(),
            ))?,
            Swatch::Dot => area.draw(&Circle::new((x + 7, y), 3, BLACK.filled()))?,
            Swatch::Cross => area.draw(&Cross::new((x + 7, y), 4, FAIL_RED.stroke_width(2)))?,
        }
        area.draw(&Text::new(
            text.clone(),
            (x + 20, y),
            style.pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
        x += 20 + tw + 22;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
