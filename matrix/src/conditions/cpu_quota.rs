//! The receiver CPU axes: `recv-cpu-quota = [1.0, 0.5, 0.25]`, a fraction of one core, the
//! share of a core per CFS period the run's `shoal recv` gets (the sweep caps it with a cgroup
//! of its own, shoal-sweep's conditions); and `recv-cpu-period = ["5ms", "100ms", "500ms"]`,
//! that period. The same share over a shorter period throttles more often for less long: at
//! half a core, 2.5 ms of every 5 ms against 250 ms of every 500 ms.

use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use shoal_proto::units::parse_duration;

use crate::axis::{self, AxisValue};

/// The CFS period a group uses when no `recv-cpu-period` axis picks one (the kernel's default).
pub const PERIOD_US: u64 = 100_000;
/// The periods the kernel accepts (cgroup v1 `cpu.cfs_period_us`, v2 `cpu.max`): 1 ms to 1 s.
pub const PERIOD_MIN_US: u64 = 1_000;
pub const PERIOD_MAX_US: u64 = 1_000_000;

/// The period a configuration's `recv-cpu-period` axis asks for, in µs (`None` without the
/// axis): a duration from 1 ms to 1 s, only beside `recv-cpu-quota`.
pub fn period_of(params: &[(String, AxisValue)]) -> Result<Option<u64>> {
    let Some((_, v)) = params.iter().find(|(k, _)| k == axis::RECV_CPU_PERIOD) else {
        return Ok(None);
    };
    let name = axis::RECV_CPU_PERIOD;
    let text = v.text();
    let d = parse_duration(text.trim())
        .map_err(|e| anyhow!("axis {name}: {text:?} is not a duration (e.g. \"20ms\"): {e}"))?;
    let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    if !(PERIOD_MIN_US..=PERIOD_MAX_US).contains(&us) || d != Duration::from_micros(us) {
        bail!("axis {name}: {text:?} is out of range (whole microseconds from 1ms to 1s)");
    }
    if !params.iter().any(|(k, _)| k == axis::RECV_CPU_QUOTA) {
        bail!("axis {name} needs recv-cpu-quota: it is the period of that quota");
    }
    Ok(Some(us))
}

/// The quota a configuration's `recv-cpu-quota` axis asks for (`None` without the axis): a
/// fraction of one core, above 0 and at most 64.
pub fn of(params: &[(String, AxisValue)]) -> Result<Option<f64>> {
    let Some((_, v)) = params.iter().find(|(k, _)| k == axis::RECV_CPU_QUOTA) else {
        return Ok(None);
    };
    let q = match v {
        AxisValue::Float(f) => *f,
        AxisValue::Int(i) => *i as f64,
        AxisValue::Str(s) => s.trim().parse::<f64>().map_err(|_| {
            anyhow::anyhow!(
                "axis {}: {s:?} is not a fraction of a core (e.g. 0.5)",
                axis::RECV_CPU_QUOTA
            )
        })?,
        AxisValue::Bool(b) => bail!(
            "axis {}: {b} is not a fraction of a core (e.g. 0.5)",
            axis::RECV_CPU_QUOTA
        ),
    };
    if !(q > 0.0 && q <= 64.0) {
        bail!(
            "axis {}: {q} is out of range (a fraction of one core above 0, e.g. 0.25)",
            axis::RECV_CPU_QUOTA
        );
    }
    Ok(Some(q))
}

/// The quota in microseconds per `period_us` for `fraction` of a core (at least the kernel's
/// 1 ms minimum).
pub fn quota_us(fraction: f64, period_us: u64) -> u64 {
    ((fraction * period_us as f64).round() as u64).max(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_values() {
        let p = |v: AxisValue| of(&[(axis::RECV_CPU_QUOTA.to_string(), v)]);
        assert_eq!(p(AxisValue::Float(0.25)).unwrap(), Some(0.25));
        assert_eq!(p(AxisValue::Int(1)).unwrap(), Some(1.0));
        assert_eq!(p(AxisValue::Str("0.5".into())).unwrap(), Some(0.5));
        assert!(p(AxisValue::Float(0.0)).is_err());
        assert!(p(AxisValue::Str("half".into()))
            .unwrap_err()
            .to_string()
            .contains("\"half\""));
        assert_eq!(of(&[]).unwrap(), None);
        assert_eq!(quota_us(0.25, PERIOD_US), 25_000);
        assert_eq!(quota_us(1.0, PERIOD_US), 100_000);
        assert_eq!(quota_us(0.001, PERIOD_US), 1000);
        assert_eq!(quota_us(0.5, 5_000), 2_500);
    }

    #[test]
    fn period_values() {
        let quota = (axis::RECV_CPU_QUOTA.to_string(), AxisValue::Float(0.5));
        let p = |v: &str| {
            period_of(&[
                quota.clone(),
                (axis::RECV_CPU_PERIOD.to_string(), AxisValue::Str(v.into())),
            ])
        };
        assert_eq!(p("5ms").unwrap(), Some(5_000));
        assert_eq!(p("500ms").unwrap(), Some(500_000));
        assert_eq!(p("1s").unwrap(), Some(1_000_000));
        for bad in ["500us", "2s", "0ms", "soon"] {
            let e = p(bad).unwrap_err().to_string();
            assert!(e.contains("recv-cpu-period") && e.contains(bad), "{e}");
        }
        let alone = period_of(&[(
            axis::RECV_CPU_PERIOD.to_string(),
            AxisValue::Str("20ms".into()),
        )]);
        assert!(alone
            .unwrap_err()
            .to_string()
            .contains("needs recv-cpu-quota"));
        assert_eq!(period_of(std::slice::from_ref(&quota)).unwrap(), None);
    }
}
