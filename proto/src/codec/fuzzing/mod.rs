//! Fuzz target bodies for the decoders, shared by the coverage-guided fuzzer (`fuzz/`) and the
//! normal test suite (which runs them over the seed corpus and seeded mutations). Each panics
//! on a broken invariant; a decode error is an expected outcome, never a failure.

use bytes::{BufMut, BytesMut};

use super::*;
use crate::relpath::fuzzing::assert_confined;

mod seeds;
pub use seeds::*;

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
