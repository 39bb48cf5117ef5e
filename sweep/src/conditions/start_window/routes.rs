//! TCP's `initial-window` axis on the emulated link. `shoal send --initial-window` is QUIC's
//! (quinn's controller); TCP takes its initial window from the route: `initcwnd` on the
//! sender's route to the receiver and `initrwnd` on the receiver's route back. Only the sweep
//! owns both namespaces of the emulated link, so it sets them for one run, reads them back
//! with `ip route show` for the row, and restores each route to exactly the line it had
//! (also when the run fails, is interrupted or panics: the guard's Drop).

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use shoal_resume::careful_resume::Saved;
use shoal_sender::path_state::{host_of, PathStore};

/// The saved state of the freshest TCP record for `rcv_addr` in `dir` (its window the smaller
/// of the saved cwnd and peak delivery rate × min RTT per connection,
/// `PathRecord::saved_window`) and what bounded that window; `saved` resolves to its jump
/// window, as QUIC's `--initial-window saved` does. `None` when there is none or it is older
/// than `lifetime`.
pub fn saved_state(
    dir: &Path,
    rcv_addr: &str,
    lifetime: Duration,
) -> Result<Option<(Saved, &'static str)>> {
    let store = PathStore::new(dir.to_path_buf());
    if !dir.exists() {
        return Ok(None);
    }
    let now = shoal_sender::path_state::now_unix();
    let mut best: Option<shoal_sender::path_state::PathRecord> = None;
    for (key, rec) in store.list()? {
        // A record that cannot be used never blocks a run (as `send` sets it aside).
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                eprintln!(
                    "[sweep] path state {key} in {} not used: {e:#}",
                    dir.display()
                );
                continue;
            }
        };
        if rec.transport != "tcp" || host_of(&rec.address) != rcv_addr {
            continue;
        }
        if !shoal_resume::careful_resume::is_fresh(rec.saved_at, now, lifetime) {
            continue;
        }
        if best.as_ref().is_none_or(|b| b.saved_at < rec.saved_at) {
            best = Some(rec);
        }
    }
    Ok(best.map(|r| (r.saved(), r.saved_window().1.name())))
}

/// Runs `ip ARGS` inside namespace `ns`; its stdout, or an error with its stderr.
fn ip(ns: &str, args: &[String]) -> Result<String> {
    let mut cmd = Command::new("ip");
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = shoal_link::spawn_in_netns(ns, &mut cmd)
        .and_then(|c| c.wait_with_output())
        .with_context(|| format!("ip {} in namespace {ns}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "ip {} in namespace {ns}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn show(ns: &str) -> Result<String> {
    ip(ns, &["-4".into(), "route".into(), "show".into()])
}

/// Whether the route's destination (`default`, `a.b.c.d` or `a.b.c.d/n`) covers `addr`, and
/// its prefix length.
fn covers(dst: &str, addr: Ipv4Addr) -> Option<u32> {
    let (net, len) = match dst {
        "default" => return Some(0),
        d => match d.split_once('/') {
            Some((n, l)) => (n.parse::<Ipv4Addr>().ok()?, l.parse::<u32>().ok()?),
            None => (d.parse::<Ipv4Addr>().ok()?, 32),
        },
    };
    if len > 32 {
        return None;
    }
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    (u32::from(net) & mask == u32::from(addr) & mask).then_some(len)
}

/// The line of `table` (`ip -4 route show`) the kernel uses for `addr`: the longest prefix
/// that covers it (the emulated link's namespaces have no policy rules or metrics to weigh).
pub fn route_for(table: &str, addr: Ipv4Addr) -> Option<String> {
    table
        .lines()
        .filter_map(|l| {
            let dst = l.split_whitespace().next()?;
            Some((covers(dst, addr)?, l.trim().to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, l)| l)
}

/// `line`'s words as `ip route replace` takes them, with `metric` (`initcwnd`/`initrwnd`)
/// set to `value` (and status flags the kernel reports but does not take dropped).
pub fn with_metric(line: &str, metric: &str, value: Option<u64>) -> Vec<String> {
    let mut words = Vec::new();
    let mut it = line.split_whitespace();
    while let Some(w) = it.next() {
        if w == metric {
            it.next();
            continue;
        }
        if matches!(w, "linkdown" | "dead" | "offload" | "trap" | "rt_offload") {
            continue;
        }
        words.push(w.to_string());
    }
    if let Some(v) = value {
        words.extend([metric.to_string(), v.to_string()]);
    }
    words
}

/// The value of `metric` in a route line, if set.
pub fn read_metric(line: &str, metric: &str) -> Option<u64> {
    let mut it = line.split_whitespace();
    while let Some(w) = it.next() {
        if w == metric {
            return it.next()?.parse().ok();
        }
    }
    None
}

/// What the kernel had in effect for the run, read back from `ip route show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InEffect {
    pub initcwnd: u64,
    pub initrwnd: u64,
}

/// Routes changed for one run; restored on [`RouteGuard::restore`] or on Drop.
pub struct RouteGuard {
    /// (namespace, the route's line before, the whole table before).
    changed: Vec<(String, String, String)>,
}

impl RouteGuard {
    /// Sets `initcwnd` = `segments` on `snd_ns`'s route to `rcv_addr` and `initrwnd` =
    /// `segments` on `rcv_ns`'s route to `snd_addr`, and reads both back.
    pub fn apply(
        snd_ns: &str,
        rcv_ns: &str,
        snd_addr: &str,
        rcv_addr: &str,
        segments: u64,
    ) -> Result<(RouteGuard, InEffect)> {
        let mut g = RouteGuard {
            changed: Vec::new(),
        };
        let mut read = [0u64; 2];
        for (i, (ns, peer, metric)) in [
            (snd_ns, rcv_addr, "initcwnd"),
            (rcv_ns, snd_addr, "initrwnd"),
        ]
        .into_iter()
        .enumerate()
        {
            let addr: Ipv4Addr = peer
                .parse()
                .with_context(|| format!("{peer}: not an IPv4 address"))?;
            let table = show(ns)?;
            let line = route_for(&table, addr)
                .with_context(|| format!("no route to {peer} in namespace {ns}:\n{table}"))?;
            let mut args = vec!["-4".into(), "route".into(), "replace".into()];
            args.extend(with_metric(&line, metric, Some(segments)));
            // Recorded before the change, so a half-done change is restored too.
            g.changed.push((ns.to_string(), line.clone(), table));
            ip(ns, &args)?;
            let now = route_for(&show(ns)?, addr).unwrap_or_default();
            read[i] = read_metric(&now, metric).with_context(|| {
                format!("{metric} not in effect after setting it in {ns}: {now}")
            })?;
        }
        Ok((
            g,
            InEffect {
                initcwnd: read[0],
                initrwnd: read[1],
            },
        ))
    }

    /// Puts every changed route back as it was and checks the tables equal what they were;
    /// the text of both (for the run's `routes` log).
    pub fn restore(mut self) -> Result<String> {
        self.restore_all()
    }

    fn restore_all(&mut self) -> Result<String> {
        let mut problems = Vec::new();
        let mut log = String::new();
        for (ns, line, before) in std::mem::take(&mut self.changed).into_iter().rev() {
            let mut args = vec!["-4".into(), "route".into(), "replace".into()];
            // The line as it was: every attribute it had, none added.
            args.extend(with_metric(
                &line,
                "initcwnd",
                read_metric(&line, "initcwnd"),
            ));
            match ip(&ns, &args).and_then(|_| show(&ns)) {
                Ok(after) if after == before => {
                    log.push_str(&format!(
                        "namespace {ns}\nbefore:\n{before}after restoring:\n{after}"
                    ));
                }
                Ok(after) => problems.push(format!(
                    "routes in {ns} differ after restoring:\nbefore:\n{before}after:\n{after}"
                )),
                Err(e) => problems.push(format!("{e:#}")),
            }
        }
        if problems.is_empty() {
            Ok(log)
        } else {
            bail!("{}", problems.join("\n"))
        }
    }
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore_all() {
            eprintln!("warning: restoring the emulated link's routes: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "default via 198.18.0.9 dev x\n\
        198.18.0.0/24 dev snd proto kernel scope link src 198.18.0.1 linkdown\n\
        198.18.0.2 dev snd scope link initcwnd 10\n";

    #[test]
    fn the_longest_prefix_is_the_route() {
        let a: Ipv4Addr = "198.18.0.2".parse().unwrap();
        assert_eq!(
            route_for(TABLE, a).unwrap(),
            "198.18.0.2 dev snd scope link initcwnd 10"
        );
        let b: Ipv4Addr = "198.18.0.3".parse().unwrap();
        assert!(route_for(TABLE, b).unwrap().starts_with("198.18.0.0/24"));
        let c: Ipv4Addr = "10.0.0.1".parse().unwrap();
        assert!(route_for(TABLE, c).unwrap().starts_with("default"));
        assert_eq!(route_for("10.0.0.0/8 dev y\n", b), None);
    }

    #[test]
    fn metrics_are_replaced_not_added() {
        let l = "198.18.0.2 dev snd scope link initcwnd 10 linkdown";
        assert_eq!(
            with_metric(l, "initcwnd", Some(64)).join(" "),
            "198.18.0.2 dev snd scope link initcwnd 64"
        );
        assert_eq!(read_metric(l, "initcwnd"), Some(10));
        assert_eq!(read_metric(l, "initrwnd"), None);
    }
}
