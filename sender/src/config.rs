//! The sender's settings, and the faults tests may ask it to make.

use std::path::PathBuf;
use std::time::Duration;

use shoal_pipeline::reader::{Chunk, ChunkKind, ReaderConfig};
use shoal_transport::config::{Cc, FlowConfig, Mode};
use shoal_transport::identity::Pin;
use shoal_transport::transport::YAMUX_STREAM_GRANT;

/// `--block-size`'s default: files larger than this are carried as blocks spread over the
/// run's connections (docs/transports.md says how it was chosen).
pub const DEFAULT_BLOCK_SIZE: u64 = 16 << 20;

/// `--read-ahead`'s default for `mode`: QUIC modes need little, since quinn's send buffer
/// already holds up to a send window of data ready to go, and 8 MiB cost a QUIC sender ~5 MB
/// more RSS (docs/benchmarks.md, Memory); TCP modes read 8 MiB ahead to hide file latency.
pub fn default_read_ahead(mode: Mode) -> usize {
    if mode.is_quic() {
        2 << 20
    } else {
        8 << 20
    }
}

/// Sender settings. [`Default`] holds every default of `shoal send`; `to`, `src`, `pin` and
/// `token` have none (empty) and must be set.
#[derive(Debug, Clone)]
pub struct SendConfig {
    /// Receiver address, `host:port` (TCP and UDP on the same port).
    pub to: String,
    pub src: PathBuf,
    pub mode: Mode,
    /// TCP modes without TLS (the receiver must allow it); the token still applies.
    pub plain: bool,
    pub pin: Pin,
    pub token: Vec<u8>,
    pub reader: ReaderConfig,
    pub flow: FlowConfig,
    pub connect_timeout: Duration,
    /// Longest the whole run may take; `None` waits as long as the receiver keeps talking.
    pub timeout: Option<Duration>,
    /// Write the full per-file latency distribution here (CSV).
    pub latency_out: Option<PathBuf>,
    /// Congestion controller (`None`: the system default for TCP, CUBIC for QUIC).
    pub cc: Option<Cc>,
    /// Independent connections sharing the files (1..=64).
    pub connections: u16,
    /// Files larger than this are carried as blocks of this size spread over the connections
    /// (every mode but tcp-wait). `None`: [`DEFAULT_BLOCK_SIZE`] in the bundled modes; the
    /// per-file-stream modes do not split on one connection and split into 32 MiB blocks on
    /// several ([`SendConfig::block_size_in_effect`]).
    pub block_size: Option<u64>,
    /// Sample every connection's statistics this often into `stats_out`, and what the
    /// receiver reported ready into `receiver_series_out`.
    pub stats_interval: Option<Duration>,
    pub stats_out: Option<PathBuf>,
    pub receiver_series_out: Option<PathBuf>,
    /// Print a progress line on stderr this often (`send --interval`).
    pub progress: Option<crate::ProgressConfig>,
    /// Ctrl-C (SIGINT) ends the run as failed with the error "interrupted", after printing
    /// the figures so far on stderr (`shoal send`; off where a caller handles the signal).
    pub stop_on_ctrl_c: bool,
    /// The run's id (`None`: random). A sweep sets it to the id it prepared a folder for on a
    /// receiver with `--control`.
    pub run_id: Option<[u8; 16]>,
    /// How the congestion window starts: `--resume`, `--initial-window` (QUIC).
    pub start: crate::start_window::StartConfig,
    /// The build that runs (recorded in the row).
    pub provenance: shoal_row::provenance::Provenance,
    pub hooks: TestHooks,
}

impl Default for SendConfig {
    fn default() -> Self {
        let mode = Mode::TcpBundle;
        Self {
            to: String::new(),
            src: PathBuf::new(),
            // The mode with the fewest moving parts: one TLS/TCP stream of records.
            mode,
            plain: false,
            pin: Pin([0; 32]),
            token: Vec::new(),
            reader: ReaderConfig {
                budget: default_read_ahead(mode),
                ..Default::default()
            },
            flow: FlowConfig::default(),
            // Past any handshake on a working path, short enough to fail fast on a dead one.
            connect_timeout: Duration::from_secs(10),
            timeout: None,
            latency_out: None,
            cc: None,
            // One connection is the protocol's own behaviour; more is an experiment's choice.
            connections: 1,
            block_size: None,
            stats_interval: None,
            stats_out: None,
            receiver_series_out: None,
            progress: None,
            stop_on_ctrl_c: false,
            run_id: None,
            start: crate::start_window::StartConfig::default(),
            provenance: shoal_row::provenance::Provenance::default(),
            hooks: TestHooks::default(),
        }
    }
}

/// Deliberate faults for tests of the receiver's defences. Never set by normal use.
#[derive(Debug, Clone, Copy, Default)]
pub struct TestHooks {
    /// Corrupt the record tag of this file (0-based index in walk order).
    pub corrupt_file: Option<usize>,
    /// Hand each large file's blocks out last first (blocks arrive out of order).
    pub reverse_blocks: bool,
}

impl TestHooks {
    pub(crate) fn apply(&self, chunk: &mut Chunk) {
        if let ChunkKind::File {
            index, first: true, ..
        } = chunk.kind
        {
            if Some(index) == self.corrupt_file {
                chunk.bytes[0] = 0x7f;
            }
        }
    }
}

impl SendConfig {
    /// The block size in effect: `None` when files are never split. tcp-wait acknowledges each
    /// file whole. Unless `--block-size` is given, the per-file-stream modes split differently
    /// from [`DEFAULT_BLOCK_SIZE`]: every block there is a stream of its own, whose window the
    /// receiver grants a round trip after the block's header arrives. So on one connection,
    /// where blocks spread nothing, they do not split; on several, a block is what one stream
    /// is granted at once ([`YAMUX_STREAM_GRANT`]). On 141 ms / 1 Gbit/s, one 256 MiB file in
    /// 16 MiB blocks, tcp-streams made 0.71 × tcp-bundle's rate on one connection and 0.94 on
    /// eight; one stream 1.07, and 32 MiB blocks on eight 0.995
    /// (docs/decisions/0027-per-file-stream-blocks.md).
    pub fn block_size_in_effect(&self) -> Option<u64> {
        match self.block_size {
            _ if self.mode == Mode::TcpWait => None,
            Some(size) => Some(size.max(1)),
            None if !self.mode.per_file_streams() => Some(DEFAULT_BLOCK_SIZE),
            None if self.connections <= 1 => None,
            None => Some(u64::from(YAMUX_STREAM_GRANT)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_file_stream_modes_split_only_over_several_connections_unless_asked() {
        let at = |mode, connections, block_size| {
            SendConfig {
                mode,
                connections,
                block_size,
                ..SendConfig::default()
            }
            .block_size_in_effect()
        };
        let grant = Some(u64::from(YAMUX_STREAM_GRANT));
        assert_eq!(at(Mode::TcpBundle, 1, None), Some(DEFAULT_BLOCK_SIZE));
        assert_eq!(at(Mode::QuicBundle, 8, None), Some(DEFAULT_BLOCK_SIZE));
        assert_eq!(at(Mode::TcpStreams, 1, None), None);
        assert_eq!(at(Mode::QuicStreams, 1, None), None);
        assert_eq!(at(Mode::TcpStreams, 8, None), grant);
        assert_eq!(at(Mode::TcpStreams, 1, Some(1 << 20)), Some(1 << 20));
        assert_eq!(at(Mode::TcpWait, 8, Some(1 << 20)), None);
    }
}
