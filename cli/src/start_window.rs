//! `shoal send --resume / --initial-window / --path-state…`: the start-window flags, their
//! resolution against the path state, and saving a run's path state.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use shoal_proto::units::parse_size;
use shoal_row::row::RunRow;
use shoal_sender::path_state::{now_unix, Cap, Lookup, PathStore, DEFAULT_LIFETIME, WINDOW_FLOOR};
use shoal_sender::start_window::{record_of, StartConfig, PHASES_FILE};
use shoal_transport::config::Mode;
use shoal_transport::identity::Pin;

/// QUIC's segment for `--initial-window N` (quinn's base datagram size, the unit of its
/// default initial window of 10 segments).
const QUIC_SEGMENT: u64 = 1_200;

/// `--initial-window`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum InitialWindow {
    Segments(u64),
    Bytes(u64),
    Saved,
}

fn parse_initial_window(s: &str) -> Result<InitialWindow, String> {
    if s == "saved" {
        return Ok(InitialWindow::Saved);
    }
    let w = match s.parse::<u64>() {
        Ok(n) => InitialWindow::Segments(n),
        Err(_) => InitialWindow::Bytes(parse_size(s).map_err(|e| e.to_string())?),
    };
    match w {
        InitialWindow::Segments(n) if n < 2 => Err("at least 2 segments".into()),
        InitialWindow::Bytes(b) if b < 2 * QUIC_SEGMENT => Err("at least 2,400 bytes".into()),
        w => Ok(w),
    }
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// Careful Resume (RFC 9959; QUIC modes): when the path state holds a fresh record for
    /// this receiver (same pin and --to host), check the first RTT against the saved one,
    /// then jump to half the saved window (the smaller of the saved cwnd and the saved peak
    /// delivery rate × min RTT per connection), paced over an RTT, validate it within
    /// one RTT and retreat to half of what was delivered on a loss. The row's `resume` column
    /// says what happened [default: off].
    #[arg(long)]
    pub resume: bool,
    /// Initial congestion window (QUIC modes): N segments (a bare number, × 1,200 bytes), a
    /// size (e.g. 64KiB), or `saved`: half the window the path state holds for this receiver
    /// (what --resume would jump to, without its checks; with no fresh state, a warning and
    /// the default). The row's `initial_window_bytes` is read back from the controller
    /// [default: quinn's, 10 × 1,200 bytes]. TCP modes refuse it: TCP's initial window is
    /// the route's (`initcwnd`); a sweep sets it on the emulated link (the `initial-window`
    /// axis), or set it by hand with `ip route change … initcwnd N` (docs/resume.md).
    #[arg(long, value_name = "N|SIZE|saved", value_parser = parse_initial_window)]
    pub initial_window: Option<InitialWindow>,
    /// Path-state folder: one JSON record per receiver and transport, saved after every ok
    /// run [default: $XDG_STATE_HOME/shoal/paths, else ~/.local/state/shoal/paths].
    #[arg(long, value_name = "DIR")]
    pub path_state: Option<PathBuf>,
    /// Path state older than this is ignored (RFC 9959's guidance: an hour).
    #[arg(long, default_value = crate::defaults::span(shoal_sender::path_state::DEFAULT_LIFETIME), value_parser = |v: &str| crate::args::span_in("path-state-lifetime", v))]
    pub path_state_lifetime: Duration,
    /// Do not save this run's path state.
    #[arg(long)]
    pub no_save_path_state: bool,
}

pub(crate) fn store(dir: &Option<PathBuf>) -> PathStore {
    PathStore::new(dir.clone().unwrap_or_else(PathStore::default_dir))
}

fn transport(mode: Mode) -> &'static str {
    if mode.is_quic() {
        "quic"
    } else {
        "tcp"
    }
}

impl StartArgs {
    /// The sender's start settings for a run in `mode` to `to` (pin `pin`).
    pub fn resolve(
        &self,
        mode: Mode,
        pin: &Pin,
        to: &str,
        trace_dir: Option<&PathBuf>,
    ) -> Result<StartConfig> {
        if self.resume && !mode.is_quic() {
            bail!("--resume applies to QUIC modes (TCP's arm is a sweep's initial-window = \"saved\")");
        }
        if self.initial_window.is_some() && !mode.is_quic() {
            // Changing a route is a host-wide, root-only change that outlives a crashed
            // sender: only a sweep, which owns both namespaces of its emulated link, does it.
            bail!(
                "--initial-window applies to QUIC modes; TCP's initial window is the route's \
                 initcwnd: use a sweep's initial-window axis on the emulated link (it sets and \
                 restores initcwnd/initrwnd), or as root set it by hand on both hosts: \
                 ip route change <the route `ip route get RECEIVER` uses> initcwnd N (sender) and \
                 … initrwnd N (receiver) (docs/resume.md, docs/two-hosts.md)"
            );
        }
        let store = store(&self.path_state);
        let wants_state = self.resume || self.initial_window == Some(InitialWindow::Saved);
        let lookup = if wants_state {
            let t = transport(mode);
            store.lookup(t, pin, to, self.path_state_lifetime, now_unix())?
        } else {
            Lookup::Missing
        };
        let (saved, saved_cap) = match &lookup {
            Lookup::Fresh(r) => (Some(r.saved()), r.saved_window().1.name()),
            Lookup::Expired(_) | Lookup::Missing | Lookup::SetAside { .. } => (None, ""),
        };
        let note = match &lookup {
            Lookup::SetAside { file, reason } => {
                let note = format!(
                    "path state set aside as {}: {reason}; started cold",
                    file.display()
                );
                eprintln!("warning: {note}");
                note
            }
            Lookup::Fresh(r) if r.saved_window().1 == Cap::Floor => format!(
                "saved window of {} B raised to the floor, {} B",
                r.unclamped_window(),
                WINDOW_FLOOR
            ),
            _ => String::new(),
        };
        let initial_window = match self.initial_window {
            None => None,
            Some(InitialWindow::Segments(n)) => Some(n.saturating_mul(QUIC_SEGMENT)),
            Some(InitialWindow::Bytes(b)) => Some(b),
            Some(InitialWindow::Saved) => match saved {
                Some(s) => Some(shoal_resume::careful_resume::jump_cwnd(&s, u64::MAX)),
                None => {
                    // A sweep's first run has no state yet: it runs with the default window
                    // (the row's initial_window_bytes says so) instead of failing.
                    eprintln!(
                        "warning: --initial-window saved: no fresh path state for {to} (pin \
                         {pin}) in {} ({}); the controller's default window is used",
                        store.dir().display(),
                        match lookup {
                            Lookup::Expired(_) => "the record there has expired",
                            Lookup::SetAside { .. } => "the record there was set aside",
                            _ => "no record",
                        }
                    );
                    None
                }
            },
        };
        Ok(StartConfig {
            resume: self.resume,
            saved,
            saved_cap,
            initial_window,
            phases_out: trace_dir.map(|d| d.join(PHASES_FILE)),
            note,
        })
    }

    /// Saves an ok run's path state (a failure to save is a warning: the run stands).
    pub fn save(&self, row: &RunRow, pin: &Pin, to: &str) {
        if self.no_save_path_state {
            return;
        }
        let Some(record) = record_of(row, &pin.to_string(), to) else {
            return;
        };
        let store = store(&self.path_state);
        if let Err(e) = store.save(&record) {
            eprintln!("warning: path state not saved: {e:#}");
        }
        // Every ok run saves a record: expired ones go, so the folder keeps what is of use.
        store.prune(self.path_state_lifetime.max(DEFAULT_LIFETIME), now_unix());
    }
}
