//! The defaults `--help` shows, taken from the libraries' `Default`s and written as a user
//! types them (`20MiB`, `1h`): the flags hold no default of their own.

use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use shoal_proto::units::{format_size, format_span};
use shoal_receiver::ReceiverConfig;
use shoal_sender::SendConfig;
use shoal_transport::config::FlowConfig;

pub(crate) static SEND: LazyLock<SendConfig> = LazyLock::new(SendConfig::default);
pub(crate) static RECV: LazyLock<ReceiverConfig> = LazyLock::new(ReceiverConfig::default);
pub(crate) static FLOW: LazyLock<FlowConfig> = LazyLock::new(FlowConfig::default);

/// A byte count as `--help` shows it (`20MiB`).
pub(crate) fn size(bytes: u64) -> &'static str {
    text(format_size(bytes))
}

/// A duration as `--help` shows it (`1h`, `10s`).
pub(crate) fn span(d: Duration) -> &'static str {
    text(format_span(d))
}

/// clap keeps defaults as `&'static str`: each distinct text is kept once for the process.
pub(crate) fn text(text: String) -> &'static str {
    static KEPT: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = kept.iter().find(|s| **s == text) {
        return s;
    }
    let s: &'static str = Box::leak(text.into_boxed_str());
    kept.push(s);
    s
}
