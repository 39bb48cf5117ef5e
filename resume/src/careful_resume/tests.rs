use super::*;

const MS: Duration = Duration::from_millis(1);
const SAVED: Saved = Saved {
    cwnd: 16_000_000,
    rtt: Duration::from_millis(100),
};
const IW: u64 = 12_000;
const MIN: u64 = 2_400;

/// A machine that has sent its initial window (packets 0..10, 1,200 bytes each) and had
/// the first 1,200 bytes of it acknowledged, before its `on_end_acks`.
fn initial_window_sent() -> CarefulResume {
    let mut cr = CarefulResume::new(Some(SAVED), u64::MAX, MIN);
    for pn in 0..10 {
        cr.on_sent(pn, 1_200);
    }
    cr.on_ack(1_200);
    cr
}

/// A machine that has sent its initial window (packets 0..10) and got it acknowledged
/// (largest 9, 10,800 bytes still counted in flight) with minimum RTT `rtt`.
fn after_first_rtt(rtt: Duration) -> (CarefulResume, Option<Transition>) {
    let mut cr = initial_window_sent();
    let t = cr.on_end_acks(10_800, false, Some(9), Some(rtt), IW);
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
fn reconnaissance_rtt_at_or_below_half_the_saved_aborts_the_jump() {
    for rtt in [49 * MS, 50 * MS] {
        let (cr, t) = after_first_rtt(rtt);
        assert_eq!(t.map(|t| t.to), Some(Phase::Normal), "{rtt:?}");
        assert_eq!(cr.outcome(), Outcome::RefusedRtt);
        assert_eq!(cr.window(IW), IW, "the ordinary controller's window");
    }
}

#[test]
fn reconnaissance_rtt_above_ten_times_the_saved_aborts_the_jump() {
    let (cr, _) = after_first_rtt(1_001 * MS);
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
fn reconnaissance_rtt_within_bounds_jumps_to_half_the_saved_window() {
    for rtt in [51 * MS, 100 * MS, 1_000 * MS] {
        let (cr, t) = after_first_rtt(rtt);
        assert_eq!(t.map(|t| t.to), Some(Phase::Unvalidated), "{rtt:?}");
        assert_eq!(cr.window(IW), SAVED.cwnd / 2);
        assert_eq!(cr.outcome(), Outcome::Taken);
    }
}

#[test]
fn reconnaissance_checks_the_minimum_rtt_of_the_phase() {
    let mut cr = initial_window_sent();
    // A first sample of 40 ms (too small), then 100 ms: the minimum, 40 ms, decides.
    assert_eq!(
        cr.on_end_acks(9_600, false, Some(0), Some(40 * MS), IW),
        None
    );
    cr.on_end_acks(0, false, Some(9), Some(100 * MS), IW);
    assert_eq!(cr.outcome(), Outcome::RefusedRtt);
}

#[test]
fn reconnaissance_jumps_only_after_all_initial_data_is_acknowledged() {
    let mut cr = initial_window_sent();
    assert_eq!(
        cr.on_end_acks(10_800, false, Some(0), Some(100 * MS), IW),
        None
    );
    // Sent after the first acknowledgement: not initial data.
    cr.on_sent(10, 1_200);
    assert_eq!(
        cr.on_end_acks(10_800, false, Some(8), Some(100 * MS), IW),
        None
    );
    assert_eq!(cr.phase(), Phase::Reconnaissance);
    let t = cr.on_end_acks(1_200, false, Some(9), None, IW);
    assert_eq!(t.map(|t| t.to), Some(Phase::Unvalidated));
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
fn safe_retreat_sets_cwnd_to_half_the_pipesize_and_holds_it() {
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
}

#[test]
fn safe_retreat_sets_ssthresh_to_the_latest_pipesize_times_beta() {
    let mut cr = jumped();
    cr.on_ack(1_200);
    cr.on_congestion(1_200);
    // PipeSize keeps growing during the retreat (§3.5 "Tracking PipeSize").
    cr.on_ack(60_000);
    assert_eq!(cr.pipesize(), 10_800 + 1_200 + 60_000);
    // Normal once everything sent before the retreat is acknowledged.
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
            ssthresh: Some(72_000 / 2)
        })
    );
    assert_eq!(safe_retreat_ssthresh(1_000, MIN), MIN, "the minimum window");
}

#[test]
fn safe_retreat_never_goes_below_the_minimum_window() {
    let (mut cr, _) = after_first_rtt(100 * MS);
    cr.on_congestion(10_800);
    assert_eq!(cr.window(IW), (10_800 / 2).max(MIN));
    let mut cr = CarefulResume::new(Some(SAVED), u64::MAX, MIN);
    cr.on_end_acks(0, false, None, Some(100 * MS), IW);
    cr.on_end_acks(0, false, Some(0), Some(100 * MS), IW);
    assert_eq!(cr.phase(), Phase::Unvalidated);
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
fn validating_sets_cwnd_to_the_flight_size_then_grows_and_validates() {
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
    // §3.4: the window grows with acknowledgements, as in slow start.
    cr.on_ack(1_200);
    assert_eq!(cr.window(IW), 101_200);
    let t = cr
        .on_end_acks(0, false, Some(109), Some(100 * MS), IW)
        .unwrap();
    assert_eq!(t.to, Phase::Normal);
    assert_eq!(
        t.handover,
        Some(Handover {
            cwnd: 101_200,
            ssthresh: None
        })
    );
    assert_eq!(cr.outcome(), Outcome::Validated);
    assert_eq!(cr.window(IW), IW, "the ordinary controller's again");
}

#[test]
fn unused_jump_with_flight_below_the_initial_window_ends_at_the_pipesize() {
    let mut cr = jumped();
    cr.on_ack(50_000);
    // The jump was hardly used: 2,400 bytes in flight when its first packet is acked.
    let t = cr
        .on_end_acks(2_400, true, Some(10), Some(100 * MS), IW)
        .unwrap();
    assert_eq!(t.to, Phase::Normal);
    assert_eq!(cr.outcome(), Outcome::RateLimited);
    assert_eq!(t.handover.unwrap().cwnd, 10_800 + 50_000, "PipeSize");
}

#[test]
fn unused_jump_with_flight_no_more_than_the_pipesize_ends_not_below_the_initial_window() {
    let mut cr = jumped();
    // Flight 12,000 ≥ the initial data (12,000) but ≤ PipeSize (10,800 + 1,200).
    cr.on_ack(1_200);
    let t = cr
        .on_end_acks(12_000, true, Some(10), Some(100 * MS), IW)
        .unwrap();
    assert_eq!(cr.outcome(), Outcome::RateLimited);
    assert_eq!(t.handover.unwrap().cwnd, 12_000);
}

#[test]
fn persistent_congestion_ends_careful_resume_in_any_phase() {
    let mut cr = jumped();
    cr.on_congestion(1_200);
    let t = cr.on_persistent_congestion().unwrap();
    assert_eq!((t.to, t.handover), (Phase::Normal, None));
    assert_eq!(cr.window(IW), IW, "the ordinary controller's own window");
    assert_eq!(cr.on_persistent_congestion(), None);
    let mut cr = CarefulResume::new(Some(SAVED), u64::MAX, MIN);
    cr.on_persistent_congestion();
    assert_eq!(cr.outcome(), Outcome::RefusedLoss);
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
