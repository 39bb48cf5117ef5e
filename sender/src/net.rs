//! Connection set-up: TCP (TLS 1.3 with pinning, or plain) and QUIC, with the socket buffers
//! asked for; a dup of each TCP socket is kept so the values in effect can be read back.

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use shoal_transport::config::{Cc, FlowConfig};
use shoal_transport::identity::{self, Pin};
use shoal_transport::quic_cc::{self, AckedBytes};
use shoal_transport::stats::set_tcp_cc;
use shoal_transport::transport::{
    discover_mtu_towards, quic_endpoint_config, quic_transport, udp_socket,
};
use socket2::SockRef;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;

/// Any byte stream a transport can run over.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}
pub(crate) type BoxIo = Box<dyn Io>;

/// A handle on a TCP socket for reading its settings and statistics back (a duplicate
/// descriptor, so it stays valid whoever owns the stream).
#[derive(Debug, Clone)]
pub(crate) struct SocketProbe(Arc<OwnedFd>);

impl SocketProbe {
    fn of(tcp: &TcpStream) -> Result<Self> {
        Ok(Self(Arc::new(tcp.as_fd().try_clone_to_owned()?)))
    }

    pub(crate) fn shared(&self) -> Arc<OwnedFd> {
        self.0.clone()
    }

    /// `SO_SNDBUF` as the kernel reports it now (autotuning changes it during a run).
    pub(crate) fn sndbuf(&self) -> u64 {
        SockRef::from(&*self.0).send_buffer_size().unwrap_or(0) as u64
    }
}

/// Checks that `to` reads as `host:port` or `[v6]:port` with a port in 1..=65535 (no
/// lookup): `send --to`'s value parser.
pub fn check_address(to: &str) -> Result<(), String> {
    let Some((host, port)) = to.rsplit_once(':') else {
        return Err(format!("{to:?} is not host:port (e.g. 10.0.0.2:7474)"));
    };
    let bracketed = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    let v6_ok = bracketed.is_some_and(|h| h.parse::<std::net::Ipv6Addr>().is_ok());
    if host.is_empty() || (host.contains(':') && !v6_ok) {
        return Err(format!(
            "{to:?} is not host:port (an IPv6 address goes in brackets: [::1]:7474)"
        ));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(format!("the port of {to:?} is outside 1..=65535")),
    }
}

/// Resolves `to` (host:port) to its first address.
pub async fn resolve(to: &str) -> Result<SocketAddr> {
    tokio::net::lookup_host(to)
        .await
        .with_context(|| format!("cannot resolve {to}"))?
        .next()
        .ok_or_else(|| anyhow!("{to} resolves to no address"))
}

/// Connects over TCP with the buffers in `flow`, then TLS with the pin (or plain).
pub(crate) async fn connect_tcp(
    to: &str,
    pin: Pin,
    plain: bool,
    cc: Option<Cc>,
    flow: &FlowConfig,
    timeout: Duration,
) -> Result<(BoxIo, SocketProbe)> {
    let work = async {
        let addr = resolve(to).await?;
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        }?;
        // Buffers must be set before connecting for the window scale to account for them.
        if let Some(b) = flow.sndbuf {
            socket.set_send_buffer_size(b as u32)?;
        }
        if let Some(b) = flow.rcvbuf {
            socket.set_recv_buffer_size(b as u32)?;
        }
        // The controller is set before connecting, so the handshake already uses it; the
        // name in effect is read back afterwards.
        if let Some(cc) = cc {
            set_tcp_cc(&socket, cc)
                .with_context(|| format!("cannot set congestion controller {cc}"))?;
        }
        let tcp = socket
            .connect(addr)
            .await
            .with_context(|| format!("cannot connect to {to}"))?;
        // Records are coalesced by the sender itself; Nagle would only add delay.
        tcp.set_nodelay(true)?;
        let probe = SocketProbe::of(&tcp)?;
        if plain {
            return Ok((Box::new(tcp) as BoxIo, probe));
        }
        let connector = TlsConnector::from(Arc::new(identity::client_config(pin)?));
        let tls = connector
            .connect(identity::server_name(), tcp)
            .await
            .with_context(|| format!("TLS handshake with {to} failed"))?;
        Ok((Box::new(tls) as BoxIo, probe))
    };
    tokio::time::timeout(timeout, work)
        .await
        .with_context(|| format!("connecting to {to} timed out after {} s", timeout.as_secs()))?
}

/// A QUIC connection and the buffer its UDP socket got.
pub struct QuicConn {
    pub conn: quinn::Connection,
    pub endpoint: quinn::Endpoint,
    pub udp_sndbuf: u64,
    /// The segmentation offload quinn-udp finds on the UDP socket.
    pub udp_offload: Option<shoal_transport::udp_offload::UdpOffload>,
    /// Bytes the receiver acknowledged (counted by the congestion controller's delegate).
    pub acked: AckedBytes,
}

/// Connects over QUIC with the pin. Public so tests can drive a live receiver with crafted
/// QUIC streams through the same client set-up as the sender.
pub async fn connect_quic(
    to: &str,
    pin: Pin,
    cc: Option<Cc>,
    flow: &FlowConfig,
    timeout: Duration,
) -> Result<QuicConn> {
    connect_quic_with(to, pin, cc, quic_cc::factory(cc), flow, timeout).await
}

/// [`connect_quic`] with `controller` as the congestion controller (`send --resume`,
/// `--initial-window`); `cc` names it for the transport parameters.
pub async fn connect_quic_with(
    to: &str,
    pin: Pin,
    cc: Option<Cc>,
    controller: quic_cc::Factory,
    flow: &FlowConfig,
    timeout: Duration,
) -> Result<QuicConn> {
    let addr = resolve(to).await?;
    let bind: SocketAddr = if addr.is_ipv4() {
        "0.0.0.0:0".parse().expect("address")
    } else {
        "[::]:0".parse().expect("address")
    };
    let socket = udp_socket(bind, flow)?;
    let udp_sndbuf = SockRef::from(&socket).send_buffer_size().unwrap_or(0) as u64;
    let udp_offload = shoal_transport::udp_offload::UdpOffload::of(&socket);
    let mut endpoint = quinn::Endpoint::new(
        quic_endpoint_config(),
        None,
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .context("cannot create the QUIC endpoint")?;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(identity::client_config(pin)?)
        .context("TLS configuration unusable for QUIC")?;
    let mut client = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quic_transport(flow, cc)?;
    // The receiver opens no stream towards the sender, and quinn sets up every stream a peer
    // may open in advance (`StreamsState::new`: 4,096 + 4 map entries a connection here).
    transport.max_concurrent_uni_streams(0u32.into());
    transport.max_concurrent_bidi_streams(0u32.into());
    discover_mtu_towards(&mut transport, addr, flow.max_udp_payload);
    let (controller, acked) = quic_cc::Counting::wrap(controller);
    transport.congestion_controller_factory(controller);
    client.transport_config(Arc::new(transport));
    endpoint.set_default_client_config(client);
    let connecting = endpoint
        .connect(addr, "shoal")
        .with_context(|| format!("cannot start a QUIC connection to {to}"))?;
    let conn = tokio::time::timeout(timeout, connecting)
        .await
        .with_context(|| {
            format!(
                "QUIC connection to {to} timed out after {} s",
                timeout.as_secs()
            )
        })?
        .with_context(|| format!("QUIC handshake with {to} failed"))?;
    Ok(QuicConn {
        conn,
        endpoint,
        udp_sndbuf,
        udp_offload,
        acked,
    })
}

/// Closes `conn` with `code` and `reason`, then waits (at most `limit`) until its
/// CONNECTION_CLOSE has been handed to the socket: the first datagram after the close, as a
/// closed connection sends nothing else.
///
/// Waiting out the endpoint's whole closing period (`Endpoint::wait_idle`: three probe
/// timeouts, in which a closed connection only repeats its close) was most of a QUIC `send`
/// process's fixed cost on loopback (docs/decisions/0006-patched-quinn-proto.md).
/// The receiver needs only the close: it has sent its completion by then, and it ends its side
/// when the close arrives or, should the close be lost, 5 s after its completion
/// (receiver/src/quic.rs). A close made behind a full congestion window was never sent at all
/// until vendor/quinn-proto exempted it from the window (its README.shoal.md): on loopback
/// the receiver then waited out those 5 s after 5 of 12 one-file runs.
pub(crate) async fn close_and_send(
    conn: &quinn::Connection,
    code: u32,
    reason: &[u8],
    limit: Duration,
) {
    // Closed already (by the peer, or lost): there is no close of ours to send.
    let already = conn.close_reason().is_some();
    let before = conn.stats().udp_tx.datagrams;
    conn.close(code.into(), reason);
    if already {
        return;
    }
    let deadline = tokio::time::Instant::now() + limit;
    // The connection's driver sends the close the next time it runs: usually at this yield.
    tokio::task::yield_now().await;
    while conn.stats().udp_tx.datagrams == before && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::check_address;

    #[test]
    fn addresses_are_host_and_port() {
        for ok in ["127.0.0.1:7474", "[::1]:1", "host.example:65535"] {
            assert_eq!(check_address(ok), Ok(()), "{ok}");
        }
        for bad in [
            "nonsense",
            "127.0.0.1:99999",
            "127.0.0.1:0",
            ":7474",
            "::1:7474",
            "a:b",
        ] {
            assert!(check_address(bad).is_err(), "{bad}");
        }
    }
}
