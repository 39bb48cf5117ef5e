//! `RelPath::from_bytes` and the confinement property (body in `shoal_proto::relpath::fuzzing`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shoal_proto::relpath::fuzzing::relpath(data));
