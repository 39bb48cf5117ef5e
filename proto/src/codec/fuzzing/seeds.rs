//! Seed inputs for the fuzz bodies of [`super`]: each a named, valid or deliberately broken
//! stream that the fuzzer starts from and the test suite runs as it is.

use super::*;

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
