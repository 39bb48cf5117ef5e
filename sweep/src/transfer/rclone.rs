//! The `rclone` arm's pipeline: `rclone copy` over SFTP, to the sshd the sweep starts in the
//! receiver namespace (its throw-away user key), or across two hosts through `[link] ssh`
//! (docs/decisions/0021-rclone-over-the-sweeps-sshd.md). Timed, limited and verified like the
//! other ssh arms.

use std::path::Path;

use anyhow::Result;

use crate::baseline::{shell_quote, Sshd};
use shoal_matrix::axis::{self, AxisValue};
use shoal_matrix::linkspec::RemoteReceiver;
use shoal_matrix::matrix::Config;
use shoal_matrix::rclone;

/// The configuration's `--transfers` (and `--checkers`).
fn transfers(cfg: &Config) -> i64 {
    match cfg.get(axis::RCLONE_TRANSFERS) {
        Some(AxisValue::Int(n)) => *n,
        _ => rclone::DEFAULT_TRANSFERS,
    }
}

fn pipeline(cfg: &Config, src: &Path, login: &rclone::Login, dest: &str) -> String {
    let words = rclone::argv(
        &src.display().to_string(),
        &login.remote(dest),
        transfers(cfg),
    );
    std::iter::once("rclone".to_string())
        .chain(words.iter().map(|w| shell_quote(w)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Into the existing folder `dest` in the receiver namespace, as root with the sweep's key.
pub fn local(sshd: &Sshd, cfg: &Config, src: &Path, addr: &str, dest: &Path) -> String {
    let login = rclone::Login {
        host: addr.to_string(),
        port: Some(22),
        user: Some("root".into()),
        key_file: Some(sshd.user_key().display().to_string()),
    };
    pipeline(cfg, src, &login, &dest.display().to_string())
}

/// Into the folder `dest` the receiving host prepared, through `[link] ssh`'s login.
pub fn remote(
    r: &RemoteReceiver,
    target: &str,
    cfg: &Config,
    src: &Path,
    dest: &str,
) -> Result<String> {
    let login = rclone::login(target, &r.ssh_opts)?;
    Ok(pipeline(cfg, src, &login, dest))
}
