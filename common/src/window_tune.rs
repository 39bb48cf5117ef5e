//! Path-sized receive window for a QUIC connection (quic-bundle and quic-streams): the window
//! a path of this round trip can use, grown with what the connection delivers, instead of the
//! whole `--conn-window` on every path.
//!
//! quinn grants the sender `--conn-window` bytes past what the application has read, and both
//! ends hold what is in that credit: the sender until it is acknowledged (quinn lets it buffer
//! no more than the receiver's credit), the receiver until the application reads it. On a
//! short path the first burst filled the whole 20 MiB at both ends: 20 MiB of a quic-bundle
//! end's ~40 MB on loopback, where ~2 MiB moves as fast (docs/benchmarks.md).
//!
//! The window starts at [`start_window`]: twice what a path as fast as [`FASTEST_PATH`] holds
//! over the round trip, at least [`FLOOR`]. On the study's 141 ms link that is past the whole
//! window, so slow start, BBR's startup and a Careful Resume jump see all of it. The window
//! then follows twice the best delivery rate of the recent periods times the path's round trip
//! (as Linux sizes a TCP receive buffer), so a path faster than assumed is not held to it.
//!
//! Until the application has read as much as the start granted, the window stays at least
//! the start. After that it may fall to what the delivery needs, at least [`FLOOR`]: where the
//! writer, not the path, sets the rate (65,536 small files into Btrfs at ~35 MB/s on the
//! 141 ms link), the data quinn holds for it is then ~2 × 35 MB/s × 141 ms ≈ 10 MB instead of
//! the whole window (20 MiB), which had been most of a quic-bundle receiver's 37–41 MB there:
//! with one connection the receiver's median fell from 38.6 to 32.0 MB, at ~4% of throughput
//! (results/ab-link/drs-combined.txt, one-connection-rates.txt). Where the path
//! sets the rate, twice its rate times the round trip is past the window, and nothing changes.
//!
//! The round trip is quinn's minimum (RFC 9002's `min_rtt`, which leaves out the peer's
//! acknowledgement delay), not the smoothed one: a receiver short of CPU delays its
//! acknowledgements, and sizing the window on that delay let a loopback receiver's queue grow
//! it. The start is sized again as that minimum falls. Held at the first round trip, which
//! on loopback includes both ends' TLS work, it kept windows of up to 15.5 MB (a start for
//! 6.2 ms) and gave a quic-bundle receiver up to 37.1 MB of RSS; following the minimum, every
//! loopback run's window fell to the 2 MiB floor, which any round trip under 0.84 ms gives
//! (results/ab-loopback/ab-quic-bundle-mtu-vs-start.log). The thirteenth session
//! tried cutting the window while a slow writer fell behind; by its account that cost
//! throughput on a Btrfs destination and did not lower the peak, which the start set
//! (docs/benchmarks.md, "Thirteenth session": its logs were lost, so no figure is kept here).
//!
//! The rule is pure ([`ReceiveTuner`]); the receiver's QUIC connection task feeds it once a
//! period.

use std::collections::VecDeque;
use std::time::Duration;

/// The smallest window (on loopback 2 MiB moved as fast as 20 MiB: docs/benchmarks.md).
pub const FLOOR: u64 = 2 << 20;

/// The fastest path the start's window assumes, bytes per second (10 Gbit/s); a faster one
/// grows the window with its measured rate.
pub const FASTEST_PATH: f64 = 1.25e9;

/// Periods of delivery rate the window covers.
const HISTORY: usize = 8;

/// Sample period: one round trip, within these bounds.
pub const MIN_PERIOD: Duration = Duration::from_millis(20);
pub const MAX_PERIOD: Duration = Duration::from_millis(250);

/// How long to wait before the next sample, for a path of round trip `rtt`.
pub fn period(rtt: Duration) -> Duration {
    rtt.clamp(MIN_PERIOD, MAX_PERIOD)
}

/// The window for the start, on a path whose least round trip so far is `rtt`: twice what
/// a path of [`FASTEST_PATH`] holds, at least [`FLOOR`] (the connection's share caps it).
pub fn start_window(rtt: Duration) -> u64 {
    ((2.0 * FASTEST_PATH * rtt.as_secs_f64()) as u64).max(FLOOR)
}

/// The window rule, fed once a period.
#[derive(Debug, Default)]
pub struct ReceiveTuner {
    /// The least round trip seen.
    min_rtt: Option<Duration>,
    last_read: u64,
    /// Recent delivery rates, bytes per second.
    rates: VecDeque<f64>,
    /// The application has read a whole window in effect (the start's credit): the start no
    /// longer bounds the window.
    started: bool,
}

impl ReceiveTuner {
    /// One period's sample: `read_total` bytes read by the application since the start, the
    /// period's length, the connection's round trip now and the window in effect (its share
    /// caps what this returns; 0 before it has one). Returns the window the connection should
    /// have.
    pub fn sample(
        &mut self,
        read_total: u64,
        elapsed: Duration,
        rtt: Duration,
        in_effect: u64,
    ) -> u64 {
        self.started |= in_effect > 0 && read_total >= in_effect;
        let read = read_total.saturating_sub(self.last_read);
        self.last_read = read_total;
        if !elapsed.is_zero() {
            if self.rates.len() == HISTORY {
                self.rates.pop_front();
            }
            self.rates.push_back(read as f64 / elapsed.as_secs_f64());
        }
        let rtt = *self
            .min_rtt
            .insert(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        let rate = self.rates.iter().copied().fold(0.0, f64::max);
        let demand = 2.0 * rate * rtt.as_secs_f64();
        let least = if self.started {
            FLOOR
        } else {
            start_window(rtt)
        };
        (demand.round() as u64).max(least)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_start_is_what_a_fast_path_of_that_round_trip_holds() {
        // The study's link: past any share of the default 20 MiB.
        assert!(start_window(141 * MS) > 20 << 20);
        assert_eq!(start_window(2 * MS), 5_000_000);
        // Loopback.
        assert_eq!(start_window(MS / 10), FLOOR);
        assert_eq!(period(MS), MIN_PERIOD);
        assert_eq!(period(Duration::from_secs(2)), MAX_PERIOD);
    }

    #[test]
    fn the_window_grows_with_the_best_recent_rate_and_never_below_its_start() {
        let mut t = ReceiveTuner::default();
        // 3 GB/s (faster than the start assumes) over a 1 ms round trip: 2 x 3e9 x 0.001 = 6 MB.
        // (Not seated yet: the start's credit is unknown, so the start holds.)
        assert_eq!(t.sample(300_000_000, 100 * MS, MS, 0), 6_000_000);
        // A pause keeps the window of the recent rate, and a longer round trip (a queue) does
        // not grow it ...
        assert_eq!(t.sample(300_000_000, 100 * MS, 4 * MS, 0), 6_000_000);
        // ... until it is older than the history; then the start for 1 ms holds.
        let mut total = 300_000_000;
        let mut last = 0;
        for _ in 0..HISTORY {
            total += 1_000;
            last = t.sample(total, 100 * MS, MS, 0);
        }
        assert_eq!(last, start_window(MS));
        assert_eq!(last, 2_500_000);
    }

    #[test]
    fn the_start_follows_the_least_round_trip() {
        let mut t = ReceiveTuner::default();
        // A first round trip of 2 ms on loopback, then 11 µs: the start falls to the floor.
        assert_eq!(t.sample(0, 20 * MS, 2 * MS, 0), start_window(2 * MS));
        assert_eq!(t.sample(0, 20 * MS, MS / 90, 0), FLOOR);
        // A queue later (a longer round trip) does not bring it back.
        assert_eq!(t.sample(0, 20 * MS, 5 * MS, 0), FLOOR);
        // The study's link keeps a start past any share of the default window.
        let mut link = ReceiveTuner::default();
        assert!(link.sample(0, 141 * MS, 141 * MS, 20 << 20) > 20 << 20);
    }

    #[test]
    fn once_the_start_is_read_a_slow_reader_gets_the_window_its_rate_needs() {
        let rtt = 141 * MS;
        let share = 20 << 20;
        let mut t = ReceiveTuner::default();
        // A writer taking 35 MB/s (4.935 MB a round trip): the start holds while the first
        // 20 MiB the start granted are read ...
        let mut total = 0;
        for _ in 0..4 {
            total += 4_935_000;
            assert!(t.sample(total, rtt, rtt, share) > share);
        }
        // ... and then the window is twice the rate over the round trip (9.87 MB).
        total += 4_935_000;
        assert!(total >= share);
        assert_eq!(t.sample(total, rtt, rtt, share), 9_870_000);
        // A stall keeps the best recent rate's window (the history), then the floor.
        assert_eq!(t.sample(total, rtt, rtt, 9_870_000), 9_870_000);
        let mut last = 0;
        for _ in 0..HISTORY {
            total += 1_000;
            last = t.sample(total, rtt, rtt, 9_870_000);
        }
        assert_eq!(last, FLOOR);
        // A faster writer grows it again at once: 100 MB/s asks for more than the share.
        total += 14_100_000;
        assert!(t.sample(total, rtt, rtt, FLOOR) > share);
    }

    #[test]
    fn a_reader_that_keeps_up_with_the_path_keeps_a_window_past_the_share() {
        // The link's rate (119 MB/s of goodput at 1 Gbit/s) read as it arrives: twice its
        // bandwidth-delay product is past the default share, so the share stays in effect.
        let rtt = 141 * MS;
        let share = 20 << 20;
        let mut t = ReceiveTuner::default();
        let mut total = 0;
        for _ in 0..20 {
            total += 16_779_000;
            assert!(t.sample(total, rtt, rtt, share) > share);
        }
    }
}
