//! Crafted streams against a live receiver: each is refused with an error that names the
//! cause, nothing is created outside the destination, and the receiver serves the next run.

use crate::support;

use bytes::BufMut;
use shoal_proto::codec::{self, EndMarker, Reply};
use shoal_transport::identity::Identity;
use support::raw::*;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crafted_streams_are_refused_and_the_receiver_keeps_serving() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    // The destination sits two levels down so "outside" escapes would land in t/ or t/box/.
    let boxdir = t.path().join("box");
    let dst = boxdir.join("dst");
    let rx = ReceiverProc::start(&id, &dst, &[]);
    let (_, token) = Identity::read_credentials(&id).unwrap();

    let long_path = vec![b'p'; 5000];
    let path_cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("dot-dot", b"../x".to_vec(), "'..' component"),
        ("absolute", b"/etc/x".to_vec(), "absolute path"),
        ("inner dot-dot", b"a/../../x".to_vec(), "'..' component"),
        ("NUL", b"a\0b".to_vec(), "NUL byte"),
        (
            "5,000-byte path",
            long_path,
            "longer than the limit of 4096",
        ),
    ];
    for (name, path, cause) in path_cases {
        let mut s = hello(&token, 1, 1);
        raw_file(&mut s, &path, 1, b"x");
        codec::encode_end(&EndMarker { files: 1, bytes: 1 }, &mut s);
        match session(&rx.addr, &id, &s).await {
            Some(Reply::Error(msg)) => assert!(msg.contains(cause), "{name}: {msg}"),
            other => panic!("{name}: expected an error naming {cause:?}, got {other:?}"),
        }
        assert!(rx.next_run_line().contains("FAILED"), "{name}");
    }

    // A size larger than the bytes that follow, two ways: more than the hello announced…
    let mut s = hello(&token, 1, 10);
    raw_file(&mut s, b"f", 1000, b"0123456789");
    codec::encode_end(
        &EndMarker {
            files: 1,
            bytes: 10,
        },
        &mut s,
    );
    match session(&rx.addr, &id, &s).await {
        Some(Reply::Error(msg)) => assert!(msg.contains("claims 1000 bytes"), "{msg}"),
        other => panic!("oversize: {other:?}"),
    }
    rx.next_run_line();
    // …and consistent with the hello, but the stream ends first.
    let mut s = hello(&token, 1, 1000);
    raw_file(&mut s, b"f", 1000, b"0123456789");
    codec::encode_end(
        &EndMarker {
            files: 1,
            bytes: 1000,
        },
        &mut s,
    );
    match session(&rx.addr, &id, &s).await {
        Some(Reply::Error(msg)) => assert!(msg.contains("short of the end of \"f\""), "{msg}"),
        other => panic!("short: {other:?}"),
    }
    rx.next_run_line();
    // A truncated stream: cut in the middle of a header.
    let mut s = hello(&token, 2, 2);
    raw_file(&mut s, b"ok", 1, b"y");
    s.put_u8(0x01);
    s.put_u16(40);
    s.put_slice(b"half");
    match session(&rx.addr, &id, &s).await {
        Some(Reply::Error(msg)) => assert!(msg.contains("truncated"), "{msg}"),
        other => panic!("truncated: {other:?}"),
    }
    rx.next_run_line();

    // Nothing escaped: the only entries beside the destination are the ones we made.
    assert!(!std::path::Path::new("/etc/x").exists());
    let around: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(around.len(), 2, "{around:?}");
    assert_eq!(std::fs::read_dir(&boxdir).unwrap().count(), 1);
    // Partial files were removed: "f" never completed.
    assert!(!dst.join("f").exists());

    // And the same receiver accepts the next good transfer.
    let src = t.path().join("src");
    gen(&src, 100, "4KiB", 4, 5);
    let out = rx.send(&src, &[]);
    assert!(out.status.success(), "{}", text(&out));
    // The good tree arrived; the one completed file of the truncated run ("ok") is extra.
    std::fs::remove_file(dst.join("ok")).ok();
    assert!(trees_identical(&src, &dst));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_a_shoal_stream_and_wrong_version_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let dst = t.path().join("dst");
    let rx = ReceiverProc::start(&id, &dst, &[]);
    match session(&rx.addr, &id, b"GET / HTTP/1.1\r\n\r\n").await {
        Some(Reply::Error(msg)) => assert!(msg.contains("not a Shoal stream"), "{msg}"),
        other => panic!("{other:?}"),
    }
    let (_, token) = Identity::read_credentials(&id).unwrap();
    let mut s = hello(&token, 0, 0);
    s[5] = 99; // protocol version
    match session(&rx.addr, &id, &s).await {
        Some(Reply::Error(msg)) => {
            assert!(msg.contains("unsupported protocol version 99"), "{msg}")
        }
        other => panic!("{other:?}"),
    }
    assert!(entries(&dst).is_empty());
}
