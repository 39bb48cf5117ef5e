//! Row assembly for one run: the RunRow fields the sweep fills when `shoal send` printed no
//! row (baselines, killed runs), what the transfer reported, and the verdict from verification.

use shoal_row::metrics;

use crate::baseline;
use crate::linkctx::LinkCtx;
use crate::payload::{Payload, Verification};
use crate::transfer::Outcome;
use shoal_matrix::arm::Arm;
use shoal_matrix::axis::{self, AxisValue};
use shoal_matrix::matrix::Config;
use shoal_matrix::plan::run_id;
use shoal_report::columns::{col, f3, Row};

/// What a run that printed no row is described by.
pub struct Unreported<'a> {
    pub cfg: &'a Config,
    pub payload: &'a Payload,
    pub out: &'a Outcome,
    pub link: Option<&'a LinkCtx>,
    /// When the run started.
    pub timestamp: String,
    /// The 1-minute load when it started.
    pub load: f64,
}

/// The RunRow fields of a run that printed none: baselines, and runs that were killed.
pub fn put_unreported(row: &mut Row, u: &Unreported) {
    row.set(col::TIMESTAMP, u.timestamp.clone());
    row.set(col::RUN_ID, run_id());
    row.set(
        col::MODE,
        match u.cfg.arm {
            Arm::Shoal => u.cfg.shoal_mode(),
            a => a.name().to_string(),
        },
    );
    row.set(
        col::TLS,
        (u.cfg.arm.is_baseline() || !matches!(u.cfg.get(axis::PLAIN), Some(AxisValue::Bool(true))))
            .to_string(),
    );
    row.set(col::FILES, u.payload.files.to_string());
    row.set(col::BYTES, u.payload.bytes.to_string());
    row.set(col::LOAD_1M_START, format!("{:.2}", u.load));
    row.set(col::KERNEL, metrics::kernel_release());
    row.set(col::HOST, metrics::host_name());
    if let Some(e) = &u.out.exit {
        if e.max_rss_bytes > 0 {
            row.set(col::SENDER_PEAK_RSS_BYTES, e.max_rss_bytes.to_string());
            row.set(col::SENDER_CPU_SECONDS, f3(e.cpu_seconds));
        }
    }
    if let Some(rss) = u.out.receiver_peak_rss_bytes {
        row.set(col::RECEIVER_PEAK_RSS_BYTES, rss.to_string());
    }
    if let Some(l) = &u.link {
        if u.cfg.arm.is_baseline() && u.cfg.arm.crosses_link() {
            row.set(col::CC, l.default_cc.clone());
            row.set(col::CC_IMPL, shoal_report::legacy::LINUX);
        }
        row.set(
            col::RECEIVER,
            match u.cfg.arm {
                Arm::Shoal => l.rcv_addr.clone(),
                Arm::TarLocal => "local".into(),
                Arm::TarTcp => format!("{}:{}", l.rcv_addr, baseline::TAR_TCP_PORT),
                Arm::Iperf3 => format!("{}:{}", l.rcv_addr, shoal_matrix::iperf3::PORT),
                Arm::TarSsh | Arm::RsyncSsh | Arm::Sftp | Arm::Rclone => {
                    format!("{}:22", l.rcv_addr)
                }
            },
        );
    }
}

/// What the transfer itself reported: its status and error, exit, time-out, the receiver's
/// report and the command line.
pub fn put_outcome(row: &mut Row, out: &Outcome) {
    let send_status = row
        .get(col::STATUS)
        .map(str::to_string)
        .unwrap_or_else(|| if out.error.is_empty() { "ok" } else { "failed" }.into());
    row.set(col::SEND_STATUS, send_status);
    row.set(col::SEND_ERROR, out.error.clone());
    row.set(
        col::EXIT_CODE,
        out.exit.as_ref().map(|e| e.describe()).unwrap_or_default(),
    );
    row.set(col::TIMED_OUT, out.timed_out.to_string());
    row.set(col::RECEIVER_REPORT, out.receiver_report.clone());
    if let Some(cpu) = out.receiver_cpu_seconds {
        row.set(col::RECEIVER_CPU_SECONDS, f3(cpu));
    }
    row.set(col::COMMAND, out.command.clone());
    for (c, v) in &out.cols {
        row.set(*c, v.clone());
    }
}

/// Verification's columns, and the run's verdict: ok only when the transfer reported no error
/// and the destination is identical to the source; a failed run carries no speed.
pub fn put_verdict(
    row: &mut Row,
    out: &Outcome,
    v: &Verification,
    payload: &Payload,
    seconds: f64,
) {
    row.set(col::VERIFIED, v.identical.to_string());
    row.set(col::VERIFY_RESULT, v.summary.clone());
    row.set(col::VERIFY_SECONDS, f3(v.seconds));
    row.set(col::FILES_VERIFIED, v.files_ok.to_string());
    row.set(col::BYTES_VERIFIED, v.bytes_ok.to_string());
    if !out.error.is_empty() || !v.identical {
        row.set(
            col::PARTIAL_MB_PER_S,
            f3(if seconds > 0.0 {
                v.bytes_ok as f64 / 1e6 / seconds
            } else {
                0.0
            }),
        );
    }
    let (verified_ok, verify_note) = (v.identical, &v.summary);
    let ok = out.error.is_empty() && verified_ok;
    row.set(col::STATUS, if ok { "ok" } else { "failed" });
    let error = if !out.error.is_empty() {
        if verified_ok {
            out.error.clone()
        } else {
            format!("{}; destination: {verify_note}", out.error)
        }
    } else if !verified_ok {
        format!("verification failed: {verify_note}")
    } else {
        String::new()
    };
    row.set(col::ERROR, error);
    if ok {
        let f = payload.files as f64;
        if out.json.is_none() {
            row.set(col::FILES_READY, payload.files.to_string());
            row.set(col::BYTES_READY, payload.bytes.to_string());
        }
        row.set(col::MB_PER_S, f3(payload.bytes as f64 / 1e6 / seconds));
        row.set(col::FILES_PER_S, format!("{:.1}", f / seconds));
    } else {
        // A failed run never carries a speed.
        row.set(col::MB_PER_S, "0");
        row.set(col::FILES_PER_S, "0");
    }
}
