//! Cutting a segmentation-offloaded super-packet into pieces made of its wire segments.
//!
//! A TSO/USO frame read from the TUN (vnet header, then one IP packet with up to 64 KiB of
//! payload) stands for `n` wire packets of `gso_size` payload bytes each (the last may be
//! shorter), each repeating the IP and TCP/UDP headers. For loss and queue drops to hit single
//! wire packets, the forwarder keeps some segments and not others; every run of consecutive
//! kept segments leaves as one frame built here, with the headers the kernel's own
//! segmentation would give the run's first segment:
//!
//! - IPv4 total length and id (the kernel numbers a TSO packet's segments id, id + 1, …) and a
//!   recomputed header checksum (the receiving kernel verifies it); IPv6 payload length.
//! - TCP sequence number advanced by the bytes before the run; CWR only on the packet's first
//!   segment, FIN and PSH only on its last (as `tcp_gso_segment` does). UDP length.
//! - The TCP/UDP checksum stays partial (`VIRTIO_NET_HDR_F_NEEDS_CSUM`): the field holds the
//!   pseudo-header sum, length included, as the sending kernel left it; it is adjusted for the
//!   new length, and the receiving kernel completes or trusts it as it does for the whole packet.
//! - A run of several segments keeps the GSO type and size; a single segment leaves as a plain
//!   packet (`GSO_NONE`).

use crate::vnet::{VnetHdr, VNET_HDR_LEN};

const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;

const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum L4 {
    Tcp,
    Udp,
}

/// A GSO frame that can be cut: TCP or UDP over IPv4 or IPv6 (no extension headers), partial
/// checksum, at least two segments.
#[derive(Clone, Debug)]
pub struct Gso<'a> {
    hdr: VnetHdr,
    /// The IP packet (after the vnet header).
    ip: &'a [u8],
    v4: bool,
    l4: L4,
    l4_off: usize,
    /// IP + TCP/UDP header bytes, repeated on every wire segment.
    hdrs: usize,
    gso_size: usize,
    segments: usize,
}

fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

/// One's-complement sum of big-endian 16-bit words (odd tail padded with zero), onto `acc`.
fn sum16(data: &[u8], mut acc: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        acc += (*last as u32) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The IPv4 header checksum of `h` (its checksum field is skipped).
fn ipv4_header_checksum(h: &[u8]) -> u16 {
    let acc = sum16(&h[..10], 0);
    !fold(sum16(&h[12..], acc))
}

/// A partial-checksum field (a folded, uncomplemented pseudo-header sum that includes the
/// transport length) changed from `old_len` to `new_len`, as RFC 1624 updates a sum in place.
fn partial_csum_with_len(field: u16, old_len: u16, new_len: u16) -> u16 {
    fold(field as u32 + (!old_len) as u32 + new_len as u32)
}

impl<'a> Gso<'a> {
    /// The frame's layout, or `None` when it is not a GSO packet this module knows how to cut
    /// (the forwarder then treats it as one unit).
    pub fn parse(frame: &'a [u8]) -> Option<Gso<'a>> {
        let hdr = VnetHdr::parse(frame)?;
        if !hdr.is_gso() || hdr.flags & F_NEEDS_CSUM == 0 {
            return None;
        }
        let ip = &frame[VNET_HDR_LEN..];
        let (v4, l4_off, proto) = match ip.first()? >> 4 {
            4 => {
                let ihl = (ip[0] & 0x0f) as usize * 4;
                if ihl < 20 || ip.len() < ihl || be16(ip, 2) as usize != ip.len() {
                    return None;
                }
                (true, ihl, ip[9])
            }
            6 => {
                if ip.len() < 40 || be16(ip, 4) as usize + 40 != ip.len() {
                    return None;
                }
                (false, 40, ip[6])
            }
            _ => return None,
        };
        let gso = hdr.gso_type & !GSO_ECN;
        let l4 = match (proto, gso) {
            (6, GSO_TCPV4) if v4 => L4::Tcp,
            (6, GSO_TCPV6) if !v4 => L4::Tcp,
            (17, GSO_UDP_L4) => L4::Udp,
            _ => return None,
        };
        if hdr.csum_start as usize != l4_off {
            return None;
        }
        let l4_len = match l4 {
            L4::Tcp => (*ip.get(l4_off + 12)? >> 4) as usize * 4,
            L4::Udp => 8,
        };
        let hdrs = l4_off + l4_len;
        if l4_len < 8 || hdrs >= ip.len() {
            return None;
        }
        let gso_size = hdr.gso_size as usize;
        let segments = (ip.len() - hdrs).div_ceil(gso_size);
        (segments >= 2).then_some(Gso {
            hdr,
            ip,
            v4,
            l4,
            l4_off,
            hdrs,
            gso_size,
            segments,
        })
    }

    pub fn segments(&self) -> usize {
        self.segments
    }

    fn payload_len(&self) -> usize {
        self.ip.len() - self.hdrs
    }

    /// Payload bytes of segment `i`.
    fn seg_payload(&self, i: usize) -> usize {
        self.gso_size.min(self.payload_len() - i * self.gso_size)
    }

    /// What segment `i` occupies on the wire: its headers and its payload.
    pub fn seg_wire_bytes(&self, i: usize) -> u64 {
        (self.hdrs + self.seg_payload(i)) as u64
    }

    /// The frame (vnet header included) carrying segments `first .. first + count`.
    pub fn build(&self, first: usize, count: usize) -> Vec<u8> {
        assert!(
            count >= 1 && first + count <= self.segments,
            "segments {first}+{count} of {}",
            self.segments
        );
        let start = self.hdrs + first * self.gso_size;
        let end = (start + count * self.gso_size).min(self.ip.len());
        let ip_len = self.hdrs + (end - start);
        let l4_len = ip_len - self.l4_off;

        let mut out = Vec::with_capacity(VNET_HDR_LEN + ip_len);
        let mut h = self.hdr;
        if count == 1 {
            h.gso_type = GSO_NONE;
            h.gso_size = 0;
        } else if first > 0 {
            // ECN in the GSO type says the packet carries CWR, which only its first segment keeps.
            h.gso_type &= !GSO_ECN;
        }
        h.hdr_len = h.hdr_len.min(ip_len as u16);
        out.extend_from_slice(&h.to_bytes());
        out.extend_from_slice(&self.ip[..self.hdrs]);
        out.extend_from_slice(&self.ip[start..end]);

        let ip = &mut out[VNET_HDR_LEN..];
        if self.v4 {
            ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
            let id = be16(ip, 4).wrapping_add(first as u16);
            ip[4..6].copy_from_slice(&id.to_be_bytes());
            let ihl = self.l4_off;
            let c = ipv4_header_checksum(&ip[..ihl]);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
        } else {
            ip[4..6].copy_from_slice(&((ip_len - 40) as u16).to_be_bytes());
        }
        let l4 = &mut ip[self.l4_off..];
        let csum_at = match self.l4 {
            L4::Tcp => {
                let seq = u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]])
                    .wrapping_add((first * self.gso_size) as u32);
                l4[4..8].copy_from_slice(&seq.to_be_bytes());
                if first > 0 {
                    l4[13] &= !TCP_CWR;
                }
                if first + count < self.segments {
                    l4[13] &= !(TCP_FIN | TCP_PSH);
                }
                16
            }
            L4::Udp => {
                l4[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
                6
            }
        };
        let old_l4_len = (self.ip.len() - self.l4_off) as u16;
        let c = partial_csum_with_len(be16(l4, csum_at), old_l4_len, l4_len as u16);
        l4[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC4: [u8; 4] = [198, 18, 0, 1];
    const DST4: [u8; 4] = [198, 18, 0, 2];

    /// The pseudo-header sum Linux leaves in a partial TCP/UDP checksum field, from scratch.
    fn pseudo(src: &[u8], dst: &[u8], proto: u8, l4_len: usize) -> u16 {
        let acc = sum16(dst, sum16(src, 0));
        fold(acc + proto as u32 + l4_len as u32)
    }

    fn vnet(
        gso_type: u8,
        gso_size: u16,
        csum_start: u16,
        csum_offset: u16,
        hdr_len: u16,
    ) -> Vec<u8> {
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type,
            hdr_len,
            gso_size,
            csum_start,
            csum_offset,
        }
        .to_bytes()
        .to_vec()
    }

    /// IPv4/TCP TSO frame: 20 + 32 header bytes, payload bytes `i as u8`, seq 1000, flags.
    fn tcp4(gso_size: u16, payload: usize, flags: u8, ecn: bool) -> Vec<u8> {
        let t = if ecn { GSO_TCPV4 | GSO_ECN } else { GSO_TCPV4 };
        let mut f = vnet(t, gso_size, 20, 16, 52);
        let len = 52 + payload;
        let mut ip = vec![0u8; len];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&0xfffeu16.to_be_bytes());
        ip[6] = 0x40; // DF
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&SRC4);
        ip[16..20].copy_from_slice(&DST4);
        let c = ipv4_header_checksum(&ip[..20]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        ip[24..28].copy_from_slice(&1000u32.to_be_bytes());
        ip[32] = 8 << 4;
        ip[33] = flags;
        let c = pseudo(&SRC4, &DST4, 6, len - 20);
        ip[36..38].copy_from_slice(&c.to_be_bytes());
        for (i, b) in ip[52..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f.extend_from_slice(&ip);
        f
    }

    fn ip_of(f: &[u8]) -> &[u8] {
        &f[VNET_HDR_LEN..]
    }

    #[test]
    fn checksum_helpers() {
        // RFC 1071's example words sum to 0xddf2.
        assert_eq!(
            fold(sum16(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7], 0)),
            0xddf2
        );
        // Updating the length in place equals recomputing from scratch.
        let a = pseudo(&SRC4, &DST4, 6, 65_000);
        assert_eq!(
            partial_csum_with_len(a, 65_000, 1480),
            pseudo(&SRC4, &DST4, 6, 1480)
        );
    }

    #[test]
    fn only_cuttable_gso_frames_parse() {
        assert!(Gso::parse(&tcp4(1448, 3 * 1448, 0x10, false)).is_some());
        // One segment's worth is not a super-packet.
        assert!(Gso::parse(&tcp4(1448, 1448, 0x10, false)).is_none());
        // No GSO.
        assert!(Gso::parse(&tcp4(0, 3000, 0x10, false)).is_none());
        // IPv4 length not matching the frame.
        let mut f = tcp4(1448, 3000, 0x10, false);
        f.push(0);
        assert!(Gso::parse(&f).is_none());
        // Garbage.
        assert!(Gso::parse(&[0u8; 12]).is_none());
    }

    #[test]
    fn tcp4_runs_carry_their_own_headers_and_bytes() {
        let payload = 5 * 1448 + 100;
        let f = tcp4(1448, payload, 0x10 | TCP_PSH | TCP_FIN | TCP_CWR, true);
        let g = Gso::parse(&f).expect("cuttable");
        assert_eq!(g.segments(), 6);
        let total: u64 = (0..6).map(|i| g.seg_wire_bytes(i)).sum();
        assert_eq!(total, crate::vnet::wire_size(&f, true).bytes);
        assert_eq!(g.seg_wire_bytes(5), 152);

        // The whole packet rebuilt is the packet.
        assert_eq!(g.build(0, 6), f);

        // Segments 1..=2: seq + 1448, id + 1, lengths, no CWR/FIN/PSH, still GSO without ECN.
        let p = g.build(1, 2);
        let h = VnetHdr::parse(&p).unwrap();
        assert_eq!((h.gso_type, h.gso_size), (GSO_TCPV4, 1448));
        let ip = ip_of(&p);
        assert_eq!(be16(ip, 2) as usize, 52 + 2 * 1448);
        assert_eq!(be16(ip, 4), 0xffff);
        assert_eq!(ipv4_header_checksum(&ip[..20]), be16(ip, 10));
        assert_eq!(fold(sum16(&ip[..20], 0)), 0xffff, "IPv4 header verifies");
        assert_eq!(
            u32::from_be_bytes(ip[24..28].try_into().unwrap()),
            1000 + 1448
        );
        assert_eq!(ip[33], 0x10);
        assert_eq!(be16(ip, 36), pseudo(&SRC4, &DST4, 6, 32 + 2 * 1448));
        assert_eq!(&ip[52..], &ip_of(&f)[52 + 1448..52 + 3 * 1448]);

        // The last segment alone: a plain packet keeping FIN/PSH, id wraps, short payload.
        let p = g.build(5, 1);
        let h = VnetHdr::parse(&p).unwrap();
        assert_eq!(
            (h.gso_type, h.gso_size, h.flags),
            (GSO_NONE, 0, F_NEEDS_CSUM)
        );
        let ip = ip_of(&p);
        assert_eq!(be16(ip, 2), 152);
        assert_eq!(be16(ip, 4), 3);
        assert_eq!(fold(sum16(&ip[..20], 0)), 0xffff);
        assert_eq!(ip[33], 0x10 | TCP_PSH | TCP_FIN);
        assert_eq!(
            u32::from_be_bytes(ip[24..28].try_into().unwrap()),
            1000 + 5 * 1448
        );
        assert_eq!(be16(ip, 36), pseudo(&SRC4, &DST4, 6, 132));

        // The first segment alone keeps CWR, loses FIN/PSH.
        let ip = g.build(0, 1);
        assert_eq!(ip_of(&ip)[33], 0x10 | TCP_CWR);

        // Every single segment, concatenated, is the payload.
        let mut all = Vec::new();
        for i in 0..6 {
            all.extend_from_slice(&ip_of(&g.build(i, 1))[52..]);
        }
        assert_eq!(all, ip_of(&f)[52..]);
    }

    #[test]
    fn udp6_runs() {
        let src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let payload = 4 * 1200;
        let mut f = vnet(GSO_UDP_L4, 1200, 40, 6, 48);
        let mut ip = vec![0u8; 48 + payload];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        ip[6] = 17;
        ip[8..24].copy_from_slice(&src);
        ip[24..40].copy_from_slice(&dst);
        ip[44..46].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        let c = pseudo(&src, &dst, 17, 8 + payload);
        ip[46..48].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);

        let g = Gso::parse(&f).expect("cuttable");
        assert_eq!(g.segments(), 4);
        assert_eq!(g.seg_wire_bytes(0), 1248);
        let p = g.build(2, 2);
        let ip = ip_of(&p);
        assert_eq!(be16(ip, 4), 8 + 2400);
        assert_eq!(be16(ip, 44), 8 + 2400);
        assert_eq!(be16(ip, 46), pseudo(&src, &dst, 17, 8 + 2400));
        assert_eq!(&ip[48..], &ip_of(&f)[48 + 2400..]);
        assert_eq!(VnetHdr::parse(&p).unwrap().gso_type, GSO_UDP_L4);
    }
}
