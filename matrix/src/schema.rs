//! The matrix file as TOML, read with serde: every section and key typed, unknown ones refused
//! (`deny_unknown_fields`), tables kept in the order they were written. An error names its
//! line, its section and its key with the value as written.

use std::fmt;
use std::marker::PhantomData;
use std::path::PathBuf;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::axis::AxisValue;
use crate::quantity::{Backend, LinkLoss, LinkQueue, LinkRate, LinkTime, Size, Spelled, TimeLimit};

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixFile {
    #[serde(default)]
    pub sweep: SweepSection,
    pub link: Option<LinkSection>,
    pub payload: Option<Ordered<PayloadSection>>,
    pub axes: Option<Ordered<AxisValues>>,
    #[serde(default)]
    pub also: Vec<Ordered<AxisValues>>,
    #[serde(default)]
    pub exclude: Vec<Ordered<AxisValue>>,
    pub flags: Option<FlagsSection>,
    /// `[binaries]`: label → another `shoal` binary, for the `shoal` axis.
    pub binaries: Option<std::collections::BTreeMap<String, PathBuf>>,
}

/// `[sweep]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSection {
    pub runs: Option<u32>,
    pub seed: Option<u64>,
    pub timeout: Option<Spelled<TimeLimit>>,
    pub reference: Option<Ordered<AxisValue>>,
    pub quiet_load: Option<f64>,
    /// Keep every Shoal run's traces under `OUT/traces/` (default true).
    pub traces: Option<bool>,
    /// Two hosts: probe the path before the first run and after the last (default true).
    pub probe: Option<bool>,
    /// The receiver's destination file system (`crate::conditions::dest_fs`; default `dir`).
    pub dest_fs: Option<String>,
    /// Size of each run's volume (default from the payload).
    pub dest_fs_size: Option<Size>,
}

/// `[link]`: an emulated link's settings, or a remote receiver's (`receiver` set).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSection {
    pub name: Option<String>,
    pub rtt: Option<Spelled<LinkTime>>,
    pub rate: Option<Spelled<LinkRate>>,
    pub down_rate: Option<Spelled<LinkRate>>,
    pub queue: Option<Spelled<LinkQueue>>,
    pub loss: Option<Spelled<LinkLoss>>,
    pub backend: Option<Backend>,
    pub seed: Option<u64>,
    pub offload: Option<bool>,
    /// Max of `tcp_rmem`/`tcp_wmem` in both namespaces (`shoal link up --tcp-mem-max`).
    pub tcp_mem_max: Option<Size>,
    pub check: Option<bool>,
    pub receiver: Option<String>,
    pub pin: Option<String>,
    pub token_file: Option<PathBuf>,
    /// Remote receiver: the `user@host` the ssh baselines log in to (docs/two-hosts.md).
    pub ssh: Option<String>,
    /// Options given to ssh and sftp before the target (e.g. `["-i", "KEY"]`).
    pub ssh_opts: Option<Vec<String>>,
}

impl LinkSection {
    /// The emulated-link keys given (a remote receiver's `[link]` takes none of them).
    pub fn emulated_keys(&self) -> Vec<&'static str> {
        [
            ("name", self.name.is_some()),
            ("rtt", self.rtt.is_some()),
            ("rate", self.rate.is_some()),
            ("down_rate", self.down_rate.is_some()),
            ("queue", self.queue.is_some()),
            ("loss", self.loss.is_some()),
            ("backend", self.backend.is_some()),
            ("seed", self.seed.is_some()),
            ("offload", self.offload.is_some()),
            ("tcp_mem_max", self.tcp_mem_max.is_some()),
            ("check", self.check.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, given)| given.then_some(k))
        .collect()
    }
}

/// `[payload.NAME]`: generated (`files`, `size`, …) or an existing folder (`path`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayloadSection {
    pub path: Option<PathBuf>,
    pub files: Option<u64>,
    pub size: Option<Size>,
    pub dirs: Option<u64>,
    pub seed: Option<u64>,
}

/// `[flags]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlagsSection {
    pub receiver: Option<Vec<String>>,
}

/// A table read in the order it was written: name → value.
#[derive(Debug)]
pub struct Ordered<T>(pub Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of name = value pairs")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Ordered<T>, A::Error> {
                let mut v = Vec::new();
                while let Some((k, x)) = m.next_entry::<String, T>()? {
                    v.push((k, x));
                }
                Ok(Ordered(v))
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

impl<'de> Deserialize<'de> for AxisValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AxisVisitor)
    }
}

/// The values of one axis: a list, or one value alone.
#[derive(Debug)]
pub struct AxisValues(pub Vec<AxisValue>);

impl<'de> Deserialize<'de> for AxisValues {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = AxisValues;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of strings, numbers or booleans, or one of them")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<AxisValues, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = s.next_element::<AxisValue>()? {
                    v.push(x);
                }
                Ok(AxisValues(v))
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<AxisValues, E> {
                AxisVisitor.visit_bool(b).map(|v| AxisValues(vec![v]))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<AxisValues, E> {
                AxisVisitor.visit_i64(n).map(|v| AxisValues(vec![v]))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<AxisValues, E> {
                AxisVisitor.visit_u64(n).map(|v| AxisValues(vec![v]))
            }
            fn visit_f64<E: de::Error>(self, x: f64) -> Result<AxisValues, E> {
                AxisVisitor.visit_f64(x).map(|v| AxisValues(vec![v]))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<AxisValues, E> {
                AxisVisitor.visit_str(s).map(|v| AxisValues(vec![v]))
            }
        }
        d.deserialize_any(V)
    }
}

struct AxisVisitor;

impl Visitor<'_> for AxisVisitor {
    type Value = AxisValue;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string, number or boolean")
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<AxisValue, E> {
        Ok(AxisValue::Bool(b))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<AxisValue, E> {
        Ok(AxisValue::Int(n))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<AxisValue, E> {
        i64::try_from(n)
            .map(AxisValue::Int)
            .map_err(|_| E::custom(format!("{n} is too large")))
    }
    fn visit_f64<E: de::Error>(self, x: f64) -> Result<AxisValue, E> {
        Ok(AxisValue::Float(x))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<AxisValue, E> {
        Ok(AxisValue::Str(s.to_string()))
    }
}

/// Reads `text` as a matrix file; an error says where: `line 12, [payload.big] size =
/// "4 potatoes": …`.
pub fn read(text: &str) -> Result<MatrixFile, String> {
    toml::from_str(text).map_err(|e| located(text, &e))
}

/// The error's message after its place in `text`: its line, the section it is in and the
/// line itself (key and value as written).
fn located(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim();
    let Some(span) = e.span() else {
        return message.to_string();
    };
    let start = span.start.min(text.len());
    let line_no = text[..start].matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("").trim();
    // The section: the nearest table header above (none when the error is on one).
    let section = if line.starts_with('[') {
        None
    } else {
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        text[..line_start]
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with('['))
    };
    match section {
        Some(s) => format!("line {line_no}, {s} {line}: {message}"),
        None => format!("line {line_no}, {line}: {message}"),
    }
}
