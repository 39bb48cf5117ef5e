//! A link's claim: `/run/shoal/link-NAME.owner.json` names the sweep that brought the link up
//! (its PID, start time and boot), the list of what it owns, and once up the link's forwarder.
//! It is made (exclusively) before the link, so two sweeps cannot both take one name, and a
//! sweep that finds the link of a dead sweep releases everything that sweep owned — wherever
//! its output folder is — while a link whose owner runs is never touched.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::{Ident, Item};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Claim {
    pub owner: Ident,
    /// The owner's list (`OUT/owned.jsonl`).
    pub list: PathBuf,
    /// The link's forwarder, once the link is up.
    pub forwarder: Option<u32>,
}

pub fn path(name: &str) -> PathBuf {
    Path::new(shoal_link::state::RUN_DIR).join(format!("link-{name}.owner.json"))
}

fn read(name: &str) -> Option<Claim> {
    serde_json::from_slice(&std::fs::read(path(name)).ok()?).ok()
}

fn link_exists(name: &str) -> bool {
    shoal_link::state::state_path(name).exists()
        || shoal_link::netns::exists(&shoal_link::state::snd_ns(name))
        || shoal_link::netns::exists(&shoal_link::state::rcv_ns(name))
}

/// Claims link `name` for this process (its list: `list`) before it is brought up. A claim
/// whose owner runs is refused, naming it; a dead owner's list is released first (each release
/// printed); a link that exists with no claim (brought up by hand) is refused as before.
pub fn take(name: &str, list: &Path) -> Result<()> {
    shoal_link::state::validate_name(name)?;
    std::fs::create_dir_all(shoal_link::state::RUN_DIR)
        .with_context(|| format!("creating {}", shoal_link::state::RUN_DIR))?;
    let me = Ident::me();
    for _ in 0..20 {
        match read(name) {
            Some(c) if c.owner == me => {
                super::note_claim(name);
                return Ok(());
            }
            Some(c) if c.owner.alive() => bail!(
                "link {name:?} belongs to a sweep that is still running ({}, its list {}): \
                 not touching it; wait for that sweep to end, stop it (kill -INT {}), or give \
                 this matrix another [link] name",
                c.owner,
                c.list.display(),
                c.owner.pid
            ),
            Some(c) => {
                println!(
                    "link {name:?} was left by a sweep that is gone ({}): releasing what it owned (its list {})",
                    c.owner,
                    c.list.display()
                );
                if c.list.exists() {
                    for line in super::release::settle(&c.list)? {
                        println!("{line}");
                    }
                }
                if link_exists(name) {
                    // No list left to say so (its folder was deleted): the claim does.
                    println!("released: {}", release_link(name, &c.owner)?);
                }
                let _ = std::fs::remove_file(path(name));
            }
            None if path(name).exists() => {
                // Being written by another sweep (wait), or made and never written: its maker
                // died at once, before the link was up (removed).
                let age = std::fs::metadata(path(name))
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok());
                if age.is_some_and(|a| a < std::time::Duration::from_secs(2)) {
                    std::thread::sleep(std::time::Duration::from_millis(200));
                    continue;
                }
                let _ = std::fs::remove_file(path(name));
            }
            None if link_exists(name) => bail!(
                "link {name:?} already exists and no sweep claims it (namespace {} or {}); \
                 run `shoal link down --name {name}` first",
                shoal_link::state::snd_ns(name),
                shoal_link::state::state_path(name).display()
            ),
            None => {}
        }
        let claim = Claim {
            owner: me.clone(),
            list: list.to_path_buf(),
            forwarder: None,
        };
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path(name))
        {
            Ok(mut f) => {
                f.write_all(&serde_json::to_vec(&claim)?)?;
                super::note_claim(name);
                return Ok(());
            }
            // Another sweep claimed it meanwhile: look again.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", path(name).display())),
        }
    }
    bail!("link {name:?}: its claim keeps changing; another sweep is starting with it")
}

/// Records the link's forwarder in this process's claim (written whole, then renamed).
pub fn set_forwarder(name: &str, forwarder: Option<u32>) -> Result<()> {
    let Some(mut c) = read(name).filter(|c| c.owner == Ident::me()) else {
        return Ok(());
    };
    c.forwarder = forwarder;
    let tmp = path(name).with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(&c)?)?;
    std::fs::rename(&tmp, path(name)).context("updating the link's claim")
}

/// Removes the claim on `name` if `owner` (dead, everything it listed released) holds it.
pub fn forget(name: &str, owner: &Ident) {
    if read(name).is_some_and(|c| c.owner == *owner) {
        let _ = std::fs::remove_file(path(name));
    }
}

/// Removes the claim on `name` when its owner is gone (after `shoal link down` took the link
/// down by hand): the owner that claim names, else `None` (no claim, or its owner runs).
pub fn forget_dead(name: &str) -> Option<Ident> {
    let c = read(name).filter(|c| !c.owner.alive())?;
    std::fs::remove_file(path(name)).ok()?;
    Some(c.owner)
}

/// Removes this process's claim (its sweep released everything).
pub fn drop_claim(name: &str) {
    if read(name).is_some_and(|c| c.owner == Ident::me()) {
        let _ = std::fs::remove_file(path(name));
    }
}

/// Brings down link `name` that `owner` (dead) brought up — unless its claim now names
/// another owner, or its state names a forwarder other than the one the claim recorded (then
/// it is someone else's link of the same name, left alone).
pub fn release_link(name: &str, owner: &Ident) -> Result<String> {
    let claim = read(name);
    if let Some(c) = claim.as_ref().filter(|c| c.owner != *owner) {
        return Ok(format!(
            "link {name}: now claimed by {} (not the owner of this list), left alone",
            c.owner
        ));
    }
    let state = shoal_link::LinkState::load(name).ok();
    if let (Some(mine), Some(theirs)) = (
        claim.as_ref().and_then(|c| c.forwarder),
        state.as_ref().and_then(|s| s.forwarder_pid),
    ) {
        if mine != theirs {
            bail!(
                "link {name} has forwarder {theirs}, not the {mine} its claim recorded: \
                 not the link this sweep brought up; left alone"
            );
        }
    }
    if !link_exists(name) {
        return Ok(format!("link {name}: already down"));
    }
    let fwd = state.and_then(|s| s.forwarder_pid);
    // The claim stays until everything its owner listed is released (`forget`): it is how
    // a later sweep finds the rest if this one is killed part-way.
    let out = shoal_link::ctl::up::down(name)?;
    let mut what = format!(
        "link {name} down: namespaces {} and {} removed",
        shoal_link::state::snd_ns(name),
        shoal_link::state::rcv_ns(name)
    );
    if let Some(pid) = fwd {
        what.push_str(&format!(
            ", forwarder {pid} stopped (it held /dev/cpu_dma_latency)"
        ));
    }
    for n in out.notes {
        what.push_str(&format!("; {n}"));
    }
    Ok(what)
}

/// The link as a sweep owns it: claimed, listed, brought down (and unlisted) with
/// [`OwnedLink::down`] or on drop; the claim goes at the sweep's end (`super::finish`).
pub struct OwnedLink {
    guard: Option<shoal_link::LinkGuard>,
    id: Option<u64>,
}

impl OwnedLink {
    /// Claims `cfg.name` (unless this process has already), lists it, brings it up.
    pub fn up(cfg: &shoal_link::UpConfig, launcher: &shoal_link::Launcher) -> Result<OwnedLink> {
        let list = super::current().unwrap_or_default();
        take(&cfg.name, &list)?;
        let id = super::acquire(Item::Link {
            name: cfg.name.clone(),
        });
        let guard = match shoal_link::LinkGuard::up_with(cfg, launcher) {
            Ok(g) => g,
            Err(e) => {
                // `up` rolled back what it made.
                super::release(id);
                return Err(e);
            }
        };
        set_forwarder(&cfg.name, guard.state().forwarder_pid)?;
        Ok(OwnedLink {
            guard: Some(guard),
            id,
        })
    }

    pub fn state(&self) -> &shoal_link::LinkState {
        self.guard.as_ref().expect("up").state()
    }

    /// Tears the link down now, reporting errors.
    pub fn down(mut self) -> Result<()> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<()> {
        let Some(g) = self.guard.take() else {
            return Ok(());
        };
        g.down()?;
        super::release(self.id.take());
        Ok(())
    }
}

impl Drop for OwnedLink {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("shoal sweep: tearing the link down: {e:#}");
        }
    }
}
