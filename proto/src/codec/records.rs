//! The sender's records after the hello: files, folders, the end marker; the incremental
//! decoder of a whole sender stream (the hello included) and of a per-file stream.

use bytes::BufMut;

use super::*;

/// Announces one file; exactly `size` bytes of content follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    pub path: RelPath,
    pub size: u64,
    /// Sender's wall clock (µs since the Unix epoch) when it started sending this file; the
    /// receiver subtracts it from its own wall clock at close to get the file's latency.
    pub sent_at_us: u64,
}

/// Announces one block of a file larger than the sender's block size: exactly `len` bytes
/// of content follow it, to be written at `offset` of the file `path` whose whole size is
/// `size`. The decoder checks `1 <= len` and `offset + len <= size` (a block never outside its
/// file); that blocks of one file never overlap and cover it exactly once is the run's
/// [`BlockLedger`]'s to check, since they arrive on any connection of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockHeader {
    pub path: RelPath,
    pub size: u64,
    pub offset: u64,
    pub len: u64,
    /// Sender's wall clock (µs since the Unix epoch) when it started sending this block.
    pub sent_at_us: u64,
}

/// The sender's last record: what it sent, for the receiver to cross-check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndMarker {
    pub files: u64,
    pub bytes: u64,
}

/// One decoded item of a sender stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Record<'a> {
    Hello(Hello),
    File(FileHeader),
    /// One block of a file; its `len` content bytes follow as `Data`, then `FileEnd`.
    Block(BlockHeader),
    /// Content of the current file or block: the first bytes of the input, borrowed.
    Data(&'a [u8]),
    /// The current file's (or block's) content is complete.
    FileEnd,
    /// An (empty) folder to create.
    Dir(RelPath),
    End(EndMarker),
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
                self.check_size(&path, size)?;
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
            TAG_BLOCK => {
                let Some((path, at)) = self.decode_path(input)? else {
                    return Ok(None);
                };
                let (Some(size), Some(offset), Some(len), Some(sent_at_us)) = (
                    read_u64(input, at),
                    read_u64(input, at + 8),
                    read_u64(input, at + 16),
                    read_u64(input, at + 24),
                ) else {
                    return Ok(None);
                };
                self.check_size(&path, size)?;
                if len == 0 || offset.checked_add(len).is_none_or(|end| end > size) {
                    return Err(DecodeError::BlockOutside {
                        path: path.to_string(),
                        offset,
                        len,
                        size,
                    });
                }
                self.state = State::InFile {
                    path: path.clone(),
                    remaining: len,
                };
                let header = BlockHeader {
                    path,
                    size,
                    offset,
                    len,
                    sent_at_us,
                };
                Ok(Some((Record::Block(header), at + 32)))
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

    /// Refuses a file larger than the per-file limit.
    fn check_size(&self, path: &RelPath, size: u64) -> Result<(), DecodeError> {
        if size > self.limits.max_file_size {
            return Err(DecodeError::FileTooLarge {
                path: path.to_string(),
                size,
                max: self.limits.max_file_size,
            });
        }
        Ok(())
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

/// Bytes [`encode_block_header`] appends for `path`.
pub fn block_header_len(path: &RelPath) -> usize {
    1 + 2 + path.as_bytes().len() + 8 * 4
}

/// Appends a block header with a zero send time (see [`stamp_sent_at`]); the caller appends
/// exactly `len` content bytes after it.
pub fn encode_block_header(
    path: &RelPath,
    size: u64,
    offset: u64,
    len: u64,
    out: &mut impl BufMut,
) {
    out.put_u8(TAG_BLOCK);
    put_path(path, out);
    out.put_u64(size);
    out.put_u64(offset);
    out.put_u64(len);
    out.put_u64(0);
}

/// Writes the send time into an encoded file or block header at the start of `buf`, at the
/// moment the transport starts sending it. Returns false if `buf` does not start with one.
pub fn stamp_sent_at(buf: &mut [u8], sent_at_us: u64) -> bool {
    let skip = match buf.first() {
        Some(&TAG_FILE) => 8,
        Some(&TAG_BLOCK) => 24,
        _ => return false,
    };
    let Some(len) = read_u16(buf, 1) else {
        return false;
    };
    let at = 3 + len as usize + skip;
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

fn put_path(path: &RelPath, out: &mut impl BufMut) {
    let bytes = path.as_bytes();
    // RelPath guarantees ≤ 4,096 bytes by default; a u16 holds any limit we allow.
    out.put_u16(u16::try_from(bytes.len()).expect("validated path fits u16"));
    out.put_slice(bytes);
}
