//! The stall axes (`recv-stall`, `send-stall` = `["none", "20ms every 250ms", "1s every 10s"]`):
//! one end's processes frozen for a length of time once every period, whatever their load —
//! the intermittent steal a CPU quota cannot give (a quota throttles only a process that uses
//! it). `recv-cpu-hog = [true]` puts a busy process beside the receiver in its CPU-capped group,
//! so the quota's throttling no longer depends on the receiver's own load. The sweep freezes
//! the end with a cgroup freezer driven by a timer process of its own (shoal-sweep's
//! conditions).

use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use shoal_proto::units::{format_duration, parse_duration};

use crate::axis::{self, AxisValue};

/// A freezer duty cycle: frozen for `length`, once every `every` (zero: no stall).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StallSpec {
    pub length: Duration,
    pub every: Duration,
}

impl StallSpec {
    /// `none`, or `LENGTH every PERIOD` (e.g. `20ms every 250ms`), the length shorter than
    /// the period.
    pub fn parse(text: &str) -> Result<StallSpec, String> {
        let t = text.trim();
        if t == "none" {
            return Ok(StallSpec::default());
        }
        let form =
            || format!("{text:?} is not a stall (write \"none\" or e.g. \"20ms every 250ms\")");
        let (l, e) = t.split_once(" every ").ok_or_else(form)?;
        let length = parse_duration(l.trim()).map_err(|e| format!("{}: {e}", form()))?;
        let every = parse_duration(e.trim()).map_err(|e| format!("{}: {e}", form()))?;
        if length.is_zero() || length >= every {
            return Err(format!(
                "{text:?}: the stall must be above 0 and shorter than its period"
            ));
        }
        if length < Duration::from_millis(1) {
            return Err(format!("{text:?}: a stall is at least 1ms"));
        }
        Ok(StallSpec { length, every })
    }

    /// Whether this is `none`.
    pub fn is_none(&self) -> bool {
        self.length.is_zero()
    }

    /// As written in a matrix (`none`, `20ms every 250ms`).
    pub fn text(&self) -> String {
        if self.is_none() {
            "none".into()
        } else {
            format!(
                "{} every {}",
                format_duration(self.length),
                format_duration(self.every)
            )
        }
    }
}

/// The stall one end's axis asks for (`None` without the axis).
pub fn of(params: &[(String, AxisValue)], name: &str) -> Result<Option<StallSpec>> {
    let Some((_, v)) = params.iter().find(|(k, _)| k == name) else {
        return Ok(None);
    };
    StallSpec::parse(&v.text())
        .map(Some)
        .map_err(|e| anyhow!("axis {name}: {e}"))
}

/// The `recv-cpu-hog` axis: whether a busy process shares the receiver's CPU-capped group
/// (only beside `recv-cpu-quota`, whose group it joins).
pub fn hog_of(params: &[(String, AxisValue)]) -> Result<bool> {
    let Some((_, v)) = params.iter().find(|(k, _)| k == axis::RECV_CPU_HOG) else {
        return Ok(false);
    };
    let on = match v {
        AxisValue::Bool(b) => *b,
        AxisValue::Str(s) if s == "true" || s == "false" => s == "true",
        other => bail!(
            "axis {}: {:?} is not true or false",
            axis::RECV_CPU_HOG,
            other.text()
        ),
    };
    if on && !params.iter().any(|(k, _)| k == axis::RECV_CPU_QUOTA) {
        bail!(
            "axis {} needs recv-cpu-quota: the hog runs in the receiver's CPU-capped group",
            axis::RECV_CPU_HOG
        );
    }
    Ok(on)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_values() {
        let ms = Duration::from_millis;
        assert_eq!(
            StallSpec::parse("20ms every 250ms"),
            Ok(StallSpec {
                length: ms(20),
                every: ms(250)
            })
        );
        assert_eq!(StallSpec::parse("1s every 10s").unwrap().length, ms(1000));
        assert!(StallSpec::parse("none").unwrap().is_none());
        assert_eq!(
            StallSpec::parse("20ms every 250ms").unwrap().text(),
            "20ms every 250ms"
        );
        assert!(StallSpec::parse("20ms").unwrap_err().contains("e.g."));
        assert!(StallSpec::parse("300ms every 250ms").is_err());
        assert!(StallSpec::parse("0s every 250ms").is_err());
        let p = |s: &str| {
            of(
                &[(axis::RECV_STALL.into(), AxisValue::Str(s.into()))],
                axis::RECV_STALL,
            )
        };
        assert!(p("20 every 250ms")
            .unwrap_err()
            .to_string()
            .starts_with("axis recv-stall:"));
        assert_eq!(of(&[], axis::SEND_STALL).unwrap(), None);
    }

    #[test]
    fn hog_needs_a_quota() {
        let hog = (axis::RECV_CPU_HOG.to_string(), AxisValue::Bool(true));
        let quota = (axis::RECV_CPU_QUOTA.to_string(), AxisValue::Float(0.5));
        assert!(hog_of(std::slice::from_ref(&hog)).is_err());
        assert!(hog_of(&[hog, quota]).unwrap());
        assert!(!hog_of(&[]).unwrap());
    }
}
