//! `shoal probe HOST:PORT`: the path measurements a two-host sweep takes before its first run
//! and after its last, on their own.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;

use shoal_common::probe::MAX_PROBE_SECONDS;

use crate::probe::{probe, ProbeOptions};
use crate::remote::{first_contact, Remote};

/// Measure the path to a remote `shoal recv --control` through its control channel alone:
/// idle RTT, bulk TCP goodput each way, RTT under load and loss (see docs/two-hosts.md).
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The receiver's address, as `shoal send --to` takes it; it must run `shoal recv
    /// --control`.
    pub receiver: String,
    /// The receiver's certificate pin (`sha256:…`, printed by `shoal recv`) [default: the
    /// default identity's, for a receiver on this host].
    #[arg(long, requires = "token_file")]
    pub pin: Option<String>,
    /// File holding the receiver's token [default: the default identity's].
    #[arg(long, requires = "pin")]
    pub token_file: Option<PathBuf>,
    /// Length of each bulk flow (one each way), warm-up included; at most 30s (the receiver
    /// ends longer flows).
    #[arg(long, default_value = "4s", value_parser = shoal_common::units::parse_duration)]
    pub duration: Duration,
    /// Start of each bulk flow left out of its goodput and loaded RTT (slow start); reported
    /// apart as the whole flow's goodput.
    #[arg(long, default_value = "1s", value_parser = shoal_common::units::parse_duration)]
    pub warmup: Duration,
    /// Control round trips for the idle RTT (min, median and max are reported).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub rtt_probes: u32,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
}

pub fn run_probe(a: ProbeArgs) -> Result<ExitCode> {
    if a.duration.as_secs_f64() > MAX_PROBE_SECONDS {
        bail!(
            "--duration {:?} is over the receiver's limit of {MAX_PROBE_SECONDS} s per flow",
            a.duration
        );
    }
    if a.warmup >= a.duration {
        bail!(
            "--warmup ({:?}) must be shorter than --duration ({:?})",
            a.warmup,
            a.duration
        );
    }
    let remote = Remote::new(&a.receiver, a.pin.as_deref(), a.token_file.as_deref())?;
    first_contact(&remote, a.token_file.as_deref())?;
    let opts = ProbeOptions {
        rtt_probes: a.rtt_probes as usize,
        duration: a.duration,
        warmup: a.warmup,
        ..Default::default()
    };
    let p = probe(&remote, &opts)?;
    if a.json {
        println!("{}", serde_json::to_string(&p)?);
    } else {
        print!("{}", p.text());
    }
    Ok(ExitCode::SUCCESS)
}
