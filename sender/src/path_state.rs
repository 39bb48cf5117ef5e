//! Path state: what a finished run learnt about the path to one receiver, kept for the next
//! run to the same receiver (`send --resume`, `--initial-window saved`; RFC 9959 §4.3.1).
//!
//! One JSON file per receiver and transport in a state folder (default
//! `$XDG_STATE_HOME/shoal/paths`, else `~/.local/state/shoal/paths`; `--path-state DIR`),
//! named by its key: `<transport>_<first 16 hex digits of the pin>_<host>`. The receiver is
//! its certificate pin and the host of the address given to `--to`: a different receiver
//! behind the same address (another pin) never inherits the state. The port is left out: the
//! path is the pair of hosts, and a sweep starts each run's receiver on a new port. Files are written to a temporary name and
//! renamed, so a reader never sees half a record. A record has a lifetime (one hour by
//! default, RFC 9959's guidance); an expired record is shown but never used.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use shoal_resume::careful_resume::{is_fresh, Saved};
use shoal_transport::identity::Pin;

/// `--path-state-lifetime`'s default (RFC 9959 §4.3.1, which sets no value).
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(3_600);

/// The least saved window a run starts from: the controller's default initial window
/// (quinn's, 10 × 1,200 bytes). A smaller one (a record of a few bytes) left the connection
/// unable to send until its connect timeout.
pub const WINDOW_FLOOR: u64 = 10 * 1_200;

/// What a path can have, at most: a record outside is refused when read, like a corrupt one.
const MOST_RTT_MS: f64 = 60_000.0;
const MOST_WINDOW: u64 = 1 << 40;
const MOST_RATE: u64 = 10_000_000_000_000 / 8;
const MOST_CONNECTIONS: u64 = 64;

/// What one run learnt about the path to a receiver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathRecord {
    /// `quic` or `tcp`: the windows of the two are not interchangeable.
    pub transport: String,
    /// The receiver's certificate pin (`sha256:<hex>`) and the address the run was sent to.
    pub pin: String,
    pub address: String,
    /// Congestion window per connection at the end of the run (the row's `cwnd_bytes`),
    /// bytes.
    pub cwnd_bytes: u64,
    /// Minimum RTT over the run's connections, ms.
    pub min_rtt_ms: f64,
    /// Goodput of the run (file bytes / seconds), bytes/s, and TCP's delivery rate where
    /// the kernel gave one.
    pub goodput_bytes_per_s: u64,
    pub delivery_rate_bytes_per_s: Option<u64>,
    /// The run's peak delivery rate (sender/src/peak.rs: newly acknowledged bytes over any
    /// window of at least one min RTT and 100 ms, summed over connections), bytes/s. Records
    /// saved before it existed have none and fall back to the goodput.
    #[serde(default)]
    pub peak_delivery_bytes_per_s: Option<u64>,
    pub connections: u64,
    /// When it was saved, seconds since the Unix epoch.
    pub saved_at: u64,
    /// The run it came from.
    pub run_id: String,
}

/// What bounded a saved window (the row's `resume_saved_window_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// Peak delivery rate × min RTT per connection.
    Peak,
    /// Whole-run goodput × min RTT per connection (a record without a peak).
    Goodput,
    /// The cwnd the saving run ended with.
    Cwnd,
    /// Raised to [`WINDOW_FLOOR`].
    Floor,
}

impl Cap {
    pub fn name(self) -> &'static str {
        match self {
            Cap::Peak => "peak",
            Cap::Goodput => "goodput",
            Cap::Cwnd => "cwnd",
            Cap::Floor => "floor",
        }
    }
}

impl PathRecord {
    /// The state the Careful Resume machine uses (its window: [`PathRecord::saved_window`]).
    pub fn saved(&self) -> Saved {
        Saved {
            cwnd: self.saved_window().0,
            rtt: self.rtt(),
        }
    }

    fn rtt(&self) -> Duration {
        Duration::from_micros((self.min_rtt_ms.max(0.0) * 1e3).round() as u64)
    }

    /// The saved window and what bounded it: the smaller of the cwnd the run ended with and
    /// the window the path carried at its best, peak delivery rate × min RTT per connection
    /// (whole-run goodput × min RTT for a record saved before the peak was measured).
    ///
    /// Why not the cwnd alone: a cwnd can grow well past what the path carried (a queue, an
    /// application-limited tail; 11 MB at the end of a run on a 1 Gbit/s × 40 ms = 5 MB path
    /// in tests/transfers/resume.rs), and the jump is half of it, so an inflated cwnd is sent
    /// as loss.
    /// Why the peak and not the goodput: goodput averages in the run's own slow start and
    /// tail, so on the 141 ms / 1 Gbit/s link (17.6 MB) it saved 1.9–5.1 MB (docs/resume.md).
    /// A rate measured over at least one RTT, times the min RTT, is a bandwidth-delay product
    /// estimate, which RFC 9959 allows a sender to save in place of the cwnd: §3.1 measures
    /// saved_cwnd as the bytes sent in an RTT, computable from the data acknowledged in one,
    /// and §4.1 names the acknowledged rate as a basis (section numbers of draft -22, the text
    /// checked: docs/resume.md, "Against RFC 9959's text").
    pub fn saved_window(&self) -> (u64, Cap) {
        let (rate, cap) = match self.peak_delivery_bytes_per_s.filter(|&p| p > 0) {
            Some(p) => (p, Cap::Peak),
            None => (self.goodput_bytes_per_s, Cap::Goodput),
        };
        let carried = u128::from(rate) * self.rtt().as_micros()
            / 1_000_000
            / u128::from(self.connections.max(1));
        let carried = u64::try_from(carried).unwrap_or(u64::MAX);
        let (window, cap) = if self.cwnd_bytes <= carried {
            (self.cwnd_bytes, Cap::Cwnd)
        } else {
            (carried, cap)
        };
        match window < WINDOW_FLOOR {
            true => (WINDOW_FLOOR, Cap::Floor),
            false => (window, cap),
        }
    }

    /// The window as the figures give it, before [`WINDOW_FLOOR`] (for the row's note).
    pub fn unclamped_window(&self) -> u64 {
        let rate = self
            .peak_delivery_bytes_per_s
            .filter(|&p| p > 0)
            .unwrap_or(self.goodput_bytes_per_s);
        let carried = u128::from(rate) * self.rtt().as_micros()
            / 1_000_000
            / u128::from(self.connections.max(1));
        self.cwnd_bytes
            .min(u64::try_from(carried).unwrap_or(u64::MAX))
    }

    pub fn key(&self) -> String {
        key(&self.transport, &self.pin, &self.address)
    }

    pub fn age(&self, now: u64) -> Option<Duration> {
        now.checked_sub(self.saved_at).map(Duration::from_secs)
    }
}

/// The host of `host:port` or `[v6]:port` (the whole text when there is no port).
pub fn host_of(address: &str) -> &str {
    match address.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() && !host.ends_with(':') => {
            host.trim_start_matches('[').trim_end_matches(']')
        }
        _ => address,
    }
}

/// The file name (without `.json`) of a receiver's record.
pub fn key(transport: &str, pin: &str, address: &str) -> String {
    let pin = pin.strip_prefix("sha256:").unwrap_or(pin);
    let safe = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!(
        "{}_{}_{}",
        safe(transport),
        safe(&pin[..pin.len().min(16)]),
        safe(host_of(address))
    )
}

/// Seconds since the Unix epoch, now.
pub fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A state folder.
#[derive(Debug, Clone)]
pub struct PathStore {
    dir: PathBuf,
}

/// What a lookup found.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    Fresh(PathRecord),
    Expired(PathRecord),
    Missing,
    /// The record could not be used (corrupt, truncated, empty, not UTF-8, values no path
    /// has): it was renamed to `file` (its name ends with the reason), and the run starts
    /// cold. `reason` says why.
    SetAside {
        file: PathBuf,
        reason: String,
    },
}

impl PathStore {
    pub fn new(dir: PathBuf) -> Self {
        PathStore { dir }
    }

    /// `$XDG_STATE_HOME/shoal/paths`, or `~/.local/state/shoal/paths`.
    pub fn default_dir() -> PathBuf {
        let base = std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("state"))
            })
            .unwrap_or_else(|| PathBuf::from("."));
        base.join("shoal").join("paths")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    /// The record for a receiver, judged against `lifetime` at `now`. A record that cannot
    /// be used is set aside ([`Lookup::SetAside`]): a cache never blocks a transfer. A folder
    /// another user owns, or others may write, is an error: its records could be anyone's.
    pub fn lookup(
        &self,
        transport: &str,
        pin: &Pin,
        address: &str,
        lifetime: Duration,
        now: u64,
    ) -> Result<Lookup> {
        self.check_folder()?;
        let file = self.file(&key(transport, &pin.to_string(), address));
        let record = match load(&file) {
            Ok(r) => r,
            Err(Unusable::Missing) => return Ok(Lookup::Missing),
            Err(Unusable::Bad(slug, why)) => {
                let aside = self.dir.join(format!(
                    "{}.{slug}-{now}",
                    file.file_name()
                        .and_then(|n| n.to_str())
                        .unwrap_or("record")
                ));
                let reason = match fs::rename(&file, &aside) {
                    Ok(()) => why,
                    Err(e) => format!("{why} (and it could not be set aside: {e})"),
                };
                return Ok(Lookup::SetAside {
                    file: aside,
                    reason,
                });
            }
        };
        // A record under this key that names another receiver (a hand-edited file) is not it.
        if record.pin != pin.to_string() || host_of(&record.address) != host_of(address) {
            return Ok(Lookup::Missing);
        }
        Ok(if is_fresh(record.saved_at, now, lifetime) {
            Lookup::Fresh(record)
        } else {
            Lookup::Expired(record)
        })
    }

    /// Refuses a folder that another user owns or that others may write (a missing one is
    /// fine: `save` creates it, private).
    pub fn check_folder(&self) -> Result<()> {
        use std::os::unix::fs::MetadataExt;
        let meta = match fs::metadata(&self.dir) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", self.dir.display())),
        };
        let me = shoal_sys::io::effective_uid();
        if meta.uid() != me {
            bail!(
                "path-state folder {} is owned by uid {}, not by this user (uid {me}): refused",
                self.dir.display(),
                meta.uid()
            );
        }
        if meta.mode() & 0o022 != 0 {
            bail!(
                "path-state folder {} may be written by others (mode {:o}): refused; `chmod go-w` it",
                self.dir.display(),
                meta.mode() & 0o7777
            );
        }
        Ok(())
    }

    /// Saves `record` (replacing the receiver's previous one) atomically: written to a new
    /// temporary (`O_CREAT | O_EXCL | O_NOFOLLOW`: a link planted there is never followed)
    /// and renamed over the record.
    pub fn save(&self, record: &PathRecord) -> Result<PathBuf> {
        use std::io::Write;
        use std::os::unix::fs::DirBuilderExt;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .with_context(|| format!("cannot create path-state folder {}", self.dir.display()))?;
        self.check_folder()?;
        let file = self.file(&record.key());
        let tmp = self.dir.join(format!(
            ".{}.tmp{}-{:08x}",
            record.key(),
            std::process::id(),
            rand::random::<u32>()
        ));
        let text = serde_json::to_string_pretty(record)? + "\n";
        let written = shoal_sys::io::create_new_nofollow(&tmp, 0o600)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("cannot write {}", tmp.display()));
        }
        if let Err(e) = fs::rename(&tmp, &file) {
            let _ = fs::remove_file(&tmp);
            return Err(e)
                .with_context(|| format!("cannot rename {} to {}", tmp.display(), file.display()));
        }
        Ok(file)
    }

    /// Removes records saved more than `older_than` before `now`, and records set aside as
    /// long ago; returns how many went. Every ok run saves one, so the folder would
    /// otherwise keep one per receiver it ever met.
    pub fn prune(&self, older_than: Duration, now: u64) -> usize {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return 0;
        };
        let cutoff = now.saturating_sub(older_than.as_secs());
        let mut n = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let saved_at = match name.strip_suffix(".json") {
                Some(_) => load(&entry.path()).ok().map(|r| r.saved_at),
                // A record set aside: `KEY.json.REASON-UNIXTIME`.
                None => name
                    .rsplit_once('-')
                    .filter(|_| name.contains(".json."))
                    .and_then(|(_, t)| t.parse::<u64>().ok()),
            };
            if saved_at.is_some_and(|t| t < cutoff) && fs::remove_file(entry.path()).is_ok() {
                n += 1;
            }
        }
        n
    }

    /// Every record in the folder, by key; a file that does not parse comes back as its error.
    pub fn list(&self) -> Result<Vec<(String, Result<PathRecord>)>> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot list {}", self.dir.display())),
        };
        let mut out = Vec::new();
        for entry in entries {
            let path = entry
                .with_context(|| format!("cannot list {}", self.dir.display()))?
                .path();
            let Some(key) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".json"))
                .filter(|n| !n.starts_with('.'))
            else {
                continue;
            };
            let record = match load(&path) {
                Ok(r) => Ok(r),
                Err(Unusable::Missing) => continue,
                Err(Unusable::Bad(_, why)) => Err(anyhow::anyhow!("{}: {why}", path.display())),
            };
            out.push((key.to_string(), record));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Removes one receiver's record; an error if there is none.
    pub fn forget(&self, key: &str) -> Result<()> {
        let valid = !key.is_empty()
            && !key.starts_with('.')
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
        if !valid {
            bail!("{key:?} is not a path-state key (see `shoal path show`)");
        }
        let file = self.file(key);
        fs::remove_file(&file).with_context(|| format!("cannot remove {}", file.display()))
    }

    /// Removes every record it can: returns how many went, and each it could not remove
    /// with the cause (one stuck entry does not keep the others).
    pub fn forget_all(&self) -> Result<(usize, Vec<String>)> {
        let mut n = 0;
        let mut kept = Vec::new();
        for (key, _) in self.list()? {
            match self.forget(&key) {
                Ok(()) => n += 1,
                Err(e) => kept.push(format!("{key}: {e:#}")),
            }
        }
        Ok((n, kept))
    }
}

/// Most bytes of a record read: a record is a few hundred bytes, and the folder is not to be
/// trusted with a file of any size under a key's name.
pub const MAX_RECORD: u64 = 16 << 10;

/// A record's text: a regular file of at most [`MAX_RECORD`] bytes (a FIFO under a key's
/// name is refused without blocking).
fn read_record(file: &Path) -> std::io::Result<String> {
    let bytes = shoal_sys::io::read_small_regular(file, MAX_RECORD)?;
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"))
}

/// Why a record cannot be used.
enum Unusable {
    Missing,
    /// A short reason for the set-aside name (`corrupt`, `empty`…) and the whole cause.
    Bad(&'static str, String),
}

/// The record in `file`, or why it cannot be used.
fn load(file: &Path) -> std::result::Result<PathRecord, Unusable> {
    let text = match read_record(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unusable::Missing),
        Err(e) if e.to_string() == "not UTF-8" => {
            return Err(Unusable::Bad("not-utf8", "not UTF-8".into()))
        }
        Err(e) => return Err(Unusable::Bad("unreadable", format!("cannot read it: {e}"))),
    };
    if text.trim().is_empty() {
        return Err(Unusable::Bad("empty", "empty".into()));
    }
    let r: PathRecord = serde_json::from_str(&text).map_err(|e| {
        let slug = match e.is_eof() {
            true => "truncated",
            false => "corrupt",
        };
        Unusable::Bad(slug, format!("not a Shoal path-state record ({slug}: {e})"))
    })?;
    out_of_range(&r).map_or(Ok(r), |why| Err(Unusable::Bad("out-of-range", why)))
}

/// What in `r` no path can have, as stored.
fn out_of_range(r: &PathRecord) -> Option<String> {
    let bad = if !(r.min_rtt_ms.is_finite() && r.min_rtt_ms > 0.0 && r.min_rtt_ms <= MOST_RTT_MS) {
        format!(
            "min_rtt_ms {:?} is outside (0, {MOST_RTT_MS}]",
            r.min_rtt_ms
        )
    } else if !(1..=MOST_WINDOW).contains(&r.cwnd_bytes) {
        format!("cwnd_bytes {} is outside 1..={MOST_WINDOW}", r.cwnd_bytes)
    } else if let Some(rate) = [
        Some(r.goodput_bytes_per_s),
        r.delivery_rate_bytes_per_s,
        r.peak_delivery_bytes_per_s,
    ]
    .into_iter()
    .flatten()
    .find(|&v| v > MOST_RATE)
    {
        format!("a rate of {rate} bytes/s is above {MOST_RATE}")
    } else if !(1..=MOST_CONNECTIONS).contains(&r.connections) {
        format!(
            "connections {} is outside 1..={MOST_CONNECTIONS}",
            r.connections
        )
    } else {
        return None;
    };
    Some(format!("values no path has: {bad}"))
}

#[cfg(test)]
#[path = "path_state_tests.rs"]
mod tests;
