//! `shoal demo`: the loopback main job — generate a small tree, transfer it, verify it, print
//! the figures. Everything runs in this process over a real TLS/TCP loopback socket, with no
//! added delay or rate limit (the emulated long link is `shoal link`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use shoal_pipeline::reader::ReaderConfig;
use shoal_pipeline::tree::{self, GenSpec};
use shoal_pipeline::verify::{self, Manifest};
use shoal_proto::units::parse_size;
use shoal_transport::config::Mode;
use shoal_transport::identity::Identity;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Number of files to generate.
    #[arg(long, default_value_t = 2000)]
    files: u64,
    /// Size of each file.
    #[arg(long, default_value = "4KiB", value_parser = parse_size)]
    size: u64,
    /// Working folder (source, destination, identity, runs.csv) [default: a new folder under
    /// results/].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the generated source and the received tree (by default they are removed after
    /// verification; the row and the identity stay).
    #[arg(long)]
    keep: bool,
    /// Transport mode.
    #[arg(long, default_value = crate::defaults::SEND.mode.name(), value_parser = crate::mode_parser())]
    mode: Mode,
}

pub async fn run(a: DemoArgs) -> Result<ExitCode> {
    let dir = a.dir.unwrap_or_else(|| {
        PathBuf::from("results").join(format!(
            "demo-{}",
            shoal_row::metrics::utc_timestamp_for_names()
        ))
    });
    println!(
        "demo: sender and receiver in this process over loopback (127.0.0.1), no added delay or \
         rate limit; for a long link see `shoal link up --help`"
    );
    let (src, dst) = (dir.join("src"), dir.join("dst"));
    let seed = 1;
    println!(
        "generating {} files of {} bytes in {}",
        a.files,
        a.size,
        src.display()
    );
    let spec = GenSpec {
        files: a.files,
        size: a.size,
        dirs: None,
        seed,
    };
    tree::generate(&src, &spec)?;
    let identity = Identity::load_or_create(&dir.join("identity"))?;
    let (pin, token) = (identity.pin, identity.token.clone());
    let receiver = shoal_receiver::Receiver::bind(
        "127.0.0.1:0".parse().expect("address"),
        identity,
        shoal_receiver::ReceiverConfig {
            dest: dst.clone(),
            once: true,
            ..Default::default()
        },
    )
    .await?;
    let addr = receiver.local_addr()?;
    let serving = tokio::spawn(receiver.serve());
    let row = shoal_sender::send(&shoal_sender::SendConfig {
        to: addr.to_string(),
        src: src.clone(),
        mode: a.mode,
        plain: false,
        pin,
        token,
        reader: ReaderConfig::default(),
        flow: Default::default(),
        connect_timeout: Duration::from_secs(10),
        timeout: Some(Duration::from_secs(600)),
        latency_out: None,
        cc: None,
        connections: 1,
        block_size: None,
        stats_interval: None,
        stats_out: None,
        receiver_series_out: None,
        progress: None,
        stop_on_ctrl_c: false,
        run_id: None,
        start: Default::default(),
        provenance: crate::provenance(),
        hooks: Default::default(),
    })
    .await;
    if row.is_ok() {
        println!(
            "transfer: {} files, {} in {:.3} s = {:.2} MB/s ({:.0} files/s) over {}; receiver {:.3} s; \
             peak RSS of this process (sender and receiver together) {}",
            row.files,
            shoal_proto::units::human_bytes(row.bytes),
            row.seconds,
            row.mb_per_s,
            row.files_per_s,
            row.mode,
            row.receiver_seconds.unwrap_or_default(),
            shoal_proto::units::human_bytes(row.sender_peak_rss_bytes),
        );
    } else {
        println!("transfer: {}", row.summary_line());
    }
    let _ = serving.await;
    // The receiver wrote the run into its own folder, dst/<run id>: verify that one.
    let received = dst.join(&row.run_id);
    let diff = verify::compare(&Manifest::build(&src, 0)?, &Manifest::build(&received, 0)?);
    let csv = dir.join("runs.csv");
    row.append_csv(&csv)?;
    if !diff.is_identical() {
        bail!("verification failed: {}", diff.summary());
    }
    println!("verify: identical (SHA-256 of every file)");
    println!("row appended to {}", csv.display());
    if a.keep {
        println!("kept {} and {}", src.display(), received.display());
    } else {
        std::fs::remove_dir_all(&src)?;
        std::fs::remove_dir_all(&dst)?;
        println!("removed the source and received trees (--keep keeps them)");
    }
    if !row.is_ok() {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
