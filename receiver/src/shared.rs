//! What every connection task shares, and the outcome of a run it reports.

use std::net::SocketAddr;
use std::sync::Arc;

use shoal_common::codec::{Completion, Hello};
use shoal_common::identity::Identity;
use tokio::sync::{mpsc, Semaphore};

use crate::config::ReceiverConfig;
use crate::hub;

/// What one authenticated run ended with.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run_id: String,
    pub peer: SocketAddr,
    pub mode: &'static str,
    pub completion: Completion,
}

impl RunOutcome {
    pub fn ok(&self) -> bool {
        self.completion.errors.is_empty()
    }
}

/// Shared by every connection task.
pub(crate) struct Shared {
    pub identity: Identity,
    pub config: ReceiverConfig,
    pub tls: tokio_rustls::TlsAcceptor,
    pub hub: hub::Hub,
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
            completion,
        });
    }
}
