//! What a sweep owns on the host — its emulated link, the processes it started (sshd, the runs'
//! ends), mounted volumes, cgroups, host-wide sysctls it changed, its work folder — recorded in
//! its output folder as it acquires each (`OUT/owned.jsonl`, one JSON object a line, each
//! appended with one write), with the owner's PID, start time and boot, so a sweep
//! killed with SIGKILL leaves a list the next sweep (or `--continue`, or `--clean`) can release
//! once the owner is dead (`release`). The link also carries a claim naming its owner
//! (`claim`), so a sweep in another output folder finds the killed one's list. See
//! docs/sweep.md, "What a sweep owns".
//!
//! The list of the running sweep is process-wide (conditions and processes record themselves
//! without a handle passed through every call); without [`begin`] nothing is recorded.

pub mod claim;
pub mod ident;
pub mod release;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub use ident::Ident;

/// The list's file in a sweep's output folder.
pub const FILE: &str = "owned.jsonl";

/// One thing a sweep owns, as it is released.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Item {
    /// The emulated link (forwarder, namespaces, state files) and its claim.
    Link { name: String },
    /// A process group the sweep started: its leader's PID and start time.
    Process { pid: u32, start: u64, what: String },
    /// A mounted volume and its image file (none when kept).
    Mount {
        point: PathBuf,
        image: Option<PathBuf>,
    },
    /// A cgroup folder.
    Cgroup { dir: PathBuf },
    /// A host-wide sysctl and the value it had before.
    Sysctl { key: String, before: String },
    /// The sweep's work folder (destinations, volumes' images), deleted unless kept.
    WorkDir { path: PathBuf },
}

/// A line of the list.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Line {
    /// A process took the folder over (a sweep's start, a continuation).
    Owner {
        owner: Ident,
        at: String,
    },
    Acquire {
        id: u64,
        owner: Ident,
        item: Item,
    },
    Release {
        id: u64,
    },
}

/// The list as read: its lines (a torn last line left out) and how many bytes of a torn line
/// there were.
pub struct List {
    pub lines: Vec<Line>,
    pub torn: usize,
}

impl List {
    pub fn read(path: &Path) -> Result<List> {
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        Ok(Self::parse(&text))
    }

    /// Whole lines only: a line without its newline was being written when the writer died.
    pub fn parse(text: &[u8]) -> List {
        let end = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let lines = text[..end]
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect();
        List {
            lines,
            torn: text.len() - end,
        }
    }

    /// The last owner.
    pub fn owner(&self) -> Option<&Ident> {
        self.lines.iter().rev().find_map(|l| match l {
            Line::Owner { owner, .. } => Some(owner),
            _ => None,
        })
    }

    /// What was acquired and not released, in the order acquired.
    pub fn outstanding(&self) -> Vec<(u64, Ident, Item)> {
        let released: std::collections::BTreeSet<u64> = self
            .lines
            .iter()
            .filter_map(|l| match l {
                Line::Release { id } => Some(*id),
                _ => None,
            })
            .collect();
        self.lines
            .iter()
            .filter_map(|l| match l {
                Line::Acquire { id, owner, item } if !released.contains(id) => {
                    Some((*id, owner.clone(), item.clone()))
                }
                _ => None,
            })
            .collect()
    }

    fn next_id(&self) -> u64 {
        self.lines
            .iter()
            .filter_map(|l| match l {
                Line::Acquire { id, .. } => Some(*id),
                _ => None,
            })
            .max()
            .map_or(1, |m| m + 1)
    }
}

/// Appends one line with one write: a kill of this process leaves it whole or absent. Only a
/// work folder's line is synced to disk too: it is the one thing that outlives a crash of the
/// machine (processes, mounts, cgroups, namespaces and sysctls do not), and a sync per
/// process started would cost the runs' timing.
pub fn append(path: &Path, line: &Line) -> Result<()> {
    let mut bytes = serde_json::to_vec(line)?;
    bytes.push(b'\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let sync = matches!(
        line,
        Line::Acquire {
            item: Item::WorkDir { .. },
            ..
        }
    );
    f.write_all(&bytes)
        .and_then(|_| if sync { f.sync_data() } else { Ok(()) })
        .with_context(|| format!("writing {}", path.display()))
}

struct Ledger {
    path: PathBuf,
    me: Ident,
    next: u64,
    /// Links this process claimed: unclaimed only at [`finish`], once everything is released.
    claims: Vec<String>,
}

static LEDGER: Mutex<Option<Ledger>> = Mutex::new(None);

fn ledger() -> std::sync::MutexGuard<'static, Option<Ledger>> {
    LEDGER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes `out` over for this process: refuses a folder whose owner still runs, releases what
/// a dead owner left (each release printed), then records this process as the owner.
pub fn begin(out: &Path) -> Result<()> {
    let path = out.join(FILE);
    for line in release::settle(&path)? {
        println!("{line}");
    }
    let list = List::read(&path)?;
    let me = Ident::me();
    append(
        &path,
        &Line::Owner {
            owner: me.clone(),
            at: shoal_row::metrics::utc_timestamp(),
        },
    )?;
    *ledger() = Some(Ledger {
        path: std::fs::canonicalize(&path).unwrap_or(path),
        me,
        next: list.next_id(),
        claims: Vec::new(),
    });
    Ok(())
}

/// The running sweep's list, if one was begun.
pub fn current() -> Option<PathBuf> {
    ledger().as_ref().map(|l| l.path.clone())
}

/// Records `item` as owned (before it is acquired, so a kill part-way leaves it listed; its
/// release then finds it absent or half made). None when no list was begun or it cannot be
/// written (said once on stderr).
pub fn acquire(mut item: Item) -> Option<u64> {
    // Released from wherever the next sweep runs: paths are made absolute.
    let abs = |p: &mut PathBuf| {
        if p.is_relative() {
            if let Ok(cwd) = std::env::current_dir() {
                *p = cwd.join(&*p);
            }
        }
    };
    match &mut item {
        Item::Mount { point, image } => {
            abs(point);
            image.iter_mut().for_each(abs);
        }
        Item::Cgroup { dir: p } | Item::WorkDir { path: p } => abs(p),
        Item::Link { .. } | Item::Process { .. } | Item::Sysctl { .. } => {}
    }
    let mut g = ledger();
    let l = g.as_mut()?;
    let id = l.next;
    l.next += 1;
    let line = Line::Acquire {
        id,
        owner: l.me.clone(),
        item,
    };
    match append(&l.path, &line) {
        Ok(()) => Some(id),
        Err(e) => {
            eprintln!("warning: {e:#}: a kill now would leave this unlisted");
            None
        }
    }
}

/// Records that `id` was released.
pub fn release(id: Option<u64>) {
    let Some(id) = id else { return };
    if let Some(l) = ledger().as_ref() {
        if let Err(e) = append(&l.path, &Line::Release { id }) {
            eprintln!("warning: {e:#}");
        }
    }
}

fn note_claim(name: &str) {
    if let Some(l) = ledger().as_mut() {
        l.claims.push(name.to_string());
    }
}

/// Ends this process's list (the sweep is over; everything it acquired was released) and
/// gives up its link's claim. Until then the claim leads the next sweep to the list.
pub fn finish() {
    if let Some(l) = ledger().take() {
        l.claims.iter().for_each(|n| claim::drop_claim(n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_left_out_and_released_items_are_not_outstanding() {
        let me = Ident::me();
        let mut text = Vec::new();
        for l in [
            Line::Owner {
                owner: me.clone(),
                at: "t".into(),
            },
            Line::Acquire {
                id: 1,
                owner: me.clone(),
                item: Item::Link { name: "x".into() },
            },
            Line::Acquire {
                id: 2,
                owner: me.clone(),
                item: Item::Cgroup { dir: "/c".into() },
            },
            Line::Release { id: 2 },
        ] {
            text.extend(serde_json::to_vec(&l).unwrap());
            text.push(b'\n');
        }
        text.extend(b"{\"t\":\"acquire\",\"id\":3,\"own");
        let list = List::parse(&text);
        assert_eq!(list.torn, 26);
        assert_eq!(list.owner(), Some(&me));
        let out = list.outstanding();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].2, Item::Link { name: "x".into() });
        assert_eq!(list.next_id(), 3);
    }
}
