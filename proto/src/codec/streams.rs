//! The rules of each kind of sender stream, as decoder states over [`RecordDecoder`]:
//! - a bundle stream (TLS/TCP, plain TCP, one QUIC stream) carries, after its hello, files,
//!   folders and the end marker; a second hello is refused;
//! - a per-file stream (yamux, QUIC) carries exactly one file or block record and nothing
//!   else;
//! - the control stream of the per-file modes carries, after its hello, folders and the end
//!   marker, never a file record;
//! - [`FileStreamCount`]: a connection's file streams against its end marker's count.
//!
//! Pure: fed bytes, they return records or a typed [`StreamError`].

use super::*;

/// Why a stream broke its kind's rules (or its bytes were refused).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("a second hello in one stream")]
    SecondHello,
    #[error("a second file record on one file stream")]
    SecondFile,
    #[error("a file stream may carry only one file record")]
    NotAFile,
    #[error("an empty file stream")]
    EmptyFileStream,
    #[error("a file record on the control stream")]
    FileOnControl,
    #[error("the connection ended after {done} of {files} file streams")]
    TooFewStreams { done: u64, files: u64 },
    #[error(
        "a file stream beyond the {files} files this connection's end marker counts{}",
        .announced.map(|a| format!(" (the hello announced {a})")).unwrap_or_default()
    )]
    TooManyStreams {
        files: u64,
        /// The hello's file count, if it announced one.
        announced: Option<u64>,
    },
}

/// Which rules a [`StreamDecoder`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bundle,
    File { seen_file: bool },
    Control,
}

/// A sender stream's decoder with its kind's rules.
#[derive(Debug)]
pub struct StreamDecoder {
    records: RecordDecoder,
    kind: Kind,
}

impl StreamDecoder {
    /// A bundle stream, `records` already past its hello.
    pub fn bundle(records: RecordDecoder) -> Self {
        Self {
            records,
            kind: Kind::Bundle,
        }
    }

    /// A per-file stream: records only, exactly one file.
    pub fn file_stream(limits: DecodeLimits) -> Self {
        Self {
            records: RecordDecoder::records_only(limits),
            kind: Kind::File { seen_file: false },
        }
    }

    /// The control stream of a per-file mode, `records` already past its hello.
    pub fn control_stream(records: RecordDecoder) -> Self {
        Self {
            records,
            kind: Kind::Control,
        }
    }

    /// Content bytes still due for the file being decoded (see
    /// [`RecordDecoder::pending_data`]).
    pub fn pending_data(&self) -> u64 {
        self.records.pending_data()
    }

    /// Decodes the next record, refusing what this kind of stream may not carry. `Ok(None)`:
    /// more bytes are needed.
    pub fn decode<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<Option<(Record<'a>, usize)>, StreamError> {
        let Some((record, n)) = self.records.decode(input)? else {
            return Ok(None);
        };
        match (&mut self.kind, &record) {
            (Kind::Bundle, Record::Hello(_)) => return Err(StreamError::SecondHello),
            (Kind::Bundle, _) => {}
            (Kind::File { seen_file }, Record::File(_) | Record::Block(_)) => {
                if *seen_file {
                    return Err(StreamError::SecondFile);
                }
                *seen_file = true;
            }
            (Kind::File { .. }, Record::Data(_) | Record::FileEnd) => {}
            (Kind::File { .. }, _) => return Err(StreamError::NotAFile),
            (Kind::Control, Record::Dir(_) | Record::End(_)) => {}
            (Kind::Control, _) => return Err(StreamError::FileOnControl),
        }
        Ok(Some((record, n)))
    }

    /// Call at end of stream, with what is still undecoded: an error unless the stream ended
    /// where its kind may end (a bundle or control stream after its end marker; a file stream
    /// after its one file).
    pub fn finish(&self, unconsumed: &[u8]) -> Result<(), StreamError> {
        match self.kind {
            Kind::Bundle | Kind::Control => Ok(self.records.finish()?),
            Kind::File { seen_file } => {
                self.records.finish_file_stream(unconsumed)?;
                if !seen_file {
                    return Err(StreamError::EmptyFileStream);
                }
                Ok(())
            }
        }
    }
}

/// One connection's file streams against its end marker: complete once the end marker has
/// arrived and as many file streams as it counts are done; a file stream beyond that count is
/// refused.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FileStreamCount {
    done: u64,
    end: Option<EndMarker>,
}

impl FileStreamCount {
    /// One more file stream was received whole.
    pub fn stream_done(&mut self) {
        self.done += 1;
    }

    /// File streams received whole so far.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// The control stream's end marker arrived.
    pub fn ended(&mut self, end: EndMarker) {
        self.end = Some(end);
    }

    /// The end marker, once it has arrived.
    pub fn end(&self) -> Option<EndMarker> {
        self.end
    }

    /// The end marker has arrived and every file stream it counts is done.
    pub fn complete(&self) -> Option<EndMarker> {
        self.end.filter(|e| self.done >= e.files)
    }

    /// No file stream is in flight and no more will come: an error if the end marker counts
    /// more than arrived.
    pub fn no_more_streams(&self) -> Result<(), StreamError> {
        match self.end {
            Some(e) if self.done < e.files => Err(StreamError::TooFewStreams {
                done: self.done,
                files: e.files,
            }),
            _ => Ok(()),
        }
    }

    /// After completion: `extra` file streams arrived or in flight beyond the count (the hello
    /// announced `announced` files) are an error.
    pub fn extra_streams(&self, extra: usize, announced: Option<u64>) -> Result<(), StreamError> {
        match self.end {
            Some(e) if extra > 0 => Err(StreamError::TooManyStreams {
                files: e.files,
                announced,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, BytesMut};

    use super::*;

    fn path(s: &str) -> RelPath {
        RelPath::from_bytes(s.as_bytes(), &PathLimits::default()).unwrap()
    }

    fn file(name: &str, data: &[u8], out: &mut BytesMut) {
        encode_file_header(&path(name), data.len() as u64, out);
        out.put_slice(data);
    }

    /// Decodes everything `stream` holds, then finishes: the records' tags, or the error.
    fn run(mut d: StreamDecoder, stream: &[u8]) -> Result<Vec<&'static str>, StreamError> {
        let mut at = 0;
        let mut seen = Vec::new();
        while let Some((record, n)) = d.decode(&stream[at..])? {
            seen.push(match record {
                Record::Hello(_) => "hello",
                Record::File(_) => "file",
                Record::Block(_) => "block",
                Record::Data(_) => "data",
                Record::FileEnd => "file-end",
                Record::Dir(_) => "dir",
                Record::End(_) => "end",
            });
            at += n;
        }
        d.finish(&stream[at..])?;
        Ok(seen)
    }

    fn after_hello(mode: Mode) -> (RecordDecoder, BytesMut) {
        let mut s = BytesMut::new();
        encode_hello(
            &Hello {
                run_id: [1; 16],
                token: b"t".to_vec(),
                mode,
                file_count: 1,
                total_bytes: 2,
                conn_index: 0,
                conn_count: 1,
                max_streams: 8,
                cc: None,
            },
            &mut s,
        );
        let mut d = RecordDecoder::new(DecodeLimits::default());
        let (_, n) = d.decode(&s).unwrap().unwrap();
        (d, s.split_off(n))
    }

    #[test]
    fn a_file_stream_carries_exactly_one_file() {
        let limits = DecodeLimits::default();
        let mut one = BytesMut::new();
        file("a", b"hi", &mut one);
        assert_eq!(
            run(StreamDecoder::file_stream(limits), &one),
            Ok(vec!["file", "data", "file-end"])
        );
        let mut two = one.clone();
        file("b", b"", &mut two);
        assert_eq!(
            run(StreamDecoder::file_stream(limits), &two),
            Err(StreamError::SecondFile)
        );
        let mut dir = BytesMut::new();
        encode_dir(&path("d"), &mut dir);
        assert_eq!(
            run(StreamDecoder::file_stream(limits), &dir),
            Err(StreamError::NotAFile)
        );
        let mut end = one.clone();
        encode_end(&EndMarker { files: 1, bytes: 2 }, &mut end);
        assert_eq!(
            run(StreamDecoder::file_stream(limits), &end),
            Err(StreamError::NotAFile)
        );
        assert_eq!(
            run(StreamDecoder::file_stream(limits), b""),
            Err(StreamError::EmptyFileStream)
        );
        assert!(matches!(
            run(StreamDecoder::file_stream(limits), &one[..one.len() - 1]),
            Err(StreamError::Decode(DecodeError::Truncated(_)))
        ));
        assert_eq!(
            StreamError::SecondFile.to_string(),
            "a second file record on one file stream"
        );
    }

    #[test]
    fn a_file_stream_may_carry_one_block_and_the_control_stream_none() {
        let limits = DecodeLimits::default();
        let mut one = BytesMut::new();
        encode_block_header(&path("big"), 9, 3, 2, &mut one);
        one.put_slice(b"hi");
        assert_eq!(
            run(StreamDecoder::file_stream(limits), &one),
            Ok(vec!["block", "data", "file-end"])
        );
        let mut two = one.clone();
        two.extend_from_slice(&one);
        assert_eq!(
            run(StreamDecoder::file_stream(limits), &two),
            Err(StreamError::SecondFile)
        );
        let (d, mut s) = after_hello(Mode::QuicStreams);
        s.extend_from_slice(&one);
        assert_eq!(
            run(StreamDecoder::control_stream(d), &s),
            Err(StreamError::FileOnControl)
        );
    }

    #[test]
    fn the_control_stream_carries_no_file() {
        let (d, mut s) = after_hello(Mode::TcpStreams);
        encode_dir(&path("d"), &mut s);
        encode_end(&EndMarker { files: 1, bytes: 2 }, &mut s);
        assert_eq!(
            run(StreamDecoder::control_stream(d), &s),
            Ok(vec!["dir", "end"])
        );
        let (d, mut s) = after_hello(Mode::TcpStreams);
        file("a", b"hi", &mut s);
        assert_eq!(
            run(StreamDecoder::control_stream(d), &s),
            Err(StreamError::FileOnControl)
        );
        assert_eq!(
            StreamError::FileOnControl.to_string(),
            "a file record on the control stream"
        );
        let (d, mut s) = after_hello(Mode::TcpStreams);
        encode_dir(&path("d"), &mut s);
        assert!(matches!(
            run(StreamDecoder::control_stream(d), &s),
            Err(StreamError::Decode(DecodeError::Truncated(_)))
        ));
    }

    #[test]
    fn a_bundle_stream_carries_files_folders_and_its_end() {
        let (d, mut s) = after_hello(Mode::TcpBundle);
        file("a", b"hi", &mut s);
        encode_dir(&path("d"), &mut s);
        encode_end(&EndMarker { files: 1, bytes: 2 }, &mut s);
        assert_eq!(
            run(StreamDecoder::bundle(d), &s),
            Ok(vec!["file", "data", "file-end", "dir", "end"])
        );
        let (d, mut s) = after_hello(Mode::TcpBundle);
        encode_end(&EndMarker { files: 0, bytes: 0 }, &mut s);
        s.put_u8(0);
        assert_eq!(
            run(StreamDecoder::bundle(d), &s),
            Err(StreamError::Decode(DecodeError::AfterEnd))
        );
    }

    #[test]
    fn file_streams_are_counted_against_the_end_marker() {
        let mut c = FileStreamCount::default();
        c.stream_done();
        assert_eq!((c.complete(), c.no_more_streams()), (None, Ok(())));
        let end = EndMarker { files: 2, bytes: 9 };
        c.ended(end);
        assert_eq!(c.complete(), None);
        assert_eq!(
            c.no_more_streams(),
            Err(StreamError::TooFewStreams { done: 1, files: 2 })
        );
        assert_eq!(
            c.no_more_streams().unwrap_err().to_string(),
            "the connection ended after 1 of 2 file streams"
        );
        c.stream_done();
        assert_eq!((c.complete(), c.done()), (Some(end), 2));
        assert_eq!(c.extra_streams(0, Some(2)), Ok(()));
        assert_eq!(
            c.extra_streams(1, Some(2)).unwrap_err().to_string(),
            "a file stream beyond the 2 files this connection's end marker counts (the hello announced 2)"
        );
    }
}
