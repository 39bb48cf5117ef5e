//! The single-stream anchor for Shoal's quic-bundle CPU cost: quinn 0.11's own bulk benchmark
//! (`benches/bench.rs`, `large_data_1_stream`, which scripts/bench-quinn-anchor.sh also builds
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

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Instant;

use quinn::{Endpoint, TokioRuntime};
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};

const SLICE: usize = 1 << 20;

fn main() {
    let total: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("BYTES: a whole number of bytes"))
        .unwrap_or(256 << 20);
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let key = PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der());
    let cert = CertificateDer::from(cert.cert);
    let mut server_config =
        quinn::ServerConfig::with_single_cert(vec![cert.clone()], key.into()).unwrap();
    Arc::get_mut(&mut server_config.transport)
        .unwrap()
        .max_concurrent_uni_streams(1024_u16.into());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let client_config = quinn::ClientConfig::with_root_certificates(Arc::new(roots)).unwrap();

    let sock = udp_socket();
    let addr = sock.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let rt = rt();
        let endpoint = {
            let _guard = rt.enter();
            Endpoint::new(Default::default(), Some(server_config), sock, Arc::new(TokioRuntime))
                .unwrap()
        };
        let received = rt.block_on(async move {
            let conn = endpoint.accept().await.expect("accept").await.expect("connect");
            let mut stream = conn.accept_uni().await.expect("stream");
            let mut n = 0u64;
            while let Some(chunk) = stream.read_chunk(usize::MAX, false).await.unwrap() {
                n += chunk.bytes.len() as u64;
            }
            // Let the client see the stream end before the connection goes.
            conn.closed().await;
            n
        });
        (received, thread_cpu_seconds())
    });

    let rt = rt();
    let data = vec![0xABu8; SLICE];
    let (seconds, client_cpu) = rt.block_on(async move {
        let mut endpoint =
            Endpoint::new(Default::default(), None, udp_socket(), Arc::new(TokioRuntime)).unwrap();
        endpoint.set_default_client_config(client_config);
        let conn = endpoint.connect(addr, "localhost").unwrap().await.unwrap();
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
        (seconds, thread_cpu_seconds())
    });
    let (received, server_cpu) = server.join().unwrap();
    assert_eq!(received, total, "the server received every byte");
    println!(
        "quinn-anchor bytes {total} seconds {seconds:.3} client_cpu_s {client_cpu:.3} server_cpu_s {server_cpu:.3}"
    );
}

/// A loopback UDP socket with Shoal's default 8 MiB buffers (`common::config::DEFAULT_UDP_BUFFER`):
/// with the kernel's default (~208 KiB) the receiving socket overflows on loopback, quinn
/// retransmits, and the anchor's CPU varies by a factor of three from run to run.
fn udp_socket() -> UdpSocket {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    let _ = s.set_recv_buffer_size(8 << 20);
    let _ = s.set_send_buffer_size(8 << 20);
    s.bind(&SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0).into())
        .unwrap();
    s.into()
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
