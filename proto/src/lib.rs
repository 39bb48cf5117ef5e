//! Shoal's protocol as pure code: the record format and its incremental decoders (`codec`,
//! with the per-stream rules of the per-file modes), the path rules every received name must
//! pass (`relpath`), the enums the hello carries (`wire`), the units its figures are written in
//! (`units`), the control channel's messages (`control`), the path probe's (`probe`), and the flags' ranges
//! (`ranges`, `recvsettings`). No I/O, no async runtime, no TLS or QUIC: both ends and the fuzzers
//! (`fuzz/`, feature `fuzzing`) use it as it is.

#![forbid(unsafe_code)]

pub mod codec;
pub mod control;
pub mod probe;
pub mod ranges;
pub mod recvsettings;
pub mod relpath;
pub mod units;
pub mod wire;
