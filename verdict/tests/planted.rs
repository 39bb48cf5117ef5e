//! One planted bottleneck per case: the observations a stage would record with that
//! constraint in place, and what the verdict must name (and must not).

use shoal_verdict::*;

const MIB: u64 = 1 << 20;

/// A path with ample buffers, fast ends and idle CPUs; the sample is `files` × `file_size`,
/// the tree 16 times that.
fn planted(mbit: f64, rtt_ms: f64, files: u64, file_size: u64) -> Observations {
    let rate = mbit * 1e6;
    let big = [4096, 131072, 256 * MIB];
    Observations {
        path: PathObs {
            idle_rtt_ms: Some(rtt_ms),
            loaded_rtt_ms: Some(rtt_ms * 1.2),
            goodput_to_receiver_bits_per_s: Some(rate),
            goodput_from_receiver_bits_per_s: Some(rate),
            bdp_bytes: Some((rate * rtt_ms / 1000.0 / 8.0) as u64),
            sender_buffers: BufferLimits {
                tcp_rmem: Some(big),
                tcp_wmem: Some(big),
                rmem_max: Some(256 * MIB),
                wmem_max: Some(256 * MIB),
            },
            receiver_buffers: BufferLimits {
                tcp_rmem: Some(big),
                tcp_wmem: Some(big),
                rmem_max: Some(256 * MIB),
                wmem_max: Some(256 * MIB),
            },
            controllers: vec!["cubic".into(), "bbr".into()],
            ..PathObs::default()
        },
        ends: EndsObs {
            source_read_found: Some(floor(200_000.0, 2e9)),
            source_read_warm: Some(floor(400_000.0, 4e9)),
            receiver_write: Some(floor(100_000.0, 1e9)),
            sender_cpu: CpuObs {
                cpus: Some(4),
                ..CpuObs::default()
            },
            receiver_cpu: CpuObs {
                cpus: Some(4),
                ..CpuObs::default()
            },
        },
        sample: SampleObs {
            sample_files: files,
            sample_bytes: files * file_size,
            tree_files: files * 16,
            tree_bytes: files * file_size * 16,
            sizes: None,
        },
        arms: Vec::new(),
    }
}

fn floor(files_per_s: f64, bytes_per_s: f64) -> FloorRate {
    FloorRate {
        files_per_s,
        bytes_per_s,
        cpu_busy: None,
    }
}

const BASE: &[&str] = &["198.18.0.2:7474", "--src", "/data", "--cc", "cubic"];

fn base(seconds: &[f64]) -> ArmObs {
    ArmObs::with_seconds(ArmKind::Base, BASE, seconds)
}

fn arm(kind: ArmKind, extra: &[&str], seconds: &[f64]) -> ArmObs {
    let mut flags: Vec<&str> = BASE.to_vec();
    flags.extend_from_slice(extra);
    ArmObs::with_seconds(kind, &flags, seconds)
}

fn bbr(seconds: &[f64]) -> ArmObs {
    let mut a = arm(ArmKind::OtherCc("bbr".into()), &[], seconds);
    a.flags[4] = "bbr".into();
    a
}

fn kinds(v: &Verdict) -> Vec<Kind> {
    v.bottlenecks.iter().map(|b| b.kind).collect()
}

fn set_runs(arm: &mut ArmObs, f: impl Fn(&mut RunObs)) {
    arm.runs.iter_mut().for_each(f);
}

#[test]
fn loss_is_named_when_bbr_is_faster_and_segments_were_retransmitted() {
    let mut o = planted(100.0, 141.0, 4096, 4096);
    o.path.loss_to_receiver = LossObs {
        total: Some(0.011),
        random: Some(0.01),
        queue_overflow: Some(0.001),
    };
    let mut b = base(&[10.0, 10.3, 10.1]);
    set_runs(&mut b, |r| {
        r.retrans_fraction = Some(0.01);
        r.congestion_events = Some(40);
    });
    o.arms = vec![
        b,
        bbr(&[4.0, 4.1, 4.2]),
        arm(
            ArmKind::PathWindows,
            &["--rcvbuf", "4MiB"],
            &[9.9, 10.2, 10.4],
        ),
    ];
    let v = diagnose(&o);
    assert_eq!(kinds(&v), vec![Kind::Loss], "{v:#?}");
    assert!(v.bottlenecks[0]
        .evidence
        .contains(&"40 congestion events per run in the base".into()));
    let share = v.bottlenecks[0].share;
    assert!((share - (10.1 - 4.1) / 10.1).abs() < 1e-9);
    assert_eq!(v.fixes.len(), 1);
    assert_eq!(v.fixes[0].change, "--cc bbr");
    assert_eq!(v.fixes[0].removes, Some(Kind::Loss));
    assert_eq!(
        v.best_command,
        "shoal send 198.18.0.2:7474 --src /data --cc bbr"
    );
    assert!(v
        .skipped
        .iter()
        .any(|s| s.contains("path-sized windows") && s.contains("noise")));
    assert!(v.ties.is_empty());
}

#[test]
fn window_is_named_when_kernel_max_is_below_the_bdp_and_path_windows_are_faster() {
    let mut o = planted(1000.0, 141.0, 4096, 64 << 10);
    let small = [4096, 131072, 2 * MIB];
    o.path.sender_buffers.tcp_wmem = Some(small);
    o.path.receiver_buffers.tcp_rmem = Some(small);
    o.path.receiver_buffers.rmem_max = Some(212_992);
    o.arms = vec![
        base(&[18.0, 18.4, 18.2]),
        arm(
            ArmKind::PathWindows,
            &["--rcvbuf", "32MiB", "--sndbuf", "32MiB"],
            &[4.0, 4.2, 4.1],
        ),
    ];
    let v = diagnose(&o);
    assert_eq!(kinds(&v), vec![Kind::Window], "{v:#?}");
    assert!(v.bottlenecks[0].evidence[0].contains("2.0 MiB"));
    assert_eq!(v.fixes[0].removes, Some(Kind::Window));
    assert!(v.fixes[0]
        .change
        .starts_with("--rcvbuf 32MiB --sndbuf 32MiB"));
    assert!(
        v.fixes[0].change.contains("net.core.rmem_max="),
        "{}",
        v.fixes[0].change
    );
    assert!(v.best_command.ends_with("--rcvbuf 32MiB --sndbuf 32MiB"));
}

#[test]
fn window_is_named_when_the_probe_itself_was_window_limited() {
    // 1 Gbit/s, 141 ms, kernel maxima of 2 MiB and rmem_max at its default: the probe's one
    // flow sees 110 Mbit/s (its BDP 1.8 MiB, below the cap), 8 connections carry 520 Mbit/s.
    let mut o = planted(110.0, 141.0, 4096, 64 << 10);
    let small = [4096, 131072, 2 * MIB];
    for b in [&mut o.path.sender_buffers, &mut o.path.receiver_buffers] {
        b.tcp_rmem = Some(small);
        b.tcp_wmem = Some(small);
        b.rmem_max = Some(212_992);
        b.wmem_max = Some(212_992);
    }
    o.arms = vec![
        base(&[18.8, 19.0, 19.2]),
        arm(
            ArmKind::PathWindows,
            &["--rcvbuf", "32MiB"],
            &[19.0, 19.3, 19.5],
        ),
        arm(
            ArmKind::Connections(8),
            &["--connections", "8"],
            &[4.0, 4.1, 4.2],
        ),
    ];
    let v = diagnose(&o);
    assert_eq!(kinds(&v), vec![Kind::Window], "{v:#?}");
    assert!(v.bottlenecks[0].evidence[0].contains("the 8-connection arm"));
    assert!(v
        .skipped
        .iter()
        .any(|s| s.starts_with("link-rate floor left out")));
    assert_eq!(v.fixes[0].change, "--connections 8");
}

#[test]
fn link_rate_binds_and_no_fix_claims_a_gain() {
    // 16 MiB at 20 Mbit/s: 6.71 s at the link's rate; the base runs at 7.0 s.
    let mut o = planted(20.0, 2.0, 4096, 4096);
    o.arms = vec![
        base(&[6.9, 7.0, 7.05]),
        bbr(&[6.85, 7.0, 7.1]),
        arm(
            ArmKind::Connections(8),
            &["--connections", "8"],
            &[6.95, 7.0, 7.02],
        ),
        arm(ArmKind::Quic, &["--mode", "quic-bundle"], &[7.1, 7.2, 7.15]),
    ];
    let v = diagnose(&o);
    assert_eq!(kinds(&v), vec![Kind::LinkRate], "{v:#?}");
    assert!(v.bottlenecks[0].share > 0.9);
    assert!(v.fixes.is_empty(), "{:#?}", v.fixes);
    assert_eq!(
        v.best_command,
        "shoal send 198.18.0.2:7474 --src /data --cc cubic"
    );
    // The whole tree is 16 times the sample, all at the link's rate.
    let t = v.predicted_seconds.unwrap();
    assert!((t - 16.0 * 7.0).abs() < 0.1 * 16.0 * 7.0, "{t}");
}

#[test]
fn receiver_cpu_is_named_when_its_cpu_fills_the_quota() {
    let mut o = planted(1000.0, 10.0, 4096, 4096);
    o.ends.receiver_cpu.quota_cores = Some(0.25);
    let mut b = base(&[10.0, 10.2, 10.1]);
    set_runs(&mut b, |r| {
        r.receiver_cpu_s = Some(r.seconds * 0.25 * 0.97);
        r.sender_cpu_s = Some(0.5);
    });
    o.arms = vec![
        b,
        arm(
            ArmKind::Connections(4),
            &["--connections", "4"],
            &[10.0, 10.3, 10.2],
        ),
    ];
    let v = diagnose(&o);
    assert_eq!(kinds(&v), vec![Kind::ReceiverCpu], "{v:#?}");
    assert!(v.bottlenecks[0].evidence[0].contains("quota of 0.25 cores"));
    assert!(v.fixes.is_empty());
}

#[test]
fn a_write_floor_measured_with_the_receiver_cpu_full_is_receiver_cpu() {
    let mut o = planted(1000.0, 10.0, 4096, 4096);
    o.ends.receiver_cpu.quota_cores = Some(0.25);
    o.ends.receiver_write = Some(FloorRate {
        cpu_busy: Some(0.98),
        ..floor(400.0, 1e9)
    });
    let mut b = base(&[10.4, 10.5, 10.6]);
    set_runs(&mut b, |r| r.receiver_cpu_s = Some(r.seconds * 0.25 * 0.96));
    o.arms = vec![b];
    let v = diagnose(&o);
    assert_eq!(kinds(&v), vec![Kind::ReceiverCpu], "{v:#?}");
    assert!(v.bottlenecks[0]
        .evidence
        .iter()
        .any(|e| e.contains("not its disk")));
    assert!(v.bottlenecks[0]
        .evidence
        .iter()
        .any(|e| e.contains("quota of 0.25 cores")));
}

#[test]
fn receiver_fs_binds_when_the_writer_floor_is_near_the_base() {
    let mut o = planted(1000.0, 10.0, 4096, 4096);
    // 4096 files at 400 files/s: 10.24 s; the base takes 10.5 s.
    o.ends.receiver_write = Some(floor(400.0, 1e9));
    let mut b = base(&[10.4, 10.5, 10.6]);
    set_runs(&mut b, |r| r.receiver_write_wait_s = Some(9.0));
    o.arms = vec![b, bbr(&[10.3, 10.5, 10.7])];
    let v = diagnose(&o);
    assert_eq!(kinds(&v), vec![Kind::ReceiverFs], "{v:#?}");
    assert!(v.bottlenecks[0].evidence[2].contains("waited 9s on its writers"));
    // The whole tree cannot be written faster than its floor: 65536 files at 400 files/s.
    assert!(v.predicted_seconds.unwrap() >= 65536.0 / 400.0);
    assert!(v
        .common_tools
        .iter()
        .all(|t| t.predicted_seconds >= 65536.0 / 400.0));
}

#[test]
fn slow_start_is_named_when_a_saved_window_is_faster() {
    // 1 Gbit/s, 141 ms, tuned buffers; 256 MiB at the link's rate is 2.15 s.
    let mut o = planted(1000.0, 141.0, 4096, 64 << 10);
    o.arms = vec![
        base(&[4.0, 4.1, 4.05]),
        arm(ArmKind::Resume, &["--resume"], &[2.7, 2.75, 2.8]),
    ];
    let v = diagnose(&o);
    assert_eq!(kinds(&v), vec![Kind::SlowStart], "{v:#?}");
    assert_eq!(v.fixes[0].change, "--resume");
    assert!(v.best_command.ends_with("--cc cubic --resume"));
}

#[test]
fn slow_start_on_quic_is_judged_against_the_quic_arm() {
    let mut o = planted(1000.0, 141.0, 4096, 64 << 10);
    o.arms = vec![
        base(&[4.0, 4.1, 4.05]),
        arm(ArmKind::Quic, &["--mode", "quic-bundle"], &[4.3, 4.4, 4.35]),
        arm(
            ArmKind::QuicStartWindow,
            &["--mode", "quic-bundle", "--initial-window", "16MiB"],
            &[2.9, 3.0, 2.95],
        ),
    ];
    let v = diagnose(&o);
    assert_eq!(kinds(&v), vec![Kind::SlowStart], "{v:#?}");
    assert_eq!(v.fixes[0].removes, Some(Kind::SlowStart));
}

#[test]
fn per_file_rtt_is_named_for_the_per_file_wait_arm() {
    // 256 files × 141 ms = 36.1 s of round trips.
    let mut o = planted(100.0, 141.0, 256, 4096);
    o.arms = vec![
        base(&[0.95, 1.0, 1.05]),
        arm(
            ArmKind::PerFileWait,
            &["--mode", "tcp-wait"],
            &[37.0, 37.2, 37.5],
        ),
    ];
    let v = diagnose(&o);
    assert_eq!(kinds(&v), vec![Kind::PerFileRtt], "{v:#?}");
    assert_eq!(v.bottlenecks[0].arm, Some(ArmKind::PerFileWait));
    assert!(v.bottlenecks[0].share > 0.95);
    assert!(v.fixes.is_empty());
    // SFTP-like: one round trip per file for the 4096-file tree.
    let sftp = &v.common_tools[0];
    assert!(sftp.predicted_seconds > 4096.0 * 0.141);
    assert!(sftp.why.contains("not a run"));
}

#[test]
fn per_file_rtt_is_not_named_when_the_wait_costs_other_than_a_round_trip_per_file() {
    let mut o = planted(100.0, 141.0, 256, 4096);
    o.arms = vec![
        base(&[0.95, 1.0, 1.05]),
        arm(
            ArmKind::PerFileWait,
            &["--mode", "tcp-wait"],
            &[5.0, 5.1, 5.2],
        ),
    ];
    let v = diagnose(&o);
    assert!(kinds(&v).is_empty(), "{v:#?}");
    assert!(v
        .skipped
        .iter()
        .any(|s| s.contains("per-file-rtt not named")));
}

#[test]
fn udp_drops_are_named_when_quic_is_slower_with_receive_buffer_errors() {
    let mut o = planted(1000.0, 141.0, 4096, 64 << 10);
    let mut q = arm(
        ArmKind::Quic,
        &["--mode", "quic-bundle"],
        &[14.0, 14.2, 14.3],
    );
    set_runs(&mut q, |r| r.udp_rcvbuf_errors = Some(5000));
    o.arms = vec![base(&[10.0, 10.1, 10.2]), q];
    let v = diagnose(&o);
    assert_eq!(kinds(&v), vec![Kind::UdpDrops], "{v:#?}");
    assert_eq!(v.bottlenecks[0].arm, Some(ArmKind::Quic));
    assert!(v.fixes.is_empty());
}

#[test]
fn quic_slower_without_receive_buffer_errors_names_nothing() {
    let mut o = planted(1000.0, 141.0, 4096, 64 << 10);
    let mut q = arm(
        ArmKind::Quic,
        &["--mode", "quic-bundle"],
        &[14.0, 14.2, 14.3],
    );
    set_runs(&mut q, |r| r.udp_rcvbuf_errors = Some(0));
    o.arms = vec![base(&[10.0, 10.1, 10.2]), q];
    assert!(diagnose(&o).bottlenecks.is_empty());
}

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
