//! A configuration's axes as `shoal send` and `shoal recv` command lines: the one place the
//! sweep maps an axis to a flag (the engine starts the processes with these, the pre-flight
//! check parses them with the real parser).

use std::path::Path;
use std::time::Duration;

use crate::axis::{self, AxisValue};
use crate::linkspec::{LinkSpec, RemoteReceiver};
use crate::matrix::Config;

/// Where an axis goes: its flag name and which ends take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route<'a> {
    pub flag: &'a str,
    pub to_send: bool,
    pub to_recv: bool,
}

/// Where axis `k` goes (`None` for the sweep's own axes): `recv.NAME` to `shoal recv --NAME`
/// alone, a name in `receiver_flags` to both ends, any other name to `shoal send` alone.
pub fn route<'a>(k: &'a str, receiver_flags: &[String]) -> Option<Route<'a>> {
    if axis::SWEEP_AXES.contains(&k) {
        return None;
    }
    Some(match k.strip_prefix(axis::RECV_PREFIX) {
        Some(flag) => Route {
            flag,
            to_send: false,
            to_recv: true,
        },
        None => Route {
            flag: k,
            to_send: true,
            to_recv: receiver_flags.iter().any(|f| f == k),
        },
    })
}

/// Flags for `shoal send` and `shoal recv` from a configuration's axes.
pub fn flags(cfg: &Config, receiver_flags: &[String]) -> (Vec<String>, Vec<String>) {
    let (mut send, mut recv) = (Vec::new(), Vec::new());
    for (k, v) in &cfg.params {
        let Some(Route {
            flag: name,
            to_send,
            to_recv,
        }) = route(k, receiver_flags)
        else {
            continue;
        };
        // TCP's initial window is the routes' (`initcwnd`), set by the sweep, not a flag.
        if k == "initial-window" && crate::start_window::on_routes(cfg) {
            continue;
        }
        let args: Vec<String> = match v {
            AxisValue::Bool(true) => vec![format!("--{name}")],
            AxisValue::Bool(false) => vec![],
            other => vec![format!("--{name}"), other.text()],
        };
        if to_send {
            send.extend(args.iter().cloned());
        }
        if to_recv {
            recv.extend(args);
        }
        let allow_plain = format!("--{}", axis::ALLOW_PLAIN);
        if k == axis::PLAIN && matches!(v, AxisValue::Bool(true)) && !recv.contains(&allow_plain) {
            recv.push(allow_plain);
        }
    }
    // The stock host profile runs quinn's default windows at both ends.
    if let Some(w) = cfg.conditions.profile.and_then(|p| p.quic_windows()) {
        let connections = cfg
            .params
            .iter()
            .find(|(k, _)| k == "connections")
            .and_then(|(_, v)| v.text().parse::<u64>().ok())
            .unwrap_or(1);
        let (s, r) = w.flags(connections);
        send.extend(s);
        recv.extend(r);
    }
    (send, recv)
}

/// `shoal recv …` as the sweep starts it for one run (without the program name).
pub fn recv_argv(
    listen: &str,
    dest: &Path,
    identity: &Path,
    recv_flags: &[String],
) -> Vec<std::ffi::OsString> {
    let mut v: Vec<std::ffi::OsString> = vec!["recv".into(), "--listen".into(), listen.into()];
    v.extend(["--dest".into(), dest.into()]);
    v.extend(["--identity".into(), identity.into()]);
    v.extend(["--once".into(), "--flat".into()]);
    v.extend(recv_flags.iter().map(Into::into));
    v
}

/// `shoal send …` as the sweep starts it for one run (without the program name); with
/// `trace_dir`, the run keeps its traces there (`--trace-dir`).
#[allow(clippy::too_many_arguments)]
pub fn send_argv(
    link: &LinkSpec,
    to: &str,
    src: &Path,
    timeout: Duration,
    run_id: Option<&str>,
    identity: &Path,
    trace_dir: Option<&Path>,
    send_flags: &[String],
) -> Vec<std::ffi::OsString> {
    let mut v: Vec<std::ffi::OsString> = vec!["send".into(), "--to".into(), to.into()];
    v.extend(["--src".into(), src.into()]);
    v.extend([
        "--json".into(),
        "--timeout".into(),
        format!("{}s", timeout.as_secs_f64()).into(),
    ]);
    if let Some(id) = run_id {
        v.extend(["--run-id".into(), id.into()]);
    }
    if let Some(dir) = trace_dir {
        v.extend(["--trace-dir".into(), dir.into()]);
    }
    match link {
        LinkSpec::Remote(RemoteReceiver {
            pin: Some(pin),
            token_file: Some(tf),
            ..
        }) => {
            v.extend(["--pin".into(), pin.into()]);
            v.extend(["--token-file".into(), tf.into()]);
        }
        LinkSpec::Remote(_) => {}
        LinkSpec::Emulated(_) => {
            v.extend(["--identity".into(), identity.into()]);
        }
    }
    v.extend(send_flags.iter().map(Into::into));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_become_flags() {
        let m = crate::matrix::Matrix::parse(
            r#"
[link]
rtt = "20ms"
rate = "100mbit"
[payload.p]
files = 1
size = 1
[axes]
mode = ["tcp-streams"]
max-streams = [64]
plain = [true]
"recv.fsync" = [true]
cc = ["bbr"]
"#,
        )
        .unwrap();
        let (s, r) = flags(&m.configs[0], &m.receiver_flags);
        assert_eq!(
            s,
            vec![
                "--mode",
                "tcp-streams",
                "--max-streams",
                "64",
                "--plain",
                "--cc",
                "bbr"
            ]
        );
        assert_eq!(r, vec!["--max-streams", "64", "--allow-plain", "--fsync"]);
    }
}
