//! The probe's figures against the emulated link they measure (root): on links of 20, 100
//! and 300 Mbit/s with 0% and 1% random loss, each direction's goodput is within 0.9–1.0 × the
//! link's TCP goodput ceiling and its random loss within the loss-fidelity band of
//! `shoal link check`, or the probe says why its figures are unreliable.

use std::process::Stdio;
use std::time::Duration;

use crate::support::*;
use shoal_link::UpConfig;

const RTT_MS: u64 = 40;
/// `shoal link check`'s TCP goodput ceiling: the rate × MSS / (MSS + 52), MSS 1448.
const CEILING: f64 = 1448.0 / 1500.0;
/// Random loss a lossless link may show before it counts as loss (0.1%, the verdict's
/// `LOSS_MIN`).
const LOSS_NONE: f64 = 0.001;

/// One direction's figures against the link: `None` when they hold, else what is off.
fn judge(d: &serde_json::Value, rate_bps: f64, loss: f64) -> (String, Option<String>) {
    let g = d["goodput_bit_s"].as_f64().unwrap_or(0.0);
    let random = d["loss_fraction"].as_f64();
    let segs = d["bulk"]["acked"]["steady_segments"].as_u64().unwrap_or(0);
    let why: Vec<String> = d["unreliable"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let ratio = g / (rate_bps * CEILING);
    let (lo, hi) = if loss > 0.0 {
        shoal_link::verdict::bulk_loss_band(loss, segs)
    } else {
        (0.0, LOSS_NONE)
    };
    let mut off = Vec::new();
    if !(0.9..=1.0).contains(&ratio) && why.is_empty() {
        off.push(format!(
            "goodput {ratio:.3} × the ceiling, and not called unreliable"
        ));
    }
    // The loss-bound reason excuses the goodput of a lossy flow, not its loss reading.
    // Loss in bursts is the probe's own queue overflow, named as such in `loss_in_bursts`.
    let loss_excused = why
        .iter()
        .any(|w| !w.contains("lower bound of the path's rate"))
        || d["loss_in_bursts"].is_number();
    let loss_ok = random.is_some_and(|r| r >= lo && r <= hi);
    if !loss_ok && !loss_excused {
        off.push(format!(
            "random loss {random:?} outside {lo:.5}..={hi:.5}, and not called unreliable"
        ));
    }
    let line = format!(
        "goodput {:.2} Mbit/s ({ratio:.3} × ceiling), random loss {}, unreliable: {}",
        g / 1e6,
        random.map_or("?".into(), |r| format!("{:.3}%", r * 100.0)),
        if why.is_empty() {
            "no".into()
        } else {
            why.join("; ")
        }
    );
    (line, (!off.is_empty()).then(|| off.join("; ")))
}

#[test]
#[ignore = "needs root"]
fn the_probe_matches_links_of_20_100_and_300_mbit_with_and_without_loss_or_says_why_not() {
    needs_root();
    let _serial = serial();
    let mut failures = Vec::new();
    for rate_mbit in [20u64, 100, 300] {
        for loss in [0.0, 0.01] {
            let name = unique("diagp");
            let mut cfg =
                UpConfig::new(&name, Duration::from_millis(RTT_MS), rate_mbit * 1_000_000);
            cfg.loss = loss;
            let guard = link_up(&cfg);
            let t = tempfile::tempdir().unwrap();
            let rx = ReceiverProc::start_at(
                "198.18.0.2:0",
                Some(&format!("{name}-rcv")),
                &t.path().join("id"),
                &t.path().join("incoming"),
                &["--control"],
            );
            let (pin, token) = credentials(&rx);
            let mut cmd = shoal();
            cmd.args(["probe", &rx.addr, "--pin", &pin, "--token-file"])
                .arg(&token)
                .args(["--duration", "3s", "--warmup", "1s", "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let child = shoal_link::spawn_in_netns(&format!("{name}-snd"), &mut cmd)
                .expect("start shoal probe");
            let out = wait_limited(child, Duration::from_secs(90));
            drop(rx);
            guard.down().expect("link down");
            assert!(out.status.success(), "{}", text(&out));
            let p = json(&out);
            for dir in ["up", "down"] {
                let (line, off) = judge(&p[dir], (rate_mbit * 1_000_000) as f64, loss);
                let case = format!("{rate_mbit} Mbit/s, {}% loss, {dir}", loss * 100.0);
                println!("{case}: {line}");
                if let Some(off) = off {
                    failures.push(format!("{case}: {off}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
