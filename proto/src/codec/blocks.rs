//! The blocks of a run's large files, from whichever connection they arrive: every block of a
//! file agrees on the file's size, no two blocks of a file overlap, and a file is complete
//! exactly when its blocks cover every byte once. Pure: the receiver keeps one ledger per run
//! and asks it about each block header before any of the block's bytes are written.

use std::collections::{BTreeMap, HashMap};

use super::*;

/// Most separate (unmerged) pieces one file may be in while its blocks arrive: adjacent blocks
/// merge, so an honest sender's file is in about as many pieces as it has connections. Bounds
/// what a hostile sender can make the receiver hold with many tiny scattered blocks.
pub const MAX_BLOCK_PIECES: usize = 65_536;

/// Why a block was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    #[error("block of \"{path}\" at offset {offset}, {len} bytes, is outside the file's {size} bytes (or empty)")]
    Outside {
        path: String,
        offset: u64,
        len: u64,
        size: u64,
    },
    #[error("block of \"{path}\" says the file has {size} bytes, an earlier block said {earlier}")]
    SizeMismatch {
        path: String,
        size: u64,
        earlier: u64,
    },
    #[error("block of \"{path}\" at bytes {start}..{end} overlaps bytes {other_start}..{other_end} already received")]
    Overlap {
        path: String,
        start: u64,
        end: u64,
        other_start: u64,
        other_end: u64,
    },
    #[error("\"{path}\" arrives in more than {MAX_BLOCK_PIECES} separate pieces")]
    Fragmented { path: String },
}

/// A file still missing blocks when the run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingBlocks {
    pub path: RelPath,
    pub size: u64,
    /// Bytes its blocks covered.
    pub covered: u64,
    /// The first byte no block covered.
    pub first_gap: u64,
}

impl std::fmt::Display for MissingBlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "\"{}\" is missing blocks: {} of its {} bytes arrived (nothing from byte {} on); the run ended before every block came",
            self.path, self.covered, self.size, self.first_gap
        )
    }
}

/// What [`BlockLedger::reserve`] granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserved {
    /// The file's id (the one given for its first block).
    pub id: u64,
    /// This is the file's first block.
    pub first: bool,
    /// With this block, the file's blocks cover every byte.
    pub complete: bool,
}

#[derive(Debug)]
struct FileBlocks {
    id: u64,
    size: u64,
    covered: u64,
    /// Covered byte ranges, start → end, adjacent ones merged.
    pieces: BTreeMap<u64, u64>,
}

/// The blocks of one run's files.
#[derive(Debug, Default)]
pub struct BlockLedger {
    files: HashMap<RelPath, FileBlocks>,
}

impl BlockLedger {
    /// Checks block `offset..offset + len` of `path` (of `size` bytes) and records it as
    /// received. `new_id` names the file when this is its first block.
    pub fn reserve(
        &mut self,
        path: &RelPath,
        size: u64,
        offset: u64,
        len: u64,
        new_id: impl FnOnce() -> u64,
    ) -> Result<Reserved, BlockError> {
        let end = match offset.checked_add(len) {
            Some(end) if len > 0 && end <= size => end,
            _ => {
                return Err(BlockError::Outside {
                    path: path.to_string(),
                    offset,
                    len,
                    size,
                })
            }
        };
        let first = !self.files.contains_key(path);
        let file = self
            .files
            .entry(path.clone())
            .or_insert_with(|| FileBlocks {
                id: new_id(),
                size,
                covered: 0,
                pieces: BTreeMap::new(),
            });
        if file.size != size {
            return Err(BlockError::SizeMismatch {
                path: path.to_string(),
                size,
                earlier: file.size,
            });
        }
        // The piece starting last before `end` is the only one that can overlap.
        if let Some((&s, &e)) = file.pieces.range(..end).next_back() {
            if e > offset {
                return Err(BlockError::Overlap {
                    path: path.to_string(),
                    start: offset,
                    end,
                    other_start: s,
                    other_end: e,
                });
            }
        }
        let before = file
            .pieces
            .range(..offset)
            .next_back()
            .filter(|(_, &e)| e == offset)
            .map(|(&s, _)| s);
        let after = file.pieces.get(&end).copied();
        if before.is_none() && after.is_none() && file.pieces.len() >= MAX_BLOCK_PIECES {
            return Err(BlockError::Fragmented {
                path: path.to_string(),
            });
        }
        let start = match before {
            Some(s) => {
                file.pieces.remove(&s);
                s
            }
            None => offset,
        };
        if after.is_some() {
            file.pieces.remove(&end);
        }
        file.pieces.insert(start, after.unwrap_or(end));
        file.covered += len;
        Ok(Reserved {
            id: file.id,
            first,
            complete: file.covered == file.size,
        })
    }

    /// Files whose blocks do not cover them yet, sorted by path.
    pub fn incomplete(&self) -> Vec<MissingBlocks> {
        let mut missing: Vec<MissingBlocks> = self
            .files
            .iter()
            .filter(|(_, f)| f.covered < f.size)
            .map(|(path, f)| MissingBlocks {
                path: path.clone(),
                size: f.size,
                covered: f.covered,
                first_gap: match f.pieces.iter().next() {
                    Some((&0, &e)) => e,
                    _ => 0,
                },
            })
            .collect();
        missing.sort_by(|a, b| a.path.cmp(&b.path));
        missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> RelPath {
        RelPath::from_bytes(s.as_bytes(), &PathLimits::default()).unwrap()
    }

    #[test]
    fn blocks_in_any_order_complete_a_file_once_every_byte_is_covered() {
        let mut l = BlockLedger::default();
        let mut ids = 7..;
        let mut id = || ids.next().unwrap();
        let r = l.reserve(&p("f"), 30, 20, 10, &mut id).unwrap();
        assert_eq!(
            r,
            Reserved {
                id: 7,
                first: true,
                complete: false
            }
        );
        assert_eq!(l.incomplete()[0].first_gap, 0);
        let r = l.reserve(&p("f"), 30, 0, 10, &mut id).unwrap();
        assert_eq!(
            r,
            Reserved {
                id: 7,
                first: false,
                complete: false
            }
        );
        let m = &l.incomplete()[0];
        assert_eq!((m.covered, m.first_gap), (20, 10));
        assert_eq!(
            m.to_string(),
            "\"f\" is missing blocks: 20 of its 30 bytes arrived (nothing from byte 10 on); the run ended before every block came"
        );
        let r = l.reserve(&p("f"), 30, 10, 10, &mut id).unwrap();
        assert_eq!(
            r,
            Reserved {
                id: 7,
                first: false,
                complete: true
            }
        );
        assert!(l.incomplete().is_empty());
        // Another file gets its own id.
        assert_eq!(l.reserve(&p("g"), 5, 0, 5, &mut id).unwrap().id, 8);
    }

    #[test]
    fn overlapping_outside_and_inconsistent_blocks_are_refused() {
        let mut l = BlockLedger::default();
        let id = || 1;
        l.reserve(&p("f"), 100, 10, 20, id).unwrap();
        for (offset, len) in [(0, 11), (29, 1), (15, 5), (5, 50), (10, 20)] {
            let e = l.reserve(&p("f"), 100, offset, len, id).unwrap_err();
            assert!(
                matches!(
                    e,
                    BlockError::Overlap {
                        other_start: 10,
                        other_end: 30,
                        ..
                    }
                ),
                "{offset}+{len}: {e}"
            );
        }
        assert_eq!(
            l.reserve(&p("f"), 100, 0, 11, id).unwrap_err().to_string(),
            "block of \"f\" at bytes 0..11 overlaps bytes 10..30 already received"
        );
        // Touching is not overlapping.
        l.reserve(&p("f"), 100, 0, 10, id).unwrap();
        l.reserve(&p("f"), 100, 30, 10, id).unwrap();
        for (offset, len) in [(90, 11), (100, 1), (0, 0), (u64::MAX, 2), (1, u64::MAX)] {
            assert!(matches!(
                l.reserve(&p("f"), 100, offset, len, id),
                Err(BlockError::Outside { .. })
            ));
        }
        assert!(matches!(
            l.reserve(&p("f"), 200, 50, 10, id),
            Err(BlockError::SizeMismatch {
                size: 200,
                earlier: 100,
                ..
            })
        ));
        let m = &l.incomplete()[0];
        assert_eq!((m.covered, m.first_gap), (40, 40));
    }

    #[test]
    fn scattered_tiny_blocks_are_bounded() {
        let mut l = BlockLedger::default();
        let size = 4 * MAX_BLOCK_PIECES as u64;
        for i in 0..MAX_BLOCK_PIECES as u64 {
            l.reserve(&p("f"), size, 2 * i, 1, || 0).unwrap();
        }
        assert!(matches!(
            l.reserve(&p("f"), size, size - 1, 1, || 0),
            Err(BlockError::Fragmented { .. })
        ));
    }
}
