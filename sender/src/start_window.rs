//! How a run starts its congestion window: `--resume` (RFC 9959 Careful Resume, QUIC) and
//! `--initial-window`; what it records of them in the row and in `resume-phases.csv`, and
//! the path state it leaves for the next run (`path_state`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use shoal_resume::careful_resume::{Outcome, Saved};
use shoal_row::row::RunRow;
use shoal_transport::config::{Cc, Mode};
use shoal_transport::quic_cc::Factory;
use shoal_transport::start_window::{StartWindowFactory, StartWindowLog};

use crate::path_state::{now_unix, PathRecord};

/// `resume-phases.csv`'s name in a `--trace-dir`.
pub const PHASES_FILE: &str = "resume-phases.csv";

/// The start of the congestion window (all off by default).
#[derive(Debug, Clone, Default)]
pub struct StartConfig {
    /// `--resume`: run Careful Resume. `saved` is the fresh path state (`None`: there was
    /// none, or it had expired; the row then says `no-state`).
    pub resume: bool,
    pub saved: Option<Saved>,
    /// What bounded `saved`'s window (`path_state::Cap::name`; empty without state).
    pub saved_cap: &'static str,
    /// `--initial-window` resolved to bytes (QUIC).
    pub initial_window: Option<u64>,
    /// Where to write the phase changes (`--trace-dir`'s `resume-phases.csv`).
    pub phases_out: Option<PathBuf>,
    /// The row's `path_state_note`: the record set aside, or the window raised to its floor.
    pub note: String,
}

/// The QUIC controller factory for one connection, and the log of what it did. `flow_limit`
/// is the connection's send window (the jump never exceeds it).
pub(crate) fn quic_controller(
    start: &StartConfig,
    cc: Option<Cc>,
    flow_limit: u64,
) -> (Factory, StartWindowLog) {
    let saved = if start.resume { start.saved } else { None };
    StartWindowFactory::wrap(cc, start.initial_window, saved, flow_limit)
}

/// Severity order for a run's several connections: the row shows the most telling outcome.
fn rank(o: Outcome) -> u8 {
    match o {
        Outcome::Retreated => 0,
        Outcome::RefusedLoss => 1,
        Outcome::RefusedRtt => 2,
        Outcome::Taken => 3,
        Outcome::Pending => 4,
        Outcome::NotNeeded => 5,
        Outcome::RateLimited => 6,
        Outcome::Validated => 7,
        Outcome::NoState => 8,
    }
}

/// The row's `resume`, `resume_jump_bytes`, `resume_saved_window_*` and
/// `initial_window_bytes`.
pub(crate) fn put_row(row: &mut RunRow, start: &StartConfig, mode: Mode, logs: &[StartWindowLog]) {
    row.resume = if !start.resume {
        "off".into()
    } else {
        logs.iter()
            .filter_map(StartWindowLog::outcome)
            .min_by_key(|&o| rank(o))
            .map_or("no-state", Outcome::name)
            .into()
    };
    if start.resume && mode.is_quic() {
        row.resume_jump_bytes = Some(logs.iter().map(StartWindowLog::jump).max().unwrap_or(0));
    }
    row.path_state_note = start.note.clone();
    if mode.is_quic() {
        // The saved window `--resume` or `--initial-window saved` started from.
        if let Some(s) = start.saved {
            row.resume_saved_window_bytes = Some(s.cwnd);
            row.resume_saved_window_cap = start.saved_cap.into();
        }
        // Read back from the controller quinn built (its `initial_window()`).
        row.initial_window_bytes = logs.iter().find_map(StartWindowLog::initial_window);
    }
}

/// Writes every connection's phase changes: run_id, t_s (from the run's clock), conn, from,
/// to, cwnd_bytes (0: the ordinary controller's own), pipesize_bytes.
pub(crate) fn write_phases(
    path: &Path,
    run_id: &str,
    t0: Instant,
    logs: &[StartWindowLog],
) -> Result<()> {
    let mut w = csv::Writer::from_path(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    w.write_record([
        "run_id",
        "t_s",
        "conn",
        "from",
        "to",
        "cwnd_bytes",
        "pipesize_bytes",
    ])?;
    for (conn, log) in logs.iter().enumerate() {
        for c in log.changes() {
            let t = c.at.saturating_duration_since(t0).as_secs_f64();
            w.write_record([
                run_id.to_string(),
                format!("{t:.4}"),
                conn.to_string(),
                c.from.name().into(),
                c.to.name().into(),
                c.cwnd.to_string(),
                c.pipesize.to_string(),
            ])?;
        }
    }
    w.flush()
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The path state an ok run leaves for the next one to the same receiver (`None`: the run
/// failed, or its transport statistics are missing).
pub fn record_of(row: &RunRow, pin: &str, address: &str) -> Option<PathRecord> {
    if !row.is_ok() {
        return None;
    }
    let transport = if row.mode.starts_with("quic") {
        "quic"
    } else {
        "tcp"
    };
    Some(PathRecord {
        transport: transport.into(),
        pin: pin.into(),
        address: address.into(),
        cwnd_bytes: row.cwnd_bytes.filter(|&c| c > 0)?,
        min_rtt_ms: row.min_rtt_ms.filter(|&r| r > 0.0)?,
        goodput_bytes_per_s: (row.mb_per_s * 1e6) as u64,
        delivery_rate_bytes_per_s: row.delivery_rate_bytes_per_s,
        peak_delivery_bytes_per_s: row.peak_delivery_bytes_per_s,
        connections: row.connections.unwrap_or(1),
        saved_at: now_unix(),
        run_id: row.run_id.clone(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_row_records_the_saved_window_the_start_used() {
        let start = StartConfig {
            resume: true,
            saved: Some(Saved {
                cwnd: 4_402_000,
                rtt: Duration::from_millis(40),
            }),
            saved_cap: "peak",
            ..Default::default()
        };
        let mut row = RunRow::default();
        put_row(&mut row, &start, Mode::QuicBundle, &[]);
        assert_eq!(row.resume_saved_window_bytes, Some(4_402_000));
        assert_eq!(row.resume_saved_window_cap, "peak");
        assert_eq!(row.resume_jump_bytes, Some(0), "no connection jumped");
        // No state: nothing recorded.
        let mut row = RunRow::default();
        let none = StartConfig {
            resume: true,
            ..Default::default()
        };
        put_row(&mut row, &none, Mode::QuicBundle, &[]);
        assert_eq!(row.resume_saved_window_bytes, None);
        assert_eq!(row.resume_saved_window_cap, "");
        assert_eq!(row.resume, "no-state");
    }
}
