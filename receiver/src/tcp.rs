//! TCP connections: TLS or plain (told apart by the first byte), the hello on the raw stream,
//! then the mode: bundled records (with acknowledgements for the stop-and-wait arm) or yamux
//! per-file streams.

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use shoal_common::codec::RecordDecoder;
use shoal_common::config::Mode;
use shoal_common::stats::set_tcp_cc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::prefixed::Prefixed;
use crate::run::{self, TransportFacts, Wire};
use crate::streams;
use crate::{bundle, read_hello, RunOutcome, Shared, READ_SIZE};

/// First byte of a TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

pub(crate) async fn handle(ctx: Arc<Shared>, tcp: TcpStream, peer: SocketAddr) {
    let _ = tcp.set_nodelay(true);
    // A duplicate descriptor, to read the receive buffer back after autotuning at the end.
    let probe = tcp.as_fd().try_clone_to_owned().ok();
    let timeout = ctx.config.idle_timeout;
    let mut first = [0u8; 1];
    let plain = match tokio::time::timeout(timeout, tcp.peek(&mut first)).await {
        Ok(Ok(1)) => first[0] != TLS_HANDSHAKE,
        _ => return, // closed or silent before saying anything
    };
    if plain {
        serve(ctx, tcp, peer, Wire::Tcp { plain: true }, probe).await;
        return;
    }
    match tokio::time::timeout(timeout, ctx.tls.accept(tcp)).await {
        Ok(Ok(tls)) => serve(ctx.clone(), tls, peer, Wire::Tcp { plain: false }, probe).await,
        Ok(Err(e)) => eprintln!("{peer}: TLS handshake failed: {e}"),
        Err(_) => eprintln!("{peer}: TLS handshake timed out"),
    }
}

async fn serve<S>(ctx: Arc<Shared>, stream: S, peer: SocketAddr, wire: Wire, probe: Option<OwnedFd>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let config = &ctx.config;
    let (mut rd, mut wr) = tokio::io::split(stream);
    let mut buf = BytesMut::with_capacity(READ_SIZE);
    let mut decoder = RecordDecoder::new(config.limits);
    let hello = match read_hello(&mut rd, &mut buf, &mut decoder, config.idle_timeout).await {
        Ok(h) => h,
        Err(e) => {
            eprintln!("{peer}: refused: {e:#}");
            run::send_error(&mut wr, &format!("{e:#}")).await;
            return;
        }
    };
    let admitted = run::admit(config, &ctx.identity.token, &hello, wire);
    let tcp_socket = probe.map(Arc::new);
    if let (Ok(()), Some(cc), Some(fd)) = (&admitted, hello.cc, &tcp_socket) {
        // The same controller for data in both directions (it matters for replies and ACKs).
        let _ = set_tcp_cc(&**fd, cc);
    }
    let completion = match hello.mode {
        Mode::TcpBundle | Mode::TcpWait => {
            let member = match admitted.and_then(|()| ctx.hub.join(config, &hello)) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("{peer}: refused: {e:#}");
                    run::send_error(&mut wr, &format!("{e:#}")).await;
                    return;
                }
            };
            let acks = hello.mode == Mode::TcpWait;
            let facts = TransportFacts {
                tcp_socket,
                ..Default::default()
            };
            let (end, mut wr) =
                bundle::receive(config, &member, &mut rd, wr, buf, decoder, acks, facts).await;
            let mut completion = member.finish(&ctx.hub, end, config.idle_timeout).await;
            run::reply(&mut wr, &mut completion).await;
            completion
        }
        Mode::TcpStreams => {
            // What was read past the hello already belongs to yamux. The sender has started
            // yamux right after its hello, so every reply, a refusal included, goes on the
            // yamux control stream where it reads them.
            let io = Prefixed::new(buf, rd.unsplit(wr));
            let streams_allowed = shoal_common::transport::yamux_streams(config.flow.max_streams);
            let (control, files, driver) = streams::spawn_yamux_server(io, streams_allowed);
            let control = match tokio::time::timeout(config.idle_timeout, control).await {
                Ok(Ok(c)) => c,
                _ => {
                    driver.abort();
                    eprintln!("{peer}: no yamux control stream");
                    return;
                }
            };
            let (mut crd, mut cwr) = tokio::io::split(control);
            // The control stream repeats the hello; it must be the same run's.
            let mut cbuf = BytesMut::new();
            let mut cdec = RecordDecoder::new(config.limits);
            let joined = match read_hello(&mut crd, &mut cbuf, &mut cdec, config.idle_timeout).await
            {
                Ok(h) if h.run_id != hello.run_id => {
                    Err(anyhow::anyhow!("control stream hello is for another run"))
                }
                Ok(_) => admitted.and_then(|()| ctx.hub.join(config, &hello)),
                Err(e) => Err(e),
            };
            let member = match joined {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("{peer}: refused: {e:#}");
                    run::send_error(&mut cwr, &format!("{e:#}")).await;
                    // Keep the connection up (bounded) so the refusal reaches the sender.
                    let _ = tokio::time::timeout(Duration::from_secs(5), driver).await;
                    return;
                }
            };
            let facts = TransportFacts {
                stream_window: 256 << 10,
                conn_window: shoal_common::transport::yamux_window(streams_allowed) as u64,
                rcvbuf: 0,
                tcp_socket,
            };
            let end = streams::receive(config, &member, &mut crd, cbuf, cdec, files, facts).await;
            let mut completion = member.finish(&ctx.hub, end, config.idle_timeout).await;
            run::reply(&mut cwr, &mut completion).await;
            // Keep the connection running until the sender has read the reply and closed.
            let _ = tokio::time::timeout(Duration::from_secs(5), driver).await;
            completion
        }
        Mode::QuicBundle | Mode::QuicStreams => unreachable!("admit() refuses QUIC modes on TCP"),
    };
    if hello.conn_index != 0 {
        return; // one report per run, from its first connection
    }
    let _ = ctx.done.send(RunOutcome {
        run_id: hex::encode(hello.run_id),
        peer,
        mode: run::mode_name(hello.mode),
        completion,
    });
}
