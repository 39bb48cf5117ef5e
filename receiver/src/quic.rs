//! QUIC connections: a bidirectional control stream carries the hello; the run is either
//! bundled on that stream or spread over unidirectional per-file streams.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use bytes::BytesMut;
use shoal_proto::codec::RecordDecoder;
use shoal_transport::config::Mode;
use shoal_transport::identity::Identity;
use shoal_transport::transport::{quic_transport, udp_socket};
use shoal_transport::udp_offload::UdpOffload;
use socket2::SockRef;
use tokio::sync::mpsc;

use crate::bundle;
use crate::config::ReceiverConfig;
use crate::hub::ConnEnd;
use crate::read::{hello_late, read_hello_by, READ_SIZE};
use crate::run::{self, TransportFacts, Wire};
use crate::runconfig;
use crate::shared::Shared;
use crate::streams::{self, InboundFile};
use crate::tune;
use shoal_transport::window_share::TunedReceive;

/// Binds the QUIC endpoint on UDP `addr`; returns it, the UDP receive buffer it got and the
/// segmentation offload quinn-udp finds on its socket.
pub(crate) fn bind(
    addr: SocketAddr,
    identity: &Identity,
    config: &ReceiverConfig,
) -> Result<(quinn::Endpoint, u64, Option<UdpOffload>)> {
    let socket = udp_socket(addr, &config.flow)?;
    let rcvbuf = SockRef::from(&socket).recv_buffer_size().unwrap_or(0) as u64;
    let offload = UdpOffload::of(&socket);
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(identity.server_config()?)
        .context("TLS configuration unusable for QUIC")?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    // The receiver sends only replies; its controller (CUBIC) hardly matters. The sender's
    // controller, chosen per run, governs the data.
    // Until a connection's hello is in, it gets a small connection window (the run's share is
    // granted after admission, in `handle`).
    let mut pre_hello = config.flow;
    pre_hello.conn_window = pre_hello
        .conn_window
        .min(shoal_transport::transport::QUIC_PRE_HELLO_WINDOW);
    pre_hello.max_streams = pre_hello
        .max_streams
        .min(shoal_transport::transport::QUIC_PRE_HELLO_STREAMS);
    server.transport_config(Arc::new(quic_transport(&pre_hello, None)?));
    let endpoint = quinn::Endpoint::new(
        shoal_transport::transport::quic_endpoint_config(),
        Some(server),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .with_context(|| format!("cannot listen for QUIC on {addr}"))?;
    Ok((endpoint, rcvbuf, offload))
}

pub(crate) async fn handle(
    ctx: Arc<Shared>,
    incoming: quinn::Incoming,
    rcvbuf: u64,
    offload: Option<UdpOffload>,
) {
    let peer = incoming.remote_address();
    let config = &ctx.config;
    // The handshake, the control stream and the hello together have until the deadline.
    let deadline = tokio::time::Instant::now() + config.hello_timeout;
    let wait = config.idle_timeout.min(config.hello_timeout);
    let conn = match tokio::time::timeout(wait, incoming).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            eprintln!("{peer}: QUIC handshake failed: {e}");
            return;
        }
        Err(_) => {
            eprintln!("{peer}: QUIC handshake timed out");
            return;
        }
    };
    // The client's handshake Finished and its first stream data arrive together.
    let ready = std::time::Instant::now();
    let accept = tokio::time::timeout(config.idle_timeout, conn.accept_bi());
    let (mut wr, mut rd) = match tokio::time::timeout_at(deadline, accept).await {
        Ok(Ok(Ok(s))) => s,
        // The close reason is all a QUIC peer that never opened its control stream can be
        // told, so it names the limit it hit, as a TCP peer's error reply does (it used to be
        // a bare "no control stream", found by tests/security/hostile_modes.rs).
        Ok(Ok(Err(e))) => {
            eprintln!("{peer}: QUIC connection ended before its control stream: {e}");
            return;
        }
        Ok(Err(_)) => {
            let why = format!(
                "peer idle for {:.1} s (recv --idle-timeout) without opening its control stream; dropped",
                config.idle_timeout.as_secs_f64()
            );
            eprintln!("{peer}: {why}");
            conn.close(1u32.into(), why.as_bytes());
            return;
        }
        Err(_) => {
            let why = hello_late(config);
            eprintln!("{peer}: {why}");
            conn.close(1u32.into(), why.to_string().as_bytes());
            return;
        }
    };
    let mut buf = BytesMut::with_capacity(READ_SIZE);
    let mut decoder = RecordDecoder::new(config.limits);
    let hello = match read_hello_by(&mut rd, &mut buf, &mut decoder, config, deadline).await {
        Ok(h) => h,
        Err(e) => {
            run::refuse(&mut wr, peer, &e).await;
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), conn.closed()).await;
            return;
        }
    };
    // A run prepared over the control channel runs with its own settings (a QUIC run
    // cannot have its own socket buffers: refused); any other run with the receiver's flags.
    let settings = ctx.hub.settings_of(&hello.run_id);
    let run_config = runconfig::apply(&ctx.config, settings.as_ref());
    let config: &ReceiverConfig = &run_config;
    let member = match run::admit(config, &ctx.identity.token, &hello, Wire::Quic)
        .and_then(|()| runconfig::refuse_on_quic(settings.as_ref()))
        .and_then(|()| ctx.hub.join(config, &hello, ready))
    {
        Ok(m) => m,
        Err(e) => {
            run::refuse(&mut wr, peer, &e).await;
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), conn.closed()).await;
            return;
        }
    };
    // This connection's share of the run's window, now that the hello says how many
    // connections the run spreads over; handed on to the others when this one is done.
    let tuned = TunedReceive::new(conn.clone());
    // The window follows what the connection delivers (proto/src/receive_window.rs); its start
    // is set before the share is granted.
    let held = tune::Held::new(
        member.run.budget.clone(),
        config.write_budget,
        hello.conn_count,
    );
    let tuning = tune::start(conn.clone(), tuned.clone(), held, config.fixed_window);
    let mut seat = member.run.quic_window.seat(tuned.clone());
    let conn_window = seat.initial();
    // As many concurrent file streams as this connection will use (admission checked that
    // against --max-streams): the receiver holds every stream it allows until it has read it.
    conn.set_max_concurrent_uni_streams(quinn::VarInt::from_u32(hello.max_streams.max(1)));
    let facts = TransportFacts {
        stream_window: config.flow.stream_window.min(conn_window),
        conn_window,
        conn_window_min: 0,
        rcvbuf,
        udp_offload: offload,
        tcp_socket: None,
    };
    let completion = match hello.mode {
        Mode::QuicBundle => {
            let mut rd = tune::Metered::new(&mut rd, tuning.meter());
            let (mut end, mut wr) =
                bundle::receive(config, &member, &mut rd, wr, buf, decoder, false, facts).await;
            end.facts.conn_window_min = tuning.finish(&tuned);
            seat.finished();
            member
                .finish_and_reply(&ctx.hub, end, config.idle_timeout, &mut wr)
                .await
        }
        Mode::QuicStreams => {
            let (tx, files) = mpsc::unbounded_channel();
            let acceptor = {
                let conn = conn.clone();
                // At most max_streams file streams are accepted and not yet written: a slot
                // is taken before a stream is accepted and freed when its handler ends, so a
                // stream quinn has already released (its bytes read) still counts.
                let slots = Arc::new(tokio::sync::Semaphore::new(
                    hello.max_streams.max(1) as usize
                ));
                tokio::spawn(async move {
                    while let Ok(slot) = slots.clone().acquire_owned().await {
                        let Ok(s) = conn.accept_uni().await else {
                            break;
                        };
                        if tx.send(InboundFile::Quic(s, slot)).is_err() {
                            break;
                        }
                    }
                })
            };
            let meter = Some(tuning.meter());
            let mut end =
                streams::receive(config, &member, &mut rd, buf, decoder, files, facts, meter).await;
            end.facts.conn_window_min = tuning.finish(&tuned);
            seat.finished();
            acceptor.abort();
            member
                .finish_and_reply(&ctx.hub, end, config.idle_timeout, &mut wr)
                .await
        }
        Mode::TcpBundle | Mode::TcpStreams | Mode::TcpWait => {
            // admit() refuses TCP modes on QUIC; never a panic reachable from the network.
            let why = anyhow::anyhow!("mode {} cannot run over QUIC", hello.mode);
            let end = ConnEnd {
                errors: vec![format!("{why:#}")],
                stopped: false,
                peak_streams: 0,
                facts,
            };
            seat.finished();
            member
                .finish_and_reply(&ctx.hub, end, config.idle_timeout, &mut wr)
                .await
        }
    };
    // Wait (bounded) for the sender to close, so the reply is delivered.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), conn.closed()).await;
    ctx.report_run(&hello, peer, completion);
}
