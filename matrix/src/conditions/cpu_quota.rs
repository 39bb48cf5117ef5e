//! The receiver CPU axis (`recv-cpu-quota = [1.0, 0.5, 0.25]`, a fraction of one core): the
//! share of a core per CFS period the run's `shoal recv` gets (the sweep caps it with a cgroup
//! of its own, shoal-sweep's conditions).

use anyhow::{bail, Result};

use crate::axis::{self, AxisValue};

/// The CFS period every group uses.
pub const PERIOD_US: u64 = 100_000;

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

/// The quota in microseconds per [`PERIOD_US`] for `fraction` of a core (at least the
/// kernel's 1 ms minimum).
pub fn quota_us(fraction: f64) -> u64 {
    ((fraction * PERIOD_US as f64).round() as u64).max(1000)
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
        assert_eq!(quota_us(0.25), 25_000);
        assert_eq!(quota_us(1.0), 100_000);
        assert_eq!(quota_us(0.001), 1000);
    }
}
