//! The arithmetic of one link direction, as pure code over nanosecond timestamps.
//!
//! The link is a FIFO server: a packet starts serialising when it arrives or when the link
//! frees up, whichever is later, and leaves after `wire_bits / rate`; it is delivered one
//! one-way delay later. Because every packet sees the same delay, delivery order equals
//! arrival order and a plain FIFO of pending packets suffices (no timer wheel).
//!
//! This is a token bucket whose depth is a single packet: the link never sends faster than
//! `rate`, even after idling, just as a real serialising interface would not.
//!
//! The queue is drop-tail in bytes: the backlog at time `t` is the work the link still has to
//! do, `(link_free - t) * rate`. A packet that would push the backlog over the limit is dropped,
//! except into an empty queue (so one packet larger than a tiny queue can still pass).
//!
//! "Packet" here is a wire packet: the forwarder offers a TSO/USO super-packet's segments one
//! by one (`admit.rs`), so loss and the queue act on what a real wire would carry.

/// Nanoseconds per second.
const NS: u128 = 1_000_000_000;

/// Outcome of offering one packet to the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted: leaves the link at `departure_ns`, reaches the far side at `delivery_ns`.
    Deliver { departure_ns: u64, delivery_ns: u64 },
    /// Dropped because the queue was full.
    QueueFull,
}

/// One direction's serialisation, queue and delay.
#[derive(Clone, Debug)]
pub struct LinkSchedule {
    rate_bps: u64,
    delay_ns: u64,
    queue_limit_bytes: u64,
    /// When the link finishes the last accepted packet.
    link_free_ns: u64,
}

impl LinkSchedule {
    pub fn new(rate_bps: u64, delay_ns: u64, queue_limit_bytes: u64) -> Self {
        assert!(rate_bps > 0, "rate must be positive");
        LinkSchedule {
            rate_bps,
            delay_ns,
            queue_limit_bytes,
            link_free_ns: 0,
        }
    }

    /// Time to serialise `wire_bytes` at the link rate, rounded up to whole nanoseconds.
    pub fn serialization_ns(&self, wire_bytes: u64) -> u64 {
        (wire_bytes as u128 * 8 * NS).div_ceil(self.rate_bps as u128) as u64
    }

    /// Bytes still waiting for (or in) serialisation at `now_ns`.
    pub fn backlog_bytes(&self, now_ns: u64) -> u64 {
        let left = self.link_free_ns.saturating_sub(now_ns) as u128;
        (left * self.rate_bps as u128 / 8 / NS) as u64
    }

    /// Offers one wire packet of `wire_bytes` arriving at `now_ns`.
    pub fn offer(&mut self, now_ns: u64, wire_bytes: u64) -> Verdict {
        let backlog = self.backlog_bytes(now_ns);
        if backlog > 0 && backlog + wire_bytes > self.queue_limit_bytes {
            return Verdict::QueueFull;
        }
        let start = self.link_free_ns.max(now_ns);
        let departure_ns = start + self.serialization_ns(wire_bytes);
        self.link_free_ns = departure_ns;
        Verdict::Deliver {
            departure_ns,
            delivery_ns: departure_ns + self.delay_ns,
        }
    }
}

/// Seeded random loss (SplitMix64): reproducible across runs with the same seed, and cheap
/// enough to call per packet. Not cryptographic, nor meant to be.
#[derive(Clone, Debug)]
pub struct LossGen {
    state: u64,
    p: f64,
}

impl LossGen {
    pub fn new(p: f64, seed: u64) -> Self {
        LossGen { state: seed, p }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Changes the probability (a running link's loss change, `ctl::loss`).
    pub fn set_p(&mut self, p: f64) {
        self.p = p;
    }

    /// Whether to drop the next wire packet: one independent draw per wire packet, so every
    /// packet on the wire is lost with probability `p`. A TSO/USO super-packet gets one draw
    /// per segment and loses only the segments drawn (`admit.rs`); dropping it whole
    /// with probability 1 − (1 − p)^n would lose ≈ n·p of its segments, in bursts.
    pub fn lose(&mut self) -> bool {
        if self.p <= 0.0 {
            return false;
        }
        self.next_f64() < self.p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn serialization_time() {
        let s = LinkSchedule::new(100_000_000, 0, 1 << 20);
        // 1500 bytes at 100 Mbit/s = 120 µs.
        assert_eq!(s.serialization_ns(1500), 120_000);
        // Rounded up, never down.
        let s = LinkSchedule::new(3, 0, 1 << 20);
        assert_eq!(s.serialization_ns(1), 2_666_666_667);
    }

    #[test]
    fn departure_and_delivery() {
        let mut s = LinkSchedule::new(100_000_000, 70 * MS, 1 << 20);
        // Idle link: departs after its own serialisation.
        assert_eq!(
            s.offer(1_000, 1500),
            Verdict::Deliver {
                departure_ns: 121_000,
                delivery_ns: 121_000 + 70 * MS
            }
        );
        // Back-to-back arrival waits for the link: departure = link_free + size/rate.
        assert_eq!(
            s.offer(2_000, 1500),
            Verdict::Deliver {
                departure_ns: 241_000,
                delivery_ns: 241_000 + 70 * MS
            }
        );
        // Arrival after the link went idle starts afresh.
        assert_eq!(
            s.offer(10 * MS, 100),
            Verdict::Deliver {
                departure_ns: 10 * MS + 8_000,
                delivery_ns: 80 * MS + 8_000
            }
        );
    }

    #[test]
    fn token_bucket_holds_the_rate() {
        // 10 s of arrivals at twice the rate, with a queue big enough to never drop:
        // departures are spaced exactly at the link rate.
        let mut s = LinkSchedule::new(50_000_000, 0, u64::MAX);
        let mut last = 0;
        for i in 0..10_000u64 {
            if let Verdict::Deliver { departure_ns, .. } = s.offer(i * 120_000, 1500) {
                last = departure_ns;
            }
        }
        // 10,000 × 1500 B × 8 / 50 Mbit/s = 2.4 s.
        assert_eq!(last, 2_400_000_000);
    }

    #[test]
    fn drop_tail() {
        // 10 packets' worth of queue at 12 Mbit/s (1 ms per 1500-byte packet).
        let mut s = LinkSchedule::new(12_000_000, 0, 15_000);
        let mut accepted = 0;
        let mut dropped = 0;
        for _ in 0..20 {
            match s.offer(0, 1500) {
                Verdict::Deliver { .. } => accepted += 1,
                Verdict::QueueFull => dropped += 1,
            }
        }
        assert_eq!((accepted, dropped), (10, 10));
        assert_eq!(s.backlog_bytes(0), 15_000);
        // After 1 ms one packet has left; exactly one more fits.
        assert!(matches!(s.offer(MS, 1500), Verdict::Deliver { .. }));
        assert_eq!(s.offer(MS, 1500), Verdict::QueueFull);
        // A packet larger than the whole queue passes when the queue is empty.
        let mut s = LinkSchedule::new(12_000_000, 0, 1000);
        assert!(matches!(s.offer(0, 64_000), Verdict::Deliver { .. }));
        assert_eq!(s.offer(0, 100), Verdict::QueueFull);
    }

    #[test]
    fn loss_rate_and_seed() {
        let mut a = LossGen::new(0.01, 42);
        let lost = (0..200_000).filter(|_| a.lose()).count();
        // 2,000 expected; 5 sigma ≈ 222.
        assert!((1_778..=2_222).contains(&lost), "lost {lost}");
        // Same seed, same sequence.
        let mut b = LossGen::new(0.3, 7);
        let mut c = LossGen::new(0.3, 7);
        let xb: Vec<bool> = (0..100).map(|_| b.lose()).collect();
        let xc: Vec<bool> = (0..100).map(|_| c.lose()).collect();
        assert_eq!(xb, xc);
        // No loss configured: never drops.
        let mut z = LossGen::new(0.0, 1);
        assert!((0..1000).all(|_| !z.lose()));
    }
}
