//! The host conditions a configuration's axes ask for, typed: the host profile, the
//! receiver's CPU quota (and hog), each end's stalls, the link's loss, the routes' initial window and the destination
//! file system. The sweep applies and restores them around each run (shoal-sweep's
//! `conditions`).

pub mod cpu_quota;
pub mod dest_fs;
pub mod loss;
pub mod profile;
pub mod stall;
pub mod start_window;

use anyhow::Result;

use crate::axis::AxisValue;
use profile::HostProfile;
use stall::StallSpec;
use start_window::Want;

/// The host conditions one configuration asks for, parsed once from its axes (`None`: the
/// axis is not set, the host stays as it is).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Conditions {
    /// The `profile` axis.
    pub profile: Option<HostProfile>,
    /// The `recv-cpu-quota` axis: a fraction of one core.
    pub recv_cpu_quota: Option<f64>,
    /// The `recv-cpu-period` axis: that quota's period (µs).
    pub recv_cpu_period_us: Option<u64>,
    /// The `loss` axis: a probability per packet and direction.
    pub loss: Option<f64>,
    /// The `initial-window` axis in a TCP mode: the routes' initial window.
    pub initial_window: Option<Want>,
    /// The `recv-stall` and `send-stall` axes (`Some(none)`: the axis says `none`).
    pub recv_stall: Option<StallSpec>,
    pub send_stall: Option<StallSpec>,
    /// The `recv-cpu-hog` axis.
    pub recv_cpu_hog: bool,
}

impl Conditions {
    /// The conditions `params` ask for; a bad value is an error naming its axis.
    pub fn of(params: &[(String, AxisValue)]) -> Result<Conditions> {
        profile::check(params)?;
        Ok(Conditions {
            profile: HostProfile::of(params)?,
            recv_cpu_quota: cpu_quota::of(params)?,
            recv_cpu_period_us: cpu_quota::period_of(params)?,
            loss: loss::of(params)?,
            initial_window: start_window::of(params)?,
            recv_stall: stall::of(params, crate::axis::RECV_STALL)?,
            send_stall: stall::of(params, crate::axis::SEND_STALL)?,
            recv_cpu_hog: stall::hog_of(params)?,
        })
    }
}
