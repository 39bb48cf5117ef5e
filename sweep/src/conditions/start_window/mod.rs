//! How a configuration's runs start their windows in a sweep: each configuration keeps its
//! own path-state folder (so one arm never starts from another arm's state), and a TCP run
//! with the `initial-window` axis gets it on the emulated link's routes (`initcwnd`), with
//! receive and send buffer defaults large enough for the window to be the first flight
//! (buffers.rs).

use std::path::Path;

use anyhow::{bail, Result};
use shoal_matrix::conditions::start_window::{self as ask, Want};
use shoal_matrix::matrix::Config;
use shoal_matrix::start_window as plan;
use shoal_report::columns::{col, Row};

use crate::conditions::profile::triple;
use crate::linkctx::LinkCtx;

pub mod buffers;
pub mod routes;

use buffers::BufGuard;
use routes::{InEffect, RouteGuard};

/// The age past which a record is ignored: the axis, else `shoal send`'s default.
const LIFETIME: &str = "path-state-lifetime";

fn lifetime(cfg: &Config) -> Result<std::time::Duration> {
    match cfg.get(LIFETIME) {
        None => Ok(shoal_sender::path_state::DEFAULT_LIFETIME),
        Some(v) => shoal_proto::ranges::parse_flag_duration(LIFETIME, &v.text())
            .map_err(|e| anyhow::anyhow!("{}: {LIFETIME} = {:?}: {e}", cfg.id, v.text())),
    }
}

/// What one run had on its routes and buffer defaults (kept alive for the run: dropping it
/// restores them).
pub struct Applied {
    pub guard: Option<RouteGuard>,
    pub in_effect: Option<InEffect>,
    /// The raised buffer defaults: restored before the host profile restores its own.
    pub buffers: Option<BufGuard>,
    pub buffers_in_effect: Option<buffers::InEffect>,
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
                row.set_triple(col::LINK_RCV_TCP_RMEM, &triple(b.rcv_tcp_rmem));
                row.set_triple(col::LINK_SND_TCP_WMEM, &triple(b.snd_tcp_wmem));
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
    if !plan::on_routes(cfg) {
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
    // Parsed with the matrix (on_routes: the axis in a TCP mode).
    let Some(want) = cfg.conditions.initial_window else {
        return Ok(None);
    };
    let mtu: u64 = l
        .cols
        .get(col::LINK_MTU)
        .and_then(|m| m.parse().ok())
        .unwrap_or(1500);
    let mss = ask::mss(mtu);
    let mut saved = None;
    let segments = match want {
        Want::Segments(n) => n,
        Want::Bytes(b) => ask::segments(b, mss),
        Want::Saved => {
            match routes::saved_state(&plan::state_dir(out, cfg), &l.rcv_addr, lifetime(cfg)?)? {
                Some((state, cap)) => {
                    saved = Some((state.cwnd, cap));
                    // The jump window, as QUIC's `--initial-window saved`.
                    let jump = shoal_resume::careful_resume::jump_cwnd(&state, u64::MAX);
                    ask::segments(jump, mss)
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
                            plan::state_dir(out, cfg).display()
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
