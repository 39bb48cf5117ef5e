//! The run's block ledger (`BlockLedger`) against a byte-by-byte model (body in
//! `shoal_proto::codec::fuzzing`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shoal_proto::codec::fuzzing::blocks(data));
