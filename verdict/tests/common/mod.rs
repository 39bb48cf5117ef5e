//! The observations of a quiet path with ample buffers, fast ends and idle CPUs, and the arms
//! the planted cases change them with.

#![allow(dead_code)]

use shoal_verdict::*;

pub const MIB: u64 = 1 << 20;

/// A path with ample buffers, fast ends and idle CPUs; the sample is `files` × `file_size`,
/// the tree 16 times that.
pub fn planted(mbit: f64, rtt_ms: f64, files: u64, file_size: u64) -> Observations {
    let rate = mbit * 1e6;
    let big = [4096, 131072, 256 * MIB];
    Observations {
        path: PathObs {
            idle_rtt_ms: Some(rtt_ms),
            loaded_rtt_ms: Some(rtt_ms * 1.2),
            goodput_to_receiver_bits_per_s: Some(rate),
            goodput_from_receiver_bits_per_s: Some(rate),
            bdp_bytes: Some((rate * rtt_ms / 1000.0 / 8.0) as u64),
            sender_buffers: BufferLimits {
                tcp_rmem: Some(big),
                tcp_wmem: Some(big),
                rmem_max: Some(256 * MIB),
                wmem_max: Some(256 * MIB),
            },
            receiver_buffers: BufferLimits {
                tcp_rmem: Some(big),
                tcp_wmem: Some(big),
                rmem_max: Some(256 * MIB),
                wmem_max: Some(256 * MIB),
            },
            controllers: vec!["cubic".into(), "bbr".into()],
            ..PathObs::default()
        },
        ends: EndsObs {
            source_read_found: Some(floor(200_000.0, 2e9)),
            source_read_warm: Some(floor(400_000.0, 4e9)),
            receiver_write: Some(floor(100_000.0, 1e9)),
            sender_cpu: CpuObs {
                cpus: Some(4),
                ..CpuObs::default()
            },
            receiver_cpu: CpuObs {
                cpus: Some(4),
                ..CpuObs::default()
            },
        },
        sample: SampleObs {
            sample_files: files,
            sample_bytes: files * file_size,
            tree_files: files * 16,
            tree_bytes: files * file_size * 16,
            sizes: None,
        },
        arms: Vec::new(),
    }
}

pub fn floor(files_per_s: f64, bytes_per_s: f64) -> FloorRate {
    FloorRate {
        files_per_s,
        bytes_per_s,
        cpu_busy: None,
    }
}

pub const BASE: &[&str] = &["198.18.0.2:7474", "--src", "/data", "--cc", "cubic"];

pub fn base(seconds: &[f64]) -> ArmObs {
    ArmObs::with_seconds(ArmKind::Base, BASE, seconds)
}

pub fn arm(kind: ArmKind, extra: &[&str], seconds: &[f64]) -> ArmObs {
    let mut flags: Vec<&str> = BASE.to_vec();
    flags.extend_from_slice(extra);
    ArmObs::with_seconds(kind, &flags, seconds)
}

pub fn bbr(seconds: &[f64]) -> ArmObs {
    let mut a = arm(ArmKind::OtherCc("bbr".into()), &[], seconds);
    a.flags[4] = "bbr".into();
    a
}

pub fn kinds(v: &Verdict) -> Vec<Kind> {
    v.bottlenecks.iter().map(|b| b.kind).collect()
}

pub fn set_runs(arm: &mut ArmObs, f: impl Fn(&mut RunObs)) {
    arm.runs.iter_mut().for_each(f);
}
