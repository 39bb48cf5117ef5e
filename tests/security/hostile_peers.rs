//! Hostile peers against a live `shoal recv` (issue 7): absurd announcements, hostile names,
//! wrong versions, silent and trickling clients. Every case ends with an error that names its
//! cause, nothing outside the destination, and the same receiver then serves a good transfer.

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use shoal_proto::codec::{self, EndMarker, Reply, ReplyDecoder};
use shoal_transport::identity::Identity;
use support::raw::*;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Checks confinement, empties the destination (a failed run keeps the files it completed;
/// only partial ones are removed), then a good transfer must arrive intact.
fn good_transfer(rx: &ReceiverProc, t: &Path, name: &str) {
    nothing_outside(t);
    clear(&rx.dest);
    let src = tempfile::tempdir().unwrap();
    let src = src.path().join(name);
    gen(&src, 50, "2KiB", 3, 11);
    let out = rx.send(&src, &[]);
    assert!(
        out.status.success(),
        "good transfer after {name}: {}",
        text(&out)
    );
    assert!(trees_identical(&src, &rx.dest), "{name}");
    clear(&rx.dest);
    nothing_outside(t);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_announcements_and_hostile_names() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let dst = t.path().join("box").join("dst");
    let rx = ReceiverProc::start(&id, &dst, &[]);
    let (_, token) = Identity::read_credentials(&id).unwrap();
    let pid = rx.child.id();

    // A million zero-byte files announced, three sent, then the stream closes: the receiver
    // allocates nothing per announced file (first, so the peak
    // RSS before it is the idle receiver's), and names the truncation.
    let rss_before = status_kib(pid, "VmHWM:");
    let mut s = hello(&token, 1_000_000, 0);
    for i in 0..3 {
        raw_file(&mut s, format!("z{i}").as_bytes(), 0, b"");
    }
    let got = session(&rx.addr, &id, &s).await;
    expect_error("a million announced", got, "without an end marker");
    let rss_after = status_kib(pid, "VmHWM:");
    assert!(
        rss_after < rss_before + 8 * 1024,
        "receiver's peak grew from {rss_before} KiB to {rss_after} KiB on a 1,000,000-file hello"
    );
    good_transfer(&rx, t.path(), "after-million");

    // A hello announcing 2^60 bytes: refused by the run-size limit before anything exists.
    let s = hello(&token, 1, 1 << 60);
    let got = session(&rx.addr, &id, &s).await;
    expect_error("hello of 2^60 bytes", got, "recv --max-bytes");
    assert!(entries(&dst).is_empty());

    // A record claiming 2^60 bytes: refused by the per-file limit (1 TiB) as soon as its
    // header is in, whatever the hello said.
    let mut s = hello(&token, 1, 1);
    raw_file(&mut s, b"huge", 1 << 60, b"x");
    let got = session(&rx.addr, &id, &s).await;
    expect_error(
        "record of 2^60 bytes",
        got,
        "claims 1152921504606846976 bytes, more than the limit of 1099511627776",
    );
    assert!(!dst.join("huge").exists());
    good_transfer(&rx, t.path(), "after-2^60");

    // 200 components of 255 bytes (51,199 bytes): over the 4,096-byte path limit, refused by
    // name before the path's bytes are waited for.
    let deep: Vec<u8> = vec![vec![b'n'; 255]; 200].join(&b'/');
    assert_eq!(deep.len(), 51_199);
    let mut s = hello(&token, 1, 1);
    raw_file(&mut s, &deep, 1, b"x");
    codec::encode_end(&EndMarker { files: 1, bytes: 1 }, &mut s);
    let got = session(&rx.addr, &id, &s).await;
    expect_error(
        "deep path",
        got,
        "path is 51199 bytes, longer than the limit of 4096",
    );
    assert!(entries(&dst).is_empty());

    // Two records for the same path: the second is refused by name.
    let mut s = hello(&token, 2, 2);
    raw_file(&mut s, b"same", 1, b"1");
    raw_file(&mut s, b"same", 1, b"2");
    codec::encode_end(&EndMarker { files: 2, bytes: 2 }, &mut s);
    let got = session(&rx.addr, &id, &s).await;
    expect_error(
        "same path twice",
        got,
        "\"same\" was sent twice in this run",
    );
    good_transfer(&rx, t.path(), "after-duplicate");

    // A file path that collides with a folder path: "a", then "a/b".
    let mut s = hello(&token, 2, 2);
    raw_file(&mut s, b"a", 1, b"1");
    raw_file(&mut s, b"a/b", 1, b"2");
    codec::encode_end(&EndMarker { files: 2, bytes: 2 }, &mut s);
    let got = session(&rx.addr, &id, &s).await;
    expect_error(
        "file then folder",
        got,
        "\"a/b\" needs \"a\" to be a folder, but the run sent \"a\" as a file earlier",
    );
    assert!(dst.join("a").is_file() && !dst.join("a").is_dir());
    // …and the other way round: folder "c" (from "c/d"), then a file "c".
    let mut s = hello(&token, 2, 2);
    raw_file(&mut s, b"c/d", 1, b"1");
    raw_file(&mut s, b"c", 1, b"2");
    codec::encode_end(&EndMarker { files: 2, bytes: 2 }, &mut s);
    let got = session(&rx.addr, &id, &s).await;
    expect_error(
        "folder then file",
        got,
        "\"c\" was sent as a file after the run had made it a folder",
    );
    assert!(dst.join("c").is_dir() && dst.join("c/d").is_file());
    good_transfer(&rx, t.path(), "after-collision");

    // Invalid UTF-8 in a name: accepted, kept byte-exact.
    let name: &[u8] = b"\xff\xfe latin1 caf\xe9";
    let mut s = hello(&token, 1, 3);
    raw_file(&mut s, name, 3, b"abc");
    codec::encode_end(&EndMarker { files: 1, bytes: 3 }, &mut s);
    match session(&rx.addr, &id, &s).await {
        Some(Reply::Completion(c)) => assert_eq!((c.files, c.bytes), (1, 3)),
        other => panic!("invalid UTF-8 name: {other:?}"),
    }
    use std::os::unix::ffi::OsStrExt;
    let p = dst.join(std::ffi::OsStr::from_bytes(name));
    assert_eq!(std::fs::read(&p).unwrap(), b"abc");
    good_transfer(&rx, t.path(), "after-utf8");

    // A hello with the wrong protocol version.
    let mut s = hello(&token, 0, 0);
    s[5] = 99;
    let got = session(&rx.addr, &id, &s).await;
    expect_error("version", got, "unsupported protocol version 99");
    assert!(entries(&dst).is_empty());
    good_transfer(&rx, t.path(), "after-version");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_trickling_peers_are_dropped_while_others_are_served() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let dst = t.path().join("box").join("dst");
    let rx = ReceiverProc::start(
        &id,
        &dst,
        &["--idle-timeout", "2s", "--hello-timeout", "8s"],
    );
    let (_, token) = Identity::read_credentials(&id).unwrap();

    // Connects over TLS and sends nothing: dropped after the idle timeout, with the cause.
    let started = Instant::now();
    let mut tls = connect(&rx.addr, &id).await;
    let got = reply(&mut tls, Duration::from_secs(30)).await;
    expect_error(
        "silent TLS client",
        got,
        "idle for 2.0 s (recv --idle-timeout)",
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(6), "dropped after {took:?}");

    // Connects over TCP and never starts TLS: closed after the idle timeout.
    let started = Instant::now();
    let mut tcp = tokio::net::TcpStream::connect(&rx.addr).await.unwrap();
    let mut sink = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(30), tcp.read_to_end(&mut sink)).await;
    assert!(closed.is_ok(), "a silent TCP client was not closed");
    assert!(started.elapsed() < Duration::from_secs(6));

    // Slow-loris: a valid hello, one byte per second. The idle timeout never fires; the hello
    // deadline does. Meanwhile a good transfer goes through.
    let full = hello(&token, 1, 1);
    let slow = connect(&rx.addr, &id).await;
    let started = Instant::now();
    let (mut srd, mut swr) = tokio::io::split(slow);
    let reader = tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(60), srd.read_to_end(&mut buf)).await;
        let got = ReplyDecoder.decode(&buf).ok().flatten().map(|(r, _)| r);
        (got, started.elapsed())
    });
    let trickle = tokio::spawn(async move {
        for b in full.iter() {
            // Stop once the receiver has answered (it closes after a refusal).
            if reader.is_finished() || swr.write_all(&[*b]).await.is_err() {
                break;
            }
            let _ = swr.flush().await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        reader.await.unwrap()
    });
    let src = t.path().join("src-good");
    gen(&src, 50, "2KiB", 3, 12);
    let good = tokio::task::spawn_blocking({
        let (addr, id) = (rx.addr.clone(), id.clone());
        let src = src.clone();
        move || {
            shoal()
                .args(["send", "--to", &addr, "--src"])
                .arg(&src)
                .arg("--identity")
                .arg(&id)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let good_done = started.elapsed();
    assert!(good.status.success(), "{}", text(&good));
    assert!(
        !trickle.is_finished(),
        "the slow client was gone before the good transfer ended"
    );
    assert!(trees_identical(&src, &dst));
    let (got, took) = trickle.await.unwrap();
    expect_error(
        "slow-loris",
        got,
        "no complete hello within 8.0 s of connecting (recv --hello-timeout)",
    );
    assert!(
        took >= Duration::from_secs(7) && took < Duration::from_secs(15),
        "slow client dropped after {took:?} (good transfer done at {good_done:?})"
    );
    std::fs::remove_dir_all(&src).unwrap();
    clear(&dst);
    nothing_outside(t.path());
    good_transfer(&rx, t.path(), "after-slow-loris");
}

/// A hello announcing a QUIC mode over TCP (TLS, and plain on a receiver without
/// `--allow-plain`) is refused with a reply naming the cause; the connection task used to
/// panic (`unreachable!`) and the peer got nothing (issue 16, item 5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quic_mode_over_tcp_is_refused_with_a_reply() {
    use shoal_transport::config::Mode;
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let dst = t.path().join("box").join("dst");
    let rx = ReceiverProc::start(&id, &dst, &[]);
    let (_, token) = Identity::read_credentials(&id).unwrap();
    for mode in [Mode::QuicBundle, Mode::QuicStreams] {
        for _ in 0..5 {
            // Over TLS, with the right token and with a wrong one.
            let wrong = vec![0u8; token.len()];
            for (tok, cause) in [(&token, "needs QUIC, not TCP"), (&wrong, "wrong token")] {
                let s = hello_for(mode, rand::random(), tok, 1, 1);
                let got = session(&rx.addr, &id, &s).await;
                expect_error(&format!("{mode} over TLS"), got, cause);
            }
            // Over plain TCP (this receiver refuses plain transfers anyway).
            let s = hello_for(mode, rand::random(), &token, 1, 1);
            let mut tcp = tokio::net::TcpStream::connect(&rx.addr).await.unwrap();
            let _ = tcp.write_all(&s).await;
            let _ = tcp.shutdown().await;
            let mut buf = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(30), tcp.read_to_end(&mut buf)).await;
            let got = ReplyDecoder.decode(&buf).ok().flatten().map(|(r, _)| r);
            expect_error(
                &format!("{mode} over plain TCP"),
                got,
                "needs QUIC, not TCP",
            );
        }
    }
    assert!(entries(&dst).is_empty());
    good_transfer(&rx, t.path(), "after-quic-over-tcp");
}
