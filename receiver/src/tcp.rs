//! TCP connections: TLS or plain (told apart by the first byte), the hello on the raw stream,
//! then the mode: bundled records (with acknowledgements for the stop-and-wait arm) or yamux
//! per-file streams.

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use shoal_proto::codec::RecordDecoder;
use shoal_transport::config::Mode;
use shoal_transport::mux;
use shoal_transport::stats::set_tcp_cc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::config::{busy_message, ReceiverConfig};
use crate::prefixed::Prefixed;
use crate::read::{hello_late, read_hello_by, READ_SIZE};
use crate::run::{self, TransportFacts, Wire};
use crate::runconfig;
use crate::shared::Shared;
use crate::streams::{self, InboundFile};
use crate::{bundle, control};

/// First byte of a TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

pub(crate) async fn handle(ctx: Arc<Shared>, tcp: TcpStream, peer: SocketAddr) {
    let _ = tcp.set_nodelay(true);
    // A duplicate descriptor, to read the receive buffer back after autotuning at the end.
    let probe = tcp.as_fd().try_clone_to_owned().ok();
    // Idle gaps and the whole way to a decoded hello are both bounded.
    let deadline = tokio::time::Instant::now() + ctx.config.hello_timeout;
    let timeout = ctx.config.idle_timeout;
    let mut first = [0u8; 1];
    let first_byte = tokio::time::timeout_at(
        deadline,
        tokio::time::timeout(timeout, tcp.peek(&mut first)),
    );
    let plain = match first_byte.await {
        Ok(Ok(Ok(1))) => first[0] != TLS_HANDSHAKE,
        Ok(Ok(_)) => return, // closed before saying anything
        Ok(Err(_)) => {
            eprintln!(
                "{peer}: silent for {:.1} s after connecting (recv --idle-timeout); dropped",
                timeout.as_secs_f64()
            );
            return;
        }
        Err(_) => {
            eprintln!("{peer}: {}", hello_late(&ctx.config));
            return;
        }
    };
    if plain {
        let ready = Instant::now();
        serve(
            ctx,
            tcp,
            peer,
            Wire::Tcp { plain: true },
            probe,
            deadline,
            ready,
        )
        .await;
        return;
    }
    let handshake = tokio::time::timeout(timeout, ctx.tls.accept(tcp));
    match tokio::time::timeout_at(deadline, handshake).await {
        Ok(Ok(Ok(tls))) => {
            // The client's Finished and its first records arrive together, but a 16 KiB
            // record that straddles the sender's first flight can be decrypted (and the hello
            // read) only a round trip later: the run's first byte is the handshake's end.
            let ready = Instant::now();
            serve(
                ctx.clone(),
                tls,
                peer,
                Wire::Tcp { plain: false },
                probe,
                deadline,
                ready,
            )
            .await
        }
        Ok(Ok(Err(e))) => eprintln!("{peer}: TLS handshake failed: {e}"),
        Ok(Err(_)) => eprintln!("{peer}: TLS handshake timed out (recv --idle-timeout)"),
        Err(_) => {
            eprintln!("{peer}: TLS handshake not done by the hello deadline (recv --hello-timeout)")
        }
    }
}

/// A connection over `max_connections`: told so where that is cheap (a bounded number at a
/// time, each within a few seconds), otherwise closed at once; logged either way.
pub(crate) fn refuse_busy(ctx: Arc<Shared>, tcp: TcpStream, peer: SocketAddr) {
    let message = busy_message(&ctx.config);
    eprintln!("{peer}: refused: {message}");
    let Ok(permit) = ctx.refusals.clone().try_acquire_owned() else {
        return; // dropping the socket closes it
    };
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            let mut first = [0u8; 1];
            if !matches!(tcp.peek(&mut first).await, Ok(1)) {
                return;
            }
            if first[0] == TLS_HANDSHAKE {
                if let Ok(tls) = ctx.tls.accept(tcp).await {
                    let (mut rd, mut wr) = tokio::io::split(tls);
                    run::send_error(&mut wr, &message).await;
                    run::linger(&mut rd).await;
                }
            } else {
                let (mut rd, mut wr) = tokio::io::split(tcp);
                run::send_error(&mut wr, &message).await;
                run::linger(&mut rd).await;
            }
        })
        .await;
        drop(permit);
    });
}

async fn serve<S>(
    ctx: Arc<Shared>,
    stream: S,
    peer: SocketAddr,
    wire: Wire,
    probe: Option<OwnedFd>,
    deadline: tokio::time::Instant,
    ready: Instant,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let config = &ctx.config;
    let (mut rd, mut wr) = tokio::io::split(stream);
    let mut buf = BytesMut::with_capacity(READ_SIZE);
    let mut decoder = RecordDecoder::new(config.limits);
    let hello = match read_hello_by(&mut rd, &mut buf, &mut decoder, config, deadline).await {
        Ok(h) => h,
        // A sweep's control connection opens with its own magic (TLS only: it carries the token).
        Err(_) if wire == (Wire::Tcp { plain: false }) && control::looks_like_control(&buf) => {
            control::serve(ctx.clone(), rd, wr, buf, peer, deadline, probe).await;
            return;
        }
        Err(e) => {
            run::refuse(&mut wr, peer, &e).await;
            run::linger(&mut rd).await;
            return;
        }
    };
    // A run prepared over the control channel runs with its own settings (its socket
    // buffers set on each of its connections); any other run with the receiver's flags.
    let settings = ctx.hub.settings_of(&hello.run_id);
    let run_config = runconfig::apply(&ctx.config, settings.as_ref());
    let config: &ReceiverConfig = &run_config;
    let tcp_socket = probe.map(Arc::new);
    let admitted =
        run::admit(config, &ctx.identity.token, &hello, wire).and_then(|()| match &tcp_socket {
            Some(fd) => runconfig::set_tcp_buffers(settings.as_ref(), fd),
            None => Ok(()),
        });
    if let (Ok(()), Some(cc), Some(fd)) = (&admitted, hello.cc, &tcp_socket) {
        // The same controller for data in both directions (it matters for replies and ACKs).
        let _ = set_tcp_cc(&**fd, cc);
    }
    let completion = match hello.mode {
        Mode::TcpBundle | Mode::TcpWait => {
            let member = match admitted.and_then(|()| ctx.hub.join(config, &hello, ready)) {
                Ok(m) => m,
                Err(e) => {
                    run::refuse(&mut wr, peer, &e).await;
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
            member
                .finish_and_reply(&ctx.hub, end, config.idle_timeout, &mut wr)
                .await
        }
        Mode::TcpStreams => {
            // What was read past the hello already belongs to yamux. The sender has started
            // yamux right after its hello, so every reply, a refusal included, goes on the
            // yamux control stream where it reads them.
            let io = Prefixed::new(buf, rd.unsplit(wr));
            // yamux (patched, vendor/yamux) flushes once per batch of frames; buffered, the
            // acknowledgements and closes of many streams leave in one TLS write.
            let io = tokio::io::BufWriter::with_capacity(
                shoal_transport::transport::YAMUX_WRITE_BUFFER,
                io,
            );
            let streams_allowed =
                shoal_transport::transport::yamux_streams(config.flow.max_streams);
            let (ctx, hello) = (&ctx, &hello);
            let served = mux::with_yamux_server(
                io,
                streams_allowed,
                InboundFile::Yamux,
                |server| async move {
                    let mux::YamuxServer {
                        control,
                        files,
                        mut ended,
                    } = server;
                    // A refused peer (wrong token, limits) still gets its refusal on the control
                    // stream, but the file streams it opens meanwhile are dropped as they arrive,
                    // so yamux buffers nothing for them before the token has matched.
                    let files = if admitted.is_ok() {
                        Some(files)
                    } else {
                        let mut files = files;
                        tokio::spawn(async move { while files.recv().await.is_some() {} });
                        None
                    };
                    // The control stream and its hello have a fresh hello deadline.
                    let control_deadline = tokio::time::Instant::now() + config.hello_timeout;
                    let control = tokio::time::timeout(config.idle_timeout, control);
                    let control = match tokio::time::timeout_at(control_deadline, control).await {
                        Ok(Ok(Ok(c))) => c,
                        waited => {
                            let why = match waited {
                                Ok(Ok(Err(_))) => "the connection ended first".to_string(),
                                _ => format!(
                                    "none within {:.1} s",
                                    config.idle_timeout.min(config.hello_timeout).as_secs_f64()
                                ),
                            };
                            let run = hex::encode(&hello.run_id[..4]);
                            eprintln!("{peer}: run {run} (tcp-streams): no yamux control stream: {why}; nothing written");
                            return None;
                        }
                    };
                    let (mut crd, mut cwr) = tokio::io::split(control);
                    // The control stream repeats the hello; it must be the same run's.
                    let mut cbuf = BytesMut::new();
                    let mut cdec = RecordDecoder::new(config.limits);
                    let joined = match read_hello_by(
                        &mut crd,
                        &mut cbuf,
                        &mut cdec,
                        config,
                        control_deadline,
                    )
                    .await
                    {
                        Ok(h) if h.run_id != hello.run_id => {
                            Err(anyhow::anyhow!("control stream hello is for another run"))
                        }
                        Ok(_) => admitted.and_then(|()| ctx.hub.join(config, hello, ready)),
                        Err(e) => Err(e),
                    };
                    let member = match joined {
                        Ok(m) => m,
                        Err(e) => {
                            run::refuse(&mut cwr, peer, &e).await;
                            linger_until_closed(&mut ended).await;
                            return None;
                        }
                    };
                    let facts = TransportFacts {
                        stream_window: 256 << 10,
                        conn_window: shoal_transport::transport::yamux_window(streams_allowed) as u64,
                        conn_window_min: 0,
                        rcvbuf: 0,
                        udp_offload: None,
                        tcp_socket,
                    };
                    let files = files.expect("an admitted connection keeps its file streams");
                    let end =
                        streams::receive(config, &member, &mut crd, cbuf, cdec, files, facts, None)
                            .await;
                    let completion = member
                        .finish_and_reply(&ctx.hub, end, config.idle_timeout, &mut cwr)
                        .await;
                    linger_until_closed(&mut ended).await;
                    Some(completion)
                },
            )
            .await;
            let Some(completion) = served else { return };
            completion
        }
        Mode::QuicBundle | Mode::QuicStreams => {
            // admit() refuses QUIC modes on TCP; the peer is told why (this used to be an
            // `unreachable!` that panicked the task and left the peer without a reply).
            let why = admitted
                .err()
                .unwrap_or_else(|| anyhow::anyhow!("mode {} needs QUIC, not TCP", hello.mode));
            run::refuse(&mut wr, peer, &why).await;
            run::linger(&mut rd).await;
            return;
        }
    };
    ctx.report_run(&hello, peer, completion);
}

/// Keeps a yamux connection served (at most 5 s) until the sender has closed it, so a reply
/// or refusal reaches the sender before the connection is dropped.
async fn linger_until_closed(ended: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = tokio::time::timeout(Duration::from_secs(5), ended.wait_for(|e| *e)).await;
}
