//! Shoal receiver: accepts authenticated transfers and writes them inside its destination.
//!
//! One address serves every mode: TCP (TLS, or plain where allowed) and QUIC on the same port.
//! Each connection is handled on its own task, so a bad or slow peer never stops the receiver
//! from serving the next one. A run starts only after the hello's token matches; nothing is
//! created before that.

mod bundle;
mod claims;
mod control;
mod hub;
mod prefixed;
mod quic;
mod run;
mod streams;
mod tcp;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::BytesMut;
use shoal_common::codec::{DecodeLimits, Hello, Record, RecordDecoder};
use shoal_common::config::FlowConfig;
use shoal_common::identity::Identity;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};

pub use shoal_common::codec::Completion;

/// Receiver settings.
#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    pub dest: PathBuf,
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
    /// Connections (TCP and QUIC) served at once; past it a new one is refused at once.
    pub max_connections: usize,
    /// Most files one run may announce in its hello (refused before anything is created).
    pub max_files: u64,
    /// Most content bytes one run may announce in its hello.
    pub max_bytes: u64,
    /// Deadline from accepting a connection to its decoded hello (TLS handshake included),
    /// whatever the peer sends meanwhile: bounds a slow-loris peer.
    pub hello_timeout: Duration,
    /// Serve control connections (authenticated sweeps on another host: a fresh folder per
    /// run under `dest`, hashing it from disk, removing it).
    pub control: bool,
}

/// Default for [`ReceiverConfig::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Default for [`ReceiverConfig::max_files`].
pub const DEFAULT_MAX_FILES: u64 = 10_000_000;
/// Default for [`ReceiverConfig::max_bytes`]: 4 TiB.
pub const DEFAULT_MAX_BYTES: u64 = 4 << 40;
/// Default for [`ReceiverConfig::hello_timeout`].
pub const DEFAULT_HELLO_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for ReceiverConfig {
    fn default() -> Self {
        Self {
            dest: PathBuf::from("."),
            fsync: false,
            once: false,
            allow_plain: false,
            limits: DecodeLimits::default(),
            flow: FlowConfig::default(),
            idle_timeout: Duration::from_secs(60),
            write_budget: 4 << 20,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_files: DEFAULT_MAX_FILES,
            max_bytes: DEFAULT_MAX_BYTES,
            hello_timeout: DEFAULT_HELLO_TIMEOUT,
            control: false,
        }
    }
}

/// What one authenticated run ended with.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run_id: String,
    pub peer: SocketAddr,
    pub mode: &'static str,
    pub completion: Completion,
}

impl RunOutcome {
    pub fn ok(&self) -> bool {
        self.completion.errors.is_empty()
    }
}

/// Shared by every connection task.
pub(crate) struct Shared {
    pub identity: Identity,
    pub config: ReceiverConfig,
    pub tls: tokio_rustls::TlsAcceptor,
    pub hub: hub::Hub,
    pub done: mpsc::UnboundedSender<RunOutcome>,
    /// One permit per connection being served (`max_connections`).
    pub slots: Arc<Semaphore>,
    /// Connections over the limit that are being told so (bounded: past it they are dropped).
    pub refusals: Arc<Semaphore>,
}

/// Connections over the limit that may be in the middle of receiving their refusal.
const MAX_REFUSALS: usize = 16;

impl Shared {
    /// Hands a finished run to the serve loop; only the run's first connection does, so a run
    /// of N connections is reported once.
    pub(crate) fn report_run(&self, hello: &Hello, peer: SocketAddr, completion: Completion) {
        if hello.conn_index != 0 {
            return;
        }
        let _ = self.done.send(RunOutcome {
            run_id: hex::encode(hello.run_id),
            peer,
            mode: hello.mode.name(),
            completion,
        });
    }
}

/// The open-files limit the receiver asks for at start (64 connections × 4,096 streams).
const OPEN_FILES_WANTED: u64 = 64 * 4096 + 4096;

/// With `--once`: how long the other connections of the run get to finish their replies.
const ONCE_GRACE: Duration = Duration::from_secs(10);

/// A bound receiver, ready to serve.
pub struct Receiver {
    listener: TcpListener,
    endpoint: quinn::Endpoint,
    udp_rcvbuf: u64,
    ctx: Arc<Shared>,
    done_rx: mpsc::UnboundedReceiver<RunOutcome>,
}

impl Receiver {
    /// Binds TCP on `listen` and UDP (QUIC) on the same port.
    pub async fn bind(
        listen: SocketAddr,
        identity: Identity,
        config: ReceiverConfig,
    ) -> Result<Self> {
        // Per-file streams keep one file open per outstanding stream (up to 64 connections ×
        // --max-streams); raise the open-files limit as far as this process may.
        shoal_common::fdlimit::raise_open_files_limit(OPEN_FILES_WANTED);
        let listener = bind_tcp(listen, &config.flow)?;
        // Partial files a killed receiver left under temporary names (never under their final
        // names) are removed in the background: walking a large destination takes a while,
        // and the files of runs this process starts are never touched.
        let dest = config.dest.clone();
        std::thread::Builder::new()
            .name("shoal-temp-sweep".into())
            .spawn(
                move || match shoal_common::pipeline::writer::remove_stale_temps(&dest) {
                    Ok(0) => {}
                    Ok(n) => eprintln!(
                        "removed {n} temporary file(s) ({}*) that an interrupted run left under {}",
                        shoal_common::pipeline::writer::TEMP_PREFIX,
                        dest.display()
                    ),
                    Err(e) => eprintln!(
                        "cannot look for temporary files left under {}: {e:#}",
                        dest.display()
                    ),
                },
            )
            .context("cannot start the temporary-file sweep")?;
        let addr = listener.local_addr()?;
        let (endpoint, udp_rcvbuf) = quic::bind(addr, &identity, &config)?;
        let tls = tokio_rustls::TlsAcceptor::from(Arc::new(identity.server_config()?));
        let (done, done_rx) = mpsc::unbounded_channel();
        let config_slots = config.max_connections.max(1);
        Ok(Self {
            listener,
            endpoint,
            udp_rcvbuf,
            ctx: Arc::new(Shared {
                identity,
                config,
                tls,
                hub: hub::Hub::default(),
                done,
                slots: Arc::new(Semaphore::new(config_slots)),
                refusals: Arc::new(Semaphore::new(MAX_REFUSALS)),
            }),
            done_rx,
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves until stopped (or, with `once`, until one authenticated run ends). Returns the
    /// last run's outcome.
    pub async fn serve(mut self) -> Result<Option<RunOutcome>> {
        // Every connection's task, so `--once` can let the others of a multi-connection run
        // send their replies before the process exits.
        let mut connections = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                accepted = self.listener.accept() => match accepted {
                    Ok((tcp, peer)) => {
                        let ctx = self.ctx.clone();
                        match ctx.slots.clone().try_acquire_owned() {
                            Ok(slot) => {
                                connections.spawn(async move {
                                    tcp::handle(ctx, tcp, peer).await;
                                    drop(slot);
                                });
                            }
                            Err(_) => tcp::refuse_busy(ctx, tcp, peer),
                        }
                    }
                    Err(e) => {
                        // Out of descriptors and the like: say so, back off, keep serving.
                        eprintln!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                incoming = self.endpoint.accept() => {
                    let Some(incoming) = incoming else { anyhow::bail!("QUIC endpoint closed") };
                    let ctx = self.ctx.clone();
                    let rcvbuf = self.udp_rcvbuf;
                    match ctx.slots.clone().try_acquire_owned() {
                        Ok(slot) => {
                            connections.spawn(async move {
                                quic::handle(ctx, incoming, rcvbuf).await;
                                drop(slot);
                            });
                        }
                        Err(_) => {
                            eprintln!("{}: refused: {}", incoming.remote_address(), busy_message(&ctx.config));
                            incoming.refuse();
                        }
                    }
                }
                Some(outcome) = self.done_rx.recv() => {
                    report(&outcome);
                    if self.ctx.config.once {
                        // The run's first connection reports; its other connections are still
                        // sending the same completion to their sender. Let them (bounded), and
                        // let the last QUIC replies reach the sender, before the process exits.
                        let _ = tokio::time::timeout(ONCE_GRACE, async {
                            while connections.join_next().await.is_some() {}
                        })
                        .await;
                        let _ = tokio::time::timeout(Duration::from_secs(2), self.endpoint.wait_idle()).await;
                        return Ok(Some(outcome));
                    }
                }
            }
        }
    }
}

fn bind_tcp(listen: SocketAddr, flow: &FlowConfig) -> Result<TcpListener> {
    let socket = if listen.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }?;
    socket.set_reuseaddr(true)?;
    // Accepted sockets inherit these; set before listen so the window scale accounts for them.
    if let Some(b) = flow.rcvbuf {
        socket.set_recv_buffer_size(b as u32)?;
    }
    if let Some(b) = flow.sndbuf {
        socket.set_send_buffer_size(b as u32)?;
    }
    socket
        .bind(listen)
        .with_context(|| format!("cannot listen on {listen}"))?;
    Ok(socket.listen(1024)?)
}

fn report(o: &RunOutcome) {
    let c = &o.completion;
    let id = &o.run_id[..8];
    if o.ok() {
        println!(
            "run {id} from {} ({}): ok, {} files, {} bytes, receiver {:.3} s",
            o.peer,
            o.mode,
            c.files,
            c.bytes,
            c.receiver_micros as f64 / 1e6
        );
    } else {
        println!(
            "run {id} from {} ({}): FAILED ({} files ready): {}",
            o.peer,
            o.mode,
            c.files,
            c.errors.join("; ")
        );
    }
}

/// What a connection over `max_connections` is told.
pub(crate) fn busy_message(config: &ReceiverConfig) -> String {
    format!(
        "too many connections: this receiver serves at most {} at once (recv --max-connections); try again later",
        config.max_connections
    )
}

/// [`read_hello`] under the connection's hello deadline: a peer that trickles bytes cannot
/// hold a connection past it.
pub(crate) async fn read_hello_by<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    decoder: &mut RecordDecoder,
    config: &ReceiverConfig,
    deadline: tokio::time::Instant,
) -> Result<Hello> {
    match tokio::time::timeout_at(deadline, read_hello(rd, buf, decoder, config.idle_timeout)).await
    {
        Ok(r) => r,
        Err(_) => Err(hello_late(config)),
    }
}

/// The error for a peer that did not complete its hello in time.
pub(crate) fn hello_late(config: &ReceiverConfig) -> anyhow::Error {
    anyhow::anyhow!(
        "no complete hello within {:.1} s of connecting (recv --hello-timeout); dropped",
        config.hello_timeout.as_secs_f64()
    )
}

/// Reads until the hello is decoded; every read is bounded by the idle timeout.
pub(crate) async fn read_hello<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    decoder: &mut RecordDecoder,
    timeout: Duration,
) -> Result<Hello> {
    loop {
        if let Some((Record::Hello(h), n)) = decoder.decode(buf)? {
            let _ = buf.split_to(n);
            return Ok(h);
        }
        if read_some(rd, buf, timeout).await? == 0 {
            decoder.finish()?;
        }
    }
}

/// Bytes asked of a stream per read.
pub(crate) const READ_SIZE: usize = 256 << 10;

/// One read into `buf`, bounded by `timeout`; 0 at end of stream.
pub(crate) async fn read_some<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    timeout: Duration,
) -> Result<usize> {
    read_sized(rd, buf, READ_SIZE, timeout).await
}

/// Like [`read_some`] with room for `want` more bytes: per-file streams size their reads to
/// the file, so thousands of open streams do not each hold a large buffer.
pub(crate) async fn read_sized<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    want: usize,
    timeout: Duration,
) -> Result<usize> {
    buf.reserve(want);
    match tokio::time::timeout(timeout, rd.read_buf(buf)).await {
        Ok(r) => Ok(r.context("connection failed")?),
        Err(_) => anyhow::bail!(
            "peer idle for {:.1} s (recv --idle-timeout); dropped",
            timeout.as_secs_f64()
        ),
    }
}
