//! The per-file-stream anchor: what Shoal's per-file protocols cost on their own, with no files.
//!
//! tcp-streams and quic-streams open one stream per file. This moves FILES streams of SIZE
//! bytes each over the same protocol stack and settings Shoal uses — yamux (the vendored copy,
//! `transport::yamux_config`) over TLS 1.3 over loopback TCP with Shoal's identity, or quinn
//! (the vendored quinn-proto, `transport::quic_transport`, the sender's MTU discovery as far
//! as the route allows: `transport::discover_mtu_towards`) — with at most OUTSTANDING streams
//! open, and the same notion of done as Shoal's sender: a yamux stream is done when the
//! receiver has read it to its end and closed its side, a QUIC stream when the receiver has
//! acknowledged all of it (`stopped()`). Nothing is read from or written to a file system and
//! nothing is hashed: the bytes come from one static buffer and are dropped on arrival.
//!
//! As in Shoal's default (`--threads 1`), each end runs on its own thread with a
//! current-thread tokio runtime; each end drives its connection in the same task as its
//! streams (no task per stream). Prints one line: streams, bytes, the transfer's seconds (first
//! stream opened to last stream done), the whole process's seconds (identity, handshake and all)
//! and the whole process's CPU seconds (both ends: `metrics::cpu_seconds`, as Shoal's rows
//! count each end's whole process).
//!
//!   cargo run --release -p shoal-transport --example stream_anchor -- yamux|quic [FILES] [SIZE] [OUTSTANDING]
//!
//! scripts/bench/stream-anchor.sh runs it beside `tar | tar` and Shoal's per-file modes.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::{AsyncReadExt, AsyncWriteExt};
use shoal_row::metrics;
use shoal_transport::config::FlowConfig;
use shoal_transport::identity::{self, Identity};
use shoal_transport::transport::{
    discover_mtu_towards, quic_endpoint_config, quic_transport, udp_socket, yamux_config,
    yamux_streams, YAMUX_WRITE_BUFFER,
};
use tokio_util::compat::TokioAsyncReadCompatExt;

fn main() -> Result<()> {
    let started = Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let protocol = args
        .first()
        .map(String::as_str)
        .unwrap_or("yamux")
        .to_string();
    let number = |i: usize, default: u64| -> Result<u64> {
        args.get(i).map_or(Ok(default), |a| {
            a.parse().with_context(|| format!("not a number: {a}"))
        })
    };
    let plan = Plan {
        files: number(1, 65_536)?,
        size: number(2, 4096)? as usize,
        outstanding: number(3, u64::from(FlowConfig::default().max_streams))? as usize,
    };
    let dir = tempfile::tempdir()?;
    let identity = Identity::load_or_create(dir.path())?;
    let seconds = match protocol.as_str() {
        "yamux" => yamux_run(&identity, plan)?,
        "quic" => quic_run(&identity, plan)?,
        other => bail!("protocol must be yamux or quic, not {other}"),
    };
    println!(
        "stream-anchor {protocol} streams {} bytes {} seconds {seconds:.3} process_seconds {:.3} \
         cpu_s {:.3}",
        plan.files,
        plan.files * plan.size as u64,
        started.elapsed().as_secs_f64(),
        metrics::cpu_seconds()
    );
    Ok(())
}

#[derive(Clone, Copy)]
struct Plan {
    files: u64,
    size: usize,
    outstanding: usize,
}

/// A current-thread runtime, as Shoal's ends use by default.
fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// Runs `server` on a thread of its own and `client` on this one; returns the client's
/// seconds once both ends are done (either end's failure is printed as it happens).
fn two_ends<S, C>(server: S, client: C) -> Result<f64>
where
    S: FnOnce() -> Result<()> + Send + 'static,
    C: FnOnce() -> Result<f64>,
{
    let server = std::thread::spawn(move || server().inspect_err(|e| eprintln!("server: {e:#}")));
    let seconds = client().inspect_err(|e| eprintln!("client: {e:#}"));
    server.join().expect("server thread")?;
    seconds
}

/// One end's streams under way, each ending when its stream is done.
type Streams = FuturesUnordered<BoxFuture<'static, Result<()>>>;

/// Takes every finished stream out of `streams`, counting it in `done`; whether any finished.
fn reap(streams: &mut Streams, cx: &mut TaskContext<'_>, done: &mut u64) -> Result<bool> {
    let mut any = false;
    while let Poll::Ready(Some(r)) = streams.poll_next_unpin(cx) {
        r?;
        *done += 1;
        any = true;
    }
    Ok(any)
}

fn yamux_run(identity: &Identity, plan: Plan) -> Result<f64> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(identity.server_config()?));
    let connector =
        tokio_rustls::TlsConnector::from(Arc::new(identity::client_config(identity.pin)?));
    let streams = yamux_streams(plan.outstanding as u32);
    let server = move || {
        runtime()?.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let (tcp, _) = listener.accept().await?;
            tcp.set_nodelay(true)?;
            let tls = acceptor.accept(tcp).await?;
            // As Shoal's receiver: the patched yamux flushes once per batch of frames, so a
            // buffered writer turns many streams' acknowledgements and closes into one TLS
            // write.
            let tls = tokio::io::BufWriter::with_capacity(YAMUX_WRITE_BUFFER, tls);
            let mut conn =
                yamux::Connection::new(tls.compat(), yamux_config(streams), yamux::Mode::Server);
            let mut reading = Streams::new();
            let mut done = 0u64;
            poll_fn(|cx| loop {
                let mut progress = reap(&mut reading, cx, &mut done)?;
                // The server keeps driving its connection until the client closes it, so every
                // stream's close reaches the client.
                match conn.poll_next_inbound(cx) {
                    Poll::Ready(Some(stream)) => {
                        let mut stream = stream?;
                        reading.push(Box::pin(async move {
                            let mut buf = [0u8; 16 << 10];
                            while stream.read(&mut buf).await? > 0 {}
                            stream.close().await?;
                            Ok(())
                        }));
                        progress = true;
                    }
                    Poll::Ready(None) if done == plan.files => return Poll::Ready(Ok(())),
                    Poll::Ready(None) => {
                        return Poll::Ready(Err(anyhow!(
                            "server: the connection ended after {done} streams"
                        )))
                    }
                    Poll::Pending => {}
                }
                if !progress {
                    return Poll::Pending;
                }
            })
            .await
        })
    };
    let client = move || {
        runtime()?.block_on(async move {
            let tcp = tokio::net::TcpStream::connect(addr).await?;
            tcp.set_nodelay(true)?;
            let tls = connector.connect(identity::server_name(), tcp).await?;
            // As Shoal's sender: whole reads below yamux's 12-byte header reads, and one TLS
            // write for the frames of many streams.
            let tls = tokio::io::BufReader::new(tls);
            let tls = tokio::io::BufWriter::with_capacity(YAMUX_WRITE_BUFFER, tls);
            let mut conn =
                yamux::Connection::new(tls.compat(), yamux_config(streams), yamux::Mode::Client);
            let data: &'static [u8] = vec![0xAB; plan.size].leak();
            let start = Instant::now();
            let mut open = Streams::new();
            let (mut opened, mut done) = (0u64, 0u64);
            poll_fn(|cx| loop {
                let mut progress = reap(&mut open, cx, &mut done)?;
                if done == plan.files {
                    return Poll::Ready(Ok::<(), anyhow::Error>(()));
                }
                if opened < plan.files && open.len() < plan.outstanding {
                    if let Poll::Ready(stream) = conn.poll_new_outbound(cx) {
                        let mut stream = stream?;
                        opened += 1;
                        open.push(Box::pin(async move {
                            stream.write_all(data).await?;
                            stream.close().await?;
                            // The receiver closes its side once it has read everything.
                            let mut scrap = [0u8; 64];
                            while stream.read(&mut scrap).await? > 0 {}
                            Ok(())
                        }));
                        progress = true;
                    }
                }
                // Driving the connection is what moves every stream's frames.
                match conn.poll_next_inbound(cx) {
                    Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(anyhow!("client: {e}"))),
                    // The receiver opens no streams.
                    Poll::Ready(Some(Ok(_))) => progress = true,
                    Poll::Ready(None) => {
                        return Poll::Ready(Err(anyhow!(
                            "client: the connection ended after {done} streams"
                        )))
                    }
                    Poll::Pending => {}
                }
                if !progress {
                    return Poll::Pending;
                }
            })
            .await?;
            let seconds = start.elapsed().as_secs_f64();
            poll_fn(|cx| conn.poll_close(cx)).await.ok();
            Ok(seconds)
        })
    };
    two_ends(server, client)
}

fn quic_run(identity: &Identity, plan: Plan) -> Result<f64> {
    let flow = FlowConfig::default();
    let bind: SocketAddr = "127.0.0.1:0".parse()?;
    let server_socket = udp_socket(bind, &flow)?;
    let addr = server_socket.local_addr()?;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(identity.server_config()?)?;
    let mut server_config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server_config.transport_config(Arc::new(quic_transport(&flow, None)?));
    let crypto =
        quinn::crypto::rustls::QuicClientConfig::try_from(identity::client_config(identity.pin)?)?;
    let mut client_config = quinn::ClientConfig::new(Arc::new(crypto));
    let mut client_transport = quic_transport(&flow, None)?;
    discover_mtu_towards(&mut client_transport, addr, None);
    client_config.transport_config(Arc::new(client_transport));
    let server = move || {
        runtime()?.block_on(async move {
            let endpoint = quinn::Endpoint::new(
                quic_endpoint_config(),
                Some(server_config),
                server_socket,
                Arc::new(quinn::TokioRuntime),
            )?;
            let conn = endpoint.accept().await.context("no connection")?.await?;
            let mut reading = FuturesUnordered::new();
            let mut done = 0u64;
            while done < plan.files {
                tokio::select! {
                    Some(r) = reading.next(), if !reading.is_empty() => {
                        let r: Result<()> = r;
                        r?;
                        done += 1;
                    }
                    stream = conn.accept_uni() => {
                        let mut stream = stream?;
                        reading.push(async move {
                            while stream.read_chunk(usize::MAX, true).await?.is_some() {}
                            Ok(())
                        });
                    }
                }
            }
            // The client closes the connection once it has seen every stream acknowledged.
            conn.closed().await;
            Ok(())
        })
    };
    let client = move || {
        runtime()?.block_on(async move {
            let mut endpoint = quinn::Endpoint::new(
                quic_endpoint_config(),
                None,
                udp_socket("0.0.0.0:0".parse()?, &flow)?,
                Arc::new(quinn::TokioRuntime),
            )?;
            endpoint.set_default_client_config(client_config);
            let conn = endpoint.connect(addr, "shoal")?.await?;
            let data = bytes::Bytes::from(vec![0xAB; plan.size]);
            let start = Instant::now();
            let mut open = FuturesUnordered::new();
            let (mut opened, mut done) = (0u64, 0u64);
            while done < plan.files {
                tokio::select! {
                    biased;
                    Some(r) = open.next(), if !open.is_empty() => {
                        let r: Result<()> = r;
                        r?;
                        done += 1;
                    }
                    stream = conn.open_uni(), if opened < plan.files && open.len() < plan.outstanding => {
                        let mut stream = stream?;
                        opened += 1;
                        let data = data.clone();
                        open.push(async move {
                            stream.write_chunk(data).await?;
                            stream.finish()?;
                            match stream.stopped().await? {
                                None => Ok(()),
                                Some(code) => bail!("stream stopped with {code}"),
                            }
                        });
                    }
                }
            }
            let seconds = start.elapsed().as_secs_f64();
            conn.close(0u32.into(), b"done");
            endpoint.wait_idle().await;
            Ok(seconds)
        })
    };
    two_ends(server, client)
}
