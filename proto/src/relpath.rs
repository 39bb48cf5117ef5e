//! `RelPath`: a validated relative path, the only way a name from the wire becomes a
//! destination path.
//!
//! Rules (enforced on every name a peer sends, and on every name the sender walks):
//! - not empty, at most [`PathLimits::max_len`] bytes (default 4,096);
//! - relative: no leading `/`;
//! - components separated by single `/`; no empty, `.` or `..` component;
//! - no NUL byte anywhere;
//! - each component at most 255 bytes (Linux `NAME_MAX`);
//! - at most [`PathLimits::max_depth`] components.
//!
//! Names are bytes, not text: Linux file names need not be UTF-8, and Shoal keeps them
//! byte-exact (NFC and NFD forms stay distinct).

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Longest name component Linux accepts.
pub const NAME_MAX: usize = 255;

/// Limits applied when a path is validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathLimits {
    pub max_len: usize,
    pub max_depth: usize,
}

impl Default for PathLimits {
    fn default() -> Self {
        Self {
            max_len: 4096,
            max_depth: 256,
        }
    }
}

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("empty path")]
    Empty,
    #[error("path is {len} bytes, longer than the limit of {max}")]
    TooLong { len: usize, max: usize },
    #[error("absolute path (starts with '/')")]
    Absolute,
    #[error("path contains a NUL byte")]
    Nul,
    #[error("path has an empty component ('//' or trailing '/')")]
    EmptyComponent,
    #[error("path has a '.' component")]
    Dot,
    #[error("path has a '..' component")]
    DotDot,
    #[error("path component is {len} bytes, longer than {NAME_MAX}")]
    ComponentTooLong { len: usize },
    #[error("path is {depth} levels deep, deeper than the limit of {max}")]
    TooDeep { depth: usize, max: usize },
}

/// A validated relative path (bytes, `/`-separated).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelPath(Box<[u8]>);

impl RelPath {
    /// Validates `bytes` against `limits`.
    pub fn from_bytes(bytes: &[u8], limits: &PathLimits) -> Result<Self, PathError> {
        validate(bytes, limits)?;
        Ok(Self(bytes.into()))
    }

    /// Builds a `RelPath` from a path relative to a walked root (sender side).
    pub fn from_path(path: &Path, limits: &PathLimits) -> Result<Self, PathError> {
        Self::from_bytes(path.as_os_str().as_bytes(), limits)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn as_path(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.0))
    }

    /// Joins onto a root folder.
    pub fn under(&self, root: &Path) -> PathBuf {
        root.join(self.as_path())
    }

    /// The components, in order.
    pub fn components(&self) -> impl Iterator<Item = &[u8]> {
        self.0.split(|&b| b == b'/')
    }

    /// The parent folder's bytes (empty for a top-level name) and the final name.
    pub fn split_parent(&self) -> (&[u8], &[u8]) {
        match self.0.iter().rposition(|&b| b == b'/') {
            Some(i) => (&self.0[..i], &self.0[i + 1..]),
            None => (&[], &self.0),
        }
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", String::from_utf8_lossy(&self.0).escape_debug())
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RelPath(\"{self}\")")
    }
}

/// Shows a raw, possibly hostile name in an error message: lossy, escaped, and cut short.
pub fn display_raw(bytes: &[u8]) -> String {
    const SHOW: usize = 120;
    let shown = &bytes[..bytes.len().min(SHOW)];
    let mut s = String::from_utf8_lossy(shown).escape_debug().to_string();
    if bytes.len() > SHOW {
        s.push_str(&format!("… ({} bytes)", bytes.len()));
    }
    s
}

fn validate(bytes: &[u8], limits: &PathLimits) -> Result<(), PathError> {
    if bytes.is_empty() {
        return Err(PathError::Empty);
    }
    if bytes.len() > limits.max_len {
        return Err(PathError::TooLong {
            len: bytes.len(),
            max: limits.max_len,
        });
    }
    if bytes[0] == b'/' {
        return Err(PathError::Absolute);
    }
    if bytes.contains(&0) {
        return Err(PathError::Nul);
    }
    let mut depth = 0;
    for component in bytes.split(|&b| b == b'/') {
        depth += 1;
        match component {
            b"" => return Err(PathError::EmptyComponent),
            b"." => return Err(PathError::Dot),
            b".." => return Err(PathError::DotDot),
            c if c.len() > NAME_MAX => return Err(PathError::ComponentTooLong { len: c.len() }),
            _ => {}
        }
    }
    if depth > limits.max_depth {
        return Err(PathError::TooDeep {
            depth,
            max: limits.max_depth,
        });
    }
    Ok(())
}

/// Fuzz target bodies for the path rules, shared by the coverage-guided fuzzer (`fuzz/`) and
/// the normal test suite (which runs them over the seed corpus and seeded mutations).
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing {
    use super::*;
    use std::path::Component;

    /// Limits chosen by a control byte: 0 is the default; anything else gives small limits so
    /// the fuzzer reaches the length and depth checks with short inputs.
    pub fn limits_for(ctl: u8) -> PathLimits {
        if ctl == 0 {
            PathLimits::default()
        } else {
            PathLimits {
                max_len: 1 + ctl as usize * 17,
                max_depth: 1 + (ctl % 16) as usize,
            }
        }
    }

    /// The confinement property: panics if `path` could name anything outside a root it is
    /// joined under, or breaks a rule it was validated against.
    pub fn assert_confined(path: &RelPath, limits: &PathLimits) {
        let bytes = path.as_bytes();
        assert!(!bytes.is_empty(), "accepted an empty path");
        assert!(
            bytes.len() <= limits.max_len,
            "accepted a path past max_len"
        );
        assert_ne!(bytes[0], b'/', "accepted an absolute path");
        assert!(!bytes.contains(&0), "accepted a NUL byte");
        let mut depth = 0;
        for c in path.components() {
            depth += 1;
            assert!(
                !c.is_empty() && c != b"." && c != b"..",
                "accepted component {:?}",
                display_raw(c)
            );
            assert!(c.len() <= NAME_MAX, "accepted a component past NAME_MAX");
        }
        assert!(depth <= limits.max_depth, "accepted a path past max_depth");
        // Joined under a root, it stays under the root: only plain names follow the root.
        let root = Path::new("/srv/shoal-root");
        let joined = path.under(root);
        assert!(joined.starts_with(root), "escaped the root");
        let rest: Vec<_> = joined
            .strip_prefix(root)
            .expect("under root")
            .components()
            .collect();
        assert_eq!(rest.len(), depth, "components changed when joined");
        for c in rest {
            assert!(matches!(c, Component::Normal(_)), "joined to {c:?}");
        }
        // The parent/name split agrees with the components.
        let (parent, name) = path.split_parent();
        assert!(!name.is_empty());
        assert_eq!(parent.is_empty(), depth == 1);
    }

    /// Fuzz body: the first byte picks the limits, the rest is the candidate path.
    pub fn relpath(data: &[u8]) {
        let Some((&ctl, raw)) = data.split_first() else {
            return;
        };
        let limits = limits_for(ctl);
        match RelPath::from_bytes(raw, &limits) {
            Ok(p) => {
                assert_eq!(p.as_bytes(), raw, "path not kept byte-exact");
                assert_confined(&p, &limits);
            }
            Err(e) => {
                // Refusals name a cause and never panic when shown.
                let _ = e.to_string();
                let _ = display_raw(raw);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(bytes: &[u8]) -> Result<RelPath, PathError> {
        RelPath::from_bytes(bytes, &PathLimits::default())
    }

    #[test]
    fn accepts_ordinary_names() {
        for ok in [
            &b"a"[..],
            b"a/b/c.txt",
            b"dir 1/file with spaces",
            b"-leading-dash",
            b"..hidden",
            b"...",
            b"a/.b",
            "caf\u{e9}".as_bytes(),
            "cafe\u{301}".as_bytes(),
            b"\xff\xfe not utf8",
            b"new\nline",
        ] {
            assert!(check(ok).is_ok(), "{:?}", display_raw(ok));
        }
    }

    #[test]
    fn refuses_escapes_and_bad_shapes() {
        assert_eq!(check(b""), Err(PathError::Empty));
        assert_eq!(check(b"../x"), Err(PathError::DotDot));
        assert_eq!(check(b"a/../../x"), Err(PathError::DotDot));
        assert_eq!(check(b"a/.."), Err(PathError::DotDot));
        assert_eq!(check(b"/etc/x"), Err(PathError::Absolute));
        assert_eq!(check(b"a//b"), Err(PathError::EmptyComponent));
        assert_eq!(check(b"a/"), Err(PathError::EmptyComponent));
        assert_eq!(check(b"./a"), Err(PathError::Dot));
        assert_eq!(check(b"a\0b"), Err(PathError::Nul));
    }

    #[test]
    fn enforces_length_limits() {
        let long = vec![b'a'; 5000];
        assert_eq!(
            check(&long),
            Err(PathError::TooLong {
                len: 5000,
                max: 4096
            })
        );
        let component = vec![b'b'; 256];
        assert_eq!(
            check(&component),
            Err(PathError::ComponentTooLong { len: 256 })
        );
        assert!(check(&vec![b'c'; 255]).is_ok());
        let deep = vec!["d"; 300].join("/");
        assert!(matches!(
            check(deep.as_bytes()),
            Err(PathError::TooDeep { depth: 300, .. })
        ));
    }

    #[test]
    fn splits_parent() {
        let p = check(b"a/b/c").unwrap();
        assert_eq!(p.split_parent(), (&b"a/b"[..], &b"c"[..]));
        let top = check(b"c").unwrap();
        assert_eq!(top.split_parent(), (&b""[..], &b"c"[..]));
    }
}
