//! The one file pipeline every transport shares.
//!
//! Sender: [`queue`] is fed by the walk as it finds files; [`reader`] takes them, reads them ahead of the network within a
//! byte [`budget`], and hands out wire-ready chunks (record header + content).
//! Receiver: [`writer`] creates folders once, writes and closes files inside the destination,
//! never following a symbolic link, and counts files that are ready.

pub mod budget;
pub mod queue;
pub mod reader;
pub mod writer;
