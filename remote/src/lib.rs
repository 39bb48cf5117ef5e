//! The controlling side of a receiver's control channel (`shoal recv --control`): first
//! contact and its identity checks, run folders prepared, hashed and removed on the receiver,
//! the clock offset, and the path probe (`shoal probe`, and a two-host sweep's path check).

mod client;
pub mod pathcheck;
pub mod probe;
pub mod probe_request;

pub use client::*;
