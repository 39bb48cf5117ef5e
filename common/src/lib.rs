//! Old paths for sweep/ and tests/ only; goes once they import the new crates directly.

pub use shoal_pipeline::{fdlimit, tree, verify};
pub use shoal_proto::{
    careful_resume, codec, probe, receive_window as window_tune, relpath, units,
};
pub use shoal_row::{hostfacts, latency, metrics, provenance, row, traces};
pub use shoal_transport::{
    config, identity, mux, quic_cc, start_window as quic_resume, stats, transport, udp_offload,
    window_share,
};

pub mod pipeline {
    pub use shoal_pipeline::{budget, queue, reader, writer};
}

pub mod control {
    pub use shoal_pipeline::manifest::*;
    pub use shoal_proto::control::*;
}
