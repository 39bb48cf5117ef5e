//! Tests of `path_state`.

use super::*;

fn record(pin: &Pin, saved_at: u64) -> PathRecord {
    PathRecord {
        transport: "quic".into(),
        pin: pin.to_string(),
        address: "10.0.0.2:7474".into(),
        cwnd_bytes: 8_000_000,
        min_rtt_ms: 141.0,
        goodput_bytes_per_s: 70_000_000,
        delivery_rate_bytes_per_s: None,
        peak_delivery_bytes_per_s: None,
        connections: 1,
        saved_at,
        run_id: "00".into(),
    }
}

#[test]
fn saves_looks_up_expires_and_forgets() {
    let dir = tempfile::tempdir().unwrap();
    let store = PathStore::new(dir.path().join("paths"));
    let pin = Pin([7; 32]);
    let hour = DEFAULT_LIFETIME;
    let lookup = |now| {
        store
            .lookup("quic", &pin, "10.0.0.2:7474", hour, now)
            .unwrap()
    };
    assert_eq!(lookup(1_000), Lookup::Missing);
    let r = record(&pin, 1_000);
    store.save(&r).unwrap();
    assert_eq!(lookup(1_000 + 3_600), Lookup::Fresh(r.clone()));
    assert_eq!(lookup(1_000 + 3_601), Lookup::Expired(r.clone()));
    // Another receiver (pin) at the same address, or TCP, does not see it.
    let other = store.lookup("quic", &Pin([8; 32]), "10.0.0.2:7474", hour, 1_000);
    assert_eq!(other.unwrap(), Lookup::Missing);
    let tcp = store.lookup("tcp", &pin, "10.0.0.2:7474", hour, 1_000);
    assert_eq!(tcp.unwrap(), Lookup::Missing);
    assert_eq!(store.list().unwrap().len(), 1);
    store.forget(&r.key()).unwrap();
    assert_eq!(lookup(1_000), Lookup::Missing);
    assert!(store.forget("../etc/passwd").is_err());
    assert!(store.forget(&r.key()).is_err(), "nothing left to forget");
}

#[test]
fn a_bad_record_is_set_aside_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store = PathStore::new(dir.path().join("paths"));
    let pin = Pin([7; 32]);
    let r = record(&pin, 1);
    let mut absurd = r.clone();
    absurd.min_rtt_ms = 1e300;
    let mut huge = r.clone();
    huge.cwnd_bytes = u64::MAX;
    let whole = serde_json::to_string(&r).unwrap();
    let (absurd, huge) = (
        serde_json::to_string(&absurd).unwrap(),
        serde_json::to_string(&huge).unwrap(),
    );
    let cases: [(&[u8], &str); 6] = [
        (&whole.as_bytes()[..whole.len() / 2], "truncated"),
        (b"not json at all", "corrupt"),
        (b"", "empty"),
        (b"\xff\xfe", "not-utf8"),
        (absurd.as_bytes(), "out-of-range"),
        (huge.as_bytes(), "out-of-range"),
    ];
    for (content, slug) in cases {
        let file = store.save(&r).unwrap();
        fs::write(&file, content).unwrap();
        let found = store.lookup("quic", &pin, &r.address, DEFAULT_LIFETIME, 7);
        let Lookup::SetAside {
            file: aside,
            reason,
        } = found.unwrap()
        else {
            panic!("{slug}: not set aside");
        };
        assert!(!file.exists(), "{slug}: the record is gone from its name");
        let name = aside.file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(name, format!("{}.json.{slug}-7", r.key()), "{reason}");
        assert!(aside.exists());
        // The next lookup finds nothing: the run after starts cold too, then saves.
        let next = store.lookup("quic", &pin, &r.address, DEFAULT_LIFETIME, 7);
        assert_eq!(next.unwrap(), Lookup::Missing);
        fs::remove_file(aside).unwrap();
    }
}

#[test]
fn a_tiny_saved_window_is_raised_to_the_floor() {
    let mut r = record(&Pin([7; 32]), 1);
    r.cwnd_bytes = 3;
    assert_eq!(r.saved_window(), (WINDOW_FLOOR, Cap::Floor));
    assert_eq!(r.unclamped_window(), 3);
    r.cwnd_bytes = 8_000_000;
    r.peak_delivery_bytes_per_s = Some(1);
    assert_eq!(r.saved_window(), (WINDOW_FLOOR, Cap::Floor));
}

#[test]
fn the_temporary_never_follows_a_planted_link_and_the_folder_must_be_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = PathStore::new(dir.path().join("paths"));
    let r = record(&Pin([7; 32]), 1);
    store.save(&r).unwrap();
    let mode = fs::metadata(store.dir()).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "created private: {mode:o}");
    fs::set_permissions(store.dir(), fs::Permissions::from_mode(0o777)).unwrap();
    let e = store.save(&r).unwrap_err().to_string();
    assert!(e.contains("may be written by others"), "{e}");
    let e = store.lookup("quic", &Pin([7; 32]), &r.address, DEFAULT_LIFETIME, 1);
    assert!(e.is_err());
}

#[test]
fn expired_records_are_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let store = PathStore::new(dir.path().to_path_buf());
    let old = record(&Pin([1; 32]), 1_000);
    let new = record(&Pin([2; 32]), 9_000);
    store.save(&old).unwrap();
    store.save(&new).unwrap();
    fs::write(dir.path().join("x.json.corrupt-1000"), "").unwrap();
    assert_eq!(store.prune(Duration::from_secs(3_600), 10_000), 2);
    let left: Vec<String> = store.list().unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(left, vec![new.key()]);
}

#[test]
fn the_saved_window_is_what_the_run_used_at_most() {
    let mut r = record(&Pin([7; 32]), 1);
    // Used: 70 MB/s × 141 ms = 9.87 MB; the 8 MB cwnd is smaller.
    assert_eq!(r.saved().cwnd, 8_000_000);
    r.cwnd_bytes = 20_000_000;
    assert_eq!(r.saved().cwnd, 9_870_000);
    r.connections = 2;
    assert_eq!(r.saved().cwnd, 4_935_000);
    assert_eq!(r.saved().rtt, Duration::from_millis(141));
    assert_eq!(r.saved_window().1, Cap::Goodput);
}

#[test]
fn the_peak_delivery_rate_bounds_the_window_when_the_record_has_one() {
    let mut r = record(&Pin([7; 32]), 1);
    r.cwnd_bytes = 30_000_000;
    // 125 MB/s at its best × 141 ms = 17.6 MB, where goodput × RTT is 9.87 MB.
    r.peak_delivery_bytes_per_s = Some(125_000_000);
    assert_eq!(r.saved_window(), (17_625_000, Cap::Peak));
    assert_eq!(r.saved().cwnd, 17_625_000);
    r.connections = 4;
    assert_eq!(r.saved_window(), (4_406_250, Cap::Peak));
    // Still never above the cwnd the run ended with.
    r.cwnd_bytes = 4_000_000;
    assert_eq!(r.saved_window(), (4_000_000, Cap::Cwnd));
    // A zero peak (nothing measured) is no peak.
    r.peak_delivery_bytes_per_s = Some(0);
    assert_eq!(r.saved_window(), (2_467_500, Cap::Goodput));
}

#[test]
fn a_record_saved_before_the_peak_loads_and_falls_back_to_goodput() {
    let dir = tempfile::tempdir().unwrap();
    let store = PathStore::new(dir.path().to_path_buf());
    let pin = Pin([7; 32]);
    let r = record(&pin, 1_000);
    let file = store.save(&r).unwrap();
    // The file as an earlier build wrote it: no peak_delivery_bytes_per_s key.
    let mut old: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
    old.as_object_mut()
        .unwrap()
        .remove("peak_delivery_bytes_per_s")
        .unwrap();
    fs::write(&file, serde_json::to_string_pretty(&old).unwrap()).unwrap();
    let found = store.lookup("quic", &pin, &r.address, DEFAULT_LIFETIME, 1_000);
    let Lookup::Fresh(back) = found.unwrap() else {
        panic!("the old record is not fresh");
    };
    assert_eq!(back.peak_delivery_bytes_per_s, None);
    assert_eq!(back.saved_window(), (8_000_000, Cap::Cwnd));
    let mut big = back;
    big.cwnd_bytes = 20_000_000;
    assert_eq!(big.saved_window(), (9_870_000, Cap::Goodput));
}

#[test]
fn keys_are_file_names() {
    let k = key("quic", "sha256:abcdef0123456789ffff", "[::1]:7474");
    assert_eq!(k, "quic_abcdef0123456789___1");
    assert_eq!(host_of("10.0.0.2:7474"), "10.0.0.2");
    assert_eq!(host_of("host.example:1"), "host.example");
    assert_eq!(host_of("::1"), "::1", "no port");
    // Another port on the same host is the same path.
    assert_eq!(
        key("tcp", "ab", "10.0.0.2:1"),
        key("tcp", "ab", "10.0.0.2:2")
    );
}
