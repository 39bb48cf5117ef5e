//! Two network namespaces as two hosts: `shoal recv --control` in one (host B), a two-host
//! sweep (`[link] receiver = …`) started in the other (host A), across an emulated link the
//! test brings up itself (the sweep only knows B's address, as across two real hosts).
//! Issue #17: each run's receiver settings reach B and apply there to that run; B's facts
//! and its TCP-metrics guard are recorded; what B cannot set per run is refused up front.
//!
//! Root only (`#[ignore = "needs root"]`).

use crate::support;

use std::path::Path;
use std::time::Duration;

use shoal_link::UpConfig;
use support::sweep::sweep_in;
use support::{link_up, needs_root, rows, serial, unique, ReceiverProc};

/// Host B: a control receiver in `ns`; returns it and the matrix head that reaches it.
fn host_b(dir: &Path, ns: &str) -> (ReceiverProc, String) {
    let id = dir.join("id-b");
    let rx = ReceiverProc::start_at(
        "198.18.0.2:0",
        Some(ns),
        &id,
        &dir.join("incoming"),
        &["--control"],
    );
    let pin = std::fs::read_to_string(id.join("pin")).unwrap();
    let head = format!(
        "[sweep]\ntimeout = \"1m\"\nprobe = false\n[link]\nreceiver = \"{}\"\npin = \"{}\"\ntoken_file = \"{}\"\n\
         [payload.p]\nfiles = 300\nsize = \"4KiB\"\ndirs = 6\n",
        rx.addr,
        pin.trim(),
        id.join("token").display()
    );
    (rx, head)
}

#[test]
#[ignore = "needs root"]
fn receiver_axes_take_effect_on_host_b_per_run_and_b_s_facts_are_recorded() {
    needs_root();
    let _s = serial();
    let name = unique("th");
    let guard = link_up(&UpConfig::new(&name, Duration::from_millis(4), 200_000_000));
    let t = tempfile::tempdir().unwrap();
    let (snd, rcv) = (format!("{name}-snd"), format!("{name}-rcv"));
    let (_rx, head) = host_b(t.path(), &rcv);

    // B was started without --fsync, --rcvbuf or --max-streams: every value below reaches it
    // only through the control channel, for its run alone.
    let axes = "[axes]\nmode = [\"tcp-streams\"]\n\"recv.fsync\" = [true, false]\n\
                rcvbuf = [\"128KiB\"]\nmax-streams = [32]\n";
    let s = sweep_in(
        Some(&snd),
        t.path(),
        "axes",
        &format!("{head}{axes}"),
        "unused",
        &["--runs", "1", "--seed", "3"],
        &[],
    );
    assert!(s.ok, "stdout:\n{}\nstderr:\n{}", s.stdout, s.stderr);
    let r = rows(&s.out.join("runs.csv"));
    assert_eq!(r.len(), 2, "{}", s.stdout);
    for row in &r {
        assert_eq!(row["status"], "ok", "{row:?}");
        assert_eq!(row["verified"], "true", "{row:?}");
        // Two namespaces of one host share one clock: the offset estimated over the control
        // channel (minimum-RTT probes) is 0 within 1 ms.
        let offset: f64 = row["clock_offset_ms"].parse().unwrap();
        assert!(
            offset.abs() < 1.0,
            "clock offset {offset} ms between namespaces"
        );
        let fsync: f64 = row["fsync_seconds"].parse().unwrap_or(0.0);
        let settings = &row["receiver_settings"];
        if row["param_recv_fsync"] == "true" {
            assert!(
                fsync > 0.0,
                "recv.fsync = true gave fsync_seconds {fsync}: {row:?}"
            );
            assert!(settings.contains("fsync=true"), "{settings}");
        } else {
            assert_eq!(fsync, 0.0, "{row:?}");
            assert!(settings.contains("fsync=false"), "{settings}");
        }
        assert!(
            settings.contains("max-streams=32") && settings.contains("rcvbuf=131072"),
            "{settings}"
        );
        // Read back from B's kernel at the end of the run: SO_RCVBUF 128 KiB, doubled by
        // Linux and locked (no autotuning).
        assert_eq!(row["receiver_rcvbuf_bytes"], "262144", "{row:?}");
        let peak: u64 = row["receiver_peak_streams"].parse().unwrap();
        assert!((1..=32).contains(&peak), "{row:?}");
        // B's guard against cached TCP metrics, before this run (the link's namespaces set
        // tcp_no_metrics_save = 1).
        assert!(
            row["receiver_tcp_metrics"].contains("tcp_no_metrics_save = 1"),
            "{row:?}"
        );
    }

    // A QUIC run's window on B is the run's own: B runs with 20 MiB unless told.
    let quic = "[axes]\nmode = [\"quic-bundle\"]\nconn-window = [\"8MiB\"]\n\
                \"recv.write-budget\" = [\"1MiB\"]\n";
    let q = sweep_in(
        Some(&snd),
        t.path(),
        "quic",
        &format!("{head}{quic}"),
        "unused",
        &["--runs", "1"],
        &[],
    );
    assert!(q.ok, "stdout:\n{}\nstderr:\n{}", q.stdout, q.stderr);
    let qr = rows(&q.out.join("runs.csv"));
    assert_eq!(qr.len(), 1, "{}", q.stdout);
    assert_eq!(qr[0]["status"], "ok", "{:?}", qr[0]);
    // Reported by B in its completion: the window it gave the run's one connection.
    assert_eq!(qr[0]["conn_window"], "8388608", "{:?}", qr[0]);
    let settings = &qr[0]["receiver_settings"];
    assert!(
        settings.contains("conn-window=8388608") && settings.contains("write-budget=1048576"),
        "{settings}"
    );

    // B's facts, read on B and fetched through its control channel, in meta.json.
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.out.join("meta.json")).unwrap()).unwrap();
    for end in ["start", "end"] {
        let o = meta["clock_offset"][end]["offset_ms"].as_f64().unwrap();
        assert!(o.abs() < 1.0, "meta.json clock_offset.{end} = {o} ms");
    }
    let b = &meta["ends"]["receiver"];
    for k in [
        "facts.kernel",
        "facts.cpu_model",
        "facts.cpus",
        "facts.tcp_congestion_control",
        "facts.tcp_rmem",
        "facts.tcp_wmem",
        "facts.rmem_max",
        "facts.wmem_max",
        "facts.tcp_no_metrics_save",
        "facts.interface",
        "facts.offloads",
        "facts.dest_fs",
    ] {
        let v = b[k].as_str().unwrap_or_default();
        assert!(!v.is_empty(), "meta.json ends.receiver.{k} is empty: {b}");
    }
    assert_eq!(b["facts.tcp_no_metrics_save"], "1", "{b}");
    assert_eq!(
        meta["tcp_metrics"]["receiver_tcp_no_metrics_save"], "1",
        "{}",
        meta["tcp_metrics"]
    );

    // What B cannot set for one run is refused before any run, naming it.
    for (axes, says) in [
        (
            "[axes]\n\"recv.max-connections\" = [4]\n",
            "recv --max-connections cannot be set per run",
        ),
        (
            "[axes]\nmode = [\"quic-bundle\"]\nrcvbuf = [\"1MiB\"]\n",
            "rcvbuf in mode quic-bundle",
        ),
    ] {
        let s = sweep_in(
            Some(&snd),
            t.path(),
            "refused",
            &format!("{head}{axes}"),
            "unused",
            &["--runs", "1"],
            &[],
        );
        assert!(!s.ok, "{}", s.stdout);
        assert!(s.stderr.contains(says), "{}", s.stderr);
        assert!(
            !s.out.join("runs.csv").exists(),
            "no run before the refusal"
        );
    }
    let left: Vec<_> = std::fs::read_dir(t.path().join("incoming"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "run folders left on B: {left:?}");
    drop(guard);
}
