//! Shoal receiver: accepts authenticated transfers and writes them inside its destination.
//!
//! One accept loop serves every connection; each connection is handled on its own task, so a
//! bad or slow peer never stops the receiver from serving the next one. A run starts only after
//! the hello's token matches; nothing is created before that.

mod bundle;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::BytesMut;
use shoal_common::codec::{self, Completion, DecodeLimits, Hello, RecordDecoder};
use shoal_common::identity::{tokens_match, Identity};
use shoal_common::metrics;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;

/// Receiver settings.
#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    pub dest: PathBuf,
    /// Sync the destination file system at the end of each run (timed separately).
    pub fsync: bool,
    /// Exit after the first authenticated run; the outcome is that run's.
    pub once: bool,
    pub limits: DecodeLimits,
    /// Longest a peer may stay silent (handshake included) before it is dropped.
    pub idle_timeout: Duration,
    /// Bytes received but not yet written that a run may hold.
    pub write_budget: usize,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        Self {
            dest: PathBuf::from("."),
            fsync: false,
            once: false,
            limits: DecodeLimits::default(),
            idle_timeout: Duration::from_secs(60),
            write_budget: 16 << 20,
        }
    }
}

/// What one authenticated run ended with.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run_id: String,
    pub peer: SocketAddr,
    pub completion: Completion,
}

impl RunOutcome {
    pub fn ok(&self) -> bool {
        self.completion.errors.is_empty()
    }
}

/// A bound receiver, ready to serve.
pub struct Receiver {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    identity: Arc<Identity>,
    config: Arc<ReceiverConfig>,
}

impl Receiver {
    /// Binds `listen` with `identity`.
    pub async fn bind(
        listen: SocketAddr,
        identity: Identity,
        config: ReceiverConfig,
    ) -> Result<Self> {
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let acceptor = TlsAcceptor::from(Arc::new(identity.server_config()?));
        Ok(Self {
            listener,
            acceptor,
            identity: Arc::new(identity),
            config: Arc::new(config),
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves until stopped (or, with `once`, until one authenticated run ends). Returns the
    /// last run's outcome.
    pub async fn serve(self) -> Result<Option<RunOutcome>> {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<RunOutcome>();
        loop {
            tokio::select! {
                accepted = self.listener.accept() => {
                    let (tcp, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            // Out of descriptors and the like: say so, back off, keep serving.
                            eprintln!("accept failed: {e}");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    };
                    let ctx = ConnContext {
                        acceptor: self.acceptor.clone(),
                        identity: self.identity.clone(),
                        config: self.config.clone(),
                        peer,
                    };
                    let done = done_tx.clone();
                    tokio::spawn(async move {
                        if let Some(outcome) = ctx.handle(tcp).await {
                            let _ = done.send(outcome);
                        }
                    });
                }
                Some(outcome) = done_rx.recv() => {
                    if self.config.once {
                        return Ok(Some(outcome));
                    }
                }
            }
        }
    }
}

struct ConnContext {
    acceptor: TlsAcceptor,
    identity: Arc<Identity>,
    config: Arc<ReceiverConfig>,
    peer: SocketAddr,
}

impl ConnContext {
    /// Handles one connection; returns the outcome if it carried an authenticated run.
    async fn handle(self, tcp: TcpStream) -> Option<RunOutcome> {
        let _ = tcp.set_nodelay(true);
        let timeout = self.config.idle_timeout;
        let tls = match tokio::time::timeout(timeout, self.acceptor.accept(tcp)).await {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                eprintln!("{}: TLS handshake failed: {e}", self.peer);
                return None;
            }
            Err(_) => {
                eprintln!("{}: TLS handshake timed out", self.peer);
                return None;
            }
        };
        let (mut rd, mut wr) = tokio::io::split(tls);
        let mut buf = BytesMut::with_capacity(bundle::READ_SIZE);
        let mut decoder = RecordDecoder::new(self.config.limits);
        let first_byte = Instant::now();
        let hello = match read_hello(&mut rd, &mut buf, &mut decoder, timeout).await {
            Ok(h) => h,
            Err(e) => {
                eprintln!("{}: refused: {e:#}", self.peer);
                send_error(&mut wr, &format!("{e:#}")).await;
                return None;
            }
        };
        if !tokens_match(&hello.token, &self.identity.token) {
            eprintln!("{}: refused: wrong token", self.peer);
            send_error(&mut wr, "authentication failed: wrong token").await;
            return None;
        }
        let run_id = hex::encode(hello.run_id);
        let completion = bundle::receive(
            &self.config,
            &hello,
            &mut rd,
            &mut wr,
            buf,
            decoder,
            first_byte,
        )
        .await;
        let outcome = RunOutcome {
            run_id,
            peer: self.peer,
            completion,
        };
        report(&outcome);
        Some(outcome)
    }
}

fn report(o: &RunOutcome) {
    let c = &o.completion;
    let id = &o.run_id[..8];
    if o.ok() {
        println!(
            "run {id} from {}: ok, {} files, {} bytes, receiver {:.3} s",
            o.peer,
            c.files,
            c.bytes,
            c.receiver_micros as f64 / 1e6
        );
    } else {
        println!(
            "run {id} from {}: FAILED ({} files ready): {}",
            o.peer,
            c.files,
            c.errors.join("; ")
        );
    }
}

/// Reads until the hello is decoded; every read is bounded by the idle timeout.
async fn read_hello<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    decoder: &mut RecordDecoder,
    timeout: Duration,
) -> Result<Hello> {
    loop {
        if let Some((codec::Record::Hello(h), n)) = decoder.decode(buf)? {
            let _ = buf.split_to(n);
            return Ok(h);
        }
        if read_some(rd, buf, timeout).await? == 0 {
            decoder.finish()?;
        }
    }
}

/// One read into `buf`, bounded by `timeout`; 0 at end of stream.
pub(crate) async fn read_some<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    timeout: Duration,
) -> Result<usize> {
    buf.reserve(bundle::READ_SIZE);
    match tokio::time::timeout(timeout, rd.read_buf(buf)).await {
        Ok(r) => Ok(r.context("connection failed")?),
        Err(_) => anyhow::bail!("peer idle for {} s; dropped", timeout.as_secs()),
    }
}

/// Tells the peer why the run failed, best effort (it may already be gone).
pub(crate) async fn send_error<W: AsyncWrite + Unpin>(wr: &mut W, message: &str) {
    let mut out = BytesMut::new();
    codec::encode_error(message, &mut out);
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        wr.write_all(&out).await?;
        wr.shutdown().await
    })
    .await;
}

/// Peak RSS of this process since the last reset (see [`metrics::reset_peak_rss`]).
pub(crate) fn peak_rss() -> u64 {
    metrics::peak_rss_bytes()
}
