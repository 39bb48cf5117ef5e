//! Shoal's transport set-up: TLS identity (`identity`), TCP/yamux and QUIC endpoints (`mux`,
//! `transport`, `udp_offload`), QUIC congestion controllers (`quic_cc`, `start_window`), window
//! sharing (`window_share`), flow-control settings (`config`) and the statistics a row reads
//! back from the kernel and quinn (`stats`).

#![forbid(unsafe_code)]

pub mod config;
pub mod identity;
pub mod mux;
pub mod quic_cc;
pub mod start_window;
pub mod stats;
pub mod transport;
pub mod udp_offload;
pub mod window_share;
