//! `ReplyDecoder` on arbitrary bytes, whole and byte by byte (body in `shoal_proto::codec::fuzzing`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shoal_proto::codec::fuzzing::replies(data));
