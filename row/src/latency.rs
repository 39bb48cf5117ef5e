//! Per-file latency: sender starts sending a file → receiver closes it, in µs, kept in an
//! HdrHistogram (3 significant digits, 1 µs to 1 hour).

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

const MAX_US: u64 = 3_600_000_000;

/// A latency histogram in µs.
#[derive(Debug, Clone)]
pub struct LatencyHistogram(Histogram<u64>);

/// The figures that go in a result row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self(Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds"))
    }
}

impl LatencyHistogram {
    /// Records one latency; values outside 1 µs..1 h are clamped into range.
    pub fn record(&mut self, us: u64) {
        self.0.saturating_record(us.clamp(1, MAX_US));
    }

    pub fn len(&self) -> u64 {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        let _ = self.0.add(&other.0);
    }

    pub fn summary(&self) -> LatencySummary {
        if self.0.is_empty() {
            return LatencySummary::default();
        }
        let ms = |q: f64| self.0.value_at_quantile(q) as f64 / 1000.0;
        LatencySummary {
            count: self.0.len(),
            p50_ms: ms(0.50),
            p90_ms: ms(0.90),
            p99_ms: ms(0.99),
            max_ms: self.0.max() as f64 / 1000.0,
        }
    }

    /// HdrHistogram V2 bytes (empty for an empty histogram).
    pub fn to_bytes(&self) -> Vec<u8> {
        if self.0.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        V2Serializer::new()
            .serialize(&self.0, &mut out)
            .expect("serializing to memory cannot fail");
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.is_empty() {
            return Ok(Self::default());
        }
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut &bytes[..])
            .map_err(|e| anyhow::anyhow!("unreadable latency histogram: {e:?}"))?;
        Ok(Self(h))
    }

    /// Writes the full distribution as CSV: `run_id,value_ms,percentile,count_at_or_below`,
    /// one row per recorded bucket, for plotting; every row carries `run_id`.
    pub fn write_distribution(&self, path: &Path, run_id: &str) -> Result<()> {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        );
        writeln!(f, "run_id,value_ms,percentile,count_at_or_below")?;
        let mut cumulative = 0u64;
        for v in self.0.iter_recorded() {
            cumulative += v.count_at_value();
            writeln!(
                f,
                "{run_id},{:.3},{:.5},{}",
                v.value_iterated_to() as f64 / 1000.0,
                v.percentile(),
                cumulative
            )?;
        }
        f.flush()
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_summarises_and_round_trips() {
        let mut h = LatencyHistogram::default();
        for ms in 1..=100u64 {
            h.record(ms * 1000);
        }
        let s = h.summary();
        assert_eq!(s.count, 100);
        assert!((s.p50_ms - 50.0).abs() < 0.1, "{s:?}");
        assert!((s.p99_ms - 99.0).abs() < 0.1, "{s:?}");
        assert!((s.max_ms - 100.0).abs() < 0.1, "{s:?}");
        let back = LatencyHistogram::from_bytes(&h.to_bytes()).unwrap();
        assert_eq!(back.summary(), s);
        let t = tempfile::tempdir().unwrap();
        h.write_distribution(&t.path().join("d.csv"), "ab12")
            .unwrap();
        let text = std::fs::read_to_string(t.path().join("d.csv")).unwrap();
        assert!(text.lines().count() > 50);
        assert!(text.starts_with("run_id,value_ms,"));
        assert!(text.lines().skip(1).all(|l| l.starts_with("ab12,")));
    }
}
