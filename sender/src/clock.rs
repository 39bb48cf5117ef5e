//! The run's clock, and the one rule for the `seconds` column: from the moment the sender
//! starts its first connection to the moment it has decoded the receiver's completion report
//! (the last of them, when the run has several connections). Closing connections, draining the
//! QUIC endpoint, waiting for a `--fsync` report, joining tasks and stopping the sampler all
//! come after the clock has stopped. The walk of the source tree starts just before it and
//! runs beside the connections (`pipeline::queue`): whatever of the walk the transfer has to
//! wait for is inside the clock, as it is in what the user waits for.

use std::time::{Duration, Instant};

/// Started once, before the first connect.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunClock {
    start: Instant,
    /// The wall clock at the start (µs since the Unix epoch), for lining the run up with
    /// samples taken outside the process (the sweep's host CPU samples).
    start_unix_us: u64,
}

impl RunClock {
    pub(crate) fn start() -> Self {
        RunClock {
            start: Instant::now(),
            start_unix_us: shoal_row::metrics::wall_clock_us(),
        }
    }

    pub(crate) fn started_at(&self) -> Instant {
        self.start
    }

    pub(crate) fn started_unix_us(&self) -> u64 {
        self.start_unix_us
    }

    /// The run's time, given when each connection decoded its completion report.
    pub(crate) fn seconds(&self, completions: impl IntoIterator<Item = Instant>) -> f64 {
        completions
            .into_iter()
            .map(|at| at.saturating_duration_since(self.start))
            .max()
            .unwrap_or(Duration::ZERO)
            .as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_completion_stops_the_clock() {
        let clock = RunClock::start();
        let t = clock.started_at();
        let at = |ms| t + Duration::from_millis(ms);
        assert_eq!(clock.seconds([at(300), at(450), at(120)]), 0.45);
        // Whatever happens after the completions (closing, draining) is not in it.
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(clock.seconds([at(10)]), 0.01);
    }
}
