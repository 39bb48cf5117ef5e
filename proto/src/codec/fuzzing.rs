//! Fuzz target bodies for the decoders, shared by the coverage-guided fuzzer (`fuzz/`) and the
//! normal test suite (which runs them over the seed corpus and seeded mutations). Each panics
//! on a broken invariant; a decode error is an expected outcome, never a failure.

use bytes::{BufMut, BytesMut};

use super::*;
use crate::relpath::fuzzing::assert_confined;

/// A decoded record with its data owned, for comparing decodes of one stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Owned {
    Hello(Hello),
    File(FileHeader),
    Block(BlockHeader),
    Data(Vec<u8>),
    FileEnd,
    Dir(RelPath),
    End(EndMarker),
}

/// Limits chosen by a control bit: the defaults, or small ones so short inputs reach the
/// length, depth and size checks.
pub fn limits_for(small: bool) -> DecodeLimits {
    if small {
        DecodeLimits {
            path: PathLimits {
                max_len: 64,
                max_depth: 4,
            },
            max_file_size: 1 << 20,
        }
    } else {
        DecodeLimits::default()
    }
}

/// Decodes `stream` delivered in pieces whose sizes come from `pieces` (cycled; 0 means
/// everything at once), checking every step. Returns the records (data merged) and the
/// error's kind, if any.
pub fn decode_split(
    stream: &[u8],
    records_only: bool,
    limits: DecodeLimits,
    pieces: &[usize],
) -> (Vec<Owned>, Option<std::mem::Discriminant<DecodeError>>) {
    let mut d = if records_only {
        RecordDecoder::records_only(limits)
    } else {
        RecordDecoder::new(limits)
    };
    let mut out: Vec<Owned> = Vec::new();
    let (mut at, mut fed, mut piece) = (0usize, 0usize, 0usize);
    // Bytes of the file being decoded still due, to check Data against the header.
    let mut due: Option<u64> = None;
    // Every step consumes a byte or ends a file; bound the loop anyway.
    for _ in 0..4 * stream.len() + 64 {
        let input = &stream[at..fed];
        let pending_before = d.pending_data();
        match d.decode(input) {
            Err(e) => {
                let _ = e.to_string();
                return (out, Some(std::mem::discriminant(&e)));
            }
            Ok(Some((rec, n))) => {
                assert!(n <= input.len(), "consumed {n} of {} bytes", input.len());
                let used = &input[..n];
                let owned = match rec {
                    Record::Hello(h) => {
                        assert!(h.token.len() <= MAX_TOKEN);
                        assert!(h.conn_index < h.conn_count);
                        assert!(n <= HELLO_PREFIX + MAX_HELLO_BODY);
                        // What the encoder makes of it decodes to the same hello.
                        let mut again = BytesMut::new();
                        encode_hello(&h, &mut again);
                        let back = decode_hello(&again).expect("re-encoded hello");
                        assert_eq!(back, Some((h.clone(), again.len())));
                        Owned::Hello(h)
                    }
                    Record::File(f) => {
                        assert_confined(&f.path, &limits.path);
                        assert!(f.size <= limits.max_file_size);
                        assert!(due.is_none(), "a file header inside a file");
                        let mut again = BytesMut::new();
                        encode_file_header(&f.path, f.size, &mut again);
                        assert!(stamp_sent_at(&mut again, f.sent_at_us));
                        assert_eq!(&again[..], used, "file header does not round-trip");
                        due = Some(f.size);
                        Owned::File(f)
                    }
                    Record::Block(b) => {
                        assert_confined(&b.path, &limits.path);
                        assert!(b.size <= limits.max_file_size);
                        assert!(
                            b.len > 0 && b.offset.checked_add(b.len).is_some_and(|e| e <= b.size)
                        );
                        assert!(due.is_none(), "a block header inside a file");
                        let mut again = BytesMut::new();
                        encode_block_header(&b.path, b.size, b.offset, b.len, &mut again);
                        assert!(stamp_sent_at(&mut again, b.sent_at_us));
                        assert_eq!(&again[..], used, "block header does not round-trip");
                        due = Some(b.len);
                        Owned::Block(b)
                    }
                    Record::Data(b) => {
                        assert!(n > 0 && b == used, "data is not the input's first bytes");
                        assert!(n as u64 <= pending_before);
                        let left = due.as_mut().expect("data outside a file");
                        *left -= n as u64;
                        assert_eq!(*left, d.pending_data());
                        Owned::Data(b.to_vec())
                    }
                    Record::FileEnd => {
                        assert_eq!(n, 0);
                        assert_eq!(due.take(), Some(0), "file ended short");
                        Owned::FileEnd
                    }
                    Record::Dir(p) => {
                        assert_confined(&p, &limits.path);
                        let mut again = BytesMut::new();
                        encode_dir(&p, &mut again);
                        assert_eq!(&again[..], used, "folder record does not round-trip");
                        Owned::Dir(p)
                    }
                    Record::End(e) => {
                        assert!(due.is_none());
                        let mut again = BytesMut::new();
                        encode_end(&e, &mut again);
                        assert_eq!(&again[..], used);
                        assert!(d.ended());
                        Owned::End(e)
                    }
                };
                assert!(n > 0 || owned == Owned::FileEnd, "no progress");
                push_merged(&mut out, owned);
                at += n;
            }
            Ok(None) => {
                if fed == stream.len() {
                    let end = if records_only {
                        d.finish_file_stream(&stream[at..])
                    } else {
                        d.finish()
                    };
                    if end.is_ok() {
                        assert_eq!(at, stream.len(), "accepted a stream with bytes left over");
                    }
                    return (out, end.err().map(|e| std::mem::discriminant(&e)));
                }
                fed = feed_more(pieces, &mut piece, fed, stream.len());
            }
        }
    }
    panic!("decoder made no progress on a {}-byte stream", stream.len());
}

/// Appends a record, merging data into the data before it.
fn push_merged(out: &mut Vec<Owned>, owned: Owned) {
    match (out.last_mut(), owned) {
        (Some(Owned::Data(a)), Owned::Data(b)) => a.extend(b),
        (_, o) => out.push(o),
    }
}

/// How far the next piece (sizes from `pieces`, cycled; 0 means everything) feeds a stream of
/// `len` bytes fed up to `fed` so far.
fn feed_more(pieces: &[usize], piece: &mut usize, fed: usize, len: usize) -> usize {
    let step = pieces
        .get(*piece % pieces.len().max(1))
        .copied()
        .unwrap_or(0);
    *piece += 1;
    if step == 0 {
        len
    } else {
        (fed + step).min(len)
    }
}

/// Fuzz body for `RecordDecoder`: byte 0 picks the decoder (bit 7: records only) and the
/// limits (bit 6: small); bytes 1..4 are piece sizes; the rest is the stream. The stream
/// is decoded whole, byte by byte and in the given pieces: every way must give the same
/// records and the same kind of error.
pub fn record_stream(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let (head, stream) = data.split_at(4);
    let records_only = head[0] & 0x80 != 0;
    let limits = limits_for(head[0] & 0x40 != 0);
    let pieces: Vec<usize> = head[1..].iter().map(|&b| b as usize).collect();
    let whole = decode_split(stream, records_only, limits, &[0]);
    let bytewise = decode_split(stream, records_only, limits, &[1]);
    assert_eq!(whole, bytewise, "whole vs byte by byte");
    let pieced = decode_split(stream, records_only, limits, &pieces);
    assert_eq!(whole, pieced, "whole vs pieces {pieces:?}");
}

/// What a [`StreamDecoder`] made of a stream: its records (data merged) and its error's kind.
type RuleOutcome = (
    Vec<Owned>,
    Option<(
        std::mem::Discriminant<StreamError>,
        Option<std::mem::Discriminant<DecodeError>>,
    )>,
);

/// Fuzz body for the stream rules ([`StreamDecoder`], [`FileStreamCount`]): byte 0 picks the
/// kind of stream (bit 7: a per-file stream; else bit 0: the control stream of a per-file
/// mode; else a bundle stream) and the limits (bit 6: small); bytes 1..4 are piece sizes; the
/// rest is the stream (for a bundle or control stream, starting with its hello). Whole, byte by
/// byte and in pieces must agree, and no kind may yield a record its rules refuse.
pub fn stream_rules(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let (head, stream) = data.split_at(4);
    let limits = limits_for(head[0] & 0x40 != 0);
    let pieces: Vec<usize> = head[1..].iter().map(|&b| b as usize).collect();
    let whole = decode_by_rules(stream, head[0], limits, &[0]);
    let bytewise = decode_by_rules(stream, head[0], limits, &[1]);
    assert_eq!(whole, bytewise, "whole vs byte by byte");
    let pieced = decode_by_rules(stream, head[0], limits, &pieces);
    assert_eq!(whole, pieced, "whole vs pieces {pieces:?}");
}

fn decode_by_rules(stream: &[u8], kind: u8, limits: DecodeLimits, pieces: &[usize]) -> RuleOutcome {
    let file_stream = kind & 0x80 != 0;
    let control = !file_stream && kind & 0x01 != 0;
    let mut at = 0;
    let mut d = if file_stream {
        StreamDecoder::file_stream(limits)
    } else {
        let mut records = RecordDecoder::new(limits);
        match records.decode(stream) {
            Ok(Some((Record::Hello(_), n))) => at = n,
            _ => return (Vec::new(), None),
        }
        if control {
            StreamDecoder::control_stream(records)
        } else {
            StreamDecoder::bundle(records)
        }
    };
    let refused = |e: StreamError| {
        let inner = match &e {
            StreamError::Decode(d) => Some(std::mem::discriminant(d)),
            _ => None,
        };
        let _ = e.to_string();
        Some((std::mem::discriminant(&e), inner))
    };
    let mut out: Vec<Owned> = Vec::new();
    let (mut fed, mut piece, mut files, mut ended) = (at, 0usize, 0usize, false);
    for _ in 0..4 * stream.len() + 64 {
        let input = &stream[at..fed];
        match d.decode(input) {
            Err(e) => return (out, refused(e)),
            Ok(Some((rec, n))) => {
                assert!(n <= input.len());
                let owned = match rec {
                    Record::Hello(_) => panic!("a hello after the hello"),
                    Record::File(f) => {
                        assert!(!control, "a file record on the control stream");
                        files += 1;
                        assert!(!file_stream || files == 1, "a second file on a file stream");
                        Owned::File(f)
                    }
                    Record::Block(b) => {
                        assert!(!control, "a block record on the control stream");
                        files += 1;
                        assert!(
                            !file_stream || files == 1,
                            "a second record on a file stream"
                        );
                        Owned::Block(b)
                    }
                    Record::Data(b) => {
                        assert!(!control, "data on the control stream");
                        Owned::Data(b.to_vec())
                    }
                    Record::FileEnd => {
                        assert!(!control, "a file end on the control stream");
                        Owned::FileEnd
                    }
                    Record::Dir(p) => {
                        assert!(!file_stream, "a folder on a file stream");
                        Owned::Dir(p)
                    }
                    Record::End(e) => {
                        assert!(!file_stream, "an end marker on a file stream");
                        ended = true;
                        check_count(e);
                        Owned::End(e)
                    }
                };
                push_merged(&mut out, owned);
                at += n;
            }
            Ok(None) => {
                if fed == stream.len() {
                    let end = d.finish(&stream[at..]);
                    if end.is_ok() {
                        assert_eq!(at, stream.len(), "accepted a stream with bytes left over");
                        assert!(if file_stream { files == 1 } else { ended });
                    }
                    return (out, end.err().and_then(refused));
                }
                fed = feed_more(pieces, &mut piece, fed, stream.len());
            }
        }
    }
    panic!("decoder made no progress on a {}-byte stream", stream.len());
}

/// [`FileStreamCount`] against an end marker, with a few file streams done.
fn check_count(end: EndMarker) {
    let done = end.files.wrapping_add(end.bytes) % 4;
    let mut count = FileStreamCount::default();
    assert!(count.complete().is_none() && count.no_more_streams().is_ok());
    for _ in 0..done {
        count.stream_done();
    }
    count.ended(end);
    let whole = done >= end.files;
    assert_eq!(count.complete().is_some(), whole);
    assert_eq!(count.no_more_streams().is_ok(), whole);
    assert!(count.extra_streams(0, Some(end.files)).is_ok());
    assert!(count.extra_streams(1, Some(end.files)).is_err());
}

/// Fuzz body for `ReplyDecoder`: replies decoded one after another, whole and byte by
/// byte; every decoded reply re-encodes to something that decodes the same.
pub fn replies(data: &[u8]) {
    let whole = decode_replies(data, false);
    let bytewise = decode_replies(data, true);
    assert_eq!(whole, bytewise, "whole vs byte by byte");
}

fn decode_replies(data: &[u8], bytewise: bool) -> (Vec<Reply>, Option<DecodeError>) {
    let mut d = ReplyDecoder;
    let mut out = Vec::new();
    let mut at = 0;
    let mut fed = if bytewise { at } else { data.len() };
    loop {
        let input = &data[at..fed];
        match d.decode(input) {
            Err(e) => return (out, Some(e)),
            Ok(Some((reply, n))) => {
                assert!(n > 0 && n <= input.len());
                let mut again = BytesMut::new();
                match &reply {
                    Reply::Ack(k) => {
                        encode_ack(*k, &mut again);
                        assert_eq!(&again[..], &input[..n]);
                    }
                    Reply::Synced(k) => {
                        encode_synced(*k, &mut again);
                        assert_eq!(&again[..], &input[..n]);
                    }
                    Reply::Error(m) => {
                        assert!(m.len() <= 3 * MAX_MESSAGE);
                        encode_error(m, &mut again);
                    }
                    Reply::Completion(c) => {
                        assert!(c.errors.len() <= MAX_REPORTED_ERRORS);
                        encode_completion(c, &mut again);
                    }
                }
                if !matches!(&reply, Reply::Error(m) if m.len() > MAX_MESSAGE) {
                    let back = ReplyDecoder.decode(&again).expect("re-encoded reply");
                    let (back, m) = back.expect("a whole reply");
                    assert_eq!(m, again.len());
                    if let (Reply::Completion(a), Reply::Completion(b)) = (&reply, &back) {
                        // The encoder drops an oversized histogram and cuts long messages.
                        assert_eq!(
                            (a.files, a.bytes, a.errors.len()),
                            (b.files, b.bytes, b.errors.len())
                        );
                    } else if !matches!(reply, Reply::Error(_)) {
                        assert_eq!(back, reply);
                    }
                }
                out.push(reply);
                at += n;
            }
            Ok(None) => {
                if fed == data.len() {
                    return (out, None);
                }
                fed += 1;
                if !bytewise {
                    fed = data.len();
                }
            }
        }
    }
}

/// Seeds for [`stream_rules`]: the record seeds (their header bits pick a bundle or a per-file
/// stream) and each bundle seed again as a control stream.
pub fn stream_rule_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut seeds = record_seeds();
    let as_control: Vec<_> = seeds
        .iter()
        .filter_map(|(name, v)| {
            let control = match *name {
                // Files on the control stream: refused.
                "valid-bundle" => "control-with-files",
                "data-after-end" => "control-data-after-end",
                _ => return None,
            };
            let mut v = v.clone();
            v[0] |= 0x01;
            Some((control, v))
        })
        .collect();
    seeds.extend(as_control);
    let mut valid = vec![0x01, 1, 3, 9];
    let mut s = BytesMut::new();
    encode_hello(
        &Hello {
            run_id: [7; 16],
            token: b"secret-token".to_vec(),
            mode: Mode::TcpStreams,
            file_count: 1,
            total_bytes: 4,
            conn_index: 0,
            conn_count: 1,
            max_streams: 4096,
            cc: None,
        },
        &mut s,
    );
    let limits = PathLimits::default();
    encode_dir(
        &RelPath::from_bytes(b"empty/folder", &limits).expect("seed path"),
        &mut s,
    );
    encode_end(&EndMarker { files: 1, bytes: 4 }, &mut s);
    valid.extend_from_slice(&s);
    seeds.push(("control-valid", valid));
    seeds
}

/// Seed streams: valid streams from the encoder and the hostile cases of the test suite.
/// Each is given with its 4-byte fuzz header (see [`record_stream`]).
pub fn record_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let limits = PathLimits::default();
    let p = |s: &[u8]| RelPath::from_bytes(s, &limits).expect("seed path");
    let hello = |files, bytes| {
        let mut s = BytesMut::new();
        encode_hello(
            &Hello {
                run_id: [7; 16],
                token: b"secret-token".to_vec(),
                mode: Mode::TcpBundle,
                file_count: files,
                total_bytes: bytes,
                conn_index: 0,
                conn_count: 1,
                max_streams: 4096,
                cc: None,
            },
            &mut s,
        );
        s
    };
    let raw_file = |s: &mut BytesMut, path: &[u8], size: u64, data: &[u8]| {
        s.put_u8(TAG_FILE);
        s.put_u16(path.len() as u16);
        s.put_slice(path);
        s.put_u64(size);
        s.put_u64(0);
        s.put_slice(data);
    };
    let with_head = |head: [u8; 4], s: &[u8]| {
        let mut v = head.to_vec();
        v.extend_from_slice(s);
        v
    };
    let mut seeds = Vec::new();

    let mut good = hello(3, 11);
    let at = good.len();
    encode_file_header(&p(b"a/b.txt"), 5, &mut good);
    stamp_sent_at(&mut good[at..], 1_700_000_000_000_000);
    good.put_slice(b"hello");
    encode_file_header(&p(b"empty"), 0, &mut good);
    encode_dir(&p(b"d/e/f"), &mut good);
    encode_file_header(&p("caf\u{e9}/x y".as_bytes()), 6, &mut good);
    good.put_slice(b"world!");
    encode_end(
        &EndMarker {
            files: 3,
            bytes: 11,
        },
        &mut good,
    );
    seeds.push(("valid-bundle", with_head([0, 1, 7, 64], &good)));
    seeds.push((
        "valid-bundle-small-limits",
        with_head([0x40, 3, 2, 1], &good),
    ));

    let mut blocks = hello(1, 10);
    let at = blocks.len();
    encode_block_header(&p(b"big"), 10, 6, 4, &mut blocks);
    stamp_sent_at(&mut blocks[at..], 1_700_000_000_000_000);
    blocks.put_slice(b"6789");
    encode_block_header(&p(b"big"), 10, 0, 6, &mut blocks);
    blocks.put_slice(b"012345");
    encode_end(
        &EndMarker {
            files: 2,
            bytes: 10,
        },
        &mut blocks,
    );
    seeds.push(("valid-blocks", with_head([0, 5, 40, 3], &blocks)));
    let mut outside = hello(1, 10);
    encode_block_header(&p(b"big"), 10, 8, 4, &mut outside);
    outside.put_slice(b"89ab");
    seeds.push(("block-past-the-end", with_head([0, 1, 2, 3], &outside)));
    let mut block_stream = BytesMut::new();
    encode_block_header(&p(b"dir/big"), 1 << 30, 1 << 29, 3, &mut block_stream);
    block_stream.put_slice(b"abc");
    seeds.push((
        "valid-block-stream",
        with_head([0x80, 2, 2, 2], &block_stream),
    ));

    let mut one = BytesMut::new();
    encode_file_header(&p(b"dir/file.bin"), 4, &mut one);
    one.put_slice(b"\x00\x01\x02\x03");
    seeds.push(("valid-file-stream", with_head([0x80, 1, 2, 3], &one)));
    let mut control = BytesMut::new();
    encode_dir(&p(b"empty/folder"), &mut control);
    encode_end(&EndMarker { files: 0, bytes: 0 }, &mut control);
    seeds.push((
        "valid-control-records",
        with_head([0x80, 5, 0, 0], &control),
    ));

    let mut huge = hello(1, 1 << 60);
    raw_file(&mut huge, b"huge", 1 << 60, b"only a few bytes");
    seeds.push(("file-claims-2pow60-bytes", with_head([0, 9, 9, 9], &huge)));
    let mut many = hello(1_000_000, 0);
    for i in 0..3 {
        raw_file(&mut many, format!("f{i}").as_bytes(), 0, b"");
    }
    seeds.push(("million-files-announced", with_head([0, 4, 4, 4], &many)));
    for (name, raw) in [
        ("dot-dot", &b"../x"[..]),
        ("absolute", b"/etc/passwd"),
        ("inner-dot-dot", b"a/../../x"),
        ("dot", b"./a"),
        ("nul", b"a\0b"),
        ("empty-component", b"a//b"),
        ("trailing-slash", b"a/"),
        ("invalid-utf8", b"\xff\xfe/\xc3\x28"),
    ] {
        let mut s = hello(1, 1);
        raw_file(&mut s, raw, 1, b"x");
        encode_end(&EndMarker { files: 1, bytes: 1 }, &mut s);
        seeds.push((name, with_head([0, 2, 3, 5], &s)));
    }
    let deep: Vec<u8> = vec![vec![b'n'; 255]; 200].join(&b'/');
    let mut s = hello(1, 0);
    s.put_u8(TAG_FILE);
    s.put_u16(u16::MAX); // the real 51,199 bytes do not fit a u16 length
    s.put_slice(&deep[..4200]);
    seeds.push(("deep-long-path", with_head([0, 100, 200, 255], &s)));
    let mut dup = hello(2, 2);
    raw_file(&mut dup, b"same", 1, b"1");
    raw_file(&mut dup, b"same", 1, b"2");
    encode_end(&EndMarker { files: 2, bytes: 2 }, &mut dup);
    seeds.push(("same-path-twice", with_head([0, 1, 1, 1], &dup)));
    let mut clash = hello(2, 2);
    raw_file(&mut clash, b"a", 1, b"1");
    raw_file(&mut clash, b"a/b", 1, b"2");
    encode_end(&EndMarker { files: 2, bytes: 2 }, &mut clash);
    seeds.push(("file-then-folder-clash", with_head([0, 6, 6, 6], &clash)));
    let mut version = hello(0, 0);
    version[5] = 99;
    seeds.push(("wrong-version", with_head([0, 1, 1, 1], &version)));
    seeds.push(("http", with_head([0, 3, 3, 3], b"GET / HTTP/1.1\r\n\r\n")));
    let mut big_hello = BytesMut::new();
    big_hello.put_slice(&MAGIC);
    big_hello.put_u16(PROTOCOL_VERSION);
    big_hello.put_u32(u32::MAX);
    seeds.push(("hello-too-large", with_head([0, 1, 1, 1], &big_hello)));
    let mut after = good.clone();
    after.put_u8(0x01);
    seeds.push(("data-after-end", with_head([0, 50, 1, 2], &after)));
    let mut unknown = hello(0, 0);
    unknown.put_u8(0x7f);
    seeds.push(("unknown-tag", with_head([0, 1, 1, 1], &unknown)));
    seeds
}

/// Seed replies: an ack, a completion with a histogram and errors, an error.
pub fn reply_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut all = BytesMut::new();
    encode_ack(42, &mut all);
    encode_completion(
        &Completion {
            files: 3,
            bytes: 12,
            receiver_micros: 1500,
            latency: vec![1, 2, 3],
            errors: vec!["one".into(), "two".into()],
            ..Default::default()
        },
        &mut all,
    );
    encode_error("authentication failed: wrong token", &mut all);
    let mut ack = BytesMut::new();
    encode_ack(1, &mut ack);
    let mut err = BytesMut::new();
    encode_error("unsupported protocol version 9", &mut err);
    vec![
        ("all-replies", all.to_vec()),
        ("ack", ack.to_vec()),
        ("error", err.to_vec()),
    ]
}

/// Path seeds (byte 0 picks the limits, see [`crate::relpath::fuzzing::relpath`]).
pub fn relpath_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let with = |ctl: u8, p: &[u8]| {
        let mut v = vec![ctl];
        v.extend_from_slice(p);
        v
    };
    vec![
        ("plain", with(0, b"a/b/c.txt")),
        ("dot-dot", with(0, b"a/../../etc/passwd")),
        ("dots-in-names", with(0, b"..a/.b/...")),
        ("absolute", with(0, b"/etc/passwd")),
        ("nul", with(0, b"a\0/b")),
        ("utf8-nfd", with(0, "cafe\u{301}/x".as_bytes())),
        ("invalid-utf8", with(0, b"\xff/\xfe")),
        ("long-component", with(0, &[b'x'; 256])),
        ("deep", with(3, b"a/b/c/d/e/f/g/h")),
        ("newline-dash", with(0, b"-rf/new\nline")),
    ]
}

/// Fuzz body for [`BlockLedger`]: the input is a list of 4-byte blocks (file 0–3 from byte 0's
/// low bits and its size 1–64 from byte 1, offset and length from bytes 2 and 3) against a
/// byte-by-byte model: a block is accepted exactly when it lies inside its file, agrees on its
/// size and covers no byte already covered; a file is complete exactly when every byte is
/// covered once, and [`BlockLedger::incomplete`] lists exactly the others.
pub fn blocks(data: &[u8]) {
    let limits = PathLimits::default();
    let names: Vec<RelPath> = (0..4)
        .map(|i| RelPath::from_bytes(format!("f{i}").as_bytes(), &limits).expect("name"))
        .collect();
    let mut ledger = BlockLedger::default();
    // Per file: its size (from its first accepted block) and which bytes are covered.
    let mut model: Vec<Option<(u64, Vec<bool>)>> = vec![None; 4];
    let mut next_id = 0u64;
    for op in data.chunks_exact(4) {
        let f = (op[0] & 3) as usize;
        let size = u64::from(op[1] % 64) + 1;
        let (offset, len) = (u64::from(op[2]), u64::from(op[3]));
        let got = ledger.reserve(&names[f], size, offset, len, || {
            next_id += 1;
            next_id
        });
        let inside = len > 0 && offset + len <= size;
        let fits = match &model[f] {
            Some((s, covered)) => {
                *s == size
                    && inside
                    && !covered[offset as usize..(offset + len) as usize]
                        .iter()
                        .any(|&c| c)
            }
            None => inside,
        };
        match got {
            Ok(r) => {
                assert!(fits, "accepted {f} {size} {offset}+{len}");
                let (_, covered) =
                    model[f].get_or_insert_with(|| (size, vec![false; size as usize]));
                assert_eq!(r.first, covered.iter().all(|&c| !c));
                covered[offset as usize..(offset + len) as usize].fill(true);
                assert_eq!(r.complete, covered.iter().all(|&c| c));
            }
            Err(e) => {
                let _ = e.to_string();
                assert!(
                    !fits || matches!(e, BlockError::Fragmented { .. }),
                    "refused {f} {size} {offset}+{len}: {e}"
                );
            }
        }
    }
    let incomplete: Vec<RelPath> = ledger.incomplete().into_iter().map(|m| m.path).collect();
    let expected: Vec<RelPath> = (0..4)
        .filter(|&f| matches!(&model[f], Some((_, c)) if !c.iter().all(|&b| b)))
        .map(|f| names[f].clone())
        .collect();
    assert_eq!(incomplete, expected);
}

/// Seeds for [`blocks`]: a file in three blocks out of order, an overlap, a block past the end.
pub fn block_seeds() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            "three-out-of-order",
            vec![0, 29, 20, 10, 0, 29, 0, 10, 0, 29, 10, 10],
        ),
        ("overlap", vec![1, 9, 0, 6, 1, 9, 5, 5]),
        ("past-the-end", vec![2, 9, 8, 4, 2, 9, 0, 8]),
        ("size-mismatch", vec![3, 9, 0, 4, 3, 19, 4, 6]),
    ]
}
