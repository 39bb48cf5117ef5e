//! The two-host side of a sweep: the client of a remote receiver's control channel, and the
//! baseline arms run across two hosts.

pub mod baseline;
mod client;

pub use client::*;
