//! `--quiet-wait`: the wait for a quiet machine, before each run and before the link check.

use std::time::{Duration, Instant};

use shoal_row::metrics;

use crate::options::Options;
use crate::progress::fmt_duration;
use shoal_hostctl::proc;

/// `--quiet-wait`: waits until the 1-minute load is below `--quiet-load` (at most
/// `--quiet-max`), before each run and before the link check; returns the seconds waited.
pub fn wait_for_quiet(opts: &Options, note: impl Fn(&str)) -> f64 {
    if !opts.quiet_wait {
        return 0.0;
    }
    let t0 = Instant::now();
    let mut said = false;
    loop {
        let load = metrics::load_avg_1m();
        if load < opts.quiet_load || proc::interrupted() {
            break;
        }
        if t0.elapsed() >= opts.quiet_max {
            note(&format!(
                "quiet wait: load {load:.2} still ≥ {} after {}; running anyway",
                opts.quiet_load,
                fmt_duration(opts.quiet_max)
            ));
            break;
        }
        if !said {
            note(&format!(
                "quiet wait: 1-minute load {load:.2} ≥ {}; waiting",
                opts.quiet_load
            ));
            said = true;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    t0.elapsed().as_secs_f64()
}
