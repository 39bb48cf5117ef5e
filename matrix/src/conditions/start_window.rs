//! TCP's initial window as the `initial-window` axis asks for it: in a TCP mode the sweep sets
//! it on the emulated link's routes (`initcwnd`, `initrwnd`; shoal-sweep's
//! `conditions::start_window`); in a QUIC mode it is `shoal send --initial-window`.

use anyhow::{anyhow, Result};
use shoal_proto::units::parse_size;

use crate::axis::{self, AxisValue};

/// The axis (a `shoal send` flag for QUIC modes, the routes for TCP modes).
pub const AXIS: &str = "initial-window";

/// IPv4 + TCP headers + the timestamp option: the MSS a Linux TCP connection uses on a link
/// of MTU m is m − 52 (what TCP_INFO's tcpi_snd_mss shows on the emulated link).
const TCP_OVERHEAD: u64 = 52;

/// What the axis asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    Segments(u64),
    Bytes(u64),
    /// Half the saved window of the configuration's TCP path state, as QUIC's `saved`.
    Saved,
}

pub fn parse_want(s: &str) -> Result<Want, String> {
    if s == "saved" {
        return Ok(Want::Saved);
    }
    let w = match s.parse::<u64>() {
        Ok(n) => Want::Segments(n),
        Err(_) => Want::Bytes(parse_size(s).map_err(|e| format!("{AXIS} = {s:?}: {e}"))?),
    };
    match w {
        Want::Segments(0) | Want::Bytes(0) => Err(format!("{AXIS} = {s:?}: must be above 0")),
        w => Ok(w),
    }
}

/// The MSS on a link of `mtu` bytes.
pub fn mss(mtu: u64) -> u64 {
    mtu.saturating_sub(TCP_OVERHEAD).max(1)
}

/// Segments for `bytes`: rounded up (the window is at least what was asked).
pub fn segments(bytes: u64, mss: u64) -> u64 {
    bytes.div_ceil(mss.max(1)).max(1)
}

/// What a configuration's `initial-window` axis asks of the routes: `None` without the axis
/// or in a QUIC mode (where `shoal send` takes it); a bad value is an error naming the axis.
pub fn of(params: &[(String, AxisValue)]) -> Result<Option<Want>> {
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.text());
    let Some(text) = get(AXIS) else {
        return Ok(None);
    };
    let mode = get(axis::MODE).unwrap_or_else(|| axis::DEFAULT_MODE.to_string());
    if mode.starts_with(axis::QUIC_MODE_PREFIX) {
        return Ok(None);
    }
    parse_want(&text).map(Some).map_err(|e| anyhow!("axis {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wants_and_segments() {
        assert_eq!(parse_want("64"), Ok(Want::Segments(64)));
        assert_eq!(parse_want("64KiB"), Ok(Want::Bytes(65_536)));
        assert_eq!(parse_want("saved"), Ok(Want::Saved));
        assert!(parse_want("0").is_err());
        assert!(parse_want("lots").unwrap_err().contains(AXIS));
        assert_eq!(mss(1500), 1448);
        assert_eq!(segments(65_536, 1448), 46);
        assert_eq!(segments(1448, 1448), 1);
        let p = |pairs: &[(&str, &str)]| {
            let v: Vec<(String, AxisValue)> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), AxisValue::Str(v.to_string())))
                .collect();
            of(&v)
        };
        assert_eq!(p(&[(AXIS, "64")]).unwrap(), Some(Want::Segments(64)));
        assert_eq!(p(&[("mode", "quic-bundle"), (AXIS, "lots")]).unwrap(), None);
        assert!(p(&[("mode", "tcp-streams"), (AXIS, "lots")]).is_err());
        assert_eq!(p(&[]).unwrap(), None);
    }
}
