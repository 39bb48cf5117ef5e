//! `shoal send --resume` for QUIC: quinn's controller (CUBIC, NewReno or BBR) under RFC 9959's
//! Careful Resume ((`shoal_resume::careful_resume`), the pure state machine).
//!
//! The wrapper hands every call to the real controller and to the machine. Outside the jump
//! (Reconnaissance, Normal) the window is the real controller's, so it keeps its own
//! behaviour; in Unvalidated, Validating and Safe Retreat the window is the machine's. quinn's
//! controllers have no setter for their window or slow-start threshold, so when the machine
//! reaches Normal after a jump the real controller is rebuilt with the handover window as its
//! initial window (it then continues in slow start, as RFC 9959 §3.7 lets it; section numbers
//! are draft-ietf-tsvwg-careful-resume-22's, see `careful_resume`). After a Safe Retreat
//! (§3.5: cwnd = PipeSize / 2, ssthresh = the latest PipeSize × 0.5) the rebuilt controller
//! slow-starts from the retreat window, and the wrapper holds the threshold for it: when its
//! window reaches the threshold it is rebuilt once more at threshold / β and given one
//! congestion event, which leaves CUBIC (β = 0.7) or NewReno (β = 0.5) in congestion avoidance
//! at the threshold (CUBIC with W_max = threshold / β, as after any loss). Persistent
//! congestion (§3.6) ends Careful Resume with the real controller's own collapsed window. A congestion event before that
//! ends the wrapper's part. BBR, which has no slow-start threshold, is only rebuilt at the
//! handover window and starts its model again from there. (A first version entered
//! congestion avoidance at β × PipeSize / 2 straight away: on the test's 100 Mbit/s link it
//! then ran at half the bandwidth-delay product and finished a second after cold runs.)
//!
//! Pacing: quinn's pacer (quinn-proto 0.11.19, `connection/pacing.rs`) releases at most
//! 1.25 × window per smoothed RTT, with bursts of about 2 ms of that rate, and recomputes its
//! capacity whenever `window()` changes — so the jumped window is paced over an RTT by quinn
//! itself, as §3.3 ("Pacing transmission") requires, not sent as one burst.
//!
//! RTT for the §3.2 / §4.2.1 check: quinn updates its RTT estimator only after `on_end_acks`, so on the
//! first batch of acknowledgements the estimator still holds its initial guess. The wrapper
//! therefore takes the batch's own sample, the shortest `now − sent` of its acknowledged
//! packets (this includes the peer's ack delay, as any RTT sample does).

use std::any::Any;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quinn::congestion::{Controller, ControllerFactory, ControllerMetrics};
use quinn_proto::RttEstimator;

use crate::config::Cc;
use crate::quic_cc::{self, Factory};
use shoal_resume::careful_resume::{CarefulResume, Outcome, Phase, Saved, Transition};

/// One phase change, as the time series records it.
#[derive(Debug, Clone, Copy)]
pub struct PhaseChange {
    pub at: Instant,
    pub from: Phase,
    pub to: Phase,
    /// The window in effect after the change (0: the ordinary controller's own).
    pub cwnd: u64,
    pub pipesize: u64,
}

/// What one connection's Careful Resume did, shared with the sender for its row and traces.
#[derive(Debug, Clone, Default)]
pub struct StartWindowLog(Arc<Mutex<LogInner>>);

#[derive(Debug, Default)]
struct LogInner {
    outcome: Option<Outcome>,
    jump: u64,
    initial_window: Option<u64>,
    changes: Vec<PhaseChange>,
}

impl StartWindowLog {
    /// What became of the jump (`None`: no controller was built).
    pub fn outcome(&self) -> Option<Outcome> {
        self.lock().outcome
    }

    /// The jump window taken, bytes (0 if none).
    pub fn jump(&self) -> u64 {
        self.lock().jump
    }

    /// The initial window of the controller quinn built, bytes, read back from it.
    pub fn initial_window(&self) -> Option<u64> {
        self.lock().initial_window
    }

    pub fn changes(&self) -> Vec<PhaseChange> {
        self.lock().changes.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogInner> {
        // A panic elsewhere while holding it leaves plain data; keep reading it.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record(&self, machine: &CarefulResume, change: Option<PhaseChange>) {
        let mut log = self.lock();
        log.outcome = Some(machine.outcome());
        log.jump = machine.jump();
        log.changes.extend(change);
    }
}

/// A factory of Careful Resume controllers over `cc`'s.
pub struct StartWindowFactory {
    cc: Option<Cc>,
    initial_window: Option<u64>,
    saved: Option<Saved>,
    flow_limit: u64,
    log: StartWindowLog,
}

impl StartWindowFactory {
    /// `saved`: the fresh path state (`None`: none or expired; the controller then only
    /// records "no-state"); `flow_limit`: the most the peer's flow control lets this
    /// connection have in flight (the jump never exceeds it, RFC 9959 §4.7).
    pub fn wrap(
        cc: Option<Cc>,
        initial_window: Option<u64>,
        saved: Option<Saved>,
        flow_limit: u64,
    ) -> (Factory, StartWindowLog) {
        let log = StartWindowLog::default();
        let f = Arc::new(StartWindowFactory {
            cc,
            initial_window,
            saved,
            flow_limit,
            log: log.clone(),
        });
        (f, log)
    }
}

impl ControllerFactory for StartWindowFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(self.controller(now, current_mtu))
    }
}

impl StartWindowFactory {
    fn controller(&self, now: Instant, current_mtu: u16) -> StartWindowController {
        let inner = quic_cc::factory_with(self.cc, self.initial_window).build(now, current_mtu);
        // quinn's minimum window is two datagrams.
        let machine = CarefulResume::new(self.saved, self.flow_limit, 2 * u64::from(current_mtu));
        self.log.record(&machine, None);
        self.log.lock().initial_window = Some(inner.initial_window());
        StartWindowController {
            inner,
            cc: self.cc,
            machine,
            batch_rtt: None,
            mtu: current_mtu,
            log: self.log.clone(),
            ss_cap: None,
        }
    }
}

struct StartWindowController {
    inner: Box<dyn Controller>,
    cc: Option<Cc>,
    machine: CarefulResume,
    /// The shortest RTT sample of the current batch of acknowledgements.
    batch_rtt: Option<Duration>,
    mtu: u16,
    log: StartWindowLog,
    /// The slow-start threshold the wrapper holds for the rebuilt controller after a Safe
    /// Retreat (quinn's have none to set).
    ss_cap: Option<u64>,
}

/// The window reduction of `cc`'s congestion response (`None`: BBR, which has none).
fn beta(cc: Option<Cc>) -> Option<f64> {
    match cc {
        None | Some(Cc::Cubic) => Some(0.7),
        Some(Cc::Reno) => Some(0.5),
        Some(Cc::Bbr) => None,
    }
}

impl StartWindowController {
    /// Once the rebuilt controller's slow start reaches the held threshold: congestion
    /// avoidance at the threshold.
    fn hold_threshold(&mut self, now: Instant) {
        let (Some(cap), Some(beta)) = (self.ss_cap, beta(self.cc)) else {
            return;
        };
        if self.inner.window() >= cap {
            let start = (cap as f64 / beta) as u64;
            let mut inner = quic_cc::factory_with(self.cc, Some(start)).build(now, self.mtu);
            inner.on_congestion_event(now, now, false, 0);
            self.inner = inner;
            self.ss_cap = None;
        }
    }

    /// The machine's side of `on_ack`: the batch's RTT sample and PipeSize.
    fn note_ack(&mut self, now: Instant, sent: Instant, bytes: u64) {
        let sample = now.saturating_duration_since(sent);
        self.batch_rtt = Some(self.batch_rtt.map_or(sample, |r| r.min(sample)));
        self.machine.on_ack(bytes);
    }

    fn apply(&mut self, now: Instant, t: Option<Transition>) {
        let Some(t) = t else { return };
        if let Some(h) = t.handover {
            self.inner = quic_cc::factory_with(self.cc, Some(h.cwnd)).build(now, self.mtu);
            self.ss_cap = h.ssthresh;
        }
        let change = PhaseChange {
            at: now,
            from: t.from,
            to: t.to,
            cwnd: t.cwnd,
            pipesize: self.machine.pipesize(),
        };
        self.log.record(&self.machine, Some(change));
    }
}

impl Controller for StartWindowController {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.machine.on_sent(last_packet_number, bytes);
        self.inner.on_sent(now, bytes, last_packet_number)
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.note_ack(now, sent, bytes);
        self.inner.on_ack(now, sent, bytes, app_limited, rtt)
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
        self.inner
            .on_end_acks(now, in_flight, app_limited, largest_packet_num_acked);
        let t = self.machine.on_end_acks(
            in_flight,
            app_limited,
            largest_packet_num_acked,
            self.batch_rtt.take(),
            self.inner.window(),
        );
        self.apply(now, t);
        self.hold_threshold(now);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        // The real controller reacts too; during the jump its window is not used, and it is
        // replaced when the jump ends.
        self.inner
            .on_congestion_event(now, sent, is_persistent_congestion, lost_bytes);
        if self.machine.phase() == Phase::Normal {
            // The rebuilt controller answered a loss itself: the held threshold is moot.
            self.ss_cap = None;
        }
        let t = if is_persistent_congestion {
            self.machine.on_persistent_congestion()
        } else {
            self.machine.on_congestion(lost_bytes)
        };
        self.apply(now, t);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mtu = new_mtu;
        self.inner.on_mtu_update(new_mtu)
    }

    fn window(&self) -> u64 {
        self.machine.window(self.inner.window())
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut m = self.inner.metrics();
        m.congestion_window = self.window();
        m
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(StartWindowController {
            inner: self.inner.clone_box(),
            cc: self.cc,
            machine: self.machine.clone(),
            batch_rtt: self.batch_rtt,
            mtu: self.mtu,
            log: self.log.clone(),
            ss_cap: self.ss_cap,
        })
    }

    fn initial_window(&self) -> u64 {
        self.inner.initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self.inner.into_any()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_after_the_first_acks_then_validates_and_hands_back() {
        let saved = Saved {
            cwnd: 8_000_000,
            rtt: Duration::from_millis(100),
        };
        let log = StartWindowLog::default();
        let f = StartWindowFactory {
            cc: Some(Cc::Cubic),
            initial_window: None,
            saved: Some(saved),
            flow_limit: u64::MAX,
            log: log.clone(),
        };
        let t0 = Instant::now();
        // quinn's RttEstimator has no public constructor, so acks go to the machine's side
        // only (`note_ack`); the real controller sees the rest.
        let mut c = f.controller(t0, 1_200);
        let iw = c.window();
        for pn in 0..10 {
            c.on_sent(t0, 1_200, pn);
        }
        let t1 = t0 + Duration::from_millis(100);
        c.note_ack(t1, t0, 1_200);
        // Jumps once all the initial data is acknowledged (RFC 9959 §3.2).
        c.on_end_acks(t1, 10_800, false, Some(9));
        assert_eq!(c.window(), 4_000_000, "half the saved window");
        assert_eq!(log.outcome(), Some(Outcome::Taken));
        for pn in 10..40 {
            c.on_sent(t1, 1_200, pn);
        }
        let t2 = t1 + Duration::from_millis(100);
        c.note_ack(t2, t1, 1_200);
        // 36,000 bytes in flight > PipeSize (12,000): Validating, not rate-limited (§3.3).
        c.on_end_acks(t2, 36_000, false, Some(10));
        c.on_end_acks(t2, 0, false, Some(39));
        assert_eq!(log.outcome(), Some(Outcome::Validated));
        let phases: Vec<Phase> = log.changes().iter().map(|c| c.to).collect();
        assert_eq!(
            phases,
            [Phase::Unvalidated, Phase::Validating, Phase::Normal]
        );
        assert!(c.window() >= iw, "CUBIC continues from the handover window");
    }

    #[test]
    fn without_state_it_is_the_plain_controller() {
        let (f, log) = StartWindowFactory::wrap(Some(Cc::Reno), Some(60_000), None, u64::MAX);
        let c = f.build(Instant::now(), 1_200);
        assert_eq!(c.window(), 60_000, "--initial-window");
        assert_eq!(log.outcome(), Some(Outcome::NoState));
        assert_eq!(log.initial_window(), Some(60_000));
    }
}
