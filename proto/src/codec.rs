//! The Shoal record format: encoder and incremental decoders. Pure code, no I/O.
//!
//! See `docs/wire-format.md` for the byte layout. The decoders take whatever bytes have arrived
//! and either return one decoded item with the number of bytes it used, or `None` to ask for
//! more. They never allocate more than a record header's worth (bounded by the limits) and never
//! trust a length before checking it against a limit.

use bytes::{BufMut, BytesMut};

use crate::relpath::{display_raw, PathError, PathLimits, RelPath};
use crate::wire::Mode;

/// First bytes of every sender stream.
pub const MAGIC: [u8; 4] = *b"SHOL";
/// The protocol version this build speaks.
/// 2: the completion says whether a sync report follows it (`Reply::Synced`).
pub const PROTOCOL_VERSION: u16 = 2;
/// Largest hello body accepted.
pub const MAX_HELLO_BODY: usize = 64 * 1024;
/// Longest token accepted.
pub const MAX_TOKEN: usize = 1024;
/// Largest completion body accepted by the sender.
pub const MAX_COMPLETION_BODY: usize = 1 << 20;
/// Most error messages carried in a completion report.
pub const MAX_REPORTED_ERRORS: usize = 64;
/// Longest single error message on the wire.
pub const MAX_MESSAGE: usize = 4096;

const HELLO_PREFIX: usize = 4 + 2 + 4;

const TAG_FILE: u8 = 0x01;
const TAG_DIR: u8 = 0x02;
const TAG_END: u8 = 0x03;
const TAG_ACK: u8 = 0x81;
const TAG_COMPLETION: u8 = 0x82;
const TAG_ERROR: u8 = 0x83;
const TAG_SYNCED: u8 = 0x84;

/// The first message of a connection: who is sending what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub run_id: [u8; 16],
    pub token: Vec<u8>,
    pub mode: Mode,
    pub file_count: u64,
    pub total_bytes: u64,
    pub conn_index: u16,
    pub conn_count: u16,
    /// Most per-file streams the sender keeps outstanding on one connection (streams modes);
    /// the receiver refuses a run that asks for more than it allows.
    pub max_streams: u32,
    /// Congestion controller the sender asked for (`None`: system default); the receiver uses
    /// the same on its TCP sockets.
    pub cc: Option<crate::wire::Cc>,
}

/// Announces one file; exactly `size` bytes of content follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    pub path: RelPath,
    pub size: u64,
    /// Sender's wall clock (µs since the Unix epoch) when it started sending this file; the
    /// receiver subtracts it from its own wall clock at close to get the file's latency.
    pub sent_at_us: u64,
}

/// The sender's last record: what it sent, for the receiver to cross-check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndMarker {
    pub files: u64,
    pub bytes: u64,
}

/// The receiver's report once every file of the run is written and closed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Completion {
    pub files: u64,
    pub bytes: u64,
    /// Receiver clock: first byte received → last file closed.
    pub receiver_micros: u64,
    /// The receiver syncs the destination (`--fsync`) after sending this report and then
    /// sends `Reply::Synced` (or an error): the sync is not part of the transfer time.
    pub sync_follows: bool,
    /// Receiver's peak resident set during the run, bytes.
    pub peak_rss: u64,
    /// Most per-file streams the receiver had open at once.
    pub peak_streams: u64,
    /// Connections the receiver counted for this run.
    pub connections: u64,
    /// Receiver's flow-control limits in effect for this run (bytes; 0 where not applicable).
    pub stream_window: u64,
    pub conn_window: u64,
    /// Receiver's socket receive buffer, read back from the kernel (bytes; summed over
    /// connections for TCP, the UDP socket's for QUIC).
    pub rcvbuf: u64,
    /// Per-file latency histogram (HdrHistogram V2 serialization, µs), empty if none.
    pub latency: Vec<u8>,
    /// Errors the receiver met; a non-empty list means the run failed.
    pub errors: Vec<String>,
}

/// One decoded item of a sender stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Record<'a> {
    Hello(Hello),
    File(FileHeader),
    /// Content of the current file: the first bytes of the input, borrowed.
    Data(&'a [u8]),
    /// The current file's content is complete.
    FileEnd,
    /// An (empty) folder to create.
    Dir(RelPath),
    End(EndMarker),
}

/// One decoded message from the receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Per-file acknowledgement (stop-and-wait control arm): the count of files closed so far.
    Ack(u64),
    Completion(Completion),
    /// After a completion with `sync_follows`: the destination is synced; how long that took
    /// (µs).
    Synced(u64),
    /// A fatal error: the receiver refused the run or failed; it closes the connection.
    Error(String),
}

/// Why bytes from a peer were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("not a Shoal stream (bad magic bytes {0:02x?})")]
    BadMagic([u8; 4]),
    #[error("unsupported protocol version {got} (this build speaks {PROTOCOL_VERSION})")]
    UnsupportedVersion { got: u16 },
    #[error("hello of {0} bytes exceeds the limit of {MAX_HELLO_BODY}")]
    HelloTooLarge(usize),
    #[error("malformed hello: {0}")]
    BadHello(&'static str),
    #[error("refused path \"{path}\": {reason}")]
    BadPath { path: String, reason: PathError },
    #[error("file \"{path}\" claims {size} bytes, more than the limit of {max}")]
    FileTooLarge { path: String, size: u64, max: u64 },
    #[error("unknown record type 0x{0:02x}")]
    UnknownTag(u8),
    #[error("data after the end marker")]
    AfterEnd,
    #[error("truncated stream: {0}")]
    Truncated(String),
    #[error("malformed reply: {0}")]
    BadReply(&'static str),
}

/// Limits the decoder enforces on what a peer may announce.
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    pub path: PathLimits,
    pub max_file_size: u64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        Self {
            path: PathLimits::default(),
            max_file_size: 1 << 40,
        }
    }
}

/// Incremental decoder of a sender stream.
#[derive(Debug)]
pub struct RecordDecoder {
    state: State,
    limits: DecodeLimits,
}

#[derive(Debug)]
enum State {
    ExpectHello,
    ExpectRecord,
    InFile { path: RelPath, remaining: u64 },
    Ended,
}

impl RecordDecoder {
    /// A decoder for a stream that starts with a hello.
    pub fn new(limits: DecodeLimits) -> Self {
        Self {
            state: State::ExpectHello,
            limits,
        }
    }

    /// A decoder for a stream of records without a hello (e.g. one per-file stream).
    pub fn records_only(limits: DecodeLimits) -> Self {
        Self {
            state: State::ExpectRecord,
            limits,
        }
    }

    /// Content bytes still due for the file being decoded (0 between records): lets a reader
    /// size its next read to what is coming.
    pub fn pending_data(&self) -> u64 {
        match &self.state {
            State::InFile { remaining, .. } => *remaining,
            _ => 0,
        }
    }

    /// Whether the end marker has been decoded.
    pub fn ended(&self) -> bool {
        matches!(self.state, State::Ended)
    }

    /// Decodes the next item from `input`. `Ok(None)` means more bytes are needed; nothing was
    /// consumed. On `Ok(Some((record, n)))` the caller drops the first `n` bytes of its input.
    pub fn decode<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<Option<(Record<'a>, usize)>, DecodeError> {
        match &mut self.state {
            State::ExpectHello => {
                let Some((hello, n)) = decode_hello(input)? else {
                    return Ok(None);
                };
                self.state = State::ExpectRecord;
                Ok(Some((Record::Hello(hello), n)))
            }
            State::ExpectRecord => self.decode_record(input),
            State::InFile { remaining, .. } => {
                if *remaining == 0 {
                    self.state = State::ExpectRecord;
                    return Ok(Some((Record::FileEnd, 0)));
                }
                if input.is_empty() {
                    return Ok(None);
                }
                let n = usize::try_from(*remaining)
                    .unwrap_or(usize::MAX)
                    .min(input.len());
                *remaining -= n as u64;
                Ok(Some((Record::Data(&input[..n]), n)))
            }
            State::Ended => {
                if input.is_empty() {
                    Ok(None)
                } else {
                    Err(DecodeError::AfterEnd)
                }
            }
        }
    }

    /// Call at end of stream: an error unless the stream ended at a record boundary after the
    /// end marker.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match &self.state {
            State::Ended => Ok(()),
            State::ExpectHello => Err(DecodeError::Truncated(
                "connection closed before the hello".into(),
            )),
            State::ExpectRecord => Err(DecodeError::Truncated(
                "stream ended without an end marker".into(),
            )),
            State::InFile { path, remaining } => Err(DecodeError::Truncated(format!(
                "stream ended {remaining} bytes short of the end of \"{path}\""
            ))),
        }
    }

    /// Like [`finish`](Self::finish) for a per-file stream: it may end after one file, with
    /// no end marker. `unconsumed` is what the caller still holds undecoded: a stream that
    /// ends inside a second record is truncated, not complete.
    pub fn finish_file_stream(&self, unconsumed: &[u8]) -> Result<(), DecodeError> {
        match &self.state {
            State::ExpectRecord if !unconsumed.is_empty() => Err(DecodeError::Truncated(format!(
                "file stream ended inside a record ({} bytes of it arrived)",
                unconsumed.len()
            ))),
            State::ExpectRecord | State::Ended => Ok(()),
            _ => self.finish(),
        }
    }

    fn decode_record<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<Option<(Record<'a>, usize)>, DecodeError> {
        let Some(&tag) = input.first() else {
            return Ok(None);
        };
        match tag {
            TAG_FILE => {
                let Some((path, after_path)) = self.decode_path(input)? else {
                    return Ok(None);
                };
                let (Some(size), Some(sent_at_us)) =
                    (read_u64(input, after_path), read_u64(input, after_path + 8))
                else {
                    return Ok(None);
                };
                if size > self.limits.max_file_size {
                    return Err(DecodeError::FileTooLarge {
                        path: path.to_string(),
                        size,
                        max: self.limits.max_file_size,
                    });
                }
                self.state = State::InFile {
                    path: path.clone(),
                    remaining: size,
                };
                let header = FileHeader {
                    path,
                    size,
                    sent_at_us,
                };
                Ok(Some((Record::File(header), after_path + 16)))
            }
            TAG_DIR => {
                let Some((path, n)) = self.decode_path(input)? else {
                    return Ok(None);
                };
                Ok(Some((Record::Dir(path), n)))
            }
            TAG_END => {
                let (Some(files), Some(bytes)) = (read_u64(input, 1), read_u64(input, 9)) else {
                    return Ok(None);
                };
                self.state = State::Ended;
                Ok(Some((Record::End(EndMarker { files, bytes }), 17)))
            }
            other => Err(DecodeError::UnknownTag(other)),
        }
    }

    /// Decodes `tag, u16 length, path bytes`; checks the length before waiting for the bytes.
    fn decode_path(&self, input: &[u8]) -> Result<Option<(RelPath, usize)>, DecodeError> {
        let Some(len) = read_u16(input, 1) else {
            return Ok(None);
        };
        let len = len as usize;
        if len > self.limits.path.max_len {
            let shown = &input[3..input.len().min(3 + len)];
            return Err(DecodeError::BadPath {
                path: display_raw(shown),
                reason: PathError::TooLong {
                    len,
                    max: self.limits.path.max_len,
                },
            });
        }
        let Some(raw) = input.get(3..3 + len) else {
            return Ok(None);
        };
        let path =
            RelPath::from_bytes(raw, &self.limits.path).map_err(|reason| DecodeError::BadPath {
                path: display_raw(raw),
                reason,
            })?;
        Ok(Some((path, 3 + len)))
    }
}

fn decode_hello(input: &[u8]) -> Result<Option<(Hello, usize)>, DecodeError> {
    if input.len() < 4 {
        // Refuse a wrong magic as soon as the bytes that differ have arrived.
        if input.iter().zip(MAGIC.iter()).any(|(a, b)| a != b) {
            let mut got = [0u8; 4];
            got[..input.len()].copy_from_slice(input);
            return Err(DecodeError::BadMagic(got));
        }
        return Ok(None);
    }
    let magic: [u8; 4] = input[..4].try_into().expect("4 bytes");
    if magic != MAGIC {
        return Err(DecodeError::BadMagic(magic));
    }
    let Some(version) = read_u16(input, 4) else {
        return Ok(None);
    };
    if version != PROTOCOL_VERSION {
        return Err(DecodeError::UnsupportedVersion { got: version });
    }
    let Some(body_len) = read_u32(input, 6) else {
        return Ok(None);
    };
    let body_len = body_len as usize;
    if body_len > MAX_HELLO_BODY {
        return Err(DecodeError::HelloTooLarge(body_len));
    }
    let Some(body) = input.get(HELLO_PREFIX..HELLO_PREFIX + body_len) else {
        return Ok(None);
    };
    const FIXED: usize = 16 + 1 + 1 + 2 + 2 + 4 + 8 + 8 + 2;
    if body.len() < FIXED {
        return Err(DecodeError::BadHello("body shorter than its fixed fields"));
    }
    let run_id: [u8; 16] = body[..16].try_into().expect("16 bytes");
    let mode = Mode::from_wire(body[16]).ok_or(DecodeError::BadHello("unknown mode"))?;
    let cc = crate::wire::Cc::from_wire(body[17])
        .ok_or(DecodeError::BadHello("unknown congestion controller"))?;
    let conn_index = read_u16(body, 18).expect("fixed");
    let conn_count = read_u16(body, 20).expect("fixed");
    let max_streams = read_u32(body, 22).expect("fixed");
    let file_count = read_u64(body, 26).expect("fixed");
    let total_bytes = read_u64(body, 34).expect("fixed");
    let token_len = read_u16(body, 42).expect("fixed") as usize;
    if token_len > MAX_TOKEN {
        return Err(DecodeError::BadHello("token longer than 1024 bytes"));
    }
    let token = body
        .get(FIXED..FIXED + token_len)
        .ok_or(DecodeError::BadHello(
            "token runs past the end of the hello",
        ))?
        .to_vec();
    if conn_count == 0 || conn_index >= conn_count {
        return Err(DecodeError::BadHello(
            "connection index outside the connection count",
        ));
    }
    // Bytes after the token are reserved for later versions' fields and ignored.
    let hello = Hello {
        run_id,
        token,
        mode,
        file_count,
        total_bytes,
        conn_index,
        conn_count,
        max_streams,
        cc,
    };
    Ok(Some((hello, HELLO_PREFIX + body_len)))
}

/// Incremental decoder of the receiver's replies.
#[derive(Debug, Default)]
pub struct ReplyDecoder;

impl ReplyDecoder {
    pub fn decode(&mut self, input: &[u8]) -> Result<Option<(Reply, usize)>, DecodeError> {
        let Some(&tag) = input.first() else {
            return Ok(None);
        };
        match tag {
            TAG_ACK => Ok(read_u64(input, 1).map(|n| (Reply::Ack(n), 9))),
            TAG_SYNCED => Ok(read_u64(input, 1).map(|n| (Reply::Synced(n), 9))),
            TAG_ERROR => {
                let Some((msg, n)) = read_message(input, 1)? else {
                    return Ok(None);
                };
                Ok(Some((Reply::Error(msg), n)))
            }
            TAG_COMPLETION => {
                let Some(len) = read_u32(input, 1) else {
                    return Ok(None);
                };
                let len = len as usize;
                if len > MAX_COMPLETION_BODY {
                    return Err(DecodeError::BadReply("completion report too large"));
                }
                let Some(body) = input.get(5..5 + len) else {
                    return Ok(None);
                };
                Ok(Some((Reply::Completion(decode_completion(body)?), 5 + len)))
            }
            _ => Err(DecodeError::BadReply("unknown reply type")),
        }
    }
}

fn decode_completion(body: &[u8]) -> Result<Completion, DecodeError> {
    let short = DecodeError::BadReply("completion report cut short");
    let field = |at| read_u64(body, at).ok_or(short.clone());
    let mut c = Completion {
        files: field(0)?,
        bytes: field(8)?,
        receiver_micros: field(16)?,
        sync_follows: match field(24)? {
            0 => false,
            1 => true,
            _ => {
                return Err(DecodeError::BadReply(
                    "completion's sync flag is neither 0 nor 1",
                ))
            }
        },
        peak_rss: field(32)?,
        peak_streams: field(40)?,
        connections: field(48)?,
        stream_window: field(56)?,
        conn_window: field(64)?,
        rcvbuf: field(72)?,
        latency: Vec::new(),
        errors: Vec::new(),
    };
    let latency_len = read_u32(body, 80).ok_or(short.clone())? as usize;
    c.latency = body
        .get(84..84 + latency_len)
        .ok_or(short.clone())?
        .to_vec();
    let mut at = 84 + latency_len;
    let count = read_u16(body, at).ok_or(short.clone())? as usize;
    if count > MAX_REPORTED_ERRORS {
        return Err(DecodeError::BadReply(
            "too many errors in completion report",
        ));
    }
    at += 2;
    for _ in 0..count {
        let (msg, next) = read_message(body, at)?.ok_or(short.clone())?;
        c.errors.push(msg);
        at = next;
    }
    Ok(c)
}

/// Reads `u16 length, UTF-8 bytes` at `at`; returns the message and the offset after it.
fn read_message(input: &[u8], at: usize) -> Result<Option<(String, usize)>, DecodeError> {
    let Some(len) = read_u16(input, at) else {
        return Ok(None);
    };
    let len = len as usize;
    if len > MAX_MESSAGE {
        return Err(DecodeError::BadReply("message too long"));
    }
    let Some(raw) = input.get(at + 2..at + 2 + len) else {
        return Ok(None);
    };
    Ok(Some((
        String::from_utf8_lossy(raw).into_owned(),
        at + 2 + len,
    )))
}

fn read_u16(input: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(input.get(at..at + 2)?.try_into().ok()?))
}

fn read_u32(input: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(input.get(at..at + 4)?.try_into().ok()?))
}

fn read_u64(input: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(input.get(at..at + 8)?.try_into().ok()?))
}

// ---- encoders ----

/// Appends a hello. Panics if the token exceeds [`MAX_TOKEN`] (the caller's bug).
pub fn encode_hello(hello: &Hello, out: &mut BytesMut) {
    assert!(hello.token.len() <= MAX_TOKEN, "token too long");
    let body_len = 16 + 1 + 1 + 2 + 2 + 4 + 8 + 8 + 2 + hello.token.len();
    out.reserve(HELLO_PREFIX + body_len);
    out.put_slice(&MAGIC);
    out.put_u16(PROTOCOL_VERSION);
    out.put_u32(body_len as u32);
    out.put_slice(&hello.run_id);
    out.put_u8(hello.mode.to_wire());
    out.put_u8(crate::wire::Cc::to_wire(hello.cc));
    out.put_u16(hello.conn_index);
    out.put_u16(hello.conn_count);
    out.put_u32(hello.max_streams);
    out.put_u64(hello.file_count);
    out.put_u64(hello.total_bytes);
    out.put_u16(hello.token.len() as u16);
    out.put_slice(&hello.token);
}

/// Bytes [`encode_file_header`] appends for `path`.
pub fn file_header_len(path: &RelPath) -> usize {
    1 + 2 + path.as_bytes().len() + 8 + 8
}

/// Appends a file header with a zero send time (see [`stamp_sent_at`]); the caller appends
/// exactly `size` content bytes after it.
pub fn encode_file_header(path: &RelPath, size: u64, out: &mut impl BufMut) {
    out.put_u8(TAG_FILE);
    put_path(path, out);
    out.put_u64(size);
    out.put_u64(0);
}

/// Writes the send time into an encoded file header at the start of `buf`, at the moment the
/// transport starts sending it. Returns false if `buf` does not start with a file header.
pub fn stamp_sent_at(buf: &mut [u8], sent_at_us: u64) -> bool {
    if buf.first() != Some(&TAG_FILE) {
        return false;
    }
    let Some(len) = read_u16(buf, 1) else {
        return false;
    };
    let at = 3 + len as usize + 8;
    match buf.get_mut(at..at + 8) {
        Some(slot) => {
            slot.copy_from_slice(&sent_at_us.to_be_bytes());
            true
        }
        None => false,
    }
}

pub fn encode_dir(path: &RelPath, out: &mut impl BufMut) {
    out.put_u8(TAG_DIR);
    put_path(path, out);
}

pub fn encode_end(end: &EndMarker, out: &mut impl BufMut) {
    out.put_u8(TAG_END);
    out.put_u64(end.files);
    out.put_u64(end.bytes);
}

pub fn encode_ack(files_closed: u64, out: &mut impl BufMut) {
    out.put_u8(TAG_ACK);
    out.put_u64(files_closed);
}

pub fn encode_synced(fsync_micros: u64, out: &mut impl BufMut) {
    out.put_u8(TAG_SYNCED);
    out.put_u64(fsync_micros);
}

pub fn encode_error(message: &str, out: &mut impl BufMut) {
    out.put_u8(TAG_ERROR);
    put_message(message, out);
}

pub fn encode_completion(c: &Completion, out: &mut BytesMut) {
    let mut body = BytesMut::with_capacity(64);
    body.put_u64(c.files);
    body.put_u64(c.bytes);
    body.put_u64(c.receiver_micros);
    body.put_u64(u64::from(c.sync_follows));
    body.put_u64(c.peak_rss);
    body.put_u64(c.peak_streams);
    body.put_u64(c.connections);
    body.put_u64(c.stream_window);
    body.put_u64(c.conn_window);
    body.put_u64(c.rcvbuf);
    // The histogram must leave room for the rest of the report under the body limit.
    let latency = if c.latency.len() <= MAX_COMPLETION_BODY / 2 {
        &c.latency[..]
    } else {
        &[][..]
    };
    body.put_u32(latency.len() as u32);
    body.put_slice(latency);
    let errors = &c.errors[..c.errors.len().min(MAX_REPORTED_ERRORS)];
    body.put_u16(errors.len() as u16);
    for e in errors {
        put_message(e, &mut body);
    }
    out.put_u8(TAG_COMPLETION);
    out.put_u32(body.len() as u32);
    out.put_slice(&body);
}

fn put_path(path: &RelPath, out: &mut impl BufMut) {
    let bytes = path.as_bytes();
    // RelPath guarantees ≤ 4,096 bytes by default; a u16 holds any limit we allow.
    out.put_u16(u16::try_from(bytes.len()).expect("validated path fits u16"));
    out.put_slice(bytes);
}

/// Writes a message cut to [`MAX_MESSAGE`] bytes at a character boundary.
fn put_message(message: &str, out: &mut impl BufMut) {
    let mut end = message.len().min(MAX_MESSAGE);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    out.put_u16(end as u16);
    out.put_slice(&message.as_bytes()[..end]);
}

/// Fuzz target bodies for the decoders, shared by the coverage-guided fuzzer (`fuzz/`) and the
/// normal test suite (which runs them over the seed corpus and seeded mutations). Each panics
/// on a broken invariant; a decode error is an expected outcome, never a failure.
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing {
    use super::*;
    use crate::relpath::fuzzing::assert_confined;

    /// A decoded record with its data owned, for comparing decodes of one stream.
    #[derive(Debug, PartialEq, Eq)]
    pub enum Owned {
        Hello(Hello),
        File(FileHeader),
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
                    match (out.last_mut(), owned) {
                        (Some(Owned::Data(a)), Owned::Data(b)) => a.extend(b),
                        (_, o) => out.push(o),
                    }
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
                    let step = pieces
                        .get(piece % pieces.len().max(1))
                        .copied()
                        .unwrap_or(0);
                    piece += 1;
                    fed = if step == 0 {
                        stream.len()
                    } else {
                        (fed + step).min(stream.len())
                    };
                }
            }
        }
        panic!("decoder made no progress on a {}-byte stream", stream.len());
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
}

#[cfg(test)]
mod tests {
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
    fn fuzz_replies_on_corpus_and_mutations() {
        run_body("replies", fuzzing::reply_seeds(), fuzzing::replies, 10_000);
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
}
