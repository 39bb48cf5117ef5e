//! Shoal receiver: accepts authenticated transfers and writes them inside its destination.
//!
//! One address serves every mode: TCP (TLS, or plain where allowed) and QUIC on the same port.
//! Each connection is handled on its own task, so a bad or slow peer never stops the receiver
//! from serving the next one. A run starts only after the hello's token matches; nothing is
//! created before that.

#![forbid(unsafe_code)]

mod baseline;
mod bundle;
mod claims;
mod config;
mod control;
mod fileread;
mod hub;
mod names;
mod prefixed;
mod probe;
mod quic;
mod read;
mod run;
mod runconfig;
mod server;
mod shared;
mod stage;
mod streams;
mod tcp;
mod tune;
mod writefloor;

pub use config::{
    default_writers, ReceiverConfig, DEFAULT_HELLO_TIMEOUT, DEFAULT_MAX_BYTES,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_FILES,
};
pub use server::Receiver;
pub use shared::RunOutcome;
pub use shoal_proto::codec::Completion;
