//! Which build of Shoal produced a result: its commit, whether the tree it was built from had
//! uncommitted changes, and the SHA-256 of the binary that ran. The commit and dirty flag are
//! compiled into the `shoal` binary (cli/build.rs) and handed down from there.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

/// The build that ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provenance {
    /// `git rev-parse HEAD` at build time (`unknown` outside a git checkout).
    pub commit: String,
    /// The tree had changes to tracked files at build time.
    pub dirty: bool,
    /// SHA-256 of the binary file, hex.
    pub binary_sha256: String,
}

impl Provenance {
    /// This process's build: `commit` and `dirty` as compiled in, the hash of its own binary.
    pub fn of_this_process(commit: &str, dirty: bool) -> Provenance {
        Provenance {
            commit: commit.to_string(),
            dirty,
            binary_sha256: file_sha256(Path::new("/proc/self/exe")).unwrap_or_default(),
        }
    }
}

/// SHA-256 of a file's content, hex.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_a_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        std::fs::write(&p, b"abc").unwrap();
        assert_eq!(
            file_sha256(&p).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
