//! One run's receiver settings (`recv --control`): a two-host sweep sends them with each
//! run it prepares; the run's data connections get the receiver's configuration with them
//! applied, and nothing else does. Connections of a run nobody prepared use the receiver's
//! own flags.

use std::borrow::Cow;
use std::os::fd::OwnedFd;

use anyhow::{bail, Context as _, Result};
use shoal_proto::control::RecvSettings;
use socket2::SockRef;

use crate::config::ReceiverConfig;

/// The configuration a run with `settings` runs under.
pub(crate) fn apply<'a>(
    base: &'a ReceiverConfig,
    settings: Option<&RecvSettings>,
) -> Cow<'a, ReceiverConfig> {
    let Some(s) = settings.filter(|s| !s.is_empty()) else {
        return Cow::Borrowed(base);
    };
    let mut c = base.clone();
    if let Some(f) = s.fsync {
        c.fsync = f;
    }
    if let Some(n) = s.max_streams {
        c.flow.max_streams = n;
    }
    if let Some(w) = s.conn_window {
        c.flow.conn_window = w;
    }
    if let Some(b) = s.write_budget {
        c.write_budget = usize::try_from(b).unwrap_or(usize::MAX);
    }
    if let Some(n) = s.writers {
        c.writers = n as usize;
    }
    if let Some(b) = s.rcvbuf {
        c.flow.rcvbuf = Some(b);
    }
    if let Some(b) = s.sndbuf {
        c.flow.sndbuf = Some(b);
    }
    Cow::Owned(c)
}

/// Every per-run setting as `config` has it: what the sweep records for the run.
pub(crate) fn in_effect(config: &ReceiverConfig) -> RecvSettings {
    RecvSettings {
        fsync: Some(config.fsync),
        max_streams: Some(config.flow.max_streams),
        conn_window: Some(config.flow.conn_window),
        write_budget: Some(config.write_budget as u64),
        writers: Some(config.writers as u32),
        rcvbuf: config.flow.rcvbuf,
        sndbuf: config.flow.sndbuf,
    }
}

/// Checks settings that arrived over the control channel before a run is prepared with them.
pub(crate) fn check(settings: &RecvSettings) -> Result<()> {
    settings.validate().context("refused run settings")
}

/// Sets a run's own socket buffers on one of its TCP connections (the listening socket's,
/// which every connection inherits, are the receiver's flags). Linux doubles what it is
/// given; the completion reports the buffer read back at the end of the run.
pub(crate) fn set_tcp_buffers(settings: Option<&RecvSettings>, socket: &OwnedFd) -> Result<()> {
    let Some(s) = settings else { return Ok(()) };
    let sock = SockRef::from(socket);
    if let Some(b) = s.rcvbuf {
        sock.set_recv_buffer_size(b as usize)
            .context("cannot set the run's SO_RCVBUF")?;
    }
    if let Some(b) = s.sndbuf {
        sock.set_send_buffer_size(b as usize)
            .context("cannot set the run's SO_SNDBUF")?;
    }
    Ok(())
}

/// A QUIC run shares the receiver's one UDP socket with every other run: its buffers
/// cannot be set for that run alone, so such a run is refused rather than labelled wrongly.
pub(crate) fn refuse_on_quic(settings: Option<&RecvSettings>) -> Result<()> {
    if let Some(flag) = settings.and_then(RecvSettings::tcp_only) {
        bail!(
            "this run was prepared with recv --{flag}, which only TCP runs can set per run (QUIC runs share the receiver's UDP socket); start the receiver with --{flag} instead"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_s_settings_override_only_what_they_name() {
        let base = ReceiverConfig::default();
        assert!(matches!(apply(&base, None), Cow::Borrowed(_)));
        let s = RecvSettings {
            fsync: Some(true),
            max_streams: Some(8),
            writers: Some(3),
            ..Default::default()
        };
        let c = apply(&base, Some(&s));
        assert!(c.fsync);
        assert_eq!(c.flow.max_streams, 8);
        assert_eq!(c.writers, 3);
        assert_eq!(c.flow.conn_window, base.flow.conn_window);
        let e = in_effect(&c);
        assert_eq!(e.fsync, Some(true));
        assert_eq!(e.write_budget, Some(base.write_budget as u64));
        assert_eq!(e.writers, Some(3));
        assert_eq!(e.rcvbuf, None);
        assert!(refuse_on_quic(Some(&s)).is_ok());
        let tcp = RecvSettings {
            rcvbuf: Some(1 << 20),
            ..Default::default()
        };
        assert!(refuse_on_quic(Some(&tcp)).is_err());
    }
}
