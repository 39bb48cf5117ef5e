//! What every connection task shares, and the outcome of a run it reports.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use shoal_proto::codec::{Completion, Hello};
use shoal_transport::identity::Identity;
use tokio::sync::{mpsc, Semaphore};

use crate::config::ReceiverConfig;
use crate::hub;

/// What one authenticated run ended with.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run_id: String,
    pub peer: SocketAddr,
    pub mode: &'static str,
    /// The folder the run wrote into (`--dest/<run id>`, its prepared folder, or `--dest`).
    pub folder: PathBuf,
    pub completion: Completion,
}

impl RunOutcome {
    pub fn ok(&self) -> bool {
        self.completion.errors.is_empty()
    }

    /// The line `recv` prints for the run.
    pub fn line(&self) -> String {
        let c = &self.completion;
        let id = &self.run_id[..8];
        if self.ok() {
            format!(
                "run {id} from {} ({}): ok, {} files, {} bytes, receiver {:.3} s, into {}",
                self.peer,
                self.mode,
                c.files,
                c.bytes,
                c.receiver_micros as f64 / 1e6,
                self.folder.display()
            )
        } else {
            format!(
                "run {id} from {} ({}): FAILED ({} files ready in {}): {}",
                self.peer,
                self.mode,
                c.files,
                self.folder.display(),
                c.errors.join("; ")
            )
        }
    }

    /// The run as one JSON object (`recv --json`; fields in `shoal recv --help`).
    pub fn json(&self) -> serde_json::Value {
        let c = &self.completion;
        serde_json::json!({
            "event": "run",
            "run_id": self.run_id,
            "peer": self.peer.to_string(),
            "mode": self.mode,
            "status": if self.ok() { "ok" } else { "failed" },
            "files_ready": c.files,
            "bytes_ready": c.bytes,
            "receiver_seconds": c.receiver_micros as f64 / 1e6,
            "folder": self.folder.display().to_string(),
            "error": c.errors.join("; "),
        })
    }
}

/// Shared by every connection task.
pub(crate) struct Shared {
    pub identity: Identity,
    pub config: ReceiverConfig,
    pub tls: tokio_rustls::TlsAcceptor,
    pub hub: hub::Hub,
    /// `tar-tcp` baseline runs under way (`--allow-baselines`).
    pub baselines: crate::baseline::Baselines,
    pub done: mpsc::UnboundedSender<RunOutcome>,
    /// One permit per connection being served (`max_connections`).
    pub slots: Arc<Semaphore>,
    /// Connections over the limit that are being told so (bounded: past it they are dropped).
    pub refusals: Arc<Semaphore>,
}

impl Shared {
    /// Hands a finished run to the serve loop; only the run's first connection does, so a run
    /// of N connections is reported once.
    pub(crate) fn report_run(&self, hello: &Hello, peer: SocketAddr, completion: Completion) {
        if hello.conn_index != 0 {
            return;
        }
        let _ = self.done.send(RunOutcome {
            run_id: hex::encode(hello.run_id),
            peer,
            mode: hello.mode.name(),
            folder: self.hub.folder_of(&self.config, &hello.run_id),
            completion,
        });
    }
}
