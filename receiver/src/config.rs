//! The receiver's settings and their defaults.

use std::path::PathBuf;
use std::time::Duration;

use shoal_proto::codec::DecodeLimits;
use shoal_transport::config::FlowConfig;

/// Receiver settings. [`Default`] holds every default of `shoal recv`, each with its reason.
#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    /// Each run writes into `dest/<run id>/` (created for it), or into `dest` itself with
    /// `flat`; a run prepared over the control channel writes into its prepared folder.
    pub dest: PathBuf,
    /// Write every run into `dest` itself (runs share, and may overwrite, one tree).
    pub flat: bool,
    /// Sync the destination file system at the end of each run (timed separately).
    pub fsync: bool,
    /// Exit after the first authenticated run; the outcome is that run's.
    pub once: bool,
    /// Accept unencrypted TCP transfers (`send --plain`); the token still applies.
    pub allow_plain: bool,
    pub limits: DecodeLimits,
    /// Streams and windows this receiver allows (QUIC transport parameters, yamux).
    pub flow: FlowConfig,
    /// Longest a peer may stay silent (handshake included) before it is dropped.
    pub idle_timeout: Duration,
    /// Bytes received but not yet written that a run may hold.
    pub write_budget: usize,
    /// Writer threads per run (files of different folders are written in parallel).
    pub writers: usize,
    /// Connections (TCP and QUIC) served at once; past it a new one is refused at once.
    pub max_connections: usize,
    /// Most files one run may bring, on its running count (`claims.rs`); a hello announcing
    /// more is refused before anything is created.
    pub max_files: u64,
    /// Most content bytes one run may bring, as `max_files`.
    pub max_bytes: u64,
    /// Most folder records (empty folders) one run may bring, counted as they arrive, before
    /// each is created. A file's parent folders are bounded by `max_files` × the path depth.
    pub max_folders: u64,
    /// Deadline from accepting a connection to its decoded hello (TLS handshake included),
    /// whatever the peer sends meanwhile: bounds a slow-loris peer.
    pub hello_timeout: Duration,
    /// Serve control connections (authenticated sweeps on another host: a fresh folder per
    /// run under `dest`, hashing it from disk, removing it).
    pub control: bool,
    /// With `control`: let the sweep's host run the `tar-tcp` baseline into a prepared run's
    /// folder (a fixed `tar -x` fed by one connection from that host; docs/two-hosts.md).
    pub allow_baselines: bool,
    /// Print each run's line as one JSON object (`recv --json`).
    pub json: bool,
    /// QUIC modes: give each connection its whole share of `flow.conn_window` from the start
    /// instead of a window sized for its path (`recv --fixed-window`; proto/src/receive_window.rs).
    pub fixed_window: bool,
}

/// Default for [`ReceiverConfig::max_connections`]: past any sweep's connections, far below
/// what exhausts file descriptors.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Default for [`ReceiverConfig::max_files`]: past any tree Shoal is meant for, bounded so a
/// peer cannot fill the file system's inodes unchecked.
pub const DEFAULT_MAX_FILES: u64 = 10_000_000;
/// Default for [`ReceiverConfig::max_folders`]: a folder costs an inode as a file does, and a
/// tree has far fewer folders than files.
pub const DEFAULT_MAX_FOLDERS: u64 = 1_000_000;
/// Default for [`ReceiverConfig::max_bytes`]: 4 TiB.
pub const DEFAULT_MAX_BYTES: u64 = 4 << 40;
/// Default for [`ReceiverConfig::hello_timeout`]: a TLS handshake over any real path, and no
/// more, so a peer that trickles bytes is dropped.
pub const DEFAULT_HELLO_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for ReceiverConfig {
    fn default() -> Self {
        Self {
            dest: PathBuf::from("."),
            flat: false,
            fsync: false,
            once: false,
            allow_plain: false,
            limits: DecodeLimits::default(),
            flow: FlowConfig::default(),
            // Long past a sender's pauses (a slow walk, a stalled path), short enough to free
            // a dead peer's run.
            idle_timeout: Duration::from_secs(60),
            // Small on purpose: TCP data waits in the socket buffer and QUIC data in quinn's
            // receive window, so this only has to keep the writer busy.
            write_budget: 4 << 20,
            writers: default_writers(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_files: DEFAULT_MAX_FILES,
            max_bytes: DEFAULT_MAX_BYTES,
            max_folders: DEFAULT_MAX_FOLDERS,
            hello_timeout: DEFAULT_HELLO_TIMEOUT,
            control: false,
            allow_baselines: false,
            json: false,
            fixed_window: false,
        }
    }
}

/// Default for [`ReceiverConfig::writers`].
pub use shoal_pipeline::writer::default_writers;

/// What a connection over `max_connections` is told.
pub(crate) fn busy_message(config: &ReceiverConfig) -> String {
    format!(
        "too many connections: this receiver serves at most {} at once (recv --max-connections); try again later",
        config.max_connections
    )
}
