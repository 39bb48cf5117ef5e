//! What every receive path shares: admitting a hello, and turning the writer's report into
//! the completion (or error) the sender is sent.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Instant;

use socket2::SockRef;

use anyhow::{bail, Result};
use bytes::BytesMut;
use shoal_pipeline::writer::WriterReport;
use shoal_proto::codec::{self, Completion, Hello};
use shoal_row::metrics;
use shoal_transport::identity::tokens_match;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::config::ReceiverConfig;

/// Which wire a connection arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    Tcp { plain: bool },
    Quic,
}

/// Figures the transport adds to the completion.
#[derive(Debug, Clone, Default)]
pub(crate) struct TransportFacts {
    pub stream_window: u64,
    pub conn_window: u64,
    /// QUIC: the smallest connection receive window in effect (sized for the path:
    /// `receive_window`); 0 where not applicable.
    pub conn_window_min: u64,
    /// The UDP socket's receive buffer (QUIC).
    pub rcvbuf: u64,
    /// QUIC: the offload quinn-udp uses on the UDP socket.
    pub udp_offload: Option<shoal_transport::udp_offload::UdpOffload>,
    /// A duplicate of the TCP socket, read at the end (autotuning grows the buffer).
    pub tcp_socket: Option<Arc<OwnedFd>>,
}

impl TransportFacts {
    pub(crate) fn rcvbuf_now(&self) -> u64 {
        match &self.tcp_socket {
            Some(fd) => SockRef::from(&**fd).recv_buffer_size().unwrap_or(0) as u64,
            None => self.rcvbuf,
        }
    }
}

/// Descriptors kept free for sockets, folders and the like when admitting a run.
const FD_RESERVE: u64 = 1024;

/// Most connections one run may span.
pub(crate) const MAX_CONNECTIONS: u16 = 64;

/// Checks a hello before anything is created: token, mode against the wire, stream limit.
pub(crate) fn admit(
    config: &ReceiverConfig,
    token: &[u8],
    hello: &Hello,
    wire: Wire,
) -> Result<()> {
    if !tokens_match(&hello.token, token) {
        bail!("authentication failed: wrong token");
    }
    match (wire, hello.mode.is_quic()) {
        (Wire::Quic, false) => bail!("mode {} cannot run over QUIC", hello.mode),
        (Wire::Tcp { .. }, true) => bail!("mode {} needs QUIC, not TCP", hello.mode),
        _ => {}
    }
    if let Wire::Tcp { plain: true } = wire {
        if !config.allow_plain {
            bail!("plain (unencrypted) transfers are not allowed here; start the receiver with --allow-plain");
        }
    }
    if hello.mode.per_file_streams() && hello.max_streams > config.flow.max_streams {
        bail!(
            "the sender asks for {} outstanding streams; this receiver allows {} (recv --max-streams)",
            hello.max_streams,
            config.flow.max_streams
        );
    }
    // Every outstanding file is an open file here, from its first byte to its last: refuse
    // up front a run that could not fit (it used to fail midway with "Too many open files").
    if hello.mode.per_file_streams() {
        let need = u64::from(hello.max_streams) * u64::from(hello.conn_count.max(1));
        let limit = shoal_pipeline::fdlimit::open_files_limit();
        if need + FD_RESERVE > limit {
            bail!(
                "{} outstanding streams × {} connections = {need} files open at once, more than this receiver's open-files limit allows ({limit}, less {FD_RESERVE} for sockets); lower --max-streams or --connections, or raise the receiver's `ulimit -n`",
                hello.max_streams,
                hello.conn_count
            );
        }
    }
    // An announced run size against this receiver's limits, before anything is created;
    // nothing is allocated per announced file, so a large announcement costs nothing until
    // refused. A hello with unknown totals (protocol 4) passes here: the limits are enforced
    // on the running counts as records arrive (`Claims`), whatever was announced.
    if let Some((files, bytes)) = hello.announced() {
        if files > config.max_files {
            bail!(
                "the run announces {files} files; this receiver accepts at most {} per run (recv --max-files)",
                config.max_files
            );
        }
        if bytes > config.max_bytes {
            bail!(
                "the run announces {bytes} bytes; this receiver accepts at most {} per run (recv --max-bytes)",
                config.max_bytes
            );
        }
    }
    if hello.conn_count > MAX_CONNECTIONS {
        bail!(
            "the sender asks for {} connections; at most {MAX_CONNECTIONS} per run",
            hello.conn_count
        );
    }
    if let (Wire::Tcp { .. }, Some(cc)) = (wire, hello.cc) {
        shoal_transport::stats::check_tcp_cc(cc)?;
    }
    Ok(())
}

/// Builds the completion from the writer's report and the transport's own errors (`claimed`:
/// the files and bytes the run's records claimed, see `Claims`); a
/// non-empty `errors` list means the run failed.
pub(crate) fn completion(
    hello: &Hello,
    claimed: (u64, u64),
    report: &WriterReport,
    mut errors: Vec<String>,
    first_byte: Instant,
    facts: &TransportFacts,
) -> Completion {
    if let Some(e) = &report.error {
        errors.push(format!("{e:#}"));
    }
    if !report.removed_partials.is_empty() {
        errors.push(format!(
            "removed {} partial file(s), e.g. \"{}\"",
            report.removed_partials.len(),
            report.removed_partials[0]
        ));
    }
    // Every file the run brought must be ready: the hello's totals if it announced them, else
    // what the records claimed (each connection's end marker matched what it carried, so
    // these are the senders' end-of-run totals).
    let (files, bytes) = hello.announced().unwrap_or(claimed);
    if errors.is_empty() && (report.files_ready != files || report.bytes_written != bytes) {
        errors.push(format!(
            "{} of {files} files and {} of {bytes} bytes ready",
            report.files_ready, report.bytes_written
        ));
    }
    let last = report.last_close.unwrap_or_else(Instant::now);
    Completion {
        files: report.files_ready,
        // What was kept: a failed run's partial files were removed, their bytes with them.
        bytes: report.bytes_ready,
        receiver_micros: last.saturating_duration_since(first_byte).as_micros() as u64,
        peak_rss: metrics::peak_rss_bytes(),
        connections: 1,
        latency: report.latency.to_bytes(),
        stream_window: facts.stream_window,
        conn_window: facts.conn_window,
        conn_window_min: Some(facts.conn_window_min),
        writers: Some(report.writers as u64),
        rcvbuf: facts.rcvbuf_now(),
        udp_gso_segments: facts.udp_offload.map(|o| o.gso_segments),
        udp_gro_segments: facts.udp_offload.map(|o| o.gro_segments),
        errors,
        ..Default::default()
    }
}

/// Sends the completion, or an error reply if the run failed, and closes the stream. With a
/// sync under way (`--fsync`), the completion goes first, so the sender's clock stops at it,
/// and the sync's own report follows it (or an error, which fails the run).
pub(crate) async fn reply<W: AsyncWrite + Unpin>(
    wr: &mut W,
    completion: &mut Completion,
    sync: Option<impl std::future::Future<Output = Result<u64, String>>>,
) {
    if !completion.errors.is_empty() {
        // The sender reads what was kept from this (sender/src/replies.rs).
        let message = format!(
            "{}; the receiver kept {} complete file(s) ({} bytes)",
            completion.errors.join("; "),
            completion.files,
            completion.bytes
        );
        send_error(wr, &message).await;
        return;
    }
    let mut out = BytesMut::new();
    codec::encode_completion(completion, &mut out);
    let sent = async {
        wr.write_all(&out).await?;
        // Out now: the sync's report below may be seconds away.
        wr.flush().await?;
        if let Some(sync) = sync {
            let mut after = BytesMut::new();
            match sync.await {
                Ok(micros) => codec::encode_synced(micros, &mut after),
                Err(e) => {
                    let message = format!("syncing the destination failed: {e}");
                    codec::encode_error(&message, &mut after);
                    completion.errors.push(message);
                }
            }
            wr.write_all(&after).await?;
        }
        wr.shutdown().await
    }
    .await;
    if let Err(e) = sent {
        completion
            .errors
            .push(format!("cannot send the completion report: {e}"));
    }
}

/// Refuses a peer: logs why, and tells it (best effort).
pub(crate) async fn refuse<W: AsyncWrite + Unpin>(
    wr: &mut W,
    peer: std::net::SocketAddr,
    why: &anyhow::Error,
) {
    let message = format!("{why:#}");
    eprintln!("{peer}: refused: {message}");
    send_error(wr, &message).await;
}

/// After a refusal: reads and discards what the peer still sends (bounded in bytes and time)
/// before the socket is closed. Closing a socket with unread bytes, or one that receives
/// more, makes the kernel reset the connection, and the reset can destroy the refusal before
/// the peer has read it (a `tcp-streams` sender is still sending its yamux frames then).
pub(crate) async fn linger<R: tokio::io::AsyncRead + Unpin>(rd: &mut R) {
    use tokio::io::AsyncReadExt;
    let mut scrap = [0u8; 4096];
    let mut left = 1usize << 20;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), async {
        while left > 0 {
            match rd.read(&mut scrap).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

/// Tells the peer why the run failed, best effort (it may already be gone).
pub(crate) async fn send_error<W: AsyncWrite + Unpin>(wr: &mut W, message: &str) {
    let mut out = BytesMut::new();
    codec::encode_error(message, &mut out);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        wr.write_all(&out).await?;
        wr.shutdown().await
    })
    .await;
}
