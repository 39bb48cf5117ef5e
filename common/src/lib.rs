//! Shoal's shared layer: the record codec, validated paths, source trees, the file pipeline,
//! verification, TLS identity, metrics and the result row. Both ends and every transport use
//! these; transports only decide how records are framed on the wire.

#![deny(unsafe_code)]

pub mod config;
pub mod identity;
pub mod mux;
pub mod quic_cc;
pub mod quic_resume;
pub mod stats;
pub mod transport;
pub mod udp_offload;
pub mod window_share;

pub use shoal_pipeline::{fdlimit, tree, verify};

pub mod pipeline {
    pub use shoal_pipeline::{budget, queue, reader, writer};
}

pub mod control {
    pub use shoal_pipeline::manifest::*;
    pub use shoal_proto::control::*;
}

pub use shoal_row::{hostfacts, latency, metrics, provenance, row, traces};

// The protocol's pure parts live in `shoal-proto`; re-exported under their old paths.
pub use shoal_proto::{
    careful_resume, codec, probe, receive_window as window_tune, relpath, units,
};
