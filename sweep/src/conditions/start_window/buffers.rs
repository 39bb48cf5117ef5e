//! The socket-buffer side of TCP's initial window on the emulated link. `initcwnd` on the
//! sender's route (`routes`) lets the sender's first flight be the whole window, but the
//! flight is also held to what the receiver advertises, and that starts at half the receive
//! buffer a socket is created with: `tcp_select_initial_window` offers
//! min(`initrwnd` × MSS, tcp_full_space(listener)), and tcp_full_space is the buffer × the
//! scaling ratio, 50 % until the connection has measured its own (Linux ≥ 6.6; before, the
//! same half came from `tcp_adv_win_scale` = 1). The buffer is `net.ipv4.tcp_rmem`'s middle
//! (default) value, 131,072 out of the box: a 64 KiB window, which then grows only as receive
//! autotuning (`tcp_rcv_space_adjust`) doubles the buffer round trip by round trip. So for the
//! run the sweep raises the receiver namespace's `tcp_rmem` default to twice the window.
//!
//! The sender's buffer did not limit the first flight on Linux 6.18 (`tcp_sndbuf_expand` sizes
//! it from the initial cwnd when the connection is established, up to `tcp_wmem`'s maximum),
//! but it would under a low maximum (the stock profile's 4 MiB and a window of more than about
//! 1 MiB), so the sender namespace's `tcp_wmem` default is raised to the same twice the window.
//!
//! Only ever raised (a maximum below the new default is raised to it too), read back, and
//! restored to exactly the text it had, on [`BufGuard::restore`] or on Drop (a failed,
//! killed or interrupted run). The host profile (profile.rs) writes these sysctls too:
//! the sweep applies the profile first, raises from what it set, and restores before the
//! profile restores its own, so each puts back what it found.
//!
//! An explicit `SO_RCVBUF`/`SO_SNDBUF` (the `rcvbuf`/`sndbuf` axes) replaces the default for
//! that socket and locks it (no autotuning); the sweep does not override it.

use anyhow::{bail, Context, Result};
use shoal_link::netns;

use crate::conditions::profile::{triple, TCP_RMEM, TCP_WMEM};

/// The default buffer a window of `window` bytes needs: twice it (the 50 % scaling ratio),
/// rounded up to 64 KiB.
pub fn need(window: u64) -> u64 {
    window.saturating_mul(2).next_multiple_of(65_536)
}

/// A `tcp_rmem`/`tcp_wmem` triple (min, default, max) as the kernel prints it.
pub fn parse_triple(key: &str, text: &str) -> Result<[u64; 3]> {
    let v: Vec<u64> = text
        .split_whitespace()
        .map(|w| w.parse::<u64>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("{key} = {text:?}: not three numbers"))?;
    match v[..] {
        [a, b, c] => Ok([a, b, c]),
        _ => bail!("{key} = {text:?}: not three numbers"),
    }
}

/// `t` with its default at least `need` and its maximum at least the default; never lower.
pub fn raised(t: [u64; 3], need: u64) -> [u64; 3] {
    let d = t[1].max(need);
    [t[0], d, t[2].max(d)]
}

/// The triples in effect for the run, read back from the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InEffect {
    /// The receiver namespace's `tcp_rmem`.
    pub rcv_tcp_rmem: [u64; 3],
    /// The sender namespace's `tcp_wmem`.
    pub snd_tcp_wmem: [u64; 3],
}

impl InEffect {
    /// The receiver's initial advertised window by the kernel's rule, from what was read
    /// back: min(`initrwnd` × MSS, the default receive buffer / 2 rounded down to the MSS).
    pub fn initial_rcv_window(&self, initrwnd: u64, mss: u64) -> u64 {
        let half = self.rcv_tcp_rmem[1] / 2;
        let space = if half > mss { half - half % mss } else { half };
        space.min(initrwnd.saturating_mul(mss))
    }
}

/// Buffer defaults raised for one run; restored on [`BufGuard::restore`] or on Drop.
pub struct BufGuard {
    /// (namespace, key, the text before) of every sysctl written.
    changed: Vec<(String, &'static str, String)>,
}

impl BufGuard {
    /// Raises `rcv_ns`'s `tcp_rmem` and `snd_ns`'s `tcp_wmem` defaults to [`need`]`(window)`
    /// where they are lower, and reads both back.
    pub fn apply(snd_ns: &str, rcv_ns: &str, window: u64) -> Result<(BufGuard, InEffect)> {
        let mut g = BufGuard {
            changed: Vec::new(),
        };
        let want = need(window);
        let mut read = [[0u64; 3]; 2];
        for (i, (ns, key)) in [(rcv_ns, TCP_RMEM), (snd_ns, TCP_WMEM)]
            .into_iter()
            .enumerate()
        {
            let before_text = netns::read_sysctl_in(ns, key)?;
            let before = parse_triple(key, &before_text)?;
            let after = raised(before, want);
            if after != before {
                // Recorded before the write, so a failed write is restored too.
                g.changed.push((ns.to_string(), key, before_text));
                netns::set_sysctl_in(ns, key, &triple(after))?;
            }
            read[i] = parse_triple(key, &netns::read_sysctl_in(ns, key)?)?;
            if read[i][1] < want {
                bail!(
                    "{key} in namespace {ns} reads {} after raising its default to {want}",
                    triple(read[i])
                );
            }
        }
        Ok((
            g,
            InEffect {
                rcv_tcp_rmem: read[0],
                snd_tcp_wmem: read[1],
            },
        ))
    }

    /// Puts every raised sysctl back as it was and checks it reads so; the text of each
    /// (for the run's `buffers` log: `namespace NS KEY`, `before: …`, `after restoring: …`).
    pub fn restore(mut self) -> Result<String> {
        self.restore_all()
    }

    fn restore_all(&mut self) -> Result<String> {
        let mut problems = Vec::new();
        let mut log = String::new();
        for (ns, key, before) in std::mem::take(&mut self.changed).into_iter().rev() {
            let done = netns::set_sysctl_in(&ns, key, &before)
                .and_then(|_| netns::read_sysctl_in(&ns, key));
            match done {
                Ok(now) if now.split_whitespace().eq(before.split_whitespace()) => {
                    log.push_str(&format!(
                        "namespace {ns} {key}\nbefore: {before}\nafter restoring: {now}\n"
                    ));
                }
                Ok(now) => problems.push(format!("{key} in {ns} reads {now:?}, was {before:?}")),
                Err(e) => problems.push(format!("{e:#}")),
            }
        }
        if problems.is_empty() {
            Ok(log)
        } else {
            bail!("restoring the buffer defaults: {}", problems.join("; "))
        }
    }
}

impl Drop for BufGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore_all() {
            eprintln!("warning: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ever_raised() {
        assert_eq!(need(1_448_000), 2_949_120);
        assert_eq!(need(1), 65_536);
        let stock = [4096, 131_072, 6_291_456];
        assert_eq!(raised(stock, 2_949_120), [4096, 2_949_120, 6_291_456]);
        assert_eq!(raised(stock, 65_536), stock);
        // A default above the maximum takes the maximum with it.
        assert_eq!(
            raised([4096, 16_384, 4_194_304], 8_388_608),
            [4096, 8_388_608, 8_388_608]
        );
    }

    #[test]
    fn triples_and_the_initial_window() {
        assert_eq!(
            parse_triple(TCP_RMEM, "4096\t131072\t6291456\n").unwrap(),
            [4096, 131_072, 6_291_456]
        );
        let e = parse_triple(TCP_RMEM, "4096 x").unwrap_err().to_string();
        assert!(e.contains("net.ipv4.tcp_rmem"), "{e}");
        assert!(parse_triple(TCP_WMEM, "1 2").is_err());
        let e = InEffect {
            rcv_tcp_rmem: [4096, 131_072, 6_291_456],
            snd_tcp_wmem: [4096, 16_384, 4_194_304],
        };
        // Out of the box: 65,536 / 1,448 → 45 segments, whatever initrwnd says.
        assert_eq!(e.initial_rcv_window(1000, 1448), 65_160);
        assert_eq!(e.initial_rcv_window(10, 1448), 14_480);
        let r = InEffect {
            rcv_tcp_rmem: raised(e.rcv_tcp_rmem, need(1_448_000)),
            ..e
        };
        assert_eq!(r.initial_rcv_window(1000, 1448), 1_448_000);
    }
}
