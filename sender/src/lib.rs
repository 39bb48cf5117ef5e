//! Shoal sender: walks a source tree, runs the shared read-ahead pipeline, and moves the files
//! over a transport; returns one result row whether the run succeeded or failed.

mod bundle;
mod tls;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use shoal_common::codec::{Completion, Hello, Reply};
use shoal_common::config::Mode;
use shoal_common::identity::Pin;
use shoal_common::metrics;
use shoal_common::pipeline::reader::{Reader, ReaderConfig, WorkQueue};
use shoal_common::row::RunRow;
use shoal_common::tree::SourceTree;

/// Sender settings.
#[derive(Debug, Clone)]
pub struct SendConfig {
    /// Receiver address, `host:port`.
    pub to: String,
    pub src: PathBuf,
    pub mode: Mode,
    pub pin: Pin,
    pub token: Vec<u8>,
    pub reader: ReaderConfig,
    pub connect_timeout: Duration,
    /// Longest the whole run may take; `None` waits as long as the receiver keeps talking.
    pub timeout: Option<Duration>,
}

/// What a successful run measured.
struct Measured {
    completion: Completion,
    seconds: f64,
}

/// Runs one transfer and returns its row (status `ok` only if the receiver reported every
/// file ready).
pub async fn send(config: &SendConfig) -> RunRow {
    let cpu_start = metrics::cpu_seconds();
    let mut row = RunRow {
        timestamp: metrics::utc_timestamp(),
        run_id: String::new(),
        mode: config.mode.to_string(),
        tls: true,
        load_1m_start: metrics::load_avg_1m(),
        read_ahead_bytes: config.reader.budget as u64,
        receiver: config.to.clone(),
        kernel: metrics::kernel_release(),
        host: metrics::host_name(),
        ..Default::default()
    };
    let run_id: [u8; 16] = rand::random();
    row.run_id = hex::encode(run_id);
    let started = Instant::now();
    let result = match SourceTree::walk(&config.src) {
        Ok(tree) => {
            let tree = Arc::new(tree);
            row.files = tree.files.len() as u64;
            row.bytes = tree.total_bytes;
            row.skipped_symlinks = tree.skipped_symlinks;
            let work = transfer(config, run_id, tree);
            match config.timeout {
                Some(limit) => tokio::time::timeout(limit, work)
                    .await
                    .unwrap_or_else(|_| Err(anyhow!("timed out after {} s", limit.as_secs_f64()))),
                None => work.await,
            }
        }
        Err(e) => Err(e),
    };
    row.sender_cpu_seconds = metrics::cpu_seconds() - cpu_start;
    row.sender_peak_rss_bytes = metrics::peak_rss_bytes();
    match result {
        Ok(m) => {
            let c = &m.completion;
            row.seconds = m.seconds;
            row.files_ready = c.files;
            row.bytes_ready = c.bytes;
            row.receiver_seconds = c.receiver_micros as f64 / 1e6;
            row.fsync_seconds = c.fsync_micros as f64 / 1e6;
            row.receiver_peak_rss_bytes = c.peak_rss;
            row.mb_per_s = row.bytes as f64 / 1e6 / m.seconds;
            row.files_per_s = row.files as f64 / m.seconds;
            row.status = "ok".into();
        }
        Err(e) => {
            row.seconds = started.elapsed().as_secs_f64();
            row.status = "failed".into();
            row.error = format!("{e:#}");
        }
    }
    row
}

/// Connects, streams the tree and waits for the completion report. Timing starts when the
/// sender starts connecting and ends when the report arrives.
async fn transfer(
    config: &SendConfig,
    run_id: [u8; 16],
    tree: Arc<SourceTree>,
) -> Result<Measured> {
    let hello = Hello {
        run_id,
        token: config.token.clone(),
        mode: config.mode,
        file_count: tree.files.len() as u64,
        total_bytes: tree.total_bytes,
        conn_index: 0,
        conn_count: 1,
    };
    let queue = Arc::new(WorkQueue::new(tree));
    // The reader starts filling its budget while the connection is being set up.
    let reader = Reader::spawn(queue, config.reader)?;
    let t0 = Instant::now();
    let completion = match config.mode {
        Mode::TcpBundle => {
            let stream = tls::connect(&config.to, config.pin, config.connect_timeout).await?;
            bundle::run(stream, &hello, reader).await?
        }
    };
    Ok(Measured {
        completion,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Turns the receiver's final reply into the run's result.
fn final_reply(reply: Option<Reply>) -> Result<Completion> {
    match reply {
        Some(Reply::Completion(c)) if c.errors.is_empty() => Ok(c),
        Some(Reply::Completion(c)) => bail!("receiver reported: {}", c.errors.join("; ")),
        Some(Reply::Error(msg)) => bail!("receiver refused the run: {msg}"),
        Some(Reply::Ack(_)) => bail!("receiver sent an acknowledgement where a report was due"),
        None => Err(anyhow!(
            "receiver closed the connection without a completion report"
        )),
    }
    .context("transfer failed")
}
