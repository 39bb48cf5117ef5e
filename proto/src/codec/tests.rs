//! The codec's unit tests: every split point of a stream, limits, round trips, the fuzz bodies
//! over the committed corpus.

use bytes::{BufMut, BytesMut};

use super::*;

fn path(s: &str) -> RelPath {
    RelPath::from_bytes(s.as_bytes(), &PathLimits::default()).unwrap()
}

fn hello() -> Hello {
    Hello {
        run_id: [7; 16],
        token: b"secret".to_vec(),
        mode: Mode::TcpBundle,
        file_count: 2,
        total_bytes: 5,
        conn_index: 0,
        conn_count: 1,
        max_streams: 4096,
        cc: Some(crate::wire::Cc::Bbr),
    }
}

/// Owned copy of a decoded record, for comparing whole streams.
#[derive(Debug, PartialEq, Eq)]
enum Owned {
    Hello(Hello),
    File(FileHeader),
    Block(BlockHeader),
    Data(Vec<u8>),
    FileEnd,
    Dir(RelPath),
    End(EndMarker),
}

/// Feeds `stream` to a decoder in pieces of `step` bytes, as a socket would deliver it.
fn decode_all(stream: &[u8], step: usize) -> Result<Vec<Owned>, DecodeError> {
    let mut d = RecordDecoder::new(DecodeLimits::default());
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut fed = 0;
    loop {
        match d.decode(&buf)? {
            Some((rec, n)) => {
                out.push(match rec {
                    Record::Hello(h) => Owned::Hello(h),
                    Record::File(f) => Owned::File(f),
                    Record::Block(b) => Owned::Block(b),
                    Record::Data(b) => Owned::Data(b.to_vec()),
                    Record::FileEnd => Owned::FileEnd,
                    Record::Dir(p) => Owned::Dir(p),
                    Record::End(e) => Owned::End(e),
                });
                buf.drain(..n);
            }
            None if fed < stream.len() => {
                let next = (fed + step).min(stream.len());
                buf.extend_from_slice(&stream[fed..next]);
                fed = next;
            }
            None => {
                d.finish()?;
                // Merge data pieces so the result does not depend on `step`.
                let mut merged: Vec<Owned> = Vec::new();
                for item in out {
                    match (merged.last_mut(), item) {
                        (Some(Owned::Data(a)), Owned::Data(b)) => a.extend(b),
                        (_, item) => merged.push(item),
                    }
                }
                return Ok(merged);
            }
        }
    }
}

fn sample_stream() -> Vec<u8> {
    let mut s = BytesMut::new();
    encode_hello(&hello(), &mut s);
    let at = s.len();
    encode_file_header(&path("a/b.txt"), 5, &mut s);
    assert!(stamp_sent_at(&mut s[at..], 1234));
    s.put_slice(b"hello");
    encode_file_header(&path("empty"), 0, &mut s);
    encode_dir(&path("d/e"), &mut s);
    encode_end(&EndMarker { files: 2, bytes: 5 }, &mut s);
    s.to_vec()
}

#[test]
fn round_trips_at_every_split() {
    let stream = sample_stream();
    let expected = vec![
        Owned::Hello(hello()),
        Owned::File(FileHeader {
            path: path("a/b.txt"),
            size: 5,
            sent_at_us: 1234,
        }),
        Owned::Data(b"hello".to_vec()),
        Owned::FileEnd,
        Owned::File(FileHeader {
            path: path("empty"),
            size: 0,
            sent_at_us: 0,
        }),
        Owned::FileEnd,
        Owned::Dir(path("d/e")),
        Owned::End(EndMarker { files: 2, bytes: 5 }),
    ];
    for step in 1..=stream.len() {
        assert_eq!(decode_all(&stream, step).unwrap(), expected, "step {step}");
    }
}

fn stream_with_raw_path(raw: &[u8]) -> Vec<u8> {
    let mut s = BytesMut::new();
    encode_hello(&hello(), &mut s);
    s.put_u8(TAG_FILE);
    s.put_u16(raw.len() as u16);
    s.put_slice(raw);
    s.put_u64(1);
    s.put_u64(0);
    s.put_u8(b'x');
    encode_end(&EndMarker { files: 1, bytes: 1 }, &mut s);
    s.to_vec()
}

#[test]
fn refuses_hostile_paths_with_named_cause() {
    let cases: [(&[u8], PathError); 5] = [
        (b"../x", PathError::DotDot),
        (b"/etc/x", PathError::Absolute),
        (b"a/../../x", PathError::DotDot),
        (b"a\0b", PathError::Nul),
        (
            &[b'p'; 5000],
            PathError::TooLong {
                len: 5000,
                max: 4096,
            },
        ),
    ];
    for (raw, reason) in cases {
        let err = decode_all(&stream_with_raw_path(raw), 7).unwrap_err();
        match err {
            DecodeError::BadPath { reason: r, .. } => assert_eq!(r, reason),
            other => panic!("{other}"),
        }
    }
}

#[test]
fn too_long_path_is_refused_before_its_bytes_arrive() {
    let mut d = RecordDecoder::records_only(DecodeLimits::default());
    let mut s = BytesMut::new();
    s.put_u8(TAG_FILE);
    s.put_u16(60_000);
    assert!(matches!(
        d.decode(&s),
        Err(DecodeError::BadPath {
            reason: PathError::TooLong { .. },
            ..
        })
    ));
}

#[test]
fn truncated_streams_are_errors() {
    let stream = sample_stream();
    // Every strict prefix must fail at finish() (or earlier), never succeed.
    for cut in 0..stream.len() {
        let err = decode_all(&stream[..cut], 3).unwrap_err();
        assert!(matches!(err, DecodeError::Truncated(_)), "cut {cut}: {err}");
    }
}

#[test]
fn size_larger_than_following_bytes_is_truncation() {
    let mut s = BytesMut::new();
    encode_hello(&hello(), &mut s);
    encode_file_header(&path("big"), 1000, &mut s);
    s.put_slice(b"only a few bytes");
    encode_end(
        &EndMarker {
            files: 1,
            bytes: 1000,
        },
        &mut s,
    );
    let err = decode_all(&s, 64).unwrap_err();
    assert!(
        err.to_string().contains("short of the end of \"big\""),
        "{err}"
    );
}

#[test]
fn refuses_wrong_version_magic_and_limits() {
    let mut s = BytesMut::new();
    encode_hello(&hello(), &mut s);
    let mut wrong_version = s.to_vec();
    wrong_version[5] = 9;
    assert!(matches!(
        decode_all(&wrong_version, 100),
        Err(DecodeError::UnsupportedVersion { got: 9 })
    ));
    assert!(matches!(
        decode_all(b"GET / HTTP/1.1\r\n", 100),
        Err(DecodeError::BadMagic(_))
    ));
    // A wrong first byte is refused at once.
    let mut d = RecordDecoder::new(DecodeLimits::default());
    assert!(d.decode(b"X").is_err());

    let mut huge = BytesMut::new();
    encode_hello(&hello(), &mut huge);
    encode_file_header(&path("f"), 1 << 60, &mut huge);
    assert!(matches!(
        decode_all(&huge, 100),
        Err(DecodeError::FileTooLarge { .. })
    ));
}

#[test]
fn refuses_data_after_end_and_unknown_tags() {
    let mut s = BytesMut::from(&sample_stream()[..]);
    s.put_u8(0);
    assert_eq!(decode_all(&s, 50), Err(DecodeError::AfterEnd));
    let mut t = BytesMut::new();
    encode_hello(&hello(), &mut t);
    t.put_u8(0x7f);
    assert_eq!(decode_all(&t, 50), Err(DecodeError::UnknownTag(0x7f)));
}

/// Seeded mutations of a seed: flips, inserts, deletes, cuts, splices and interesting
/// integers written over length and size fields.
pub(crate) fn mutate(seed: &[u8], rng: &mut u64, donors: &[Vec<u8>]) -> Vec<u8> {
    fn next(r: &mut u64) -> u64 {
        // splitmix64
        *r = r.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *r;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    let mut v = seed.to_vec();
    for _ in 0..1 + next(rng) % 4 {
        let at = if v.is_empty() {
            0
        } else {
            (next(rng) % v.len() as u64) as usize
        };
        match next(rng) % 7 {
            0 if !v.is_empty() => v[at] ^= 1 << (next(rng) % 8),
            1 => v.insert(at.min(v.len()), next(rng) as u8),
            2 if !v.is_empty() => {
                v.remove(at);
            }
            3 => v.truncate(at),
            4 => {
                let d = &donors[(next(rng) % donors.len() as u64) as usize];
                let from = (next(rng) % (d.len() as u64 + 1)) as usize;
                v.truncate(at);
                v.extend_from_slice(&d[from..]);
            }
            5 => {
                let vals: [&[u8]; 6] = [
                    &[0xff, 0xff],
                    &[0, 0],
                    &[0x10, 0, 0, 0, 0, 0, 0, 0],
                    &[0xff; 8],
                    &[0, 0, 0, 0, 0, 0, 0, 1],
                    b"..",
                ];
                let val = vals[(next(rng) % 6) as usize];
                for (i, b) in val.iter().enumerate() {
                    if let Some(x) = v.get_mut(at + i) {
                        *x = *b;
                    }
                }
            }
            _ if !v.is_empty() => v[at] = next(rng) as u8,
            _ => {}
        }
    }
    v
}

/// The committed seed corpus of a fuzz target (`fuzz/corpus/<target>`), if present.
pub(crate) fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            out.push(std::fs::read(e.path()).unwrap());
        }
    }
    out
}

/// Runs a fuzz body over the seeds, the committed corpus and `n` seeded mutations.
pub(crate) fn run_body(
    target: &str,
    seeds: Vec<(&'static str, Vec<u8>)>,
    body: fn(&[u8]),
    n: usize,
) {
    let mut inputs: Vec<Vec<u8>> = seeds.into_iter().map(|(_, v)| v).collect();
    let committed = corpus(target);
    assert!(
        !committed.is_empty(),
        "fuzz/corpus/{target} is missing (cargo test -p shoal-proto -- --ignored write_seed_corpus)"
    );
    inputs.extend(committed);
    for input in &inputs {
        body(input);
    }
    let mut rng = 0x5eed_0000_0000_0007u64;
    for i in 0..n {
        let m = mutate(&inputs[i % inputs.len()], &mut rng, &inputs);
        body(&m);
    }
}

#[test]
fn fuzz_record_stream_on_corpus_and_mutations() {
    run_body(
        "record_stream",
        fuzzing::record_seeds(),
        fuzzing::record_stream,
        20_000,
    );
}

#[test]
fn fuzz_blocks_on_corpus_and_mutations() {
    run_body("blocks", fuzzing::block_seeds(), fuzzing::blocks, 20_000);
}

#[test]
fn fuzz_replies_on_corpus_and_mutations() {
    run_body("replies", fuzzing::reply_seeds(), fuzzing::replies, 10_000);
}

#[test]
fn fuzz_stream_rules_on_corpus_and_mutations() {
    run_body(
        "stream_rules",
        fuzzing::stream_rule_seeds(),
        fuzzing::stream_rules,
        20_000,
    );
}

#[test]
fn fuzz_relpath_on_corpus_and_mutations() {
    run_body(
        "relpath",
        fuzzing::relpath_seeds(),
        crate::relpath::fuzzing::relpath,
        20_000,
    );
}

/// Writes the seed corpus under `fuzz/corpus/` (run by hand after changing the seeds).
#[test]
#[ignore]
fn write_seed_corpus() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    for (target, seeds) in [
        ("record_stream", fuzzing::record_seeds()),
        ("replies", fuzzing::reply_seeds()),
        ("relpath", fuzzing::relpath_seeds()),
        ("stream_rules", fuzzing::stream_rule_seeds()),
        ("blocks", fuzzing::block_seeds()),
        ("control", crate::control::fuzzing::control_seeds()),
    ] {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in seeds {
            std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
        }
    }
}

/// A per-file stream that ends inside a second record is truncated, not a clean end
/// (found by the record_stream fuzz body's leftover-bytes invariant).
#[test]
fn file_stream_ending_inside_a_record_is_truncated() {
    let mut s = BytesMut::new();
    encode_file_header(&path("f"), 1, &mut s);
    s.put_u8(b'x');
    let whole = s.len();
    s.put_u8(TAG_FILE);
    let mut d = RecordDecoder::records_only(DecodeLimits::default());
    let mut at = 0;
    while let Some((_, n)) = d.decode(&s[at..]).unwrap() {
        at += n;
    }
    assert_eq!(at, whole);
    assert!(matches!(
        d.finish_file_stream(&s[at..]),
        Err(DecodeError::Truncated(_))
    ));
    assert!(d.finish_file_stream(&[]).is_ok());
}

#[test]
fn replies_round_trip() {
    let completion = Completion {
        files: 3,
        bytes: 12,
        receiver_micros: 1500,
        sync_follows: true,
        peak_rss: 1 << 20,
        peak_streams: 300,
        connections: 4,
        stream_window: 5,
        conn_window: 6,
        rcvbuf: 7,
        latency: vec![1, 2, 3],
        errors: vec!["one".into(), "two".into()],
        cpu_micros: Some(2_500_000),
        udp_gso_segments: Some(64),
        udp_gro_segments: None,
        threads: Some(1),
        conn_window_min: Some(2 << 20),
        writers: Some(2),
        write_wait_micros: Some(1_500),
    };
    let mut s = BytesMut::new();
    encode_ack(1, &mut s);
    encode_completion(&completion, &mut s);
    encode_synced(42, &mut s);
    encode_error("no such token", &mut s);
    let mut d = ReplyDecoder;
    let mut at = 0;
    let mut got = Vec::new();
    while at < s.len() {
        // Every prefix of the remaining bytes asks for more rather than failing.
        let rest = &s[at..];
        let (reply, n) = (1..=rest.len())
            .find_map(|k| d.decode(&rest[..k]).unwrap())
            .unwrap();
        got.push(reply);
        at += n;
    }
    assert_eq!(
        got,
        vec![
            Reply::Ack(1),
            Reply::Completion(completion),
            Reply::Synced(42),
            Reply::Error("no such token".into())
        ]
    );
}

#[test]
fn block_records_round_trip_and_stay_inside_their_file() {
    let mut s = BytesMut::new();
    encode_hello(&hello(), &mut s);
    let p = RelPath::from_bytes(b"big", &PathLimits::default()).unwrap();
    encode_block_header(&p, 10, 6, 4, &mut s);
    let at = s.len() - block_header_len(&p);
    assert!(stamp_sent_at(&mut s[at..], 77));
    s.put_slice(b"wxyz");
    encode_end(&EndMarker { files: 1, bytes: 4 }, &mut s);
    for step in [1, 3, 1000] {
        let out = decode_all(&s, step).unwrap();
        assert_eq!(
            out[1],
            Owned::Block(BlockHeader {
                path: p.clone(),
                size: 10,
                offset: 6,
                len: 4,
                sent_at_us: 77
            })
        );
        assert_eq!(out[2], Owned::Data(b"wxyz".to_vec()));
        assert_eq!(out[3], Owned::FileEnd);
    }
    // Outside the file, empty, overflowing, or of a file over the size limit: refused at the
    // header, before any content is awaited.
    for (size, offset, len) in [
        (10, 7, 4),
        (10, 10, 1),
        (10, 0, 0),
        (10, u64::MAX, 2),
        (1 << 41, 0, 1),
    ] {
        let mut s = BytesMut::new();
        encode_hello(&hello(), &mut s);
        encode_block_header(&p, size, offset, len, &mut s);
        let e = decode_all(&s, 1).unwrap_err();
        assert!(
            matches!(
                e,
                DecodeError::BlockOutside { .. } | DecodeError::FileTooLarge { .. }
            ),
            "{size} {offset} {len}: {e}"
        );
    }
    let mut s = BytesMut::new();
    encode_block_header(&p, 10, 7, 4, &mut s);
    let mut d = RecordDecoder::records_only(DecodeLimits::default());
    assert_eq!(
        d.decode(&s).unwrap_err().to_string(),
        "block of \"big\" at offset 7, 4 bytes, is outside the file's 10 bytes (or empty)"
    );
    // A stream that ends inside a block is truncated.
    let mut s = BytesMut::new();
    encode_block_header(&p, 10, 0, 4, &mut s);
    s.put_slice(b"ab");
    let mut d = RecordDecoder::records_only(DecodeLimits::default());
    let (_, n) = d.decode(&s).unwrap().unwrap();
    let _ = d.decode(&s[n..]).unwrap().unwrap();
    assert!(matches!(
        d.finish_file_stream(&[]),
        Err(DecodeError::Truncated(_))
    ));
}

#[test]
fn a_completion_without_the_cpu_trailer_reads_as_not_reported() {
    // A receiver that predates the trailer (CPU, GSO, GRO, threads, the smallest window, then
    // the writers) ends its report after the errors; one that predates the threads ends it
    // after GRO, one that predates the window after the threads, and one that predates only
    // the writers after the window.
    let c = Completion {
        files: 1,
        errors: vec!["e".into()],
        cpu_micros: Some(7),
        udp_gro_segments: Some(64),
        threads: Some(2),
        conn_window_min: Some(3 << 20),
        writers: Some(3),
        write_wait_micros: Some(0),
        ..Default::default()
    };
    let mut s = BytesMut::new();
    encode_completion(&c, &mut s);
    let cut = |n: u32| {
        let mut old = s[..s.len() - n as usize].to_vec();
        let body_len = u32::from_be_bytes(old[1..5].try_into().unwrap()) - n;
        old[1..5].copy_from_slice(&body_len.to_be_bytes());
        let Some((Reply::Completion(got), used)) = ReplyDecoder.decode(&old).unwrap() else {
            panic!("no completion");
        };
        assert_eq!(used, old.len());
        got
    };
    let before_trailer = cut(56);
    assert_eq!(before_trailer.cpu_micros, None);
    assert_eq!(before_trailer.threads, None);
    assert_eq!(before_trailer.errors, c.errors);
    let before_threads = cut(32);
    assert_eq!(before_threads.cpu_micros, Some(7));
    assert_eq!(before_threads.udp_gro_segments, Some(64));
    assert_eq!(before_threads.threads, None);
    let before_window = cut(24);
    assert_eq!(before_window.threads, Some(2));
    assert_eq!(before_window.conn_window_min, None);
    let before_writers = cut(16);
    assert_eq!(before_writers.conn_window_min, Some(3 << 20));
    assert_eq!(before_writers.writers, None);
    let before_wait = cut(8);
    assert_eq!(before_wait.writers, Some(3));
    assert_eq!(before_wait.write_wait_micros, None);
    let Some((Reply::Completion(got), _)) = ReplyDecoder.decode(&s).unwrap() else {
        panic!("no completion");
    };
    assert_eq!(got.cpu_micros, Some(7));
    assert_eq!(
        (got.udp_gso_segments, got.udp_gro_segments),
        (None, Some(64))
    );
    assert_eq!(got.threads, Some(2));
    assert_eq!(got.conn_window_min, Some(3 << 20));
    assert_eq!(got.writers, Some(3));
    assert_eq!(
        got.write_wait_micros,
        Some(0),
        "a measured 0 is not 'not reported'"
    );
}
