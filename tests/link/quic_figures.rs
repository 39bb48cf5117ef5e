//! The QUIC figures the study of receiver stalls reads (docs/csv-schema.md): the UDP receive
//! buffer the `udp-rcvbuf` axis got, read back at the receiver, and the persistent-congestion
//! and blocked-frame counts, empty in TCP modes.

use crate::support;

use support::sweep::sweep;
use support::{needs_root, rows, serial};

#[test]
#[ignore = "needs root"]
fn udp_rcvbuf_is_read_back_and_quic_counts_are_empty_for_tcp() {
    needs_root();
    let _l = serial();
    let link = format!("stall{}q", std::process::id() % 100);
    let t = tempfile::tempdir().unwrap();
    let m = format!(
        "[sweep]\ntimeout = \"2m\"\n\
         [link]\nname = \"{link}\"\nrtt = \"20ms\"\nrate = \"200mbit\"\ncheck = false\n\
         [payload.p]\nfiles = 200\nsize = \"4KiB\"\ndirs = 2\nseed = 3\n\
         [axes]\nmode = [\"quic-bundle\", \"tcp-bundle\"]\nudp-rcvbuf = [\"kernel\", \"1MiB\"]\n"
    );
    let s = sweep(t.path(), "out", &m, &link, &["--runs", "1"], &[]);
    let rs = rows(&s.out.join("runs.csv"));
    assert_eq!(rs.len(), 4, "{}", s.stderr);
    let rmem_default = std::fs::read_to_string("/proc/sys/net/core/rmem_default").unwrap();
    for r in &rs {
        assert_eq!(r["status"], "ok", "{r:?}");
        let quic = r["mode"] == "quic-bundle";
        for c in [
            "persistent_congestion_events",
            "stream_data_blocked_frames",
            "data_blocked_frames",
        ] {
            assert_eq!(r[c].is_empty(), !quic, "{c}: {r:?}");
        }
        if quic {
            // What the kernel granted: its default when unset, else twice what was asked
            // (the link raised rmem_max well above it).
            let want = match r["param_udp_rcvbuf"].as_str() {
                "kernel" => rmem_default.trim().to_string(),
                _ => (2u64 << 20).to_string(),
            };
            assert_eq!(r["receiver_rcvbuf_bytes"], want, "{r:?}");
        }
    }
}
