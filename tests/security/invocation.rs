//! Settings of zero or nonsense and invocation errors are refused as the command line is
//! parsed (exit 2, naming the flag, the value and the range; no run, no "FAILED after"), and
//! the path-state folder never blocks or misleads a run (docs/security.md).

use std::path::Path;

use crate::support::*;

/// `shoal ARGS…` exits 2 saying `says`, and starts no run.
fn refused(args: &[&str], says: &str) {
    let out = run(args);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
    assert!(said.contains(says), "{args:?}: {said}");
    assert!(
        !said.contains("FAILED after"),
        "{args:?} started a run: {said}"
    );
}

#[test]
fn zero_and_nonsense_settings_are_refused_when_parsed() {
    let t = tempfile::tempdir().unwrap();
    let (dst, src) = (t.path().join("dst"), t.path().join("src"));
    gen(&src, 2, "1KiB", 1, 1);
    let (d, s) = (dst.to_str().unwrap(), src.to_str().unwrap());
    refused(
        &["recv", "--dest", d, "--idle-timeout", "0s"],
        "--idle-timeout 0s is outside 1s..=24h",
    );
    refused(
        &["recv", "--dest", d, "--hello-timeout", "0s"],
        "--hello-timeout 0s is outside 1s..=1h",
    );
    refused(
        &["recv", "--dest", d, "--write-budget", "0"],
        "--write-budget 0 is below 65536 bytes",
    );
    refused(
        &["recv", "--dest", d, "--max-files", "0"],
        "--max-files 0 is outside 1 or more",
    );
    assert!(!dst.exists(), "a refused recv created its destination");
    let to = ["send", "--to", "127.0.0.1:9", "--src", s];
    for bad in ["0s", "1ns"] {
        refused(
            &[&to[..], &["--timeout", bad]].concat(),
            &format!("--timeout {bad} is outside 1s.."),
        );
    }
    refused(
        &[&to[..], &["--stream-window", "0"]].concat(),
        "--stream-window 0 is below 65536 bytes",
    );
    refused(
        &[&to[..], &["--read-ahead", "1"]].concat(),
        "--read-ahead 1 is outside 64KiB..=4GiB",
    );
    refused(
        &[
            "link", "up", "--name", "guard-x", "--rtt", "0s", "--rate", "1mbit",
        ],
        "--rtt 0s is outside",
    );
    refused(
        &[
            "link", "up", "--name", "guard-x", "--rtt", "10ms", "--rate", "0",
        ],
        "'--rate <RATE>'",
    );
    refused(
        &["link", "blackhole", "--name", "guard-x", "--for", "0s"],
        "--for 0s is outside",
    );
    let help = text(&run(&["send", "--help"]));
    assert!(
        help.contains("Exit status: 0 ok, 1 a run failed, 2 the invocation is wrong"),
        "{help}"
    );
    assert!(help.contains("--timeout 1s..="), "{help}");
}

#[test]
fn invocation_errors_exit_2_before_any_run() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 2, "1KiB", 1, 2);
    let file = t.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let fifo = t.path().join("fifo");
    sys::mkfifo(&fifo).unwrap();
    let s = src.to_str().unwrap();
    for (to, says) in [
        ("nonsense", "is not host:port"),
        ("127.0.0.1:99999", "outside 1..=65535"),
        ("127.0.0.1:0", "outside 1..=65535"),
        (
            "no-such-host.invalid:7474",
            "--to no-such-host.invalid:7474: cannot resolve",
        ),
    ] {
        refused(&["send", "--to", to, "--src", s], says);
    }
    for bad in [file.as_path(), fifo.as_path(), Path::new("/dev/null")] {
        let b = bad.to_str().unwrap();
        refused(
            &["send", "--to", "127.0.0.1:9", "--src", b],
            "is not a folder",
        );
    }
}

/// A record in the path-state folder of `rx` (QUIC, host 127.0.0.1) written as `content`.
fn plant_record(rx: &ReceiverProc, state: &Path, content: &str) -> std::path::PathBuf {
    let pin = pin_of(rx);
    let key = shoal_sender::path_state::key("quic", &pin, &rx.addr);
    std::fs::create_dir_all(state).unwrap();
    let file = state.join(format!("{key}.json"));
    std::fs::write(&file, content).unwrap();
    file
}

/// The receiver's pin, from its identity folder.
fn pin_of(rx: &ReceiverProc) -> String {
    let (pin, _) = shoal_transport::identity::Identity::read_credentials(&rx.identity).unwrap();
    pin.to_string()
}

fn record_text(rx: &ReceiverProc, cwnd: u64, rtt_ms: f64) -> String {
    let pin = pin_of(rx);
    serde_json::json!({
        "transport": "quic", "pin": pin, "address": rx.addr, "cwnd_bytes": cwnd,
        "min_rtt_ms": rtt_ms, "goodput_bytes_per_s": 100_000_000u64,
        "delivery_rate_bytes_per_s": null, "peak_delivery_bytes_per_s": null,
        "connections": 1, "saved_at": shoal_sender::path_state::now_unix(), "run_id": "00"
    })
    .to_string()
}

#[test]
fn an_unusable_path_state_record_is_set_aside_and_the_run_starts_cold() {
    let t = tempfile::tempdir().unwrap();
    let (id, dst, src) = (
        t.path().join("id"),
        t.path().join("dst"),
        t.path().join("src"),
    );
    gen(&src, 8, "4KiB", 1, 3);
    let rx = ReceiverProc::start(&id, &dst, &[]);
    let state = t.path().join("state");
    let st = state.to_str().unwrap();
    let huge = record_text(&rx, 1 << 62, 1e300);
    for (content, slug) in [
        ("{\"transport\": \"qu", "truncated"),
        ("", "empty"),
        ("\u{0}\u{1}garbage", "corrupt"),
        (huge.as_str(), "out-of-range"),
    ] {
        let file = plant_record(&rx, &state, content);
        for flags in [&["--resume"][..], &["--initial-window", "saved"][..]] {
            let out = rx.send(
                &src,
                &[
                    &[
                        "--mode",
                        "quic-bundle",
                        "--json",
                        "--path-state",
                        st,
                        "--no-save-path-state",
                    ][..],
                    flags,
                ]
                .concat(),
            );
            assert!(out.status.success(), "{slug} {flags:?}: {}", text(&out));
            let row = json(&out);
            let note = row["path_state_note"].as_str().unwrap();
            assert!(
                note.contains("set aside") && note.contains("started cold"),
                "{note}"
            );
            assert!(note.contains(&format!(".json.{slug}-")), "{note}");
            assert!(text(&out).contains("warning: path state set aside"));
            // Set aside: the same content again for the second flag.
            std::fs::write(&file, content).unwrap();
        }
        std::fs::remove_file(&file).unwrap();
    }
}

#[test]
fn a_saved_window_of_a_few_bytes_is_raised_to_the_floor() {
    let t = tempfile::tempdir().unwrap();
    let (id, dst, src) = (
        t.path().join("id"),
        t.path().join("dst"),
        t.path().join("src"),
    );
    gen(&src, 8, "4KiB", 1, 4);
    let rx = ReceiverProc::start(&id, &dst, &[]);
    let state = t.path().join("state");
    plant_record(&rx, &state, &record_text(&rx, 3, 1.0));
    let st = state.to_str().unwrap();
    let flags = [
        "--mode",
        "quic-bundle",
        "--json",
        "--path-state",
        st,
        "--initial-window",
        "saved",
        "--connect-timeout",
        "5s",
    ];
    let out = rx.send(&src, &flags);
    assert!(out.status.success(), "{}", text(&out));
    let row = json(&out);
    assert_eq!(row["resume_saved_window_cap"], "floor", "{row}");
    assert_eq!(row["resume_saved_window_bytes"], 12_000, "{row}");
    let note = row["path_state_note"].as_str().unwrap();
    assert!(
        note.contains("saved window of 3 B raised to the floor"),
        "{note}"
    );
}

#[test]
fn a_path_state_folder_others_may_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let (id, dst, src) = (
        t.path().join("id"),
        t.path().join("dst"),
        t.path().join("src"),
    );
    gen(&src, 2, "1KiB", 1, 5);
    let rx = ReceiverProc::start(&id, &dst, &[]);
    let state = t.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    let st = state.to_str().unwrap();
    let out = rx.send(
        &src,
        &["--mode", "quic-bundle", "--resume", "--path-state", st],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("may be written by others"),
        "{}",
        text(&out)
    );
    // A plain send runs, and saves nothing there.
    let out = rx.send(&src, &["--mode", "quic-bundle", "--path-state", st]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("path state not saved"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_dir(&state).unwrap().count(), 0);
}

#[test]
fn a_link_planted_at_the_state_temporary_is_not_followed() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let (id, dst, src) = (
        t.path().join("id"),
        t.path().join("dst"),
        t.path().join("src"),
    );
    gen(&src, 4, "4KiB", 1, 6);
    let rx = ReceiverProc::start(&id, &dst, &[]);
    let state = t.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let outside = t.path().join("outside");
    std::fs::write(&outside, "not a record").unwrap();
    let key = shoal_sender::path_state::key("quic", &pin_of(&rx), &rx.addr);
    let mut child = rx
        .send_command(
            &src,
            &[
                "--mode",
                "quic-bundle",
                "--path-state",
                state.to_str().unwrap(),
            ],
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The name the sender's temporary had: `.KEY.tmp<pid>`.
    std::os::unix::fs::symlink(&outside, state.join(format!(".{key}.tmp{}", child.id()))).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "not a record");
    let record = state.join(format!("{key}.json"));
    let meta = std::fs::symlink_metadata(&record).unwrap();
    assert!(meta.is_file(), "the record is a file of its own");
    assert_eq!(meta.permissions().mode() & 0o077, 0);
}

#[test]
fn a_sweeps_preflight_refuses_settings_outside_their_range() {
    let t = tempfile::tempdir().unwrap();
    let matrix = t.path().join("m.toml");
    let write = |timeout: &str, axis: &str| {
        let text = format!(
            "[sweep]\nruns = 1\ntimeout = \"{timeout}\"\n\n[link]\nname = \"guard-m\"\nrtt = \"20ms\"\nrate = \"100mbit\"\n\n[payload.small]\nfiles = 4\nsize = \"4KiB\"\n\n[axes]\npayload = [\"small\"]\nmode = [\"quic-bundle\"]\n{axis}\n"
        );
        std::fs::write(&matrix, text).unwrap();
    };
    let m = matrix.to_str().unwrap();
    write("1m", "read-ahead = [\"1\", \"8MiB\"]");
    refused(
        &["sweep", "--matrix", m, "--dry-run"],
        "--read-ahead 1 is outside 64KiB..=4GiB",
    );
    write("0s", "connections = [1]");
    refused(
        &["sweep", "--matrix", m, "--dry-run"],
        "--timeout 0s is outside 1s..",
    );
}
