//! The start window of a configuration's runs, as the matrix asks for it: each configuration
//! keeps its own path-state folder (so one arm never starts from another arm's state), a
//! configuration that starts from saved state gets a warm-up run first, and a TCP run's
//! `initial-window` axis is carried by the emulated link's routes rather than by `shoal send`
//! (the sweep sets them, shoal-sweep's `conditions::start_window`).

use std::path::{Path, PathBuf};

use crate::axis;
use crate::conditions::start_window::AXIS;
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
