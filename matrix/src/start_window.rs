//! The start window of a configuration's runs, as the matrix asks for it: each configuration
//! keeps its own path-state folder (so one arm never starts from another arm's state), a
//! configuration that starts from saved state gets a warm-up run first, and a TCP run's
//! `initial-window` axis is carried by the emulated link's routes rather than by `shoal send`
//! (the sweep sets them, shoal-sweep's `conditions::start_window`).

use std::path::{Path, PathBuf};

use shoal_common::units::parse_size;

use crate::axis;
use crate::matrix::Config;
use crate::plan::Planned;

/// `shoal send`'s flag, also a matrix axis.
pub const PATH_STATE: &str = "path-state";
/// The path-state folder of `cfg`'s runs: its `path-state` axis, else
/// `<out>/path-state/<config id>`.
pub fn state_dir(out: &Path, cfg: &Config) -> PathBuf {
    match cfg.get(PATH_STATE) {
        Some(v) => PathBuf::from(v.text()),
        None => out.join("path-state").join(&cfg.id),
    }
}

/// The `--path-state` flag the sweep adds to `cfg`'s `shoal send` (none when the matrix
/// sets the axis itself: it is already among the flags).
pub fn send_flags(out: &Path, cfg: &Config) -> Vec<String> {
    if cfg.get(PATH_STATE).is_some() {
        return Vec::new();
    }
    vec![
        format!("--{PATH_STATE}"),
        state_dir(out, cfg).display().to_string(),
    ]
}

/// Whether the sweep, not `shoal send`, carries `cfg`'s `initial-window` (TCP modes).
pub fn on_routes(cfg: &Config) -> bool {
    cfg.get(AXIS).is_some() && !cfg.shoal_mode().starts_with(axis::QUIC_MODE_PREFIX)
}

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

/// Whether `cfg`'s runs start from path state: `resume = true` or `initial-window = "saved"`.
pub fn wants_state(cfg: &Config) -> bool {
    cfg.get("resume").is_some_and(|v| v.text() == "true")
        || cfg.get(AXIS).is_some_and(|v| v.text() == "saved")
}

/// `plan` with one warm-up (run 0: cold, verified, not a row) right before the first run of
/// every configuration that starts from path state, so each of its recorded runs has state
/// (its own configuration's: [`state_dir`]).
pub fn with_warmups(plan: Vec<Planned>, configs: &[Config]) -> Vec<Planned> {
    let mut seen = vec![false; configs.len()];
    let mut v = Vec::with_capacity(plan.len() + configs.len());
    for p in plan {
        if !seen[p.config] && wants_state(&configs[p.config]) {
            v.push(Planned {
                config: p.config,
                run: WARMUP_RUN,
            });
        }
        seen[p.config] = true;
        v.push(p);
    }
    v
}

/// The run number of a warm-up.
pub const WARMUP_RUN: u32 = 0;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Matrix;

    #[test]
    fn stateful_configurations_get_one_warmup_before_their_first_run() {
        let m = Matrix::parse(
            "[link]\nname = \"x\"\nrtt = \"10ms\"\nrate = \"1gbit\"\n\
             [payload.p]\nfiles = 1\nsize = 1\n\
             [axes]\nmode = [\"quic-bundle\"]\nresume = [false, true]\n\
             [[also]]\nmode = [\"tcp-bundle\"]\ninitial-window = [\"saved\", \"64\"]\n",
        )
        .unwrap();
        let plan = crate::plan::plan(m.configs.len(), 3, 7);
        let w = with_warmups(plan.clone(), &m.configs);
        let stateful: Vec<usize> = (0..m.configs.len())
            .filter(|&c| wants_state(&m.configs[c]))
            .collect();
        assert_eq!(stateful.len(), 2, "resume=true and initial-window=saved");
        assert_eq!(w.len(), plan.len() + 2);
        for c in stateful {
            let first = w.iter().position(|p| p.config == c).unwrap();
            assert_eq!(w[first].run, WARMUP_RUN);
            assert_eq!(w.iter().filter(|p| p.config == c && p.run == 0).count(), 1);
        }
        let recorded: Vec<_> = w.into_iter().filter(|p| p.run != WARMUP_RUN).collect();
        assert_eq!(recorded, plan);
    }
}

#[cfg(test)]
mod want_tests {
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
    }
}
