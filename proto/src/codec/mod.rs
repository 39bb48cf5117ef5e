//! The Shoal record format: encoder and incremental decoders. Pure code, no I/O.
//!
//! See `docs/wire-format.md` for the byte layout. The decoders take whatever bytes have arrived
//! and either return one decoded item with the number of bytes it used, or `None` to ask for
//! more. They never allocate more than a record header's worth (bounded by the limits) and never
//! trust a length before checking it against a limit.

mod blocks;
mod hello;
mod records;
mod replies;
mod streams;

#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) use tests::run_body as run_fuzz_body;

pub use blocks::*;
pub use hello::*;
pub use records::*;
pub use replies::*;
pub use streams::*;

pub(crate) use crate::relpath::{display_raw, PathError, PathLimits, RelPath};
pub(crate) use crate::wire::Mode;

/// First bytes of every sender stream.
pub const MAGIC: [u8; 4] = *b"SHOL";
/// The protocol version this build speaks.
/// 2: the completion says whether a sync report follows it (`Reply::Synced`).
/// 3: block records (`TAG_BLOCK`): a large file carried as blocks over the run's connections.
/// 4: the hello's file count and bytes may be unknown ([`TOTALS_UNKNOWN`]): the sender walks
///    its tree while it sends; the receiver enforces its limits on what arrives.
pub const PROTOCOL_VERSION: u16 = 4;
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
const TAG_BLOCK: u8 = 0x04;
const TAG_ACK: u8 = 0x81;
const TAG_COMPLETION: u8 = 0x82;
const TAG_ERROR: u8 = 0x83;
const TAG_SYNCED: u8 = 0x84;

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
    #[error("block of \"{path}\" at offset {offset}, {len} bytes, is outside the file's {size} bytes (or empty)")]
    BlockOutside {
        path: String,
        offset: u64,
        len: u64,
        size: u64,
    },
    #[error("unknown record type 0x{0:02x}")]
    UnknownTag(u8),
    #[error("data after the end marker")]
    AfterEnd,
    #[error("truncated stream: {0}")]
    Truncated(String),
    #[error("malformed reply: {0}")]
    BadReply(&'static str),
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
