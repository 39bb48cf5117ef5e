//! `ReplyDecoder` on arbitrary bytes, whole and byte by byte (body in `shoal_common::codec::fuzzing`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shoal_common::codec::fuzzing::replies(data));
