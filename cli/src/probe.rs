//! `shoal probe`: its arguments, handed to shoal-sweep as a [`ProbeRequest`] (whose `Default`
//! and constants hold the defaults shown here).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use shoal_proto::units::parse_duration;
use shoal_remote::probe_request::{self, ProbeRequest};

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
    #[arg(long, default_value = probe_request::DEFAULT_DURATION, value_parser = parse_duration)]
    pub duration: Duration,
    /// Start of each bulk flow left out of its goodput and loaded RTT (slow start); reported
    /// apart as the whole flow's goodput.
    #[arg(long, default_value = probe_request::DEFAULT_WARMUP, value_parser = parse_duration)]
    pub warmup: Duration,
    /// Control round trips for the idle RTT (min, median and max are reported).
    #[arg(long, default_value_t = ProbeRequest::default().rtt_probes, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub rtt_probes: u32,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
}

impl From<ProbeArgs> for ProbeRequest {
    fn from(a: ProbeArgs) -> ProbeRequest {
        ProbeRequest {
            receiver: a.receiver,
            pin: a.pin,
            token_file: a.token_file,
            duration: a.duration,
            warmup: a.warmup,
            rtt_probes: a.rtt_probes,
            json: a.json,
        }
    }
}
