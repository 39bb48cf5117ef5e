//! A run's accounting of what its records bring: files and bytes so far, held within the
//! receiver's limits (`recv --max-files`, `--max-bytes`) and, when the hello announced the
//! run's totals, within those; and one connection's end marker against what that connection
//! carried. The limits are enforced on these running counts, as records arrive, because a
//! sender that walks its tree while it sends announces no totals (protocol 4) and a hostile
//! one may announce anything. A run's tally also holds its names (`names.rs`). Pure.

use anyhow::anyhow;
use shoal_proto::codec::{self, Hello};
use shoal_proto::relpath::RelPath;

use crate::names::RunNames;

/// Files and bytes brought by records so far, and the ceilings they must stay within.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    pub files: u64,
    pub bytes: u64,
    /// Empty folders the run's folder records create.
    pub folders: u64,
    ceiling: Ceiling,
    /// The run's names (a connection's own tally has none).
    names: Option<RunNames>,
}

/// The most files and bytes a run may bring. `Default` (a connection's own tally) has none.
#[derive(Debug, Default)]
struct Ceiling {
    /// The receiver's limits: (files, bytes).
    limits: Option<(u64, u64)>,
    /// The receiver's limit on folder records (`recv --max-folders`).
    max_folders: Option<u64>,
    /// The hello's totals, when it announced them.
    announced: Option<(u64, u64)>,
}

impl Claims {
    /// A run's tally: within `max_files` and `max_bytes`, and within the hello's totals if it
    /// announced them.
    pub(crate) fn for_run(hello: &Hello, max_files: u64, max_bytes: u64, max_folders: u64) -> Self {
        Claims {
            files: 0,
            bytes: 0,
            folders: 0,
            ceiling: Ceiling {
                limits: Some((max_files, max_bytes)),
                max_folders: Some(max_folders),
                announced: hello.announced(),
            },
            names: Some(RunNames::default()),
        }
    }

    /// Counts one file of `size` bytes (a whole file, or the first block of one), refused if
    /// it takes the run past a ceiling or its name clashes with one the run has
    /// (`RunNames::file`). `path` is only formatted when the claim is refused (no allocation
    /// per record).
    pub(crate) fn claim(&mut self, path: &RelPath, size: u64) -> anyhow::Result<()> {
        let files = self.files + 1;
        let bytes = self.bytes.checked_add(size);
        if let Some((max_files, max_bytes)) = self.ceiling.limits {
            if files > max_files {
                return Err(anyhow!(
                    "file \"{path}\" would be the run's file number {files}; this receiver accepts at most {max_files} files per run (recv --max-files)"
                ));
            }
            if bytes.is_none_or(|b| b > max_bytes) {
                return Err(anyhow!(
                    "file \"{path}\" ({size} bytes) would take the run past {max_bytes} bytes, after {} bytes already; this receiver accepts at most {max_bytes} bytes per run (recv --max-bytes)",
                    self.bytes
                ));
            }
        }
        if let Some((announced_files, announced_bytes)) = self.ceiling.announced {
            if files > announced_files {
                return Err(anyhow!(
                    "more files than the {announced_files} the hello announced"
                ));
            }
            let remaining = announced_bytes.saturating_sub(self.bytes);
            if size > remaining {
                return Err(anyhow!(
                    "file \"{path}\" claims {size} bytes, but only {remaining} of the announced total remain"
                ));
            }
        }
        if let Some(names) = &mut self.names {
            names.file(path)?;
        }
        self.files = files;
        self.bytes = bytes.unwrap_or(u64::MAX);
        Ok(())
    }

    /// Claims an empty folder the run creates, before it is created: refused past
    /// `recv --max-folders`, or if the run sent its name, or a name on its way, as a file
    /// (`RunNames::folder`).
    pub(crate) fn claim_folder(&mut self, path: &RelPath) -> anyhow::Result<()> {
        let folders = self.folders + 1;
        if let Some(max) = self.ceiling.max_folders {
            if folders > max {
                return Err(anyhow!(
                    "folder \"{path}\" would be the run's folder number {folders}; this receiver accepts at most {max} folder records per run (recv --max-folders)"
                ));
            }
        }
        if let Some(names) = &mut self.names {
            names.folder(path)?;
        }
        self.folders = folders;
        Ok(())
    }

    /// One connection's end marker against what that connection carried (file and block
    /// records, content bytes).
    pub(crate) fn check_own_end(&self, end: codec::EndMarker) -> anyhow::Result<()> {
        if end.files != self.files || end.bytes != self.bytes {
            return Err(anyhow!(
                "end marker counts {} files / {} bytes but {} / {} arrived on this connection",
                end.files,
                end.bytes,
                self.files,
                self.bytes
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::codec::TOTALS_UNKNOWN;
    use shoal_proto::relpath::PathLimits;
    use shoal_transport::config::Mode;

    fn rel(s: &str) -> RelPath {
        RelPath::from_bytes(s.as_bytes(), &PathLimits::default()).unwrap()
    }

    fn hello(files: u64, bytes: u64) -> Hello {
        Hello {
            run_id: [0; 16],
            token: Vec::new(),
            mode: Mode::TcpBundle,
            file_count: files,
            total_bytes: bytes,
            conn_index: 0,
            conn_count: 1,
            max_streams: 1,
            cc: None,
        }
    }

    #[test]
    fn folder_records_are_counted_before_they_are_created() {
        let h = hello(TOTALS_UNKNOWN, TOTALS_UNKNOWN);
        let mut c = Claims::for_run(&h, 5, 100, 2);
        c.claim_folder(&rel("a")).unwrap();
        c.claim_folder(&rel("b")).unwrap();
        let e = c.claim_folder(&rel("c")).unwrap_err().to_string();
        assert!(
            e.contains("\"c\"") && e.contains("(recv --max-folders)"),
            "{e}"
        );
        assert_eq!(c.folders, 2);
    }

    #[test]
    fn limits_hold_on_running_counts_when_no_totals_were_announced() {
        let h = hello(TOTALS_UNKNOWN, TOTALS_UNKNOWN);
        let mut c = Claims::for_run(&h, 2, 100, u64::MAX);
        c.claim(&rel("a"), 60).unwrap();
        let e = c.claim(&rel("b"), 41).unwrap_err().to_string();
        assert!(
            e.contains("\"b\"") && e.contains("(recv --max-bytes)"),
            "{e}"
        );
        c.claim(&rel("b"), 40).unwrap();
        let e = c.claim(&rel("c"), 0).unwrap_err().to_string();
        assert!(
            e.contains("file number 3") && e.contains("(recv --max-files)"),
            "{e}"
        );
        assert_eq!((c.files, c.bytes), (2, 100), "refused claims count nothing");
        // A size that would overflow the count is refused, not wrapped.
        let mut c = Claims::for_run(&h, 10, u64::MAX, u64::MAX);
        c.claim(&rel("a"), u64::MAX).unwrap();
        assert!(c.claim(&rel("b"), 1).is_err());
    }

    #[test]
    fn announced_totals_are_ceilings_too() {
        let mut c = Claims::for_run(&hello(1, 10), 100, 1000, u64::MAX);
        let e = c.claim(&rel("a"), 11).unwrap_err().to_string();
        assert!(e.contains("only 10 of the announced total remain"), "{e}");
        c.claim(&rel("a"), 10).unwrap();
        let e = c.claim(&rel("b"), 0).unwrap_err().to_string();
        assert!(e.contains("the 1 the hello announced"), "{e}");
    }
}
