//! The receiver's replies: acknowledgements, the completion report, the sync report and
//! errors, with their incremental decoder.

use bytes::{BufMut, BytesMut};

use super::*;

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
    /// Receiver CPU time (user + system) from the run's admission to this report, µs. This
    /// and the two below travel after the errors, so a receiver that predates them is read as
    /// `None` (and an older sender ignores them).
    pub cpu_micros: Option<u64>,
    /// QUIC: segments per `sendmsg` (GSO) and per `recvmsg` (GRO) of the receiver's UDP
    /// socket, as quinn-udp reports them for it (1: no offload).
    pub udp_gso_segments: Option<u64>,
    pub udp_gro_segments: Option<u64>,
    /// Threads of the receiver's async runtime (its `--threads`, read back from the runtime);
    /// after the three above, so an older receiver's report reads as `None`.
    pub threads: Option<u64>,
    /// QUIC: the smallest connection receive window in effect during the run (the
    /// receiver sizes it for the path; equal to `conn_window` when that is the whole window).
    /// After `threads`, so an older receiver's report reads as `None`.
    pub conn_window_min: Option<u64>,
    /// Writer threads the run had (`recv --writers`); after `conn_window_min`, so an older
    /// receiver's report reads as `None`.
    pub writers: Option<u64>,
    /// Time the receiver's network side waited to hand decoded bytes to its writers (the
    /// write budget full, or the writers' queue), µs, summed over the run's connections and
    /// streams. On the wire as µs + 1 after `writers` (0: not reported), so a measured 0 is
    /// told from an older receiver's absent field.
    pub write_wait_micros: Option<u64>,
}

/// One decoded message from the receiver.
// A completion comes once per run: its size beside the other replies costs nothing.
#[allow(clippy::large_enum_variant)]
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
        cpu_micros: None,
        udp_gso_segments: None,
        udp_gro_segments: None,
        threads: None,
        conn_window_min: None,
        writers: None,
        write_wait_micros: None,
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
    // The trailer (0: not reported), absent from older receivers' reports.
    let trailer = |i: usize| read_u64(body, at + 8 * i).filter(|&v| v > 0);
    if read_u64(body, at + 16).is_some() {
        c.cpu_micros = trailer(0);
        c.udp_gso_segments = trailer(1);
        c.udp_gro_segments = trailer(2);
    }
    if read_u64(body, at + 24).is_some() {
        c.threads = trailer(3);
    }
    if read_u64(body, at + 32).is_some() {
        c.conn_window_min = trailer(4);
    }
    if read_u64(body, at + 40).is_some() {
        c.writers = trailer(5);
    }
    c.write_wait_micros = trailer(6).map(|v| v - 1);
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
    body.put_u64(c.cpu_micros.unwrap_or(0));
    body.put_u64(c.udp_gso_segments.unwrap_or(0));
    body.put_u64(c.udp_gro_segments.unwrap_or(0));
    body.put_u64(c.threads.unwrap_or(0));
    body.put_u64(c.conn_window_min.unwrap_or(0));
    body.put_u64(c.writers.unwrap_or(0));
    body.put_u64(c.write_wait_micros.map_or(0, |w| w.saturating_add(1)));
    out.put_u8(TAG_COMPLETION);
    out.put_u32(body.len() as u32);
    out.put_slice(&body);
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
