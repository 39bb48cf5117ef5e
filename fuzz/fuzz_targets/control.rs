//! The control channel's decoders (opening, frames, manifests) on arbitrary bytes (body in
//! `shoal_proto::control::fuzzing`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shoal_proto::control::fuzzing::control(data));
