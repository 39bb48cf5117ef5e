//! The two-host side of a sweep: the client of a remote receiver's control channel (the
//! baseline arms across two hosts are a kind of transfer: `transfer::remote_baseline`).

mod client;

pub use client::*;
