//! Transfers with real `shoal` processes: every mode over loopback, connections and blocks,
//! integrity, names, provenance, traces, and the start window on the emulated link (root).

#[path = "../support/mod.rs"]
mod support;

mod blocks;
mod connections;
mod initwin;
mod integrity;
mod modes;
mod names;
mod provenance;
mod resume;
mod traces;
mod transfer;
