//! Large files carried as blocks over several connections (issue 18), with real sender and
//! receiver processes over loopback: blocks out of order in every mode that splits files, the
//! row's account of the connections, and hostile block records refused with no
//! complete-looking file left.

use crate::support;

use std::path::Path;

use bytes::{BufMut, BytesMut};
use shoal_proto::codec::{self, EndMarker};
use shoal_proto::relpath::{PathLimits, RelPath};
use shoal_transport::identity::Identity;
use support::raw::*;
use support::*;

/// Deterministic bytes that differ block to block.
fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A tree with one 2.5 MiB file (3 blocks of at most 1 MiB) and a few small ones.
fn tree(src: &Path) {
    std::fs::create_dir_all(src.join("d")).unwrap();
    std::fs::write(src.join("d/big"), payload(2560 << 10, 7)).unwrap();
    for i in 0..5 {
        std::fs::write(src.join(format!("s{i}")), payload(3000 + i, i as u64)).unwrap();
    }
}

fn no_temporaries(dst: &Path) {
    for e in entries(dst) {
        let name = e.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.starts_with(".shoal-tmp."), "temporary left: {e:?}");
    }
}

#[test]
fn three_blocks_over_two_connections_out_of_order_in_every_mode() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    tree(&src);
    let total: u64 = (2560 << 10) + (0..5).map(|i| 3000 + i).sum::<u64>();
    for mode in all_modes() {
        for conns in ["2", "1"] {
            let dst = t.path().join(format!("dst-{mode}-{conns}"));
            let rx = ReceiverProc::start(&t.path().join("id"), &dst, &[]);
            let out = rx.send(
                &src,
                &[
                    "--mode",
                    mode,
                    "--connections",
                    conns,
                    "--block-size",
                    "1MiB",
                    "--test-reverse-blocks",
                    "--json",
                ],
            );
            assert!(out.status.success(), "{mode} ×{conns}: {}", text(&out));
            assert!(trees_identical(&src, &dst), "{mode} ×{conns}");
            no_temporaries(&dst);
            let row = json(&out);
            let n: u64 = conns.parse().unwrap();
            let spread: Vec<u64> =
                serde_json::from_str(row["connection_bytes_each"].as_str().unwrap()).unwrap();
            assert_eq!(row["connection_bytes_total"].as_u64(), Some(total));
            assert_eq!(spread.len() as u64, n, "{mode}: {row}");
            assert_eq!(spread.iter().sum::<u64>(), total, "{mode}: {row}");
            let used = spread.iter().filter(|&&b| b > 0).count() as u64;
            assert_eq!(row["connections_used"].as_u64(), Some(used));
            assert_eq!(row["connections"].as_u64(), Some(n));
            assert_eq!(
                row["connections_note"].as_str().unwrap().is_empty(),
                used == n,
                "{mode}: a note exactly when fewer connections carried content: {row}"
            );
            if mode == "tcp-wait" {
                // Acknowledged file by file: never split.
                assert_eq!(row["block_size"].as_u64(), Some(0));
                assert_eq!(row["files_in_blocks"].as_u64(), Some(0));
            } else {
                assert_eq!(row["block_size"].as_u64(), Some(1 << 20));
                assert_eq!(row["files_in_blocks"].as_u64(), Some(1));
                // The big file's latency runs to its last block.
                assert!(row["latency_max_ms"].as_f64().unwrap() > 0.0, "{row}");
            }
        }
    }
}

#[test]
fn one_file_on_more_connections_than_it_has_blocks_says_so() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("big"), payload(2 << 20, 3)).unwrap();
    for (mode, note) in [
        ("tcp-bundle", "fewer files and blocks"),
        ("tcp-wait", "tcp-wait never splits"),
    ] {
        let dst = t.path().join(format!("dst-{mode}"));
        let rx = ReceiverProc::start(&t.path().join("id"), &dst, &[]);
        let out = rx.send(
            &src,
            &[
                "--mode",
                mode,
                "--connections",
                "4",
                "--block-size",
                "1MiB",
                "--json",
            ],
        );
        assert!(out.status.success(), "{mode}: {}", text(&out));
        assert!(trees_identical(&src, &dst));
        let row = json(&out);
        assert_eq!(row["connections"].as_u64(), Some(4));
        let used = row["connections_used"].as_u64().unwrap();
        assert!((1..=2).contains(&used), "{row}");
        let msg = row["connections_note"].as_str().unwrap();
        assert!(
            msg.contains(&format!("{used} of 4 connections")) && msg.contains(note),
            "{msg}"
        );
    }
}

fn rel(s: &str) -> RelPath {
    RelPath::from_bytes(s.as_bytes(), &PathLimits::default()).unwrap()
}

/// A block of "f": the file's size, the block's offset, its content.
type Block = (u64, u64, &'static [u8]);

/// A block record with its content.
fn block(s: &mut BytesMut, path: &str, size: u64, offset: u64, data: &[u8]) {
    codec::encode_block_header(&rel(path), size, offset, data.len() as u64, s);
    s.put_slice(data);
}

/// Checks the destination holds nothing of the refused run, then a good transfer in blocks
/// goes through the same receiver.
fn good_after(rx: &ReceiverProc, t: &Path, name: &str) {
    assert!(
        entries(&rx.dest).is_empty(),
        "{name}: {:?}",
        entries(&rx.dest)
    );
    nothing_outside(t);
    let src = tempfile::tempdir().unwrap();
    let src = src.path().join(name);
    tree(&src);
    let out = rx.send(&src, &["--connections", "2", "--block-size", "1MiB"]);
    assert!(
        out.status.success(),
        "good transfer after {name}: {}",
        text(&out)
    );
    assert!(trees_identical(&src, &rx.dest), "{name}");
    clear(&rx.dest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_blocks_are_refused_and_leave_no_complete_looking_file() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let dst = t.path().join("box").join("dst");
    let rx = ReceiverProc::start(&id, &dst, &[]);
    let (_, token) = Identity::read_credentials(&id).unwrap();
    // (case, hello's files and bytes, records as (offset, data) blocks of "f" of `size`
    // bytes, what the refusal names). The end marker counts what was sent.
    let cases: [(&str, u64, u64, &[Block], &str); 4] = [
        (
            "overlap",
            1,
            10,
            &[(10, 0, b"abcdef"), (10, 4, b"EFGHIJ")],
            "block of \"f\" at bytes 4..10 overlaps bytes 0..6",
        ),
        (
            "past the end",
            1,
            10,
            &[(10, 0, b"abcdef"), (10, 6, b"ghijk")],
            "is outside the file's 10 bytes",
        ),
        // Bytes 4..8 never sent, then a clean end of the run: only the blocks' coverage can
        // tell.
        (
            "missing block",
            1,
            10,
            &[(10, 8, b"ij"), (10, 0, b"abcd")],
            "\"f\" is missing blocks: 6 of its 10 bytes arrived (nothing from byte 4 on)",
        ),
        (
            "size mismatch",
            1,
            20,
            &[(10, 0, b"abcd"), (20, 4, b"efgh")],
            "says the file has 20 bytes, an earlier block said 10",
        ),
    ];
    for (case, files, bytes, blocks, said) in cases {
        let mut s = hello(&token, files, bytes);
        for (size, offset, data) in blocks {
            block(&mut s, "f", *size, *offset, data);
        }
        let sent = blocks.iter().map(|b| b.2.len() as u64).sum();
        codec::encode_end(
            &EndMarker {
                files: blocks.len() as u64,
                bytes: sent,
            },
            &mut s,
        );
        let got = session(&rx.addr, &id, &s).await;
        let msg = expect_error(case, got, said);
        assert!(msg.contains("kept 0 complete file(s)"), "{case}: {msg}");
        good_after(&rx, t.path(), case);
    }

    // A whole-file record and blocks for the same path.
    let mut s = hello(&token, 2, 20);
    raw_file(&mut s, b"f", 10, b"0123456789");
    block(&mut s, "f", 10, 0, b"abcdefghij");
    codec::encode_end(
        &EndMarker {
            files: 2,
            bytes: 20,
        },
        &mut s,
    );
    let got = session(&rx.addr, &id, &s).await;
    expect_error("file and blocks", got, "sent twice");
    clear(&rx.dest);
    good_after(&rx, t.path(), "after-file-and-blocks");
}

/// One connection's stream of a two-connection tcp-bundle run: hello, `records`.
fn conn_of_two(token: &[u8], run_id: [u8; 16], index: u16, records: &[u8]) -> BytesMut {
    let mut s = BytesMut::new();
    codec::encode_hello(
        &shoal_proto::codec::Hello {
            run_id,
            token: token.to_vec(),
            mode: shoal_transport::config::Mode::TcpBundle,
            file_count: 1,
            total_bytes: 10,
            conn_index: index,
            conn_count: 2,
            max_streams: 0,
            cc: None,
        },
        &mut s,
    );
    s.put_slice(records);
    s
}

/// The blocks of one file from two connections of a run are checked together: the run's
/// ledger refuses an overlap between them, and a file split between them completes with its
/// last block, whichever connection brings it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_of_one_file_from_two_connections_are_checked_together() {
    let t = tempfile::tempdir().unwrap();
    let id = t.path().join("id");
    let dst = t.path().join("box").join("dst");
    let rx = ReceiverProc::start(&id, &dst, &[]);
    let (_, token) = Identity::read_credentials(&id).unwrap();
    let records = |offset: u64, data: &[u8]| {
        let mut s = BytesMut::new();
        block(&mut s, "f", 10, offset, data);
        let len = data.len() as u64;
        codec::encode_end(
            &EndMarker {
                files: 1,
                bytes: len,
            },
            &mut s,
        );
        s
    };

    let run_id: [u8; 16] = rand::random();
    let a = conn_of_two(&token, run_id, 0, &records(0, b"abcdef"));
    let b = conn_of_two(&token, run_id, 1, &records(4, b"EFGHIJ"));
    let (ga, gb) = tokio::join!(session(&rx.addr, &id, &a), session(&rx.addr, &id, &b));
    let overlap = "block of \"f\" at bytes";
    let (ma, mb) = match (ga, gb) {
        (Some(codec::Reply::Error(a)), Some(codec::Reply::Error(b))) => (a, b),
        other => panic!("overlap across connections: expected two errors, got {other:?}"),
    };
    assert!(ma.contains(overlap) || mb.contains(overlap), "{ma} / {mb}");
    assert!(entries(&dst).is_empty(), "{:?}", entries(&dst));

    let run_id: [u8; 16] = rand::random();
    let a = conn_of_two(&token, run_id, 0, &records(6, b"ghij"));
    let b = conn_of_two(&token, run_id, 1, &records(0, b"abcdef"));
    let (ga, gb) = tokio::join!(session(&rx.addr, &id, &a), session(&rx.addr, &id, &b));
    for got in [ga, gb] {
        match got {
            Some(codec::Reply::Completion(c)) => {
                assert_eq!((c.files, c.bytes, c.errors.len()), (1, 10, 0), "{c:?}")
            }
            other => panic!("split across connections: {other:?}"),
        }
    }
    assert_eq!(std::fs::read(dst.join("f")).unwrap(), b"abcdefghij");
    no_temporaries(&dst);
    clear(&dst);
    good_after(&rx, t.path(), "after-two-connections");
}
