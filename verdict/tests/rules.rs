//! The rules around the constraints: noise, ties, skipped arms, contradicted floors, and the
//! verdict's JSON and summary.

mod common;

use common::*;
use shoal_verdict::*;

#[test]
fn two_shares_within_noise_are_a_tie() {
    let mut o = planted(1000.0, 141.0, 4096, 64 << 10);
    let small = [4096, 131072, 2 * MIB];
    o.path.receiver_buffers.tcp_rmem = Some(small);
    o.path.loss_to_receiver.random = Some(0.01);
    o.arms = vec![
        base(&[10.0, 10.1, 10.2]),
        bbr(&[6.0, 6.1, 6.2]),
        arm(
            ArmKind::PathWindows,
            &["--rcvbuf", "32MiB"],
            &[6.2, 6.3, 6.4],
        ),
    ];
    let v = diagnose(&o);
    let mut k = kinds(&v);
    k.sort();
    assert_eq!(k, vec![Kind::Window, Kind::Loss], "{v:#?}");
    assert_eq!(v.ties.len(), 1, "{v:#?}");
    let (a, b) = v.ties[0];
    assert!([a, b].contains(&Kind::Loss) && [a, b].contains(&Kind::Window));
    assert!(render(&v, &o).contains("neither is picked"));
}

#[test]
fn a_skipped_arm_is_listed_and_names_nothing() {
    let mut o = planted(100.0, 141.0, 4096, 4096);
    o.path.loss_to_receiver.random = Some(0.01);
    let mut b = base(&[10.0, 10.3, 10.1]);
    set_runs(&mut b, |r| r.retrans_fraction = Some(0.01));
    o.arms = vec![
        b,
        ArmObs::skipped(
            ArmKind::OtherCc("bbr".into()),
            &["--cc", "bbr"],
            "the budget left 20s, the arm needs 45s",
        ),
        ArmObs {
            failed: 3,
            ..arm(ArmKind::Connections(8), &["--connections", "8"], &[])
        },
    ];
    let v = diagnose(&o);
    assert!(kinds(&v).is_empty(), "{v:#?}");
    assert!(v.fixes.is_empty());
    assert!(v
        .skipped
        .iter()
        .any(|s| s.starts_with("the bbr arm: did not run (the budget")));
    assert!(v
        .skipped
        .iter()
        .any(|s| s.contains("no verified run (3 failed)")));
}

#[test]
fn a_base_that_did_not_run_gives_no_verdict() {
    let mut o = planted(100.0, 141.0, 4096, 4096);
    o.arms = vec![ArmObs::skipped(ArmKind::Base, BASE, "budget")];
    let v = diagnose(&o);
    assert!(v.bottlenecks.is_empty() && v.fixes.is_empty());
    assert!(v
        .skipped
        .iter()
        .any(|s| s.contains("no constraint can be named")));
}

#[test]
fn a_floor_the_transfer_beat_is_left_out_and_said_so() {
    let mut o = planted(1000.0, 10.0, 4096, 4096);
    // 4096 files at 100 files/s would need 41 s; the base took 10 s.
    o.ends.receiver_write = Some(floor(100.0, 1e9));
    o.arms = vec![base(&[10.0, 10.1, 10.2])];
    let v = diagnose(&o);
    assert!(!kinds(&v).contains(&Kind::ReceiverFs), "{v:#?}");
    assert!(v
        .skipped
        .iter()
        .any(|s| s.starts_with("receiver-fs floor left out") && s.contains("contradicted")));
    // Nor does it bound the prediction.
    assert!(v.predicted_seconds.unwrap() < 65536.0 / 100.0);
}

#[test]
fn overlapping_runs_claim_no_gain() {
    let mut o = planted(100.0, 141.0, 4096, 4096);
    o.path.loss_to_receiver.random = Some(0.01);
    o.arms = vec![base(&[10.0, 11.0, 12.0]), bbr(&[9.5, 10.5, 11.5])];
    let v = diagnose(&o);
    assert!(v.bottlenecks.is_empty() && v.fixes.is_empty(), "{v:#?}");
    assert!(v.skipped.iter().any(|s| s.contains("run ranges overlap")));
}

#[test]
fn a_gain_below_five_percent_is_noise_even_without_overlap() {
    let mut o = planted(100.0, 141.0, 4096, 4096);
    o.path.loss_to_receiver.random = Some(0.01);
    o.arms = vec![base(&[10.0, 10.05]), bbr(&[9.7, 9.75])];
    let v = diagnose(&o);
    assert!(v.bottlenecks.is_empty() && v.fixes.is_empty(), "{v:#?}");
    assert!(v.skipped.iter().any(|s| s.contains("below 5%")));
}

#[test]
fn a_gain_within_a_half_range_is_noise() {
    let mut o = planted(100.0, 141.0, 4096, 4096);
    o.path.loss_to_receiver.random = Some(0.01);
    // Ranges 8.0–8.3 and 8.5–12.5 do not overlap and the medians differ by 8.9%, but by
    // less than the base's half-range (2 s).
    o.arms = vec![base(&[8.5, 9.0, 12.5]), bbr(&[8.0, 8.2, 8.3])];
    let v = diagnose(&o);
    assert!(v.fixes.is_empty(), "{v:#?}");
    assert!(v.skipped.iter().any(|s| s.contains("half-range")));
}

#[test]
fn a_single_run_needs_a_ten_percent_gain() {
    let mut o = planted(100.0, 141.0, 4096, 4096);
    o.path.loss_to_receiver.random = Some(0.01);
    o.arms = vec![base(&[10.0]), bbr(&[9.2])];
    let v = diagnose(&o);
    assert!(v.fixes.is_empty(), "{v:#?}");
    assert!(v.skipped.iter().any(|s| s.contains("one run")));
    o.arms = vec![base(&[10.0]), bbr(&[8.5])];
    assert_eq!(kinds(&diagnose(&o)), vec![Kind::Loss]);
}

#[test]
fn nothing_measured_to_bind_is_said_so() {
    let mut o = planted(1000.0, 10.0, 4096, 4096);
    o.arms = vec![base(&[2.0, 2.1, 2.05]), bbr(&[2.0, 2.05, 2.1])];
    let v = diagnose(&o);
    assert!(v.bottlenecks.is_empty() && v.fixes.is_empty(), "{v:#?}");
    let text = render(&v, &o);
    assert!(
        text.contains("No constraint was measured to bind"),
        "{text}"
    );
    assert!(text.contains("no arm was faster than the base beyond noise"));
}

#[test]
fn json_has_the_documented_shape_and_kebab_case_kinds() {
    let mut o = planted(100.0, 141.0, 4096, 4096);
    o.path.loss_to_receiver.random = Some(0.01);
    o.arms = vec![base(&[10.0, 10.3, 10.1]), bbr(&[4.0, 4.1, 4.2])];
    let v = diagnose(&o);
    let j = report_json(&v, &o, serde_json::Value::Null);
    for key in [
        "bottlenecks",
        "fixes",
        "best_command",
        "path",
        "ends",
        "stages",
    ] {
        assert!(j.get(key).is_some(), "{key}");
    }
    assert_eq!(j["bottlenecks"][0]["kind"], "loss");
    assert_eq!(j["stages"][1]["kind"]["other-cc"], "bbr");
    let all: Vec<String> = Kind::ALL
        .iter()
        .map(|k| {
            serde_json::to_value(k)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(all, Kind::ALL.map(|k| k.name().to_string()));
    assert!(all.contains(&"per-file-rtt".to_string()) && all.contains(&"udp-drops".to_string()));
    let back: Observations = serde_json::from_value(serde_json::to_value(&o).unwrap()).unwrap();
    assert_eq!(back, o);
}

#[test]
fn the_summary_writes_units_as_the_units_table() {
    let mut o = planted(100.0, 141.0, 4096, 4096);
    o.path.loss_to_receiver.random = Some(0.01);
    o.arms = vec![base(&[10.0, 10.3, 10.1]), bbr(&[4.0, 4.1, 4.2])];
    let text = render(&diagnose(&o), &o);
    for s in [
        "100 Mbit/s",
        "141ms",
        "1.0%",
        "1. loss",
        "Best command:",
        "not runs",
    ] {
        assert!(text.contains(s), "{s} missing in\n{text}");
    }
    assert!(!text.contains("mbps"));
}

#[test]
fn the_best_command_is_the_fix_with_the_lowest_predicted_time_not_a_combination() {
    // Resume gains more on the sample (it saves slow start, paid once), more connections
    // gain less there but carry the per-file part of the tree faster: their prediction wins.
    let mut o = planted(100.0, 141.0, 4096, 4096);
    o.path.loss_to_receiver.random = Some(0.01);
    o.arms = vec![
        base(&[10.0, 10.1, 10.2]),
        arm(
            ArmKind::Connections(4),
            &["--connections", "4"],
            &[9.0, 9.05, 9.1],
        ),
        arm(
            ArmKind::Connections(8),
            &["--connections", "8"],
            &[8.5, 8.55, 8.6],
        ),
        arm(ArmKind::Resume, &["--resume"], &[8.0, 8.05, 8.1]),
    ];
    let v = diagnose(&o);
    assert_eq!(v.fixes.len(), 3, "{:#?}", v.fixes);
    assert_eq!(v.fixes[0].change, "--resume");
    let eight = v
        .fixes
        .iter()
        .find(|f| f.change == "--connections 8")
        .unwrap();
    assert!(
        eight.predicted_seconds.unwrap() < v.fixes[0].predicted_seconds.unwrap(),
        "{:#?}",
        v.fixes
    );
    assert_eq!(
        v.best_command,
        "shoal send 198.18.0.2:7474 --src /data --cc cubic --connections 8"
    );
    assert_eq!(v.predicted_seconds, eight.predicted_seconds);
    let lowest = v
        .fixes
        .iter()
        .filter_map(|f| f.predicted_seconds)
        .fold(f64::INFINITY, f64::min);
    assert_eq!(v.predicted_seconds, Some(lowest));
}
