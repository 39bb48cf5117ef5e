//! `shoal path show|forget`: the path state `send` keeps per receiver.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Subcommand;
use shoal_proto::units::human_bytes;
use shoal_sender::path_state::now_unix;

use crate::start_window::store;

#[derive(Debug, Subcommand)]
pub enum PathCommand {
    /// List the saved path state: per receiver and transport, the window and min RTT the last
    /// ok run reached, its goodput and peak delivery rate, the saved window a resumed run
    /// would start from (and whether the peak, the goodput or the cwnd bounded it), and its
    /// age (fresh or expired).
    Show {
        /// Path-state folder [default: as `send --path-state`].
        #[arg(long, value_name = "DIR")]
        path_state: Option<PathBuf>,
        /// Records older than this show as expired.
        #[arg(long, default_value = crate::defaults::span(shoal_sender::path_state::DEFAULT_LIFETIME), value_parser = |v: &str| crate::args::span_in("path-state-lifetime", v))]
        path_state_lifetime: Duration,
        /// One JSON object per record.
        #[arg(long)]
        json: bool,
        /// Only the records still fresh (expired ones are pruned after each ok `send`).
        #[arg(long)]
        fresh: bool,
        /// Only the records of this receiver host (as given to `send --to`, without the port).
        #[arg(long)]
        host: Option<String>,
    },
    /// Delete one receiver's record (KEY, as `path show` prints it) or, with --all, every one.
    Forget {
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        key: Option<String>,
        #[arg(long)]
        all: bool,
        /// Path-state folder [default: as `send --path-state`].
        #[arg(long, value_name = "DIR")]
        path_state: Option<PathBuf>,
    },
}

pub fn path_command(cmd: PathCommand) -> Result<bool> {
    match cmd {
        PathCommand::Show {
            path_state,
            path_state_lifetime,
            json,
            fresh: only_fresh,
            host,
        } => {
            let store = store(&path_state);
            let records = store.list()?;
            if records.is_empty() && !json {
                println!("no path state in {}", store.dir().display());
            }
            let now = now_unix();
            let mut all_ok = true;
            for (key, record) in records {
                let wanted = |r: &shoal_sender::path_state::PathRecord| {
                    let fresh = shoal_resume::careful_resume::is_fresh(
                        r.saved_at,
                        now,
                        path_state_lifetime,
                    );
                    (fresh || !only_fresh)
                        && host.as_ref().is_none_or(|h| {
                            shoal_sender::path_state::host_of(&r.address) == h.as_str()
                        })
                };
                if matches!(&record, Ok(r) if !wanted(r)) {
                    continue;
                }
                match record {
                    Ok(r) if json => println!("{}", serde_json::to_string(&r)?),
                    Ok(r) => {
                        let age = r.age(now).unwrap_or_default();
                        let fresh = shoal_resume::careful_resume::is_fresh(
                            r.saved_at,
                            now,
                            path_state_lifetime,
                        );
                        let (window, cap) = r.saved_window();
                        let peak = r
                            .peak_delivery_bytes_per_s
                            .map_or("none".into(), |p| format!("{:.1} MB/s", p as f64 / 1e6));
                        println!(
                            "{key}: {} {} cwnd {} min RTT {:.1} ms goodput {:.1} MB/s peak delivery {peak} saved window {} (by {}), {} s old ({})",
                            r.transport,
                            r.address,
                            human_bytes(r.cwnd_bytes),
                            r.min_rtt_ms,
                            r.goodput_bytes_per_s as f64 / 1e6,
                            human_bytes(window),
                            cap.name(),
                            age.as_secs(),
                            if fresh { "fresh" } else { "expired" }
                        );
                    }
                    Err(e) => {
                        all_ok = false;
                        eprintln!("{key}: {e:#}");
                    }
                }
            }
            Ok(all_ok)
        }
        PathCommand::Forget {
            key,
            all,
            path_state,
        } => {
            let store = store(&path_state);
            if all {
                let (n, kept) = store.forget_all()?;
                println!("forgot {n} record(s) in {}", store.dir().display());
                if !kept.is_empty() {
                    anyhow::bail!(
                        "could not remove {} entry(ies): {}",
                        kept.len(),
                        kept.join("; ")
                    );
                }
            } else if let Some(key) = key {
                store.forget(&key)?;
                println!("forgot {key}");
            }
            Ok(true)
        }
    }
}
