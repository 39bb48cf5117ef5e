//! A run's accounting of what its records announce: files and bytes so far against the hello's
//! totals, and one connection's end marker against what that connection carried. Pure.

use anyhow::anyhow;
use shoal_common::codec::{self, Hello};

/// Files and bytes announced by records so far, checked against the hello.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    pub files: u64,
    pub bytes: u64,
}

impl Claims {
    /// `path` is only formatted when the claim is refused (no allocation per record).
    pub(crate) fn claim(
        &mut self,
        hello: &Hello,
        path: impl std::fmt::Display,
        size: u64,
    ) -> anyhow::Result<()> {
        self.files += 1;
        if self.files > hello.file_count {
            return Err(anyhow!(
                "more files than the {} the hello announced",
                hello.file_count
            ));
        }
        let remaining = hello.total_bytes - self.bytes;
        if size > remaining {
            return Err(anyhow!(
                "file \"{path}\" claims {size} bytes, but only {remaining} of the announced total remain"
            ));
        }
        self.bytes += size;
        Ok(())
    }

    /// One connection's end marker against what that connection carried (file and block
    /// records, content bytes).
    pub(crate) fn check_own_end(&self, end: codec::EndMarker) -> anyhow::Result<()> {
        if end.files != self.files || end.bytes != self.bytes {
            return Err(anyhow!(
                "end marker counts {} files / {} bytes but {} / {} arrived on this connection",
                end.files,
                end.bytes,
                self.files,
                self.bytes
            ));
        }
        Ok(())
    }
}
