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

/// The UDP payload size a QUIC connection sends now: quinn's current path MTU (its MTU
/// discovery raises it from 1,200 bytes), bytes.
pub fn udp_payload_bytes(conn: &quinn::Connection) -> u64 {
    u64::from(conn.stats().path.current_mtu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_socket_reports_at_least_one_segment() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let o = UdpOffload::of(&s).expect("quinn-udp sets up a plain UDP socket");
        assert!(o.gso_segments >= 1 && o.gro_segments >= 1, "{o:?}");
    }
}
