//! Shoal's sweep matrix: reads a matrix file (TOML) once into a typed plan — payloads, the
//! link, axes, arms and host conditions, the Cartesian product of configurations and their
//! shuffled order — and checks it before anything runs (every configuration's command lines,
//! the run count, what a remote receiver could not do). Pure: no process is started and
//! nothing on the host is changed. See docs/sweep.md.
#![deny(unsafe_code)]

pub mod argv;
pub mod arm;
pub mod axis;
pub mod binaries;
pub mod conditions;
pub mod iperf3;
pub mod linkspec;
pub mod matrix;
pub mod plan;
pub mod preflight;
mod product;
pub mod quantity;
pub mod rclone;
pub mod recvaxes;
pub mod remote_arms;
mod schema;
pub mod start_window;
