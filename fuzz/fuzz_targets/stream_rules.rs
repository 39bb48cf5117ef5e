//! The per-stream rules (`StreamDecoder`, `FileStreamCount`) on arbitrary bytes at arbitrary
//! split points (body in `shoal_proto::codec::fuzzing`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shoal_proto::codec::fuzzing::stream_rules(data));
