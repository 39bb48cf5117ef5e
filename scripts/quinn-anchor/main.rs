//! The single-stream anchor for Shoal's quic-bundle CPU cost: quinn 0.11's own bulk benchmark
//! (`benches/bench.rs`, `large_data_1_stream`, which scripts/bench/quinn-anchor.sh also builds
//! and runs) reduced to one long stream, so no per-iteration stream set-up and wait is in its
//! figure: the stricter reference. As there: a server thread and a client thread, each with a
//! current-thread tokio runtime, on loopback, default `TransportConfig` (quinn's bench only
//! raises the uni-stream limit), a self-signed certificate; one connection, one unidirectional
//! stream, the client writes BYTES (default 256 MiB) with `write_all` in 1 MiB slices, finishes
//! and waits for the stream to be stopped; the server reads with `read_chunk(usize::MAX,
//! false)` and drops the chunks. Both UDP sockets get Shoal's 8 MiB buffers (with the kernel's
//! ~208 KiB default, which quinn's bench keeps, the receiving socket overflows on loopback and
//! the anchor's CPU varied threefold from run to run). Prints one line: bytes, seconds, and the
//! CPU seconds (user + system, from /proc/thread-self/stat) of the client and server threads.
//!
//!   quinn-anchor [BYTES]
//!
//! The same client and server as two processes, for what the protocol itself holds in memory
//! on a long path (scripts/bench/quic-link-memory.sh runs them on each side of `shoal link`):
//!
//!   quinn-anchor serve ADDR CERT_OUT WINDOW [CONNECTIONS]
//!   quinn-anchor send ADDR CERT BYTES WINDOW [CONNECTIONS]
//!
//! `serve` listens on ADDR, writes its certificate (DER) to CERT_OUT, takes CONNECTIONS
//! (default 1) connections and one stream on each; `send` trusts CERT and sends BYTES, split
//! evenly over CONNECTIONS connections, each from an endpoint and socket of its own (as
//! `shoal send` does). WINDOW is Shoal's quic-bundle flow setting (20 MiB by default in
//! Shoal) for the whole run, divided among the connections as Shoal divides it (at least
//! 2 MiB each): the server's stream and connection receive windows, the client's send window.
//! Quinn's defaults (a 1.25 MB stream window) would hold one connection to ~9 MB/s at 141 ms,
//! far from the link's rate. Each prints its bytes, seconds and its process's peak RSS
//! (`VmHWM`), the figure Shoal's rows carry.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Instant;

use quinn::{Endpoint, TokioRuntime};
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};

const SLICE: usize = 1 << 20;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") if matches!(args.len(), 4 | 5) => serve(
            &args[1],
            &args[2],
            number(&args[3], "WINDOW"),
            connections(args.get(4)),
        ),
        Some("send") if matches!(args.len(), 5 | 6) => send(
            &args[1],
            &args[2],
            number(&args[3], "BYTES"),
            number(&args[4], "WINDOW"),
            connections(args.get(5)),
        ),
        Some("serve" | "send") => {
            eprintln!(
                "usage: quinn-anchor serve ADDR CERT_OUT WINDOW [CONNECTIONS] \
                 | send ADDR CERT BYTES WINDOW [CONNECTIONS]"
            );
            std::process::exit(2);
        }
        _ => one_process(args.first().map_or(256 << 20, |a| number(a, "BYTES"))),
    }
}

fn connections(arg: Option<&String>) -> u64 {
    arg.map_or(1, |a| number(a, "CONNECTIONS")).max(1)
}

/// Each connection's window: the run's divided among its connections, at least 2 MiB
/// (Shoal's `quic_window_per_connection`).
fn share(window: u64, connections: u64) -> u64 {
    (window / connections).max(2 << 20)
}

fn number(arg: &str, what: &str) -> u64 {
    arg.parse()
        .unwrap_or_else(|_| panic!("{what}: a whole number of bytes, not {arg:?}"))
}

/// Both ends in one process on loopback: the CPU anchor.
fn one_process(total: u64) {
    let (mut server_config, cert) = server_config();
    Arc::get_mut(&mut server_config.transport)
        .unwrap()
        .max_concurrent_uni_streams(1024_u16.into());
    let client_config = trusting(cert);

    let sock = udp_socket();
    let addr = sock.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let rt = rt();
        let endpoint = {
            let _guard = rt.enter();
            Endpoint::new(Default::default(), Some(server_config), sock, Arc::new(TokioRuntime))
                .unwrap()
        };
        let (received, _) = rt.block_on(async move {
            receive_one_stream(endpoint.accept().await.expect("accept")).await
        });
        (received, thread_cpu_seconds())
    });

    let rt = rt();
    let seconds = rt.block_on(send_one_stream(udp_socket(), client_config, addr, total));
    let client_cpu = thread_cpu_seconds();
    let (received, server_cpu) = server.join().unwrap();
    assert_eq!(received, total, "the server received every byte");
    println!(
        "quinn-anchor bytes {total} seconds {seconds:.3} client_cpu_s {client_cpu:.3} server_cpu_s {server_cpu:.3}"
    );
}

/// A loopback UDP socket with Shoal's default 8 MiB buffers (`transport::config::DEFAULT_UDP_BUFFER`):
/// with the kernel's default (~208 KiB) the receiving socket overflows on loopback, quinn
/// retransmits, and the anchor's CPU varies by a factor of three from run to run.
fn udp_socket() -> UdpSocket {
    udp_socket_on(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0))
}

fn udp_socket_on(addr: SocketAddr) -> UdpSocket {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    let _ = s.set_recv_buffer_size(8 << 20);
    let _ = s.set_send_buffer_size(8 << 20);
    s.bind(&addr.into()).unwrap();
    s.into()
}

/// A server configuration with a fresh self-signed certificate for "localhost", and the
/// certificate (for the client to trust).
fn server_config() -> (quinn::ServerConfig, CertificateDer<'static>) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let key = PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der());
    let cert = CertificateDer::from(cert.cert);
    let config = quinn::ServerConfig::with_single_cert(vec![cert.clone()], key.into()).unwrap();
    (config, cert)
}

/// A client configuration that trusts `cert` alone.
fn trusting(cert: CertificateDer<'static>) -> quinn::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    quinn::ClientConfig::with_root_certificates(Arc::new(roots)).unwrap()
}

fn varint(v: u64) -> quinn::VarInt {
    quinn::VarInt::from_u64(v).expect("WINDOW fits a QUIC varint")
}

/// The server of `serve`: `connections` connections, one stream each read to its end.
fn serve(addr: &str, cert_out: &str, window: u64, connections: u64) {
    let (mut config, cert) = server_config();
    let transport = Arc::get_mut(&mut config.transport).unwrap();
    let window = share(window, connections);
    transport
        .stream_receive_window(varint(window))
        .receive_window(varint(window));
    let sock = udp_socket_on(addr.parse().expect("ADDR: ip:port"));
    let rt = rt();
    let endpoint = {
        let _guard = rt.enter();
        Endpoint::new(Default::default(), Some(config), sock, Arc::new(TokioRuntime)).unwrap()
    };
    // Written after the socket is bound: the client starts when it sees the file.
    let tmp = format!("{cert_out}.tmp");
    std::fs::write(&tmp, cert.as_ref()).unwrap();
    std::fs::rename(&tmp, cert_out).unwrap();
    let (received, seconds) = rt.block_on(async move {
        let start = Instant::now();
        let mut each = Vec::new();
        for _ in 0..connections {
            let incoming = endpoint.accept().await.expect("accept");
            each.push(tokio::spawn(receive_one_stream(incoming)));
        }
        let mut received = 0;
        for task in each {
            received += task.await.expect("connection task").0;
        }
        (received, start.elapsed().as_secs_f64())
    });
    println!(
        "quinn-anchor serve bytes {received} seconds {seconds:.3} peak_rss_kb {}",
        peak_rss_kb()
    );
}

/// The client of `send`: BYTES over `connections` streams, one a connection, each written as
/// quinn's bench writes it.
fn send(addr: &str, cert: &str, total: u64, window: u64, connections: u64) {
    let mut client_config = trusting(CertificateDer::from(std::fs::read(cert).expect("CERT")));
    let mut transport = quinn::TransportConfig::default();
    transport.send_window(share(window, connections));
    client_config.transport_config(Arc::new(transport));
    let server: SocketAddr = addr.parse().expect("ADDR: ip:port");
    let bind = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
    let seconds = rt().block_on(async move {
        let start = Instant::now();
        let each: Vec<_> = (0..connections)
            .map(|i| {
                // The bytes split evenly, the first connections taking the remainder.
                let n = total / connections + u64::from(i < total % connections);
                let sock = udp_socket_on(bind);
                tokio::spawn(send_one_stream(sock, client_config.clone(), server, n))
            })
            .collect();
        for task in each {
            task.await.expect("connection task");
        }
        start.elapsed().as_secs_f64()
    });
    println!("quinn-anchor send bytes {total} seconds {seconds:.3} peak_rss_kb {}", peak_rss_kb());
}

/// The server's side: takes one connection and reads its one stream to the end, dropping
/// the bytes; returns the bytes and the seconds from the stream's start to its end.
async fn receive_one_stream(incoming: quinn::Incoming) -> (u64, f64) {
    let conn = incoming.await.expect("connect");
    let mut stream = conn.accept_uni().await.expect("stream");
    let start = Instant::now();
    let mut n = 0u64;
    while let Some(chunk) = stream.read_chunk(usize::MAX, false).await.unwrap() {
        n += chunk.bytes.len() as u64;
    }
    let seconds = start.elapsed().as_secs_f64();
    // Let the client see the stream end before the connection goes.
    conn.closed().await;
    (n, seconds)
}

/// The client's side: connects, writes `total` bytes on one stream in 1 MiB slices (as quinn's
/// bench does), waits for the server to have read it all, closes; returns the seconds from
/// opening the stream to that.
async fn send_one_stream(
    sock: UdpSocket,
    config: quinn::ClientConfig,
    server: SocketAddr,
    total: u64,
) -> f64 {
    let mut endpoint =
        Endpoint::new(Default::default(), None, sock, Arc::new(TokioRuntime)).unwrap();
    endpoint.set_default_client_config(config);
    let conn = endpoint.connect(server, "localhost").unwrap().await.unwrap();
    let data = vec![0xABu8; SLICE];
    let start = Instant::now();
    let mut stream = conn.open_uni().await.unwrap();
    let mut left = total;
    while left > 0 {
        let n = left.min(SLICE as u64) as usize;
        stream.write_all(&data[..n]).await.unwrap();
        left -= n as u64;
    }
    stream.finish().unwrap();
    let _ = stream.stopped().await;
    let seconds = start.elapsed().as_secs_f64();
    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    seconds
}

/// This process's peak resident set size (`VmHWM`), KiB. Panics rather than print a figure
/// that was not read.
fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// This thread's user + system CPU seconds (/proc/thread-self/stat fields 14 and 15, in clock
/// ticks of 1/100 s on Linux).
fn thread_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // After ")": field 3 is index 0, so utime (14) is index 11 and stime (15) index 12.
    (ticks(11) + ticks(12)) / 100.0
}
