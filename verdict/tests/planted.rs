//! One planted bottleneck per case: the observations a stage would record with that
//! constraint in place, and what the verdict must name (and must not).

mod common;

use common::*;
use shoal_verdict::*;

#[test]
fn loss_is_named_when_bbr_is_faster_and_segments_were_retransmitted() {
    let mut o = planted(100.0, 141.0, 4096, 4096);
    o.path.loss_to_receiver = LossObs {
        total: Some(0.011),
        random: Some(0.01),
        queue_overflow: Some(0.001),
        in_bursts: None,
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
fn window_is_named_when_kernel_maxima_of_1_mib_hold_a_window_held_probe() {
    // 100 Mbit/s, 100 ms (BDP 1.2 MiB), tcp_rmem/tcp_wmem max 1 MiB at both ends: one flow
    // keeps ~512 KiB in flight, so the probe, held by the receive window 90% of its time,
    // sees 52 Mbit/s (a BDP of 640 KiB, below the kernels' 1 MiB). 8 connections and a
    // resumed QUIC carry more; path-sized windows did not run.
    let mut o = planted(52.4, 100.0, 20_000, 4096);
    o.path.window_limited_fraction = Some(0.9);
    let small = [4096, 131072, MIB];
    for b in [&mut o.path.sender_buffers, &mut o.path.receiver_buffers] {
        b.tcp_rmem = Some(small);
        b.tcp_wmem = Some(small);
        b.rmem_max = Some(64 * MIB);
        b.wmem_max = Some(64 * MIB);
    }
    let mut windows = arm(ArmKind::PathWindows, &["--rcvbuf", "4MiB"], &[]);
    windows.skipped = Some("not run".into());
    o.arms = vec![
        base(&[15.8, 16.0, 16.2]),
        windows,
        arm(
            ArmKind::Connections(8),
            &["--connections", "8"],
            &[10.0, 10.13, 10.3],
        ),
        arm(
            ArmKind::Quic,
            &["--mode", "quic-bundle"],
            &[12.0, 12.2, 12.4],
        ),
        arm(
            ArmKind::QuicStartWindow,
            &["--mode", "quic-bundle", "--resume"],
            &[9.0, 9.09, 9.2],
        ),
    ];
    let v = diagnose(&o);
    assert_eq!(v.bottlenecks[0].kind, Kind::Window, "{v:#?}");
    let ev = v.bottlenecks[0].evidence.join("\n");
    assert!(ev.contains("at most 512.0 KiB in flight"), "{ev}");
    assert!(
        ev.contains("held by the receive window or the send buffer 90"),
        "{ev}"
    );
    assert!(ev.contains("the 8-connection arm ran in"), "{ev}");
    // The summary's path lines show the share too, as the JSON's `window_limited_fraction`.
    let text = render(&v, &o);
    assert!(
        text.contains("the probe's flow to the receiver was held by the receive window or the send buffer 90.0% of its time"),
        "{text}"
    );
    // The best command is the measured fix with the lowest predicted time.
    let lowest = v
        .fixes
        .iter()
        .filter_map(|f| f.predicted_seconds)
        .fold(f64::INFINITY, f64::min);
    assert_eq!(v.predicted_seconds, Some(lowest), "{:#?}", v.fixes);
    let best = v.fixes.iter().find(|f| f.predicted_seconds == Some(lowest));
    assert!(v.best_command.ends_with(&best.unwrap().change), "{v:#?}");
}

#[test]
fn a_window_held_probe_alone_shows_the_window_when_its_bdp_is_below_the_kernels() {
    // The same kernels, but the estimate of the BDP stays below the usable window: the
    // probe's own measurement that its flow was window-held is the cause shown.
    let mut o = planted(30.0, 100.0, 20_000, 4096);
    let small = [4096, 131072, MIB];
    o.path.receiver_buffers.tcp_rmem = Some(small);
    o.path.sender_buffers.tcp_wmem = Some(small);
    o.arms = vec![
        base(&[30.0, 30.2, 30.4]),
        arm(
            ArmKind::Connections(8),
            &["--connections", "8"],
            &[24.0, 24.1, 24.2],
        ),
    ];
    assert!(kinds(&diagnose(&o)).is_empty());
    o.path.window_limited_fraction = Some(0.8);
    let v = diagnose(&o);
    assert_eq!(kinds(&v), vec![Kind::Window], "{v:#?}");
    assert!(v.bottlenecks[0].evidence[0].contains("80"));
}

#[test]
fn path_windows_not_faster_where_they_could_be_set_refute_window() {
    // Kernel maxima of 2 MiB below the BDP, but rmem_max/wmem_max allow path-sized windows and
    // that arm gained nothing: more connections won for another reason (here: none shown).
    let mut o = planted(1000.0, 141.0, 4096, 64 << 10);
    let small = [4096, 131072, 2 * MIB];
    o.path.sender_buffers.tcp_wmem = Some(small);
    o.path.receiver_buffers.tcp_rmem = Some(small);
    o.arms = vec![
        base(&[10.0, 10.1, 10.2]),
        arm(
            ArmKind::PathWindows,
            &["--rcvbuf", "32MiB"],
            &[10.0, 10.1, 10.3],
        ),
        arm(
            ArmKind::Connections(8),
            &["--connections", "8"],
            &[6.0, 6.1, 6.2],
        ),
    ];
    let v = diagnose(&o);
    assert!(!kinds(&v).contains(&Kind::Window), "{v:#?}");
    assert!(v.skipped.iter().any(|s| s.starts_with("window not named")));
    // The gain stands as a fix with no constraint named.
    assert_eq!(v.fixes[0].removes, None);
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
fn an_end_floor_the_fastest_arm_reached_binds_though_the_base_ran_slower() {
    // The planted sync mount as CI met it: 317 files at 77 files/s need 4.1 s, the base took
    // 6.6 s (62%), the QUIC arm 4.587 s (90% of it is the floor).
    let mut o = planted(192.0, 2.1, 317, 4096);
    o.ends.receiver_write = Some(floor(77.0, 1e9));
    o.arms = vec![
        base(&[6.053, 7.157]),
        arm(ArmKind::Quic, &["--mode", "quic-bundle"], &[4.587]),
    ];
    let v = diagnose(&o);
    assert_eq!(kinds(&v)[0], Kind::ReceiverFs, "{v:#?}");
    assert!(v.bottlenecks[0]
        .evidence
        .iter()
        .any(|e| e.contains("the QUIC arm's fastest run took 4.587s")));
    // Nor when no run came near it.
    o.arms = vec![
        base(&[6.053, 7.157]),
        arm(ArmKind::Quic, &["--mode", "quic-bundle"], &[6.0]),
    ];
    assert!(!kinds(&diagnose(&o)).contains(&Kind::ReceiverFs));
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
    // The best command is the arm as it ran: the base's TCP `--cc` is not laid over a QUIC
    // arm that left it out (it would pick quinn's controller of that name, never measured).
    let mut saved = arm(ArmKind::QuicStartWindow, &[], &[2.9, 3.0, 2.95]);
    saved.flags.retain(|f| f != "--cc" && f != "cubic");
    saved
        .flags
        .extend(["--mode", "quic-bundle", "--resume"].map(String::from));
    o.arms[2] = saved;
    let v = diagnose(&o);
    assert!(
        v.best_command.ends_with("--mode quic-bundle --resume"),
        "{}",
        v.best_command
    );
    assert!(!v.best_command.contains("--cc"), "{}", v.best_command);
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
    let text = render(&v, &o);
    assert!(
        text.contains("No constraint was measured to bind"),
        "{text}"
    );
    assert!(
        text.contains("per-file-rtt in the per-file-wait arm  97"),
        "{text}"
    );
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
fn a_prediction_from_a_short_run_that_set_the_paths_rate_is_called_unreliable() {
    // The loss case as measured (40 ms, 50 Mbit/s, 1% loss, CUBIC): the probe's lossy flow saw
    // 2.9 Mbit/s, so the sample was 286 files; the bbr arm ran it in 0.548 s (13 round trips),
    // and its goodput set the path's rate. The whole tree then took 14.45 s with --cc bbr
    // against 27.29 s predicted.
    let mut o = planted(2.9, 41.6, 286, 4096);
    o.sample.tree_files = 20_000;
    o.sample.tree_bytes = 20_000 * 4096;
    o.path.loss_to_receiver = LossObs {
        total: Some(0.01),
        random: Some(0.007),
        queue_overflow: Some(0.014),
        in_bursts: None,
    };
    let mut b = base(&[0.9097]);
    set_runs(&mut b, |r| r.retrans_fraction = Some(0.01));
    o.arms = vec![b, bbr(&[0.5483])];
    let v = diagnose(&o);
    assert_eq!(kinds(&v), vec![Kind::Loss], "{v:#?}");
    let why = v.prediction_unreliable.clone().expect("called unreliable");
    assert!(
        why.contains("the bbr arm's own goodput") && why.contains("13 round trips"),
        "{why}"
    );
    assert!(render(&v, &o).contains("the prediction is unreliable: the path's rate"));
    // The loss case with a grown sample: the bbr arm set no rate above the probe's lossy one
    // but ran 2.6 MiB in 1.867 s (46 round trips); the whole tree then ran 3.7 × faster than
    // the sample's rate.
    let mut o = planted(2.65, 40.2, 667, 4096);
    o.sample.tree_files = 20_000;
    o.sample.tree_bytes = 20_000 * 4096;
    o.path.loss_to_receiver = LossObs {
        total: Some(0.011),
        random: Some(0.009),
        queue_overflow: Some(0.014),
        in_bursts: None,
    };
    let mut b = base(&[2.953, 5.993]);
    set_runs(&mut b, |r| r.retrans_fraction = Some(0.009));
    o.arms = vec![b, bbr(&[1.867])];
    let v = diagnose(&o);
    let why = v.prediction_unreliable.clone().expect("called unreliable");
    assert!(
        why.contains("the path loses") && why.contains("46 round trips"),
        "{why}"
    );
    // A run of many round trips at the probe's own rate is not doubted.
    let mut o = planted(20.0, 10.0, 2_000, 4096);
    o.arms = vec![base(&[3.4, 3.5])];
    assert_eq!(diagnose(&o).prediction_unreliable, None);
}
