//! The receiver's control channel, used by a sweep on another host: prepare a fresh
//! destination folder for a run, hash that folder from disk, remove it. Pure code, no I/O: the
//! sockets are the receiver's and the sweep's; `shoal_pipeline::manifest` adds the manifest
//! glue (its `Manifest` is built from disk).
//!
//! Wire (inside TLS, on the receiver's usual port; see docs/wire-format.md):
//! - opening: `SHCT`, u16 version, u16 token length, token;
//! - then frames both ways: u32 body length, u8 kind, body. Requests and replies are JSON
//!   (kind 1); a manifest is binary (kind 2, [`encode_manifest`]).
//!
//! Every length is checked against a limit before anything is allocated for it.

use std::collections::BTreeMap;

use bytes::{BufMut, BytesMut};
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use crate::recvsettings::{RecvSettings, MAX_WRITERS};

/// First bytes of a control connection (a data connection starts with `SHOL`).
pub const CONTROL_MAGIC: [u8; 4] = *b"SHCT";
/// The control protocol version this build speaks.
pub const CONTROL_VERSION: u16 = 1;
/// Frame kind: a JSON request or reply.
pub const KIND_JSON: u8 = 1;
/// Frame kind: a binary manifest.
pub const KIND_MANIFEST: u8 = 2;
/// Largest request the receiver reads.
pub const MAX_REQUEST: u32 = 4096;
/// Most files one `write-floor` request may create.
pub const MAX_FLOOR_FILES: u64 = 200_000;
/// Most bytes one `write-floor` request may write (1 GiB).
pub const MAX_FLOOR_BYTES: u64 = 1 << 30;
/// Most folders one `write-floor` request may spread its files over.
pub const MAX_FLOOR_DIRS: u32 = 4096;
/// Largest frame the sweep reads (a manifest of millions of files fits).
pub const MAX_REPLY: u32 = 1 << 30;
/// Longest path a manifest entry may name (far above any receiver's path limit).
const MAX_MANIFEST_PATH: u32 = 1 << 16;
/// Longest token accepted in the opening.
const MAX_TOKEN: usize = 1024;

/// What a control peer asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    /// Facts about the receiving host: version, kernel, destination file system, free space.
    Info,
    /// The receiving host's counters a sweep reads before and after each run (UDP drops,
    /// CPU steal): cheap, unlike `Info`'s facts.
    Counters,
    /// Create a new, empty folder for this run under the destination; the run's data
    /// connections (same run id) then write there, with `settings` in effect for them alone.
    Prepare {
        run_id: String,
        #[serde(default, skip_serializing_if = "RecvSettings::is_empty")]
        settings: RecvSettings,
    },
    /// Hash the run's folder from disk; the reply is followed by a manifest frame.
    Hash { run_id: String },
    /// Remove the run's folder.
    Cleanup { run_id: String },
    /// The receiving host's wall clock (`wall_clock_us`), for the sender's estimate of the
    /// offset between the two hosts' clocks.
    Clock,
    /// Path probe: read probe data frames from this connection until the empty one that ends
    /// them, discarding them (bounded in time and bytes), and reply with what arrived
    /// (`bulk`), the first `warmup_ms` counted apart.
    ProbeSink { warmup_ms: u64 },
    /// Path probe: send probe data frames for `duration_ms` (capped), then the empty one, then
    /// the reply with this end's TCP_INFO once every byte was acknowledged (`bulk`), and
    /// what it acknowledged after the first `warmup_ms` (`bulk.acked`).
    ProbeSource {
        duration_ms: u64,
        #[serde(default)]
        warmup_ms: u64,
    },
    /// The receiver's write floor: its own writer pool creates `files` files of `file_bytes`
    /// bytes each, spread over `dirs` folders, in a fresh folder `run_id` under its
    /// destination, with no network involved (a small untimed warm-up first), then removes
    /// it. The reply's `seconds` is the timed part and `facts` hold `files`, `bytes`,
    /// `files_per_s`, `bytes_per_s`, `cpu_busy`. Bounded by [`MAX_FLOOR_FILES`],
    /// [`MAX_FLOOR_BYTES`] and the receiver's own per-run limits.
    WriteFloor {
        run_id: String,
        files: u64,
        file_bytes: u64,
        dirs: u32,
    },
    /// Baseline `tar-tcp` (receiver started with `--allow-baselines`): listen on an ephemeral
    /// port for one connection from the asking host and unpack it with `tar -x` into the run's
    /// prepared folder; the reply's `port` names the port. `limit_s` bounds the whole run on
    /// the receiving host (tar is killed and reaped past it).
    TarTcpStart { run_id: String, limit_s: u64 },
    /// Wait for that `tar -x` to exit (or, with `stop`, kill it first) and report how it
    /// ended; the run's folder can be hashed only after this.
    TarTcpWait { run_id: String, stop: bool },
}

/// The receiver's answer to one request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// Prepare: the folder the run writes to, as the receiving host names it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dest: String,
    /// Hash: seconds spent hashing on the receiving host.
    #[serde(default)]
    pub seconds: f64,
    /// Info: free facts, e.g. `version`, `kernel`, `host`, `dest_fs`, `free_bytes`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub facts: BTreeMap<String, String>,
    /// Clock: the receiving host's wall clock when it answered, µs since the Unix epoch — the
    /// clock the per-file latency stamps are read from.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wall_clock_us: u64,
    /// ProbeSink / ProbeSource: the bulk flow's figures (see `crate::probe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bulk: Option<crate::probe::BulkReport>,
    /// TarTcpStart: the port the receiving `tar -x` listens on.
    #[serde(default, skip_serializing_if = "is_zero_port")]
    pub port: u16,
    /// Prepare: the receiver settings the run's connections get (the run's own, else the
    /// receiver's), every per-run setting filled in. Absent from a receiver that cannot set
    /// them per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_effect: Option<RecvSettings>,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

fn is_zero_port(x: &u16) -> bool {
    *x == 0
}

impl Reply {
    pub fn failed(error: impl Into<String>) -> Self {
        Reply {
            ok: false,
            error: error.into(),
            ..Default::default()
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ControlError {
    #[error("not a control connection (bad magic {0:02x?})")]
    BadMagic([u8; 4]),
    #[error("unsupported control protocol version {0} (this build speaks {CONTROL_VERSION})")]
    Version(u16),
    #[error("token of {0} bytes is longer than the limit of {MAX_TOKEN}")]
    TokenTooLong(usize),
    #[error("frame of {len} bytes is larger than the limit of {max}")]
    FrameTooLarge { len: u32, max: u32 },
    #[error("empty frame")]
    EmptyFrame,
    #[error("bad manifest: {0}")]
    BadManifest(String),
}

/// A run id as the wire and the sweep write it: 32 lowercase hex digits.
pub fn parse_run_id(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut id = [0u8; 16];
    hex::decode_to_slice(s, &mut id).ok()?;
    Some(id)
}

pub fn encode_open(token: &[u8], out: &mut BytesMut) {
    assert!(token.len() <= MAX_TOKEN, "token too long");
    out.put_slice(&CONTROL_MAGIC);
    out.put_u16(CONTROL_VERSION);
    out.put_u16(token.len() as u16);
    out.put_slice(token);
}

/// Decodes the opening: `Ok(None)` until it is complete; on success the token and the bytes
/// it took.
pub fn decode_open(input: &[u8]) -> Result<Option<(Vec<u8>, usize)>, ControlError> {
    let have = input.len().min(4);
    if input[..have] != CONTROL_MAGIC[..have] {
        let mut got = [0u8; 4];
        got[..have].copy_from_slice(&input[..have]);
        return Err(ControlError::BadMagic(got));
    }
    if input.len() < 8 {
        return Ok(None);
    }
    let version = u16::from_be_bytes([input[4], input[5]]);
    if version != CONTROL_VERSION {
        return Err(ControlError::Version(version));
    }
    let len = u16::from_be_bytes([input[6], input[7]]) as usize;
    if len > MAX_TOKEN {
        return Err(ControlError::TokenTooLong(len));
    }
    if input.len() < 8 + len {
        return Ok(None);
    }
    Ok(Some((input[8..8 + len].to_vec(), 8 + len)))
}

pub fn encode_frame(kind: u8, body: &[u8], out: &mut BytesMut) {
    let len = u32::try_from(body.len() + 1).expect("frame under 4 GiB");
    out.put_u32(len);
    out.put_u8(kind);
    out.put_slice(body);
}

/// Decodes one frame: `Ok(None)` until complete; on success (kind, body range, bytes taken).
/// A length over `max` is refused as soon as the length is in.
pub fn decode_frame(
    input: &[u8],
    max: u32,
) -> Result<Option<(u8, std::ops::Range<usize>, usize)>, ControlError> {
    if input.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([input[0], input[1], input[2], input[3]]);
    if len == 0 {
        return Err(ControlError::EmptyFrame);
    }
    if len > max {
        return Err(ControlError::FrameTooLarge { len, max });
    }
    let end = 4 + len as usize;
    if input.len() < end {
        return Ok(None);
    }
    Ok(Some((input[4], 5..end, end)))
}

const ENTRY_FILE: u8 = 1;
const ENTRY_DIR: u8 = 2;

/// One entry of a manifest: a file with its size and SHA-256, or a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    File { size: u64, sha256: [u8; 32] },
    Dir,
}

/// A manifest's entries by relative path bytes.
pub type Entries = BTreeMap<Vec<u8>, Entry>;

/// A manifest as bytes: u64 entry count, u64 skipped, then per entry u32 path length, path,
/// u8 kind (1 file: u64 size, 32-byte SHA-256; 2 folder).
pub fn encode_manifest_entries(entries: &Entries, skipped: u64) -> Vec<u8> {
    let mut out = BytesMut::with_capacity(16 + entries.len() * 64);
    out.put_u64(entries.len() as u64);
    out.put_u64(skipped);
    for (path, entry) in entries {
        out.put_u32(path.len() as u32);
        out.put_slice(path);
        match entry {
            Entry::File { size, sha256 } => {
                out.put_u8(ENTRY_FILE);
                out.put_u64(*size);
                out.put_slice(sha256);
            }
            Entry::Dir => out.put_u8(ENTRY_DIR),
        }
    }
    out.to_vec()
}

/// The inverse of [`encode_manifest_entries`]: the entries and the skipped count. Never
/// trusts a count or a length.
pub fn decode_manifest_entries(mut input: &[u8]) -> Result<(Entries, u64), ControlError> {
    fn take<'a>(input: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8], ControlError> {
        if input.len() < n {
            return Err(ControlError::BadManifest(format!("truncated in {what}")));
        }
        let (head, rest) = input.split_at(n);
        *input = rest;
        Ok(head)
    }
    fn u64_of(b: &[u8]) -> u64 {
        u64::from_be_bytes(b.try_into().expect("8 bytes"))
    }
    let count = u64_of(take(&mut input, 8, "the entry count")?);
    let skipped = u64_of(take(&mut input, 8, "the skipped count")?);
    let mut entries = Entries::new();
    for i in 0..count {
        let len = u32::from_be_bytes(take(&mut input, 4, "a path length")?.try_into().unwrap());
        if len > MAX_MANIFEST_PATH {
            return Err(ControlError::BadManifest(format!(
                "entry {i}: path of {len} bytes"
            )));
        }
        let path = take(&mut input, len as usize, "a path")?.to_vec();
        let entry = match take(&mut input, 1, "an entry kind")?[0] {
            ENTRY_FILE => {
                let size = u64_of(take(&mut input, 8, "a size")?);
                let sha256 = take(&mut input, 32, "a hash")?.try_into().unwrap();
                Entry::File { size, sha256 }
            }
            ENTRY_DIR => Entry::Dir,
            k => {
                return Err(ControlError::BadManifest(format!(
                    "entry {i}: unknown kind {k}"
                )))
            }
        };
        if entries.insert(path, entry).is_some() {
            return Err(ControlError::BadManifest(format!(
                "entry {i}: a path listed twice"
            )));
        }
    }
    if !input.is_empty() {
        return Err(ControlError::BadManifest(format!(
            "{} bytes after the last entry",
            input.len()
        )));
    }
    Ok((entries, skipped))
}

/// Fuzz body for the control channel's decoders (shared by `fuzz/` and the test suite).
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing {
    use super::*;

    /// Byte 0 picks the decoder (0: opening, 1: frames under a small limit, 2: frames under
    /// the request limit, else: a manifest); the rest is its input. Every decoded item must
    /// re-encode to what decodes the same, and no prefix of them may decode to anything.
    pub fn control(data: &[u8]) {
        let Some((&pick, input)) = data.split_first() else {
            return;
        };
        match pick {
            0 => {
                if let Ok(Some((token, n))) = decode_open(input) {
                    assert_eq!(n, 8 + token.len());
                    let mut again = BytesMut::new();
                    encode_open(&token, &mut again);
                    assert_eq!(&again[..], &input[..n]);
                    for cut in 0..n {
                        assert_eq!(decode_open(&input[..cut]), Ok(None), "cut {cut}");
                    }
                }
            }
            1 | 2 => {
                let max = if pick == 1 { 64 } else { MAX_REQUEST };
                let mut at = 0;
                while let Ok(Some((kind, body, n))) = decode_frame(&input[at..], max) {
                    let frame = &input[at..at + n];
                    assert!(n as u64 <= 4 + u64::from(max));
                    assert_eq!(kind, frame[4]);
                    let mut again = BytesMut::new();
                    encode_frame(kind, &frame[body], &mut again);
                    assert_eq!(&again[..], frame);
                    for cut in 0..n.min(256) {
                        assert_eq!(decode_frame(&frame[..cut], max), Ok(None), "cut {cut}");
                    }
                    at += n;
                }
            }
            _ => {
                if let Ok((entries, skipped)) = decode_manifest_entries(input) {
                    // Entries may arrive in any order; what they re-encode to decodes the same.
                    let again = encode_manifest_entries(&entries, skipped);
                    assert_eq!(again.len(), input.len());
                    assert_eq!(decode_manifest_entries(&again), Ok((entries, skipped)));
                }
            }
        }
    }

    /// A folder and a file in it.
    pub fn sample_entries() -> Entries {
        let mut entries = Entries::new();
        entries.insert(b"d".to_vec(), Entry::Dir);
        entries.insert(
            b"d/f".to_vec(),
            Entry::File {
                size: 3,
                sha256: [9; 32],
            },
        );
        entries
    }

    /// Seeds: an opening, frames, a manifest, and lies about their lengths.
    pub fn control_seeds() -> Vec<(&'static str, Vec<u8>)> {
        let with = |pick: u8, b: &[u8]| {
            let mut v = vec![pick];
            v.extend_from_slice(b);
            v
        };
        let mut open = BytesMut::new();
        encode_open(b"secret-token", &mut open);
        let mut frames = BytesMut::new();
        encode_frame(KIND_JSON, br#"{"op":"prepare","run_id":"00"}"#, &mut frames);
        encode_frame(KIND_MANIFEST, b"\x00", &mut frames);
        let manifest = encode_manifest_entries(&sample_entries(), 1);
        let mut lie = manifest.clone();
        lie[..8].copy_from_slice(&u64::MAX.to_be_bytes());
        vec![
            ("open", with(0, &open)),
            ("open-long-token", with(0, b"SHCT\x00\x01\xff\xff")),
            ("frames-small", with(1, &frames)),
            ("frames", with(2, &frames)),
            ("frame-too-large", with(2, &[0xff, 0xff, 0xff, 0xff, 1])),
            ("manifest", with(3, &manifest)),
            ("manifest-count-lie", with(3, &lie)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_round_trips_at_every_split() {
        let mut out = BytesMut::new();
        encode_open(b"secret-token", &mut out);
        for cut in 0..out.len() {
            assert_eq!(decode_open(&out[..cut]), Ok(None), "cut {cut}");
        }
        assert_eq!(
            decode_open(&out),
            Ok(Some((b"secret-token".to_vec(), out.len())))
        );
    }

    #[test]
    fn a_data_hello_is_not_a_control_opening() {
        assert!(matches!(
            decode_open(b"SHOL\x00\x01"),
            Err(ControlError::BadMagic(_))
        ));
        assert!(matches!(decode_open(b"SHC"), Ok(None)));
        let mut out = BytesMut::new();
        encode_open(b"t", &mut out);
        out[5] = 9;
        assert_eq!(decode_open(&out), Err(ControlError::Version(9)));
        let mut long = BytesMut::from(&b"SHCT\x00\x01"[..]);
        long.put_u16(5000);
        assert_eq!(decode_open(&long), Err(ControlError::TokenTooLong(5000)));
    }

    #[test]
    fn frames_are_bounded_before_their_bytes_arrive() {
        let mut out = BytesMut::new();
        encode_frame(KIND_JSON, b"{\"op\":\"info\"}", &mut out);
        for cut in 0..out.len() {
            assert_eq!(
                decode_frame(&out[..cut], MAX_REQUEST),
                Ok(None),
                "cut {cut}"
            );
        }
        let (kind, body, n) = decode_frame(&out, MAX_REQUEST).unwrap().unwrap();
        assert_eq!((kind, n), (KIND_JSON, out.len()));
        let req: Request = serde_json::from_slice(&out[body]).unwrap();
        assert_eq!(req, Request::Info);
        assert_eq!(
            decode_frame(&[0xff, 0xff, 0xff, 0xff], MAX_REQUEST),
            Err(ControlError::FrameTooLarge {
                len: u32::MAX,
                max: MAX_REQUEST
            })
        );
        assert_eq!(
            decode_frame(&[0, 0, 0, 0], MAX_REQUEST),
            Err(ControlError::EmptyFrame)
        );
    }

    #[test]
    fn baseline_requests_read_as_json() {
        let start: Request =
            serde_json::from_str(r#"{"op":"tar-tcp-start","run_id":"00","limit_s":60}"#).unwrap();
        assert_eq!(
            start,
            Request::TarTcpStart {
                run_id: "00".into(),
                limit_s: 60
            }
        );
        let wait = Request::TarTcpWait {
            run_id: "00".into(),
            stop: true,
        };
        let text = serde_json::to_string(&wait).unwrap();
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), wait);
        // The port travels only in the reply that names one.
        assert!(!serde_json::to_string(&Reply::default())
            .unwrap()
            .contains("port"));
    }

    #[test]
    fn run_ids_are_32_lowercase_hex_digits() {
        assert!(parse_run_id("00112233445566778899aabbccddeeff").is_some());
        for bad in [
            "",
            "../../etc",
            "00112233445566778899AABBCCDDEEFF",
            "00112233445566778899aabbccddeef",
            "00112233445566778899aabbccddeeff0",
            "0011223344556677/899aabbccddeeff",
        ] {
            assert!(parse_run_id(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn fuzz_control_on_seeds_and_mutations() {
        crate::codec::run_fuzz_body(
            "control",
            fuzzing::control_seeds(),
            fuzzing::control,
            10_000,
        );
    }

    #[test]
    fn manifest_entries_round_trip_at_every_cut() {
        let entries = fuzzing::sample_entries();
        let bytes = encode_manifest_entries(&entries, 3);
        assert_eq!(decode_manifest_entries(&bytes), Ok((entries, 3)));
        for cut in 0..bytes.len() {
            assert!(decode_manifest_entries(&bytes[..cut]).is_err(), "cut {cut}");
        }
    }
}
