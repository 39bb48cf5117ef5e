//! The `virtio_net_hdr` that a TUN opened with `IFF_VNET_HDR` puts before every packet, and
//! the on-wire size of a (possibly segmentation-offloaded) packet.
//!
//! With TSO/USO on, the kernel hands the TUN one super-packet of up to 64 KiB that it would
//! otherwise have cut into MTU-sized segments. The forwarder passes it through whole (the
//! receiving kernel segments or GROs it), but the link must be charged for what a real wire
//! would carry: every segment repeats the IP and TCP/UDP headers.

/// Size of the legacy `virtio_net_hdr` (no `num_buffers`), as set with `TUNSETVNETHDRSZ`.
pub const VNET_HDR_LEN: usize = 10;

const GSO_NONE: u8 = 0;
const GSO_ECN: u8 = 0x80;
const F_NEEDS_CSUM: u8 = 1;

/// The fields of `virtio_net_hdr` (TUN uses host byte order, little-endian on the hosts we run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    pub fn parse(b: &[u8]) -> Option<VnetHdr> {
        if b.len() < VNET_HDR_LEN {
            return None;
        }
        let u16at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16at(2),
            gso_size: u16at(4),
            csum_start: u16at(6),
            csum_offset: u16at(8),
        })
    }

    /// The header as the TUN reads it (host byte order).
    pub fn to_bytes(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }

    pub fn is_gso(&self) -> bool {
        self.gso_type & !GSO_ECN != GSO_NONE && self.gso_size > 0
    }
}

/// What one packet read from the TUN costs on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireSize {
    /// Bytes on the wire (IP packets, no link-layer framing), summed over segments.
    pub bytes: u64,
    /// Number of wire packets it stands for.
    pub segments: u32,
}

/// Length of the IP plus transport headers at the start of `ip`, if it can be parsed.
fn l3_l4_header_len(ip: &[u8], l4_offset_hint: Option<usize>) -> Option<usize> {
    let version = ip.first()? >> 4;
    let (l4_off, proto) = match version {
        4 => ((ip[0] & 0x0f) as usize * 4, *ip.get(9)?),
        // Extension headers are rare on this link; the checksum offset, when present, still
        // points at the transport header.
        6 => (40, *ip.get(6)?),
        _ => return None,
    };
    let l4_off = l4_offset_hint.unwrap_or(l4_off);
    let l4_len = match proto {
        6 => (ip.get(l4_off + 12)? >> 4) as usize * 4,
        17 => 8,
        // Not TCP/UDP at the expected place: trust the hint's transport as UDP-sized.
        _ => return None,
    };
    Some(l4_off + l4_len)
}

/// The on-wire size of one frame read from the TUN. `frame` starts with the vnet header when
/// `vnet` is true, otherwise it is a bare IP packet.
pub fn wire_size(frame: &[u8], vnet: bool) -> WireSize {
    if !vnet {
        return WireSize {
            bytes: frame.len() as u64,
            segments: 1,
        };
    }
    let ip = frame.get(VNET_HDR_LEN..).unwrap_or(&[]);
    let single = WireSize {
        bytes: ip.len() as u64,
        segments: 1,
    };
    let Some(h) = VnetHdr::parse(frame) else {
        return single;
    };
    if !h.is_gso() {
        return single;
    }
    let hint = (h.flags & F_NEEDS_CSUM != 0).then_some(h.csum_start as usize);
    // Fall back to the header's own hdr_len (which the kernel fills as a lower bound) when
    // the packet cannot be parsed.
    let hdrs = l3_l4_header_len(ip, hint).unwrap_or(h.hdr_len as usize);
    if hdrs == 0 || hdrs >= ip.len() {
        return single;
    }
    let payload = (ip.len() - hdrs) as u64;
    let segments = payload.div_ceil(h.gso_size as u64).max(1);
    WireSize {
        bytes: payload + segments * hdrs as u64,
        segments: segments as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vnet header followed by an IPv4/TCP packet (20 + 32 header bytes) with `payload` bytes.
    fn tcp4_frame(gso_size: u16, payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; VNET_HDR_LEN];
        f[0] = F_NEEDS_CSUM;
        f[1] = if gso_size > 0 { 1 } else { 0 }; // VIRTIO_NET_HDR_GSO_TCPV4
        f[2..4].copy_from_slice(&66u16.to_ne_bytes());
        f[4..6].copy_from_slice(&gso_size.to_ne_bytes());
        f[6..8].copy_from_slice(&20u16.to_ne_bytes());
        f[8..10].copy_from_slice(&16u16.to_ne_bytes());
        let mut ip = vec![0u8; 20 + 32 + payload];
        ip[0] = 0x45;
        ip[9] = 6;
        ip[20 + 12] = 8 << 4; // data offset: 8 words = 32 bytes (timestamps)
        f.extend_from_slice(&ip);
        f
    }

    #[test]
    fn plain_packet_costs_its_length() {
        let f = tcp4_frame(0, 1448);
        assert_eq!(
            wire_size(&f, true),
            WireSize {
                bytes: 1500,
                segments: 1
            }
        );
        assert_eq!(wire_size(&f[VNET_HDR_LEN..], false).bytes, 1500);
    }

    #[test]
    fn tso_packet_costs_every_segment_header() {
        // 45 full segments of 1448 bytes: exactly 45 × 1500 on the wire.
        let f = tcp4_frame(1448, 45 * 1448);
        assert_eq!(
            wire_size(&f, true),
            WireSize {
                bytes: 45 * 1500,
                segments: 45
            }
        );
        // A short last segment pays a full header but only its own payload.
        let f = tcp4_frame(1448, 2 * 1448 + 100);
        assert_eq!(
            wire_size(&f, true),
            WireSize {
                bytes: 2 * 1500 + 152,
                segments: 3
            }
        );
    }

    #[test]
    fn udp_gso() {
        let mut f = vec![0u8; VNET_HDR_LEN];
        f[0] = F_NEEDS_CSUM;
        f[1] = 5; // VIRTIO_NET_HDR_GSO_UDP_L4
        f[4..6].copy_from_slice(&1200u16.to_ne_bytes());
        f[6..8].copy_from_slice(&40u16.to_ne_bytes());
        let mut ip = vec![0u8; 40 + 8 + 10 * 1200];
        ip[0] = 0x60;
        ip[6] = 17;
        f.extend_from_slice(&ip);
        assert_eq!(
            wire_size(&f, true),
            WireSize {
                bytes: 10 * 1248,
                segments: 10
            }
        );
    }

    #[test]
    fn garbage_is_charged_by_length() {
        assert_eq!(wire_size(&[1, 2, 3], true).bytes, 0);
        let mut f = tcp4_frame(1448, 3000);
        f[VNET_HDR_LEN] = 0x00; // not IP; falls back to hdr_len = 66 from the header
        let w = wire_size(&f, true);
        assert_eq!(w.segments, 3);
    }
}
