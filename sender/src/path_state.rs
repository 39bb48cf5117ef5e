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
use shoal_proto::careful_resume::{is_fresh, Saved};
use shoal_transport::identity::Pin;

/// `--path-state-lifetime`'s default (RFC 9959 §4.3.1, which sets no value).
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(3_600);

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
}

impl Cap {
    pub fn name(self) -> &'static str {
        match self {
            Cap::Peak => "peak",
            Cap::Goodput => "goodput",
            Cap::Cwnd => "cwnd",
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
        if self.cwnd_bytes <= carried {
            (self.cwnd_bytes, Cap::Cwnd)
        } else {
            (carried, cap)
        }
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

    /// The record for a receiver, judged against `lifetime` at `now`. A file that cannot be
    /// read or parsed is an error naming it (delete it with `shoal path forget`).
    pub fn lookup(
        &self,
        transport: &str,
        pin: &Pin,
        address: &str,
        lifetime: Duration,
        now: u64,
    ) -> Result<Lookup> {
        let file = self.file(&key(transport, &pin.to_string(), address));
        let text = match read_record(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Lookup::Missing),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
        };
        let record = parse(&file, &text)?;
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

    /// Saves `record` (replacing the receiver's previous one) atomically.
    pub fn save(&self, record: &PathRecord) -> Result<PathBuf> {
        fs::create_dir_all(&self.dir)
            .with_context(|| format!("cannot create path-state folder {}", self.dir.display()))?;
        let file = self.file(&record.key());
        let tmp = self
            .dir
            .join(format!(".{}.tmp{}", record.key(), std::process::id()));
        let text = serde_json::to_string_pretty(record)? + "\n";
        fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
        fs::rename(&tmp, &file)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), file.display()))?;
        Ok(file)
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
            let record = read_record(&path)
                .with_context(|| format!("cannot read {}", path.display()))
                .and_then(|t| parse(&path, &t));
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

fn parse(file: &Path, text: &str) -> Result<PathRecord> {
    let r: PathRecord = serde_json::from_str(text)
        .with_context(|| format!("{}: not a Shoal path-state record", file.display()))?;
    if !(r.min_rtt_ms.is_finite() && r.min_rtt_ms > 0.0) || r.cwnd_bytes == 0 {
        bail!(
            "{}: min_rtt_ms must be a positive number and cwnd_bytes above 0",
            file.display()
        );
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(pin: &Pin, saved_at: u64) -> PathRecord {
        PathRecord {
            transport: "quic".into(),
            pin: pin.to_string(),
            address: "10.0.0.2:7474".into(),
            cwnd_bytes: 8_000_000,
            min_rtt_ms: 141.0,
            goodput_bytes_per_s: 70_000_000,
            delivery_rate_bytes_per_s: None,
            peak_delivery_bytes_per_s: None,
            connections: 1,
            saved_at,
            run_id: "00".into(),
        }
    }

    #[test]
    fn saves_looks_up_expires_and_forgets() {
        let dir = tempfile::tempdir().unwrap();
        let store = PathStore::new(dir.path().join("paths"));
        let pin = Pin([7; 32]);
        let hour = DEFAULT_LIFETIME;
        let lookup = |now| {
            store
                .lookup("quic", &pin, "10.0.0.2:7474", hour, now)
                .unwrap()
        };
        assert_eq!(lookup(1_000), Lookup::Missing);
        let r = record(&pin, 1_000);
        store.save(&r).unwrap();
        assert_eq!(lookup(1_000 + 3_600), Lookup::Fresh(r.clone()));
        assert_eq!(lookup(1_000 + 3_601), Lookup::Expired(r.clone()));
        // Another receiver (pin) at the same address, or TCP, does not see it.
        let other = store.lookup("quic", &Pin([8; 32]), "10.0.0.2:7474", hour, 1_000);
        assert_eq!(other.unwrap(), Lookup::Missing);
        let tcp = store.lookup("tcp", &pin, "10.0.0.2:7474", hour, 1_000);
        assert_eq!(tcp.unwrap(), Lookup::Missing);
        assert_eq!(store.list().unwrap().len(), 1);
        store.forget(&r.key()).unwrap();
        assert_eq!(lookup(1_000), Lookup::Missing);
        assert!(store.forget("../etc/passwd").is_err());
        assert!(store.forget(&r.key()).is_err(), "nothing left to forget");
    }

    #[test]
    fn a_bad_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = PathStore::new(dir.path().to_path_buf());
        let pin = Pin([7; 32]);
        let mut r = record(&pin, 1);
        let file = store.save(&r).unwrap();
        fs::write(&file, "{ not json").unwrap();
        let e = store.lookup("quic", &pin, &r.address, DEFAULT_LIFETIME, 1);
        let msg = format!("{:#}", e.unwrap_err());
        assert!(msg.contains(&file.display().to_string()), "{msg}");
        r.min_rtt_ms = 0.0;
        fs::write(&file, serde_json::to_string(&r).unwrap()).unwrap();
        let e = store.lookup("quic", &pin, &r.address, DEFAULT_LIFETIME, 1);
        assert!(format!("{:#}", e.unwrap_err()).contains("min_rtt_ms"));
    }

    #[test]
    fn the_saved_window_is_what_the_run_used_at_most() {
        let mut r = record(&Pin([7; 32]), 1);
        // Used: 70 MB/s × 141 ms = 9.87 MB; the 8 MB cwnd is smaller.
        assert_eq!(r.saved().cwnd, 8_000_000);
        r.cwnd_bytes = 20_000_000;
        assert_eq!(r.saved().cwnd, 9_870_000);
        r.connections = 2;
        assert_eq!(r.saved().cwnd, 4_935_000);
        assert_eq!(r.saved().rtt, Duration::from_millis(141));
        assert_eq!(r.saved_window().1, Cap::Goodput);
    }

    #[test]
    fn the_peak_delivery_rate_bounds_the_window_when_the_record_has_one() {
        let mut r = record(&Pin([7; 32]), 1);
        r.cwnd_bytes = 30_000_000;
        // 125 MB/s at its best × 141 ms = 17.6 MB, where goodput × RTT is 9.87 MB.
        r.peak_delivery_bytes_per_s = Some(125_000_000);
        assert_eq!(r.saved_window(), (17_625_000, Cap::Peak));
        assert_eq!(r.saved().cwnd, 17_625_000);
        r.connections = 4;
        assert_eq!(r.saved_window(), (4_406_250, Cap::Peak));
        // Still never above the cwnd the run ended with.
        r.cwnd_bytes = 4_000_000;
        assert_eq!(r.saved_window(), (4_000_000, Cap::Cwnd));
        // A zero peak (nothing measured) is no peak.
        r.peak_delivery_bytes_per_s = Some(0);
        assert_eq!(r.saved_window(), (2_467_500, Cap::Goodput));
    }

    #[test]
    fn a_record_saved_before_the_peak_loads_and_falls_back_to_goodput() {
        let dir = tempfile::tempdir().unwrap();
        let store = PathStore::new(dir.path().to_path_buf());
        let pin = Pin([7; 32]);
        let r = record(&pin, 1_000);
        let file = store.save(&r).unwrap();
        // The file as an earlier build wrote it: no peak_delivery_bytes_per_s key.
        let mut old: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
        old.as_object_mut()
            .unwrap()
            .remove("peak_delivery_bytes_per_s")
            .unwrap();
        fs::write(&file, serde_json::to_string_pretty(&old).unwrap()).unwrap();
        let found = store.lookup("quic", &pin, &r.address, DEFAULT_LIFETIME, 1_000);
        let Lookup::Fresh(back) = found.unwrap() else {
            panic!("the old record is not fresh");
        };
        assert_eq!(back.peak_delivery_bytes_per_s, None);
        assert_eq!(back.saved_window(), (8_000_000, Cap::Cwnd));
        let mut big = back;
        big.cwnd_bytes = 20_000_000;
        assert_eq!(big.saved_window(), (9_870_000, Cap::Goodput));
    }

    #[test]
    fn keys_are_file_names() {
        let k = key("quic", "sha256:abcdef0123456789ffff", "[::1]:7474");
        assert_eq!(k, "quic_abcdef0123456789___1");
        assert_eq!(host_of("10.0.0.2:7474"), "10.0.0.2");
        assert_eq!(host_of("host.example:1"), "host.example");
        assert_eq!(host_of("::1"), "::1", "no port");
        // Another port on the same host is the same path.
        assert_eq!(
            key("tcp", "ab", "10.0.0.2:1"),
            key("tcp", "ab", "10.0.0.2:2")
        );
    }
}
