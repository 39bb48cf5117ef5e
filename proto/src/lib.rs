//! Shoal's protocol as pure code: the record format and its incremental decoders (`codec`), the
//! path rules every received name must pass (`relpath`), the enums the hello carries (`wire`)
//! and the units its figures are written in (`units`). No I/O, no async runtime, no TLS or
//! QUIC: both ends and the fuzzers (`fuzz/`, feature `fuzzing`) use it as it is.

pub mod codec;
pub mod relpath;
pub mod units;
pub mod wire;
