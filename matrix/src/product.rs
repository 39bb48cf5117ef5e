//! A matrix's products: each axes table's values, their Cartesian product, and each point
//! normalised (payload and kind first, the arm and time limit typed, Shoal axes dropped from
//! baselines).

use std::time::Duration;

use anyhow::{bail, Result};

use crate::arm::Arm;
use crate::axis::{self, AxisValue};
use crate::conditions::Conditions;
use crate::schema::{AxisValues, Ordered};
use shoal_proto::wire::Cc;

/// One axes table: axis name → its values, in matrix order.
pub type Product = Vec<(String, Vec<AxisValue>)>;

/// One point of a product, normalised.
pub struct Point {
    pub arm: Arm,
    /// The `timeout` axis, when there is one.
    pub timeout: Option<Duration>,
    /// The host conditions its axes ask for.
    pub conditions: Conditions,
    /// Axis name → value: payload and kind first, then the rest in matrix order.
    pub params: Vec<(String, AxisValue)>,
}

/// Checks one axes table (`what` names it in errors: `[axes]`, `[[also]] #2`).
pub fn axes_of(t: Ordered<AxisValues>, what: &str) -> Result<Product> {
    let mut out = Vec::new();
    for (k, AxisValues(values)) in t.0 {
        if k.is_empty()
            || !k
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        {
            bail!("{what}: axis name {k:?} is not a flag name");
        }
        if k == axis::RECV_PREFIX {
            bail!("{what}: recv. needs a flag name");
        }
        if values.is_empty() {
            bail!("{what}: axis {k} has no value");
        }
        if axis::PER_RUN_FILE_FLAGS.contains(&k.as_str()) {
            bail!(
                "{what}: axis {k}: every run would write the same file. The sweep keeps every \
                 run's time series, latency distribution and receiver series in \
                 OUT/traces/<config_id>-r<run>/ (sampled every 100ms, or as a stats-interval \
                 axis says); drop the axis"
            );
        }
        out.push((k, values));
    }
    Ok(out)
}

/// Every combination of one value per axis, in matrix order.
pub fn cartesian(product: &Product) -> Vec<Vec<(String, AxisValue)>> {
    let mut out: Vec<Vec<(String, AxisValue)>> = vec![Vec::new()];
    for (k, values) in product {
        let mut next = Vec::with_capacity(out.len() * values.len());
        for partial in &out {
            for v in values {
                let mut p = partial.clone();
                p.push((k.clone(), v.clone()));
                next.push(p);
            }
        }
        out = next;
    }
    out
}

/// Puts payload and kind first, checks the payload is one of `payloads`, types the arm and the
/// time limit (`what` names the axes table in errors), and drops Shoal axes from baseline arms
/// and a tool's own axes from every other arm.
pub fn normalise(params: Vec<(String, AxisValue)>, payloads: &[&str], what: &str) -> Result<Point> {
    let find = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let payload = match find(axis::PAYLOAD) {
        Some(v) => v,
        None if payloads.len() == 1 => AxisValue::Str(payloads[0].to_string()),
        None => bail!("an axes table has no payload axis and there are several payloads"),
    };
    if !payloads.contains(&payload.text().as_str()) {
        bail!("payload {} is not defined ([payload.NAME])", payload.text());
    }
    let kind = find(axis::KIND).unwrap_or(AxisValue::Str(Arm::Shoal.name().into()));
    let Some(arm) = Arm::from_name(&kind.text()) else {
        bail!(
            "{what}: kind {} unknown (known: {})",
            kind.text(),
            Arm::names()
        );
    };
    let timeout = match find(axis::TIMEOUT) {
        Some(v) => Some(
            shoal_proto::units::parse_duration(&v.text())
                .map_err(|e| anyhow::anyhow!("{what} timeout: {e}"))?,
        ),
        None => None,
    };
    // The sweep's own typed axes: a bad value is an error naming the axes table.
    Conditions::of(&params).map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
    let mut out = vec![
        (axis::PAYLOAD.to_string(), payload),
        (axis::KIND.to_string(), kind),
    ];
    for (k, v) in params {
        if k == axis::PAYLOAD || k == axis::KIND {
            continue;
        }
        let own = arm.own_axes().contains(&k.as_str());
        if !own
            && (axis::TOOL_AXES.contains(&k.as_str())
                || (arm.is_baseline() && !axis::BASELINE_AXES.contains(&k.as_str())))
        {
            continue;
        }
        if k == axis::RCLONE_TRANSFERS && !matches!(v, AxisValue::Int(n) if n > 0) {
            bail!("{what}: {k} = {}: a positive number of transfers", v.text());
        }
        // iperf3 -C takes a Linux controller's name.
        if arm == Arm::Iperf3
            && k == axis::CC
            && ![Cc::Cubic, Cc::Bbr, Cc::Reno]
                .map(Cc::linux_name)
                .contains(&v.text().as_str())
        {
            bail!("{what}: cc = {}: iperf3 takes cubic, bbr or reno", v.text());
        }
        out.push((k, v));
    }
    // Those that apply to this arm (a baseline's receiver is not capped).
    let conditions = Conditions::of(&out)?;
    Ok(Point {
        arm,
        timeout,
        conditions,
        params: out,
    })
}
