//! QUIC congestion control as Shoal sets it up: quinn's controller (CUBIC, NewReno or BBR) in
//! a delegate that counts the bytes the peer acknowledged.
//!
//! quinn exposes no acknowledged-bytes counter of its own; every acknowledged packet passes
//! through its congestion controller's `on_ack`, so a wrapper that hands every call to the
//! real controller and adds each `on_ack`'s `bytes` to a shared counter is exact and costs one
//! atomic add per acknowledged packet. The count is of ack-eliciting QUIC packets (their
//! frames and QUIC headers; not UDP/IP headers): the bytes the peer acknowledged, as TCP's
//! `tcpi_bytes_acked` is for TCP (which counts payload only).

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use quinn::congestion::{
    BbrConfig, Controller, ControllerFactory, ControllerMetrics, CubicConfig, NewRenoConfig,
};
use quinn_proto::RttEstimator;

use crate::config::Cc;

/// A congestion-controller factory quinn can use.
pub type Factory = Arc<dyn ControllerFactory + Send + Sync + 'static>;

/// quinn's factory for `cc` (`None`: CUBIC).
pub fn factory(cc: Option<Cc>) -> Factory {
    match cc {
        None | Some(Cc::Cubic) => Arc::new(CubicConfig::default()),
        Some(Cc::Bbr) => Arc::new(BbrConfig::default()),
        Some(Cc::Reno) => Arc::new(NewRenoConfig::default()),
    }
}

/// quinn's factory for `cc` with `initial_window` bytes as its initial window (`None`:
/// quinn's default, 10 datagrams of 1,200 bytes; `--initial-window`).
pub fn factory_with(cc: Option<Cc>, initial_window: Option<u64>) -> Factory {
    let Some(w) = initial_window else {
        return factory(cc);
    };
    match cc {
        None | Some(Cc::Cubic) => Arc::new(CubicConfig::default().initial_window(w).clone()),
        Some(Cc::Bbr) => Arc::new(BbrConfig::default().initial_window(w).clone()),
        Some(Cc::Reno) => Arc::new(NewRenoConfig::default().initial_window(w).clone()),
    }
}

/// Bytes acknowledged on a connection so far, and its persistent-congestion events (which
/// quinn's statistics do not count), shared with its controller.
#[derive(Clone, Debug, Default)]
pub struct AckedBytes(Arc<Counts>);

#[derive(Debug, Default)]
struct Counts {
    acked: AtomicU64,
    persistent: AtomicU64,
}

impl AckedBytes {
    pub fn get(&self) -> u64 {
        self.0.acked.load(Ordering::Relaxed)
    }

    /// Congestion events quinn declared persistent congestion (RFC 9002 §7.6: the window
    /// falls to its minimum).
    pub fn persistent_congestion(&self) -> u64 {
        self.0.persistent.load(Ordering::Relaxed)
    }

    fn add(&self, bytes: u64) {
        self.0.acked.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// A factory whose controllers delegate to `inner`'s and count acknowledged bytes into one
/// [`AckedBytes`]. Use one per connection (the count is the sum over every controller it
/// builds).
pub struct Counting {
    inner: Factory,
    acked: AckedBytes,
}

impl Counting {
    /// Wraps `inner`; returns the factory and the counter its controllers add to.
    pub fn wrap(inner: Factory) -> (Factory, AckedBytes) {
        let acked = AckedBytes::default();
        let f = Arc::new(Counting {
            inner,
            acked: acked.clone(),
        });
        (f, acked)
    }
}

impl ControllerFactory for Counting {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(CountingController {
            inner: self.inner.clone().build(now, current_mtu),
            acked: self.acked.clone(),
        })
    }
}

/// A controller that delegates every call to the real one and counts `on_ack`'s bytes and
/// the persistent-congestion events.
struct CountingController {
    inner: Box<dyn Controller>,
    acked: AckedBytes,
}

impl Controller for CountingController {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
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
        self.acked.add(bytes);
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
            .on_end_acks(now, in_flight, app_limited, largest_packet_num_acked)
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        if is_persistent_congestion {
            self.acked.0.persistent.fetch_add(1, Ordering::Relaxed);
        }
        self.inner
            .on_congestion_event(now, sent, is_persistent_congestion, lost_bytes)
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.inner.on_mtu_update(new_mtu)
    }

    fn window(&self) -> u64 {
        self.inner.window()
    }

    fn metrics(&self) -> ControllerMetrics {
        self.inner.metrics()
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(CountingController {
            inner: self.inner.clone_box(),
            acked: self.acked.clone(),
        })
    }

    fn initial_window(&self) -> u64 {
        self.inner.initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        // The real controller, for whoever looks inside.
        self.inner.into_any()
    }
}
