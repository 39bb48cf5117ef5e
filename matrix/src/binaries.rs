//! The `shoal` axis: other builds of `shoal` in one sweep, each named by a short label in
//! `[binaries]` (`old = "/opt/shoal-cubic-0595/shoal"`), so that two builds (e.g. against
//! different quinn-proto releases) run interleaved in one shuffled order. Both ends of a run use
//! the configuration's binary; the label is the axis value, so it names the arm in the
//! configuration's label, the summary and the charts. The sweep checks each binary before the
//! first run and records its provenance in meta.json (each row has the sender's SHA-256).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::axis;

/// Checks the labels: each a short name, and every value of the `shoal` axis (`used`) one of
/// them.
pub fn check(
    binaries: &BTreeMap<String, PathBuf>,
    used: impl IntoIterator<Item = String>,
) -> Result<()> {
    for label in binaries.keys() {
        let ok = !label.is_empty()
            && label.len() <= 16
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
        if !ok {
            bail!("[binaries] {label:?}: a label is 1–16 characters of [A-Za-z0-9._-]");
        }
    }
    for label in used {
        if !binaries.contains_key(&label) {
            let known: Vec<&str> = binaries.keys().map(String::as_str).collect();
            bail!(
                "axis {} = {label:?}: not a label of [binaries] (known: {})",
                axis::SHOAL,
                if known.is_empty() {
                    "none; add e.g. [binaries] old = \"/path/to/shoal\"".to_string()
                } else {
                    known.join(", ")
                }
            );
        }
    }
    Ok(())
}

/// A relative path as seen from the matrix file's folder.
pub fn resolve(binaries: &mut BTreeMap<String, PathBuf>, matrix_dir: &Path) {
    for p in binaries.values_mut() {
        if p.is_relative() {
            *p = matrix_dir.join(&*p);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::matrix::Matrix;

    const BASE: &str =
        "[link]\nrtt = \"10ms\"\nrate = \"100mbit\"\n[payload.p]\nfiles = 1\nsize = \"1KiB\"\n";

    #[test]
    fn labels_name_binaries() {
        let m = Matrix::parse(&format!(
            "{BASE}[binaries]\nold = \"/opt/old/shoal\"\nnew = \"/opt/new/shoal\"\n\
             [axes]\nshoal = [\"new\", \"old\"]\nmode = [\"quic-bundle\"]\n"
        ))
        .unwrap();
        assert_eq!(m.configs.len(), 2);
        let c = &m.configs[1];
        assert!(c.label().contains("shoal=old"), "{}", c.label());
        assert_eq!(m.binary(c).unwrap().to_str(), Some("/opt/old/shoal"));
        // Not a flag of either end.
        let (send, recv) = crate::argv::flags(c, &m.receiver_flags);
        assert!(
            !send.iter().chain(&recv).any(|f| f.contains("shoal")),
            "{send:?}"
        );

        let e = Matrix::parse(&format!(
            "{BASE}[binaries]\nold = \"/opt/old/shoal\"\n[axes]\nshoal = [\"olf\"]\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("\"olf\": not a label of [binaries] (known: old)"),
            "{e}"
        );
        let e = Matrix::parse(&format!(
            "{BASE}[binaries]\n\"a b\" = \"/x\"\n[axes]\nmode = [\"quic-bundle\"]\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("a label is"), "{e}");
        // Baselines ignore it.
        let m = Matrix::parse(&format!(
            "{BASE}[binaries]\nold = \"/x\"\nnew = \"/y\"\n[axes]\nshoal = [\"new\", \"old\"]\n\
             kind = [\"tar-ssh\"]\n"
        ))
        .unwrap();
        assert_eq!(m.configs.len(), 1);
        assert_eq!(m.binary(&m.configs[0]), None);
    }
}
