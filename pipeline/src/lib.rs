//! The one file pipeline every transport shares, with no network dependency.
//!
//! Sender: [`tree`] walks the source (or generates a payload); [`queue`] is fed by the walk as
//! it finds files; [`reader`] takes them, reads them ahead of the network within a byte
//! [`budget`], and hands out wire-ready chunks (record header + content).
//! Receiver: [`writer`] creates folders once, writes and closes files inside the destination,
//! never following a symbolic link, and counts files that are ready; [`fdlimit`] raises the
//! open-files limit it needs.
//! Both: [`verify`] proves a tree arrived (SHA-256 of every file); [`manifest`] carries such a
//! proof on the control channel.

#![forbid(unsafe_code)]

pub mod budget;
pub mod fdlimit;
pub mod manifest;
pub mod queue;
pub mod reader;
pub mod tree;
pub mod verify;
pub mod writer;
