//! The receive-window rule of a QUIC connection (quic-bundle and quic-streams): the window a
//! path of this round trip can use, grown with what the connection delivers, instead of the
//! whole `--conn-window` on every path, because both ends hold what is in the credit (on a
//! short path a full 20 MiB window was half a receiver's memory, and ~2 MiB moves as fast).
//!
//! The window starts at [`start_window`] (twice what a path as fast as [`FASTEST_PATH`] holds
//! over the least round trip so far, at least [`FLOOR`]) and holds it until the application has
//! read that much; then it follows twice the best recent delivery rate times the round trip
//! (as Linux sizes a TCP receive buffer), at least [`FLOOR`], so a slow writer is not given
//! credit it cannot use and a path faster than assumed is not held back. The round trip is
//! quinn's minimum, not the smoothed one, which a receiver short of CPU inflates with its own
//! acknowledgement delay. Evidence: docs/decisions/0007-path-sized-receive-window.md.
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
