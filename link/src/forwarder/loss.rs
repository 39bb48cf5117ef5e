//! The loss rate both directions of the forwarder apply, changed while it runs by a
//! [`LOSS_SIGNAL`](crate::ipc::LOSS_SIGNAL) (`ctl::loss::set_loss` sends it).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ipc::{to_ppb, LossStats, PPB};

/// The loss rate both directions apply, shared with the daemon that changes it.
#[derive(Debug, Default)]
pub struct LiveLoss {
    ppb: AtomicU64,
    requests: AtomicU64,
}

impl LiveLoss {
    pub fn new(p: f64) -> LiveLoss {
        LiveLoss {
            ppb: AtomicU64::new(to_ppb(p)),
            requests: AtomicU64::new(0),
        }
    }

    /// The probability now.
    pub fn p(&self) -> f64 {
        self.ppb.load(Ordering::Relaxed) as f64 / PPB
    }

    /// Acts on a [`LOSS_SIGNAL`](crate::ipc::LOSS_SIGNAL) whose value was `ppb`.
    pub fn take(&self, ppb: usize) {
        self.ppb
            .store((ppb as u64).min(PPB as u64), Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
        eprintln!("forwarder: loss now {}% per packet", self.p() * 100.0);
    }

    pub fn snapshot(&self) -> LossStats {
        LossStats {
            loss_ppb: self.ppb.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_travels_in_parts_per_billion() {
        let l = LiveLoss::new(0.01);
        assert_eq!(l.p(), 0.01);
        l.take(to_ppb(0.0001) as usize);
        assert_eq!(l.p(), 0.0001);
        assert_eq!(l.snapshot().requests, 1);
        l.take(usize::MAX);
        assert_eq!(l.p(), 1.0);
        assert_eq!(to_ppb(-1.0), 0);
    }
}
