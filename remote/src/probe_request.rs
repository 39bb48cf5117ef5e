//! `shoal probe HOST:PORT`: the path measurements a two-host sweep takes before its first run
//! and after its last, on their own: the request, its defaults and its entry point.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};

use shoal_proto::probe::MAX_PROBE_SECONDS;
use shoal_proto::units::parse_duration;

use crate::probe::{probe, ProbeOptions};
use crate::{first_contact, Remote};

/// The bulk flows' length when `--duration` does not say.
pub const DEFAULT_DURATION: &str = "4s";
/// The bulk flows' slow-start part left out when `--warmup` does not say.
pub const DEFAULT_WARMUP: &str = "1s";

/// What `shoal probe` is asked to do.
#[derive(Clone, Debug)]
pub struct ProbeRequest {
    /// The receiver's address; it must run `shoal recv --control`.
    pub receiver: String,
    /// `None`: the default identity's (a receiver on this host).
    pub pin: Option<String>,
    pub token_file: Option<PathBuf>,
    /// Each bulk flow's length, warm-up included.
    pub duration: Duration,
    /// Start of each bulk flow left out of its goodput and loaded RTT.
    pub warmup: Duration,
    /// Control round trips for the idle RTT.
    pub rtt_probes: u32,
    /// One JSON object instead of the summary.
    pub json: bool,
}

impl Default for ProbeRequest {
    fn default() -> ProbeRequest {
        let duration = |s: &str| parse_duration(s).expect("a default duration parses");
        ProbeRequest {
            receiver: String::new(),
            pin: None,
            token_file: None,
            duration: duration(DEFAULT_DURATION),
            warmup: duration(DEFAULT_WARMUP),
            rtt_probes: 20,
            json: false,
        }
    }
}

pub fn run_probe(a: ProbeRequest) -> Result<ExitCode> {
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
