//! The segmentation offload quinn-udp uses on a UDP socket and the UDP payload size a QUIC
//! connection uses, read back for the result row (docs/csv-schema.md): a QUIC arm's CPU cost
//! per byte depends on how many datagrams one system call carries.

/// Segments per system call on one UDP socket, as quinn-udp reports them (1: no offload).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpOffload {
    /// Most datagrams one `sendmsg` carries (`UdpSocketState::max_gso_segments`, GSO).
    pub gso_segments: u64,
    /// Datagrams one `recvmsg` may return coalesced (`UdpSocketState::gro_segments`, GRO).
    pub gro_segments: u64,
}

impl UdpOffload {
    /// What quinn-udp finds on `socket`: the same probe quinn runs on the socket it is given
    /// (it enables GRO where the kernel has it), so it reads what the endpoint uses. `None` if
    /// quinn-udp cannot set the socket up.
    pub fn of(socket: &std::net::UdpSocket) -> Option<UdpOffload> {
        let state = quinn::udp::UdpSocketState::new(socket.into()).ok()?;
        Some(UdpOffload {
            gso_segments: state.max_gso_segments() as u64,
            gro_segments: state.gro_segments() as u64,
        })
    }
}

/// Largest UDP payload a Shoal QUIC endpoint accepts, and the most its MTU discovery may try.
/// The kernel takes a GSO send only if all of it fits in one 64 KiB IP packet (65,507 bytes of
/// UDP payload over IPv4); ten datagrams of 6,500 bytes fit. quinn 0.11 sent up to ten whatever
/// their size, and larger datagrams made every batched send fail with `EMSGSIZE`, which
/// quinn-udp takes for a lost MTU probe; black-hole detection then dropped the connection to
/// 1,200 bytes (docs/decisions/0008-quic-datagram-size.md). The vendored quinn now bounds a
/// batch by those bytes (vendor/quinn/README.shoal.md); the bound here is kept as measured.
pub const QUIC_MAX_UDP_PAYLOAD: u16 = 6_500;

/// UDP payload that fits an Ethernet frame (1,500 − 28 bytes of IPv4 and UDP headers).
const ETHERNET_UDP_PAYLOAD: u32 = 1_472;

/// The MTU of the kernel's route towards `peer` (`IP_MTU`/`IPV6_MTU` of a UDP socket
/// connected to it; nothing is sent), or `None` where the kernel does not say.
pub fn route_mtu(peer: std::net::SocketAddr) -> Option<u32> {
    let bind: std::net::SocketAddr = if peer.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = std::net::UdpSocket::bind(bind).ok()?;
    socket.connect(peer).ok()?;
    if peer.is_ipv4() {
        rustix::net::sockopt::ip_mtu(&socket).ok()
    } else {
        rustix::net::sockopt::ipv6_mtu(&socket).ok()
    }
}

/// The upper bound of a sender's MTU discovery on a route of `route_mtu` bytes, or `None` for
/// quinn's default (1,452 bytes: an Ethernet path through IPv6 or a tunnel).
///
/// TCP sizes its segments from the same route MTU (65,483-byte segments on loopback), so a
/// QUIC connection held to 1,452 bytes there paid its per-packet work (packet assembly,
/// header protection, one AEAD call, ACK and loss bookkeeping) ~4.5 times as often per byte
/// as it must. Paths of Ethernet MTU or less keep quinn's default, which is what QUIC uses on
/// the Internet and what the study's 1,500-byte link measured.
pub fn mtu_discovery_bound(route_mtu: Option<u32>, ipv6: bool) -> Option<u16> {
    let payload = route_payload(route_mtu, ipv6)?;
    (payload > ETHERNET_UDP_PAYLOAD).then(|| payload.min(u32::from(QUIC_MAX_UDP_PAYLOAD)) as u16)
}

/// The bound when the user asked for at most `max` bytes (`send --max-udp-payload`): `max`,
/// or the route's payload where that is smaller (never below QUIC's 1,200).
pub fn asked_discovery_bound(route_mtu: Option<u32>, ipv6: bool, max: u16) -> u16 {
    let route = route_payload(route_mtu, ipv6).map_or(u32::from(max), |p| p.max(1200));
    route.min(u32::from(max)) as u16
}

/// The UDP payload a route of `route_mtu` bytes carries (less the IP and UDP headers).
fn route_payload(route_mtu: Option<u32>, ipv6: bool) -> Option<u32> {
    let headers = if ipv6 { 48 } else { 28 };
    route_mtu?.checked_sub(headers)
}

/// The UDP payload size a QUIC connection sends now: quinn's current path MTU (its MTU
/// discovery raises it from 1,200 bytes), bytes.
pub fn udp_payload_bytes(conn: &quinn::Connection) -> u64 {
    u64::from(conn.stats().path.current_mtu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_goes_past_ethernet_only_on_larger_routes() {
        assert_eq!(mtu_discovery_bound(None, false), None);
        assert_eq!(mtu_discovery_bound(Some(1500), false), None);
        assert_eq!(mtu_discovery_bound(Some(1500), true), None);
        assert_eq!(mtu_discovery_bound(Some(1280), true), None);
        assert_eq!(mtu_discovery_bound(Some(20), false), None);
        assert_eq!(mtu_discovery_bound(Some(3000), false), Some(2972));
        assert_eq!(mtu_discovery_bound(Some(9000), true), Some(6500));
        assert_eq!(mtu_discovery_bound(Some(65536), false), Some(6500));
    }

    #[test]
    fn an_asked_bound_is_kept_within_the_route() {
        assert_eq!(asked_discovery_bound(Some(65536), false, 1452), 1452);
        assert_eq!(asked_discovery_bound(Some(1500), false, 6500), 1472);
        assert_eq!(asked_discovery_bound(Some(1500), true, 6500), 1452);
        assert_eq!(asked_discovery_bound(None, false, 3000), 3000);
        assert_eq!(asked_discovery_bound(Some(1000), false, 1452), 1200);
    }

    #[test]
    fn the_kernel_gives_loopbacks_route_mtu() {
        let lo = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mtu = route_mtu(lo.local_addr().unwrap()).expect("IP_MTU of a connected socket");
        assert!(mtu >= 1500, "{mtu}");
    }

    #[test]
    fn a_loopback_socket_reports_at_least_one_segment() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let o = UdpOffload::of(&s).expect("quinn-udp sets up a plain UDP socket");
        assert!(o.gso_segments >= 1 && o.gro_segments >= 1, "{o:?}");
    }
}
