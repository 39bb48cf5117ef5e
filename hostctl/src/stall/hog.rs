//! The CPU hog (`shoal cpu-hog`, the `recv-cpu-hog` axis): a busy loop that the sweep puts in
//! the receiver's CPU-capped group, so the quota throttles the group whatever the receiver's
//! own load. It ends when its standard input ends, so a killed sweep leaves no hog spinning.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Spins until standard input ends.
pub fn main() {
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let spin = std::thread::spawn(move || {
        let mut x: u64 = 1;
        while !d.load(Ordering::Relaxed) {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
    });
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    done.store(true, Ordering::Relaxed);
    let _ = spin.join();
}
