//! A two-host sweep's receiver axes: the `shoal recv` flags a configuration sets (`recv.NAME`,
//! and the names in `[flags] receiver`) as the typed per-run settings the remote receiver
//! applies to that run alone (`shoal_proto::recvsettings`, carried in the control channel's
//! prepare request). A flag the receiver cannot set per run is refused before anything runs.

use shoal_proto::control::RecvSettings;

use crate::argv;
use crate::axis;
use crate::matrix::Config;

/// The receiver settings `cfg` asks for (empty when it has no receiver axis); `Err` names
/// every axis that cannot be carried, and why.
pub fn settings(cfg: &Config, receiver_flags: &[String]) -> Result<RecvSettings, String> {
    let mut s = RecvSettings::default();
    let mut problems = Vec::new();
    for (k, v) in &cfg.params {
        let Some(route) = argv::route(k, receiver_flags) else {
            continue;
        };
        // `--allow-plain` only lets the receiver accept what the sender chose: the remote
        // receiver must have been started with it (a `plain` run it refuses fails as such).
        if !route.to_recv || route.flag == axis::ALLOW_PLAIN {
            continue;
        }
        if let Err(e) = s.set(route.flag, &v.text()) {
            problems.push(format!("{k}={}: {e}", v.text()));
        }
    }
    let mode = cfg.shoal_mode();
    if let Some(flag) = s
        .tcp_only()
        .filter(|_| mode.starts_with(axis::QUIC_MODE_PREFIX))
    {
        problems.push(format!(
            "{flag} in mode {mode}: a QUIC run shares the remote receiver's one UDP socket with every run, so its buffers cannot be this run's; start the receiver with --{flag}, or take {flag} out of [flags] receiver to vary it at the sender only"
        ));
    }
    if problems.is_empty() {
        Ok(s)
    } else {
        Err(problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::Matrix;

    fn matrix(axes: &str) -> Matrix {
        Matrix::parse(&format!(
            "[link]\nreceiver = \"hostb:7474\"\npin = \"sha256:00\"\ntoken_file = \"t\"\n\
             [payload.p]\nfiles = 1\nsize = 1\n[axes]\n{axes}"
        ))
        .unwrap()
    }

    #[test]
    fn receiver_axes_become_the_run_s_settings() {
        let m = matrix(
            "mode = [\"tcp-streams\"]\nmax-streams = [64]\n\"recv.fsync\" = [true]\n\
             rcvbuf = [\"4MiB\"]\ncc = [\"cubic\"]\n",
        );
        let s = settings(&m.configs[0], &m.receiver_flags).unwrap();
        assert_eq!(s.max_streams, Some(64));
        assert_eq!(s.fsync, Some(true));
        assert_eq!(s.rcvbuf, Some(4 << 20));
        // A sender-only axis (cc) is not the receiver's.
        assert_eq!(s.conn_window, None);
    }

    #[test]
    fn what_cannot_be_one_run_s_is_refused_by_name() {
        let m = matrix("\"recv.max-connections\" = [4]\n");
        let e = settings(&m.configs[0], &m.receiver_flags).unwrap_err();
        assert!(
            e.contains("recv.max-connections=4: recv --max-connections cannot be set per run"),
            "{e}"
        );
        let m = matrix("mode = [\"quic-bundle\"]\nrcvbuf = [\"4MiB\"]\n");
        let e = settings(&m.configs[0], &m.receiver_flags).unwrap_err();
        assert!(e.contains("rcvbuf in mode quic-bundle"), "{e}");
        // Taken out of [flags] receiver, the flag goes to the sender alone.
        let mut m = matrix("stream-window = [\"1MiB\"]\n");
        assert!(settings(&m.configs[0], &m.receiver_flags).is_err());
        m.receiver_flags.clear();
        assert!(settings(&m.configs[0], &m.receiver_flags)
            .unwrap()
            .is_empty());
    }
}
