//! Careful Resume (RFC 9959) as a pure state machine: no I/O, no quinn types, no clock.
//!
//! Its inputs are what a congestion controller sees — packets sent (number, bytes), bytes
//! acknowledged, the end of a batch of acknowledgements (bytes in flight, whether the sender
//! was application-limited, the largest packet number acknowledged, the current RTT), and
//! congestion events. Its output is the phase and, outside `Reconnaissance` and `Normal`, the
//! congestion window to use; on the way to `Normal` it says what window (and threshold) the
//! ordinary controller should continue from. `common::quic_resume` adapts it to quinn.
//!
//! Phases and rules (RFC 9959 §4; section numbers in the comments below):
//! - Reconnaissance (§4.2): the ordinary controller runs from its initial window. The first
//!   batch of acknowledgements gives the current RTT; a current RTT outside
//!   [saved_rtt / 2, 10 × saved_rtt) means the path is not the one the state describes, and
//!   the jump is abandoned (Normal). A congestion event here also abandons it.
//! - Unvalidated (§4.3): cwnd jumps to `jump_cwnd = min(saved_cwnd / 2, flow-control limit)`;
//!   PipeSize starts at the flight size and grows by every acknowledged byte. The first packet
//!   sent in this phase being acknowledged (one RTT later) ends it.
//! - Validating (§4.4): cwnd is set to the flight size (no more than what the jump put in
//!   flight; at least PipeSize and the ordinary controller's window); acknowledgement of the
//!   last packet sent unvalidated ends it (Normal, validated).
//! - Safe Retreat (§4.5): a congestion event in Unvalidated or Validating sets
//!   cwnd = PipeSize / 2 and holds it until the last packet sent before the retreat is
//!   acknowledged; Normal then continues with ssthresh = PipeSize. The PipeSize taken is the
//!   one at the retreat — what the path delivered in about one RTT since the jump; PipeSize
//!   keeps growing during Safe Retreat (§4.5), but over more than one RTT, so it would
//!   overstate the capacity.
//!
//! The saved state itself is checked before the machine is built: state older than its
//! lifetime (one hour by default, §5) is ignored ([`is_fresh`]).

use std::time::Duration;

/// What an earlier connection to the same receiver learned (RFC 9959 §5: saved_cwnd and
/// saved_rtt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Saved {
    /// Congestion window reached, bytes.
    pub cwnd: u64,
    /// Minimum RTT observed.
    pub rtt: Duration,
}

/// The machine's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Reconnaissance,
    Unvalidated,
    Validating,
    SafeRetreat,
    Normal,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Reconnaissance => "reconnaissance",
            Phase::Unvalidated => "unvalidated",
            Phase::Validating => "validating",
            Phase::SafeRetreat => "safe-retreat",
            Phase::Normal => "normal",
        }
    }
}

/// What became of the jump, for the row's `resume` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No usable saved state (none, or expired).
    NoState,
    /// Still in Reconnaissance (the run ended before the first RTT sample, or stayed
    /// application-limited).
    Pending,
    /// The current RTT did not match the saved one (§4.2).
    RefusedRtt,
    /// A congestion event in Reconnaissance (§4.2).
    RefusedLoss,
    /// The jump window was no larger than the window already reached: nothing to gain.
    NotNeeded,
    /// Jumped, not yet validated when the run ended.
    Taken,
    /// Jumped and validated (§4.4).
    Validated,
    /// Jumped and retreated on congestion (§4.5).
    Retreated,
}

impl Outcome {
    /// The row's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::NoState => "no-state",
            Outcome::Pending => "pending",
            Outcome::RefusedRtt => "refused-rtt",
            Outcome::RefusedLoss => "refused-loss",
            Outcome::NotNeeded => "not-needed",
            Outcome::Taken => "taken",
            Outcome::Validated => "validated",
            Outcome::Retreated => "retreated",
        }
    }
}

/// Where the ordinary controller continues from when the machine reaches Normal after a jump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handover {
    pub cwnd: u64,
    /// Slow-start threshold (`None`: unchanged, i.e. slow start may continue).
    pub ssthresh: Option<u64>,
}

/// A phase change, for the time series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub from: Phase,
    pub to: Phase,
    /// The window in effect after the change (the machine's, or the handover's in Normal; 0
    /// when the ordinary controller simply keeps its own).
    pub cwnd: u64,
    pub handover: Option<Handover>,
}

/// Is state saved at `saved_at` still usable at `now` (both seconds since the Unix epoch)?
/// RFC 9959 §5: saved state has a lifetime; state from the future (a clock stepped back) is
/// not trusted either.
pub fn is_fresh(saved_at: u64, now: u64, lifetime: Duration) -> bool {
    saved_at <= now && now - saved_at <= lifetime.as_secs()
}

/// The jump window for `saved` under a flow-control limit: never more than half the saved
/// window (§4.3).
pub fn jump_cwnd(saved: &Saved, flow_limit: u64) -> u64 {
    (saved.cwnd / 2).min(flow_limit)
}

/// One connection's Careful Resume state.
#[derive(Debug, Clone)]
pub struct CarefulResume {
    phase: Phase,
    outcome: Outcome,
    saved: Option<Saved>,
    flow_limit: u64,
    min_window: u64,
    /// The machine's window in Unvalidated, Validating and Safe Retreat.
    cwnd: u64,
    jump: u64,
    pipesize: u64,
    flight: u64,
    last_sent: Option<u64>,
    first_unvalidated: Option<u64>,
    last_unvalidated: Option<u64>,
    /// The last packet sent when Safe Retreat began, and PipeSize then.
    retreat_mark: Option<u64>,
    retreat_pipesize: u64,
}

impl CarefulResume {
    /// A machine for a connection. `saved` is `None` when there is no fresh state (the machine
    /// is then Normal from the start); `flow_limit` is the peer's flow-control allowance
    /// (the jump never exceeds it); `min_window` is the controller's minimum window.
    pub fn new(saved: Option<Saved>, flow_limit: u64, min_window: u64) -> Self {
        let (phase, outcome) = match saved {
            Some(_) => (Phase::Reconnaissance, Outcome::Pending),
            None => (Phase::Normal, Outcome::NoState),
        };
        CarefulResume {
            phase,
            outcome,
            saved,
            flow_limit,
            min_window,
            cwnd: 0,
            jump: 0,
            pipesize: 0,
            flight: 0,
            last_sent: None,
            first_unvalidated: None,
            last_unvalidated: None,
            retreat_mark: None,
            retreat_pipesize: 0,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// The jump window taken (0 if none).
    pub fn jump(&self) -> u64 {
        self.jump
    }

    pub fn pipesize(&self) -> u64 {
        self.pipesize
    }

    /// The window to use: the machine's during the jump, otherwise `inner` (the ordinary
    /// controller's).
    pub fn window(&self, inner: u64) -> u64 {
        match self.phase {
            Phase::Unvalidated | Phase::Validating | Phase::SafeRetreat => self.cwnd,
            Phase::Reconnaissance | Phase::Normal => inner,
        }
    }

    /// Packets up to number `pn` were sent, `bytes` of them.
    pub fn on_sent(&mut self, pn: u64, bytes: u64) {
        self.flight += bytes;
        self.last_sent = Some(pn);
        if self.phase == Phase::Unvalidated {
            self.first_unvalidated.get_or_insert(pn);
            self.last_unvalidated = Some(pn);
        }
    }

    /// `bytes` were acknowledged. §4.3–§4.5: PipeSize counts every byte acknowledged from
    /// the jump on.
    pub fn on_ack(&mut self, bytes: u64) {
        self.flight = self.flight.saturating_sub(bytes);
        if matches!(
            self.phase,
            Phase::Unvalidated | Phase::Validating | Phase::SafeRetreat
        ) {
            self.pipesize += bytes;
        }
    }

    /// A batch of acknowledgements ended. `in_flight` is the transport's own count (it
    /// replaces the machine's, which cannot see packets the transport discards unacked);
    /// `inner_cwnd` is the ordinary controller's window; `rtt` the batch's RTT sample, if it
    /// had one (Reconnaissance waits for one).
    pub fn on_end_acks(
        &mut self,
        in_flight: u64,
        app_limited: bool,
        largest_acked: Option<u64>,
        rtt: Option<Duration>,
        inner_cwnd: u64,
    ) -> Option<Transition> {
        self.flight = in_flight;
        let acked =
            |mark: Option<u64>| matches!((largest_acked, mark), (Some(a), Some(m)) if a >= m);
        match self.phase {
            Phase::Reconnaissance => self.reconnaissance(app_limited, rtt, inner_cwnd),
            Phase::Unvalidated if acked(self.first_unvalidated) => {
                // §4.4: on entry, cwnd is the flight size: what the jump actually put in
                // flight. Never below PipeSize (already delivered) nor the ordinary
                // controller's window: a sender that did not fill the jump (application- or
                // flow-control-limited; seen on a loaded machine, flight 2,400 B) would
                // otherwise crawl at the minimum window for the whole phase.
                self.cwnd = self
                    .flight
                    .max(self.pipesize)
                    .max(inner_cwnd)
                    .max(self.min_window);
                Some(self.go(Phase::Validating, None))
            }
            Phase::Validating if acked(self.last_unvalidated) => {
                self.outcome = Outcome::Validated;
                let handover = Handover {
                    cwnd: self.cwnd,
                    ssthresh: None,
                };
                Some(self.go(Phase::Normal, Some(handover)))
            }
            Phase::SafeRetreat if acked(self.retreat_mark) => {
                // §4.5: Normal continues from the retreated window with ssthresh = PipeSize.
                let handover = Handover {
                    cwnd: self.cwnd,
                    ssthresh: Some(self.retreat_pipesize.max(self.min_window)),
                };
                Some(self.go(Phase::Normal, Some(handover)))
            }
            _ => None,
        }
    }

    fn reconnaissance(
        &mut self,
        app_limited: bool,
        rtt: Option<Duration>,
        inner_cwnd: u64,
    ) -> Option<Transition> {
        let (saved, rtt) = (self.saved?, rtt?);
        // §4.2: the current RTT must confirm the saved one: at least half of it and less
        // than ten times it.
        // Saturating: the saved RTT comes from a file.
        if rtt < saved.rtt / 2 || rtt >= saved.rtt.saturating_mul(10) {
            self.outcome = Outcome::RefusedRtt;
            return Some(self.go(Phase::Normal, None));
        }
        let jump = jump_cwnd(&saved, self.flow_limit);
        if jump <= inner_cwnd {
            self.outcome = Outcome::NotNeeded;
            return Some(self.go(Phase::Normal, None));
        }
        // §4.2: jump only when the sender has more to send than the window allows.
        if app_limited {
            return None;
        }
        // §4.3: PipeSize starts at the flight size; cwnd jumps.
        self.pipesize = self.flight;
        self.jump = jump;
        self.cwnd = jump;
        self.outcome = Outcome::Taken;
        Some(self.go(Phase::Unvalidated, None))
    }

    /// A congestion event (`lost_bytes` lost; 0 for an ECN mark).
    pub fn on_congestion(&mut self, lost_bytes: u64) -> Option<Transition> {
        self.flight = self.flight.saturating_sub(lost_bytes);
        match self.phase {
            Phase::Reconnaissance => {
                self.outcome = Outcome::RefusedLoss;
                Some(self.go(Phase::Normal, None))
            }
            Phase::Unvalidated | Phase::Validating => {
                // §4.5: cwnd = PipeSize / 2, held until everything sent so far is acknowledged.
                self.cwnd = (self.pipesize / 2).max(self.min_window);
                self.retreat_mark = self.last_sent;
                self.retreat_pipesize = self.pipesize;
                self.outcome = Outcome::Retreated;
                Some(self.go(Phase::SafeRetreat, None))
            }
            // Further losses in Safe Retreat are the same episode; Normal is the controller's.
            Phase::SafeRetreat | Phase::Normal => None,
        }
    }

    fn go(&mut self, to: Phase, handover: Option<Handover>) -> Transition {
        let from = self.phase;
        self.phase = to;
        let cwnd = match to {
            Phase::Normal => handover.map_or(0, |h| h.cwnd),
            _ => self.cwnd,
        };
        Transition {
            from,
            to,
            cwnd,
            handover,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const SAVED: Saved = Saved {
        cwnd: 16_000_000,
        rtt: Duration::from_millis(100),
    };
    const IW: u64 = 12_000;
    const MIN: u64 = 2_400;

    /// A machine that has sent its initial window (packets 0..10) and got its first batch of
    /// acknowledgements with `rtt`.
    fn after_first_rtt(rtt: Duration) -> (CarefulResume, Option<Transition>) {
        let mut cr = CarefulResume::new(Some(SAVED), u64::MAX, MIN);
        for pn in 0..10 {
            cr.on_sent(pn, 1_200);
        }
        cr.on_ack(1_200);
        let t = cr.on_end_acks(10_800, false, Some(0), Some(rtt), IW);
        (cr, t)
    }

    /// A machine in Unvalidated that sent packets 10..110 of the jump.
    fn jumped() -> CarefulResume {
        let (mut cr, _) = after_first_rtt(100 * MS);
        for pn in 10..110 {
            cr.on_sent(pn, 1_200);
        }
        cr
    }

    #[test]
    fn rtt_below_half_the_saved_aborts_the_jump() {
        let (cr, t) = after_first_rtt(49 * MS);
        assert_eq!(t.map(|t| t.to), Some(Phase::Normal));
        assert_eq!(cr.outcome(), Outcome::RefusedRtt);
        assert_eq!(cr.window(IW), IW, "the ordinary controller's window");
    }

    #[test]
    fn rtt_of_ten_times_the_saved_aborts_the_jump() {
        let (cr, _) = after_first_rtt(1_000 * MS);
        assert_eq!(cr.outcome(), Outcome::RefusedRtt);
        assert_eq!(cr.phase(), Phase::Normal);
    }

    #[test]
    fn an_absurd_saved_rtt_neither_panics_nor_jumps_early() {
        let saved = Saved {
            cwnd: 1 << 40,
            rtt: Duration::MAX,
        };
        let mut cr = CarefulResume::new(Some(saved), u64::MAX, MIN);
        cr.on_end_acks(0, false, Some(0), Some(100 * MS), IW);
        assert_eq!(cr.outcome(), Outcome::RefusedRtt);
    }

    #[test]
    fn rtt_within_bounds_jumps_to_half_the_saved_window() {
        for rtt in [50 * MS, 100 * MS, 999 * MS] {
            let (cr, t) = after_first_rtt(rtt);
            assert_eq!(t.map(|t| t.to), Some(Phase::Unvalidated), "{rtt:?}");
            assert_eq!(cr.window(IW), SAVED.cwnd / 2);
            assert_eq!(cr.outcome(), Outcome::Taken);
        }
    }

    #[test]
    fn jump_never_exceeds_half_the_saved_window_nor_the_flow_limit() {
        for cwnd in [0, 1, 2_400, 16_000_000, u64::MAX] {
            let saved = Saved {
                cwnd,
                rtt: SAVED.rtt,
            };
            assert!(jump_cwnd(&saved, u64::MAX) <= cwnd / 2);
            assert!(jump_cwnd(&saved, 1_000_000) <= 1_000_000);
        }
        let mut cr = CarefulResume::new(Some(SAVED), 3_000_000, MIN);
        cr.on_sent(0, 1_200);
        cr.on_end_acks(1_200, false, Some(0), Some(100 * MS), IW);
        assert_eq!(cr.window(IW), 3_000_000, "limited by flow control");
    }

    #[test]
    fn loss_in_unvalidated_retreats_to_half_the_pipesize() {
        let mut cr = jumped();
        // PipeSize started at the flight size at the jump (10,800) and grows with acks.
        cr.on_ack(1_200);
        assert_eq!(cr.pipesize(), 10_800 + 1_200);
        let t = cr.on_congestion(1_200).expect("a transition");
        assert_eq!(t.to, Phase::SafeRetreat);
        assert_eq!(cr.window(IW), 12_000 / 2);
        assert_eq!(cr.outcome(), Outcome::Retreated);
        // More acks grow PipeSize but not the held window.
        cr.on_ack(1_200);
        assert_eq!(cr.window(IW), 6_000);
        assert_eq!(cr.on_congestion(1_200), None, "the same episode");
        // Normal once everything sent before the retreat is acknowledged, ssthresh = PipeSize.
        assert_eq!(
            cr.on_end_acks(0, false, Some(108), Some(100 * MS), IW),
            None
        );
        let t = cr
            .on_end_acks(0, false, Some(109), Some(100 * MS), IW)
            .unwrap();
        assert_eq!(t.to, Phase::Normal);
        assert_eq!(
            t.handover,
            Some(Handover {
                cwnd: 6_000,
                ssthresh: Some(12_000)
            })
        );
    }

    #[test]
    fn safe_retreat_never_goes_below_the_minimum_window() {
        let (mut cr, _) = after_first_rtt(100 * MS);
        cr.on_congestion(10_800);
        assert_eq!(cr.window(IW), (10_800 / 2).max(MIN));
        let mut cr = CarefulResume::new(Some(SAVED), u64::MAX, MIN);
        cr.on_end_acks(0, false, None, Some(100 * MS), IW);
        cr.on_congestion(0);
        assert_eq!(cr.window(IW), MIN);
    }

    #[test]
    fn loss_in_validating_retreats_too() {
        let mut cr = jumped();
        cr.on_end_acks(100_000, false, Some(10), Some(100 * MS), IW);
        assert_eq!(cr.phase(), Phase::Validating);
        cr.on_congestion(1_200);
        assert_eq!(cr.phase(), Phase::SafeRetreat);
    }

    #[test]
    fn acknowledged_jump_validates() {
        let mut cr = jumped();
        assert_eq!(
            cr.on_end_acks(100_000, false, Some(9), Some(100 * MS), IW),
            None
        );
        let t = cr
            .on_end_acks(100_000, false, Some(10), Some(100 * MS), IW)
            .unwrap();
        assert_eq!((t.from, t.to), (Phase::Unvalidated, Phase::Validating));
        assert_eq!(cr.window(IW), 100_000, "the flight size at entry");
        let t = cr
            .on_end_acks(0, false, Some(109), Some(100 * MS), IW)
            .unwrap();
        assert_eq!(t.to, Phase::Normal);
        assert_eq!(t.handover.unwrap().ssthresh, None);
        assert_eq!(cr.outcome(), Outcome::Validated);
        assert_eq!(cr.window(IW), IW, "the ordinary controller's again");
    }

    #[test]
    fn validating_never_starts_below_what_was_delivered() {
        let mut cr = jumped();
        cr.on_ack(50_000);
        // The jump was hardly used: 2,400 bytes in flight when its first packet is acked.
        cr.on_end_acks(2_400, true, Some(10), Some(100 * MS), IW);
        assert_eq!(cr.phase(), Phase::Validating);
        assert_eq!(cr.window(IW), 10_800 + 50_000, "PipeSize");
        let mut cr = jumped();
        cr.on_end_acks(2_400, true, Some(10), Some(100 * MS), 30_000);
        assert_eq!(cr.window(IW), 30_000, "the ordinary controller's window");
    }

    #[test]
    fn loss_in_reconnaissance_abandons_the_jump() {
        let mut cr = CarefulResume::new(Some(SAVED), u64::MAX, MIN);
        cr.on_sent(0, 1_200);
        assert_eq!(cr.on_congestion(1_200).map(|t| t.to), Some(Phase::Normal));
        assert_eq!(cr.outcome(), Outcome::RefusedLoss);
        assert_eq!(cr.on_end_acks(0, false, Some(0), Some(100 * MS), IW), None);
    }

    #[test]
    fn application_limited_sender_waits_in_reconnaissance() {
        let mut cr = CarefulResume::new(Some(SAVED), u64::MAX, MIN);
        assert_eq!(cr.on_end_acks(0, true, Some(0), Some(100 * MS), IW), None);
        assert_eq!(cr.phase(), Phase::Reconnaissance);
        assert!(cr
            .on_end_acks(0, false, Some(1), Some(100 * MS), IW)
            .is_some());
        assert_eq!(cr.phase(), Phase::Unvalidated);
    }

    #[test]
    fn reconnaissance_waits_for_an_rtt_sample() {
        let mut cr = CarefulResume::new(Some(SAVED), u64::MAX, MIN);
        assert_eq!(cr.on_end_acks(0, false, Some(0), None, IW), None);
        assert_eq!(cr.phase(), Phase::Reconnaissance);
    }

    #[test]
    fn a_jump_no_larger_than_the_window_is_not_taken() {
        let mut cr = CarefulResume::new(Some(SAVED), u64::MAX, MIN);
        cr.on_end_acks(0, false, Some(0), Some(100 * MS), SAVED.cwnd / 2);
        assert_eq!(cr.outcome(), Outcome::NotNeeded);
    }

    #[test]
    fn expired_or_missing_state_is_ignored() {
        let hour = Duration::from_secs(3_600);
        assert!(is_fresh(1_000, 1_000 + 3_600, hour));
        assert!(!is_fresh(1_000, 1_000 + 3_601, hour));
        assert!(!is_fresh(2_000, 1_000, hour), "saved in the future");
        let cr = CarefulResume::new(None, u64::MAX, MIN);
        assert_eq!(
            (cr.phase(), cr.outcome()),
            (Phase::Normal, Outcome::NoState)
        );
        assert_eq!(cr.window(IW), IW);
    }
}
