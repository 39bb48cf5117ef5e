//! Hostile peers and resource limits against a live receiver: every crafted stream is refused
//! with its cause, nothing lands outside the destination, and the receiver serves the next run.

#[path = "../support/mod.rs"]
mod support;

mod hostile;
mod hostile_modes;
mod hostile_peers;
mod invocation;
mod limits;
mod limits_hardening;
