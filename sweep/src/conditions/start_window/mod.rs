//! How a configuration's runs start their windows in a sweep: each configuration keeps its
//! own path-state folder (so one arm never starts from another arm's state), and a TCP run
//! with the `initial-window` axis gets it on the emulated link's routes (`initcwnd`), with
//! receive and send buffer defaults large enough for the window to be the first flight
//! (crate::startbuf).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::axis;
use crate::columns::{col, Row};
use crate::initcwnd::{self, InEffect, RouteGuard, Want};
use crate::linkctx::LinkCtx;
use crate::matrix::Config;
use crate::plan::Planned;
use crate::profile::triple;
use crate::startbuf::{self, BufGuard};

/// `shoal send`'s flag, also a matrix axis.
pub const PATH_STATE: &str = "path-state";
/// The age past which a record is ignored: the axis, else `shoal send`'s default.
const LIFETIME: &str = "path-state-lifetime";

fn lifetime(cfg: &Config) -> Result<std::time::Duration> {
    match cfg.get(LIFETIME) {
        None => Ok(shoal_sender::path_state::DEFAULT_LIFETIME),
        Some(v) => shoal_common::units::parse_duration(&v.text())
            .map_err(|e| anyhow::anyhow!("{}: {LIFETIME} = {:?}: {e}", cfg.id, v.text())),
    }
}

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
    cfg.get(initcwnd::AXIS).is_some() && !cfg.shoal_mode().starts_with(axis::QUIC_MODE_PREFIX)
}

/// What one run had on its routes and buffer defaults (kept alive for the run: dropping it
/// restores them).
pub struct Applied {
    pub guard: Option<RouteGuard>,
    pub in_effect: Option<InEffect>,
    /// The raised buffer defaults: restored before the host profile restores its own.
    pub buffers: Option<BufGuard>,
    pub buffers_in_effect: Option<startbuf::InEffect>,
    pub mss: u64,
    pub note: Option<String>,
    /// `saved`: the saved window the routes' initcwnd is half of, and what bounded it.
    pub saved: Option<(u64, &'static str)>,
}

impl Applied {
    /// The row's `initcwnd_segments`, `initrwnd_segments` and `initial_window_bytes`
    /// (initcwnd × the link's MSS), and with `saved` the `resume_saved_window_*` pair, after
    /// `shoal send`'s own row was put in.
    pub fn put(&self, row: &mut Row) {
        if let Some(e) = self.in_effect {
            row.set(col::INITCWND_SEGMENTS, e.initcwnd.to_string());
            row.set(col::INITRWND_SEGMENTS, e.initrwnd.to_string());
            row.set(
                col::INITIAL_WINDOW_BYTES,
                (e.initcwnd * self.mss).to_string(),
            );
            if let Some(b) = self.buffers_in_effect {
                row.set(col::LINK_RCV_TCP_RMEM, triple(b.rcv_tcp_rmem));
                row.set(col::LINK_SND_TCP_WMEM, triple(b.snd_tcp_wmem));
                row.set(
                    col::INITIAL_RCV_WINDOW_BYTES,
                    b.initial_rcv_window(e.initrwnd, self.mss).to_string(),
                );
            }
        }
        if let Some((window, cap)) = self.saved.filter(|_| self.in_effect.is_some()) {
            row.set(col::RESUME_SAVED_WINDOW_BYTES, window.to_string());
            row.set(col::RESUME_SAVED_WINDOW_CAP, cap.to_string());
        }
    }

    /// Puts the buffer defaults back (the sweep calls this before the host profile is
    /// dropped, so the profile then restores what it found).
    /// The restore's log text (empty when nothing was raised).
    pub fn restore_buffers(&mut self) -> Result<String> {
        match self.buffers.take() {
            Some(b) => b.restore(),
            None => Ok(String::new()),
        }
    }
}

/// For a TCP run of `cfg` on the emulated link: sets its routes' initial windows.
pub fn apply(link: Option<&LinkCtx>, out: &Path, cfg: &Config) -> Result<Option<Applied>> {
    if !on_routes(cfg) {
        return Ok(None);
    }
    let Some(l) = link else {
        bail!(
            "{}: initial-window in TCP mode {} needs the emulated link (the sweep sets initcwnd \
             on routes it owns); with a remote receiver set `ip route change … initcwnd N` on \
             both hosts by hand (docs/two-hosts.md) and drop the axis",
            cfg.id,
            cfg.shoal_mode()
        );
    };
    let text = cfg
        .get(initcwnd::AXIS)
        .map(|v| v.text())
        .unwrap_or_default();
    let want = initcwnd::parse_want(&text).map_err(|e| anyhow::anyhow!("{}: {e}", cfg.id))?;
    let mtu: u64 = l
        .cols
        .get(col::LINK_MTU)
        .and_then(|m| m.parse().ok())
        .unwrap_or(1500);
    let mss = initcwnd::mss(mtu);
    let mut saved = None;
    let segments = match want {
        Want::Segments(n) => n,
        Want::Bytes(b) => initcwnd::segments(b, mss),
        Want::Saved => {
            match initcwnd::saved_state(&state_dir(out, cfg), &l.rcv_addr, lifetime(cfg)?)? {
                Some((state, cap)) => {
                    saved = Some((state.cwnd, cap));
                    // The jump window, as QUIC's `--initial-window saved`.
                    let jump = shoal_common::careful_resume::jump_cwnd(&state, u64::MAX);
                    initcwnd::segments(jump, mss)
                }
                None => {
                    return Ok(Some(Applied {
                        guard: None,
                        in_effect: None,
                        saved: None,
                        buffers: None,
                        buffers_in_effect: None,
                        mss,
                        note: Some(format!(
                            "{}: initial-window saved: no fresh TCP path state in {}; routes \
                         left as they are (the kernel's default initial window)",
                            cfg.id,
                            state_dir(out, cfg).display()
                        )),
                    }))
                }
            }
        }
    };
    let (guard, in_effect) =
        RouteGuard::apply(&l.snd_ns, &l.rcv_ns, &l.snd_addr, &l.rcv_addr, segments)?;
    // The larger of the two windows as read back (the sweep sets both to `segments`).
    let window = in_effect.initcwnd.max(in_effect.initrwnd) * mss;
    let (buffers, buffers_in_effect) = BufGuard::apply(&l.snd_ns, &l.rcv_ns, window)?;
    Ok(Some(Applied {
        guard: Some(guard),
        in_effect: Some(in_effect),
        buffers: Some(buffers),
        buffers_in_effect: Some(buffers_in_effect),
        mss,
        note: None,
        saved,
    }))
}

/// Whether `cfg`'s runs start from path state: `resume = true` or `initial-window = "saved"`.
pub fn wants_state(cfg: &Config) -> bool {
    cfg.get("resume").is_some_and(|v| v.text() == "true")
        || cfg.get(initcwnd::AXIS).is_some_and(|v| v.text() == "saved")
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
