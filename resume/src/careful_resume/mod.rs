//! Careful Resume (RFC 9959) as a pure state machine: no I/O, no quinn types, no clock.
//!
//! Its inputs are what a congestion controller sees — packets sent (number, bytes), bytes
//! acknowledged, the end of a batch of acknowledgements (bytes in flight, whether the sender
//! was application-limited, the largest packet number acknowledged, the current RTT), and
//! congestion events. Its output is the phase and, outside `Reconnaissance` and `Normal`, the
//! congestion window to use; on the way to `Normal` it says what window (and threshold) the
//! ordinary controller should continue from. `shoal_transport::start_window` adapts it to quinn.
//!
//! Phases and rules, checked against the text of draft-ietf-tsvwg-careful-resume-22 (the
//! version RFC 9959 was published from two revisions later; section numbers are the draft's:
//! §3 the phases, §4 the implementation notes). docs/resume.md, "Against RFC 9959's text", has
//! the rule-by-rule table.
//! - Reconnaissance (§3.2, §4.2): the ordinary controller runs from its initial window. The
//!   machine waits until all the initial data (everything sent before the first
//!   acknowledgement) is acknowledged; the minimum RTT seen in the phase must then be more than
//!   saved_rtt / 2 and no more than 10 × saved_rtt (§3.2, §4.2.1), else the jump is abandoned
//!   (Normal). A congestion event here also abandons it. An application-limited sender waits.
//! - Unvalidated (§3.3): PipeSize = the flight size; cwnd jumps to
//!   `jump_cwnd = min(saved_cwnd / 2, flow-control limit)` and is not increased; PipeSize grows
//!   by every acknowledged byte. The first packet sent in this phase being acknowledged (one
//!   RTT later) ends it: if the flight size is below the initial window or no more than
//!   PipeSize the jump was not used (rate-limited): cwnd = max(PipeSize, initial window) and
//!   Normal; otherwise cwnd = the flight size and Validating.
//! - Validating (§3.4): cwnd grows as in slow start (by each acknowledged byte); the
//!   acknowledgement of the last packet sent unvalidated ends it (Normal, validated).
//! - Safe Retreat (§3.5): a congestion event in Unvalidated or Validating sets
//!   cwnd = PipeSize / 2 (never below the controller's minimum window, §3.5's note on QUIC) and
//!   holds it until the last packet sent before the retreat is acknowledged; Normal then
//!   continues with ssthresh = the latest PipeSize × Beta (Beta = 0.5, the RFC's default).
//! - Persistent congestion (§3.6) in any phase ends Careful Resume: Normal, with the ordinary
//!   controller's own (collapsed) window.
//!
//! The saved state itself is checked before the machine is built: state older than its
//! lifetime (one hour by default, §4.3.1) is ignored ([`is_fresh`]).

use std::time::Duration;

/// What an earlier connection to the same receiver learned (RFC 9959 §3.1: saved_cwnd and
/// saved_rtt; §4.1 lets saved_cwnd be an acknowledged-rate estimate, not only a cwnd).
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
    /// The current RTT did not match the saved one (§3.2, §4.2.1).
    RefusedRtt,
    /// A congestion event in Reconnaissance (§3.2).
    RefusedLoss,
    /// The jump window was no larger than the window already reached: nothing to gain.
    NotNeeded,
    /// Jumped, not yet validated when the run ended.
    Taken,
    /// Jumped and validated (§3.4).
    Validated,
    /// Jumped but did not use the jump (§3.3 "Check flight_size": flight size below the
    /// initial window or no more than PipeSize); back to the ordinary controller at PipeSize.
    RateLimited,
    /// Jumped and retreated on congestion (§3.5).
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
            Outcome::RateLimited => "rate-limited",
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
/// RFC 9959 §4.3.1 (and §3.2, "Lifetime"): saved state has a lifetime; state from the future
/// (a clock stepped back) is not trusted either.
pub fn is_fresh(saved_at: u64, now: u64, lifetime: Duration) -> bool {
    saved_at <= now && now - saved_at <= lifetime.as_secs()
}

/// The jump window for `saved` under a flow-control limit: never more than half the saved
/// window (§3.3 "Setting the jump_cwnd"; the flow-control limit is §4.7's).
pub fn jump_cwnd(saved: &Saved, flow_limit: u64) -> u64 {
    (saved.cwnd / 2).min(flow_limit)
}

/// Beta, the factor on PipeSize for ssthresh on leaving Safe Retreat (§3.5: between 0.5 and 1,
/// default 0.5, "chosen to reduce the probability of inducing a second round of congestion").
pub const BETA: f64 = 0.5;

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
    /// The last packet sent when Safe Retreat began.
    retreat_mark: Option<u64>,
    /// Reconnaissance: bytes sent before the first acknowledgement (the initial data, §3.2;
    /// also the initial window the rate-limited exit never goes below, §3.3), whether an
    /// acknowledgement has come, the last packet of the initial data, and the minimum RTT
    /// of the phase (§4.2.1 note 1).
    initial_bytes: u64,
    acked_any: bool,
    initial_mark: Option<u64>,
    recon_min_rtt: Option<Duration>,
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
            initial_bytes: 0,
            acked_any: false,
            initial_mark: None,
            recon_min_rtt: None,
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
        if !self.acked_any {
            self.initial_bytes += bytes;
        }
        if self.phase == Phase::Unvalidated {
            self.first_unvalidated.get_or_insert(pn);
            self.last_unvalidated = Some(pn);
        }
    }

    /// `bytes` were acknowledged. §3.3–§3.5: PipeSize counts every byte acknowledged from
    /// the jump on; §3.4: in Validating the window grows as the ordinary controller's would
    /// in slow start (one byte per byte acknowledged).
    pub fn on_ack(&mut self, bytes: u64) {
        self.acked_any = true;
        self.flight = self.flight.saturating_sub(bytes);
        if self.phase == Phase::Validating {
            self.cwnd = self.cwnd.saturating_add(bytes);
        }
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
            Phase::Reconnaissance => {
                self.reconnaissance(app_limited, largest_acked, rtt, inner_cwnd)
            }
            Phase::Unvalidated if acked(self.first_unvalidated) => Some(self.leave_unvalidated()),
            Phase::Validating if acked(self.last_unvalidated) => {
                self.outcome = Outcome::Validated;
                let handover = Handover {
                    cwnd: self.cwnd,
                    ssthresh: None,
                };
                Some(self.go(Phase::Normal, Some(handover)))
            }
            Phase::SafeRetreat if acked(self.retreat_mark) => {
                // §3.5: Normal continues from the retreated window (it "MUST NOT be increased"
                // in the phase) with ssthresh no larger than the most recently measured
                // PipeSize × Beta.
                let handover = Handover {
                    cwnd: self.cwnd,
                    ssthresh: Some(safe_retreat_ssthresh(self.pipesize, self.min_window)),
                };
                Some(self.go(Phase::Normal, Some(handover)))
            }
            _ => None,
        }
    }

    /// §3.3 "Check flight_size", on the acknowledgement of the first unvalidated packet: a
    /// jump the sender did not use (flight size below the initial window, or no more than
    /// PipeSize) ends Careful Resume at max(PipeSize, initial window); otherwise cwnd = the
    /// flight size and Validating.
    fn leave_unvalidated(&mut self) -> Transition {
        let iw = self.initial_bytes.max(self.min_window);
        if self.flight < iw || self.flight <= self.pipesize {
            self.outcome = Outcome::RateLimited;
            let handover = Handover {
                cwnd: self.pipesize.max(iw),
                ssthresh: None,
            };
            return self.go(Phase::Normal, Some(handover));
        }
        self.cwnd = self.flight;
        self.go(Phase::Validating, None)
    }

    fn reconnaissance(
        &mut self,
        app_limited: bool,
        largest_acked: Option<u64>,
        rtt: Option<Duration>,
        inner_cwnd: u64,
    ) -> Option<Transition> {
        let saved = self.saved?;
        // §4.2.1 note 1: the minimum RTT over the phase, checked on the way to Unvalidated.
        if let Some(r) = rtt {
            self.recon_min_rtt = Some(self.recon_min_rtt.map_or(r, |m| m.min(r)));
        }
        // §3.2 "Path confirmed": only once all the initial data is acknowledged.
        let mark = *self.initial_mark.get_or_insert(self.last_sent.unwrap_or(0));
        if largest_acked.is_none_or(|a| a < mark) {
            return None;
        }
        let rtt = self.recon_min_rtt?;
        // §3.2 "Minimum RTT too small": at most saved_rtt / 2 ends it; §4.2.1: more than ten
        // times saved_rtt is a path change. Saturating: the saved RTT comes from a file.
        if !rtt_confirms(rtt, saved.rtt) {
            self.outcome = Outcome::RefusedRtt;
            return Some(self.go(Phase::Normal, None));
        }
        let jump = jump_cwnd(&saved, self.flow_limit);
        if jump <= inner_cwnd {
            self.outcome = Outcome::NotNeeded;
            return Some(self.go(Phase::Normal, None));
        }
        // §3.2, §4.2: a rate-limited sender may stay here until it has more to send than the
        // window allows.
        if app_limited {
            return None;
        }
        // §3.3: PipeSize starts at the flight size; cwnd jumps.
        self.pipesize = self.flight;
        self.jump = jump;
        self.cwnd = jump;
        self.outcome = Outcome::Taken;
        Some(self.go(Phase::Unvalidated, None))
    }

    /// Persistent congestion (an RTO in TCP terms): §3.6, Careful Resume ends in any phase and
    /// the ordinary controller (which answered the event itself) continues alone.
    pub fn on_persistent_congestion(&mut self) -> Option<Transition> {
        self.outcome = match self.phase {
            Phase::Normal => return None,
            Phase::Reconnaissance => Outcome::RefusedLoss,
            Phase::Unvalidated | Phase::Validating | Phase::SafeRetreat => Outcome::Retreated,
        };
        Some(self.go(Phase::Normal, None))
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
                // §3.5: cwnd no more than PipeSize / 2 (QUIC's minimum window is the floor, as
                // §3.5's note says), held until the last packet sent in the Unvalidated or
                // Validating Phase is acknowledged ("Loss Recovery"; appendix A: the highest
                // packet number sent on entry).
                self.cwnd = (self.pipesize / 2).max(self.min_window);
                self.retreat_mark = self.last_sent;
                self.outcome = Outcome::Retreated;
                Some(self.go(Phase::SafeRetreat, None))
            }
            // Further losses in Safe Retreat are the same episode (§3.5: the window is held);
            // Normal is the controller's.
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

/// §3.2 / §4.2.1: does the current (minimum) RTT confirm the saved one? More than half of it
/// and no more than ten times it.
pub fn rtt_confirms(current: Duration, saved: Duration) -> bool {
    current > saved / 2 && current <= saved.saturating_mul(10)
}

/// §3.5: ssthresh on leaving Safe Retreat, PipeSize × Beta (never below the minimum window).
pub fn safe_retreat_ssthresh(pipesize: u64, min_window: u64) -> u64 {
    ((pipesize as f64 * BETA) as u64).max(min_window)
}

#[cfg(test)]
mod tests;
