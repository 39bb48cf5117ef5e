//! `--out DIR/time.svg`: where each measured arm's time on the sample goes (handshake, slow
//! start, the bytes at the rate its window allows, receiver writes, per-file costs), one
//! stacked bar per arm, from the verdict's fitted model. Plain SVG text, no drawing library.

use std::fmt::Write;

use shoal_verdict::model::{breakdown, PathFigures};
use shoal_verdict::Observations;

const PARTS: [(&str, &str); 5] = [
    ("handshake", "#8da0cb"),
    ("slow start", "#fc8d62"),
    ("at the link's rate", "#66c2a5"),
    ("receiver writes", "#e78ac3"),
    ("per-file costs", "#a6d854"),
];

/// The chart, or `None` when no arm's time could be split (no model fits).
pub fn svg(obs: &Observations) -> Option<String> {
    let p = PathFigures::of(obs)?;
    let bars: Vec<(String, [f64; 5])> = obs
        .arms
        .iter()
        .filter(|a| a.measured())
        .filter_map(|a| {
            let b = breakdown(obs, a, &p)?;
            Some((
                a.kind.label(),
                [
                    b.handshake_s,
                    b.slow_start_s,
                    b.at_rate_s,
                    b.receiver_writes_s,
                    b.per_file_s,
                ]
                .map(|x| x.max(0.0)),
            ))
        })
        .collect();
    if bars.is_empty() {
        return None;
    }
    let longest = bars
        .iter()
        .map(|(_, v)| v.iter().sum::<f64>())
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let (left, width, row) = (230.0, 520.0, 28.0);
    let height = 60.0 + row * bars.len() as f64 + 30.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="800" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<text x="10" y="20" font-size="14">Where the time goes on the sample (s, the verdict's model)</text>"#
    );
    for (i, (name, color)) in PARTS.iter().enumerate() {
        let x = 10.0 + i as f64 * 150.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="32" width="12" height="12" fill="{color}"/><text x="{}" y="43">{name}</text>"#,
            x + 16.0
        );
    }
    for (i, (label, parts)) in bars.iter().enumerate() {
        let y = 60.0 + row * i as f64;
        let _ = writeln!(
            s,
            r#"<text x="10" y="{}">{}</text>"#,
            y + 16.0,
            label.replace('&', "&amp;").replace('<', "&lt;")
        );
        let mut x = left;
        for (v, (_, color)) in parts.iter().zip(PARTS) {
            let w = v / longest * width;
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{y}" width="{w:.1}" height="20" fill="{color}"/>"#
            );
            x += w;
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}">{:.2} s</text>"#,
            x + 4.0,
            y + 15.0,
            parts.iter().sum::<f64>()
        );
    }
    s += "</svg>\n";
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_verdict::{ArmKind, ArmObs};

    #[test]
    fn one_bar_per_measured_arm_and_none_without_a_model() {
        let mut obs = Observations::default();
        assert!(svg(&obs).is_none());
        obs.path.idle_rtt_ms = Some(10.0);
        obs.path.goodput_to_receiver_bits_per_s = Some(20e6);
        obs.path.bdp_bytes = Some(25_000);
        obs.sample.sample_files = 1000;
        obs.sample.sample_bytes = 4_096_000;
        obs.sample.tree_files = 1000;
        obs.sample.tree_bytes = 4_096_000;
        obs.arms = vec![
            ArmObs::with_seconds(ArmKind::Base, &["--to", "h:1"], &[1.9, 2.0]),
            ArmObs::skipped(ArmKind::Quic, &["--mode", "quic-bundle"], "budget"),
        ];
        let s = svg(&obs).expect("a chart");
        assert!(s.contains("the base") && !s.contains("QUIC"), "{s}");
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
    }
}
