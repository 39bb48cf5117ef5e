//! The path state a diagnosis leaves for its best command. When that command starts from saved
//! state (`--resume`, `--initial-window saved`), the newest QUIC record the arms' sweeps saved
//! for this receiver is saved in `shoal send`'s default path-state folder, as a `shoal send`
//! of the same sample would have done (every ok run saves one). The sweeps keep their records
//! in their own folders (one per configuration), so without this the command's first run
//! would start cold and only its second would make the gain the arm measured.

use std::path::{Path, PathBuf};

use anyhow::Result;
use shoal_sender::path_state::{PathRecord, PathStore};

/// Whether `command`'s words start a QUIC run from saved path state.
pub fn starts_from_saved_state(command: &str) -> bool {
    let words: Vec<&str> = command.split_whitespace().collect();
    words.contains(&"--resume")
        || words
            .windows(2)
            .any(|w| w[0] == "--initial-window" && w[1] == "saved")
}

/// The newest QUIC record for `receiver` under `arms_out` (the arms' sweep folders, each with
/// `path-state/<configuration>/`, as the sweep lays them out: nothing deeper is read).
pub fn newest_quic_record(arms_out: &Path, receiver: &str) -> Option<PathRecord> {
    walkdir::WalkDir::new(arms_out)
        .min_depth(3)
        .max_depth(3)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_dir())
        .filter(|e| {
            e.path()
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|n| n == "path-state")
        })
        .filter_map(|e| PathStore::new(e.path().to_path_buf()).list().ok())
        .flatten()
        .filter_map(|(_, r)| r.ok())
        .filter(|r| r.transport == "quic" && r.address == receiver)
        .max_by_key(|r| r.saved_at)
}

/// What [`save_for_best`] did.
#[derive(Debug, PartialEq)]
pub enum Handoff {
    /// The best command does not start from saved state.
    NotNeeded,
    /// The record was saved as this file.
    Saved(PathBuf),
    /// It does, but no arm left a QUIC record for this receiver.
    NoRecord,
}

impl Handoff {
    /// The summary's paragraph on it (empty when not needed).
    pub fn text(&self) -> String {
        match self {
            Handoff::NotNeeded => String::new(),
            Handoff::Saved(file) => format!(
                "\nPath state: the QUIC arms' newest record is saved as {} (`shoal send`'s \
                 default folder): the best command starts from it within its lifetime (1h by \
                 default)\n",
                file.display()
            ),
            Handoff::NoRecord => "\nPath state: no QUIC arm left a record: the best command's \
                 first run starts cold and saves one\n"
                .into(),
        }
    }
}

/// Saves the newest QUIC record into `store` when `best_command` needs one.
pub fn save_for_best(
    arms_out: &Path,
    receiver: &str,
    best_command: &str,
    store: &PathStore,
) -> Result<Handoff> {
    if !starts_from_saved_state(best_command) {
        return Ok(Handoff::NotNeeded);
    }
    match newest_quic_record(arms_out, receiver) {
        Some(r) => Ok(Handoff::Saved(store.save(&r)?)),
        None => Ok(Handoff::NoRecord),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(address: &str, saved_at: u64, transport: &str) -> PathRecord {
        PathRecord {
            transport: transport.into(),
            pin: format!("sha256:{}", "ab".repeat(32)),
            address: address.into(),
            cwnd_bytes: 4 << 20,
            min_rtt_ms: 141.0,
            goodput_bytes_per_s: 30_000_000,
            delivery_rate_bytes_per_s: None,
            peak_delivery_bytes_per_s: Some(36_000_000),
            connections: 1,
            saved_at,
            run_id: "0".repeat(32),
        }
    }

    #[test]
    fn the_newest_quic_record_of_the_arms_is_saved_when_the_best_command_resumes() {
        let t = tempfile::tempdir().unwrap();
        let arms = t.path().join("arms");
        let at =
            |sweep: &str, cfg: &str| PathStore::new(arms.join(sweep).join("path-state").join(cfg));
        at("arms", "c1")
            .save(&record("198.18.0.2:7474", 100, "quic"))
            .unwrap();
        at("refine", "c1")
            .save(&record("198.18.0.2:7474", 200, "quic"))
            .unwrap();
        at("refine", "c2")
            .save(&record("198.18.0.2:7474", 300, "tcp"))
            .unwrap();
        at("arms", "c3")
            .save(&record("198.18.0.9:7474", 400, "quic"))
            .unwrap();
        let store = PathStore::new(t.path().join("user"));
        let cmd = "shoal send --to 198.18.0.2:7474 --src TREE --mode quic-bundle --resume";
        let Handoff::Saved(file) = save_for_best(&arms, "198.18.0.2:7474", cmd, &store).unwrap()
        else {
            panic!("not saved");
        };
        let saved = store.list().unwrap();
        assert_eq!(saved.len(), 1, "{saved:?}");
        assert_eq!(saved[0].1.as_ref().unwrap().saved_at, 200);
        assert!(file.starts_with(store.dir()));
        // A command that does not start from saved state leaves the store alone.
        let plain = "shoal send --to 198.18.0.2:7474 --src TREE --mode quic-bundle";
        assert_eq!(
            save_for_best(&arms, "198.18.0.2:7474", plain, &store).unwrap(),
            Handoff::NotNeeded
        );
        // One that does, with no QUIC record for its receiver, says so.
        assert_eq!(
            save_for_best(&arms, "198.18.0.7:7474", cmd, &store).unwrap(),
            Handoff::NoRecord
        );
        assert!(starts_from_saved_state("shoal send --initial-window saved"));
        assert!(!starts_from_saved_state("shoal send --initial-window 64"));
    }
}
