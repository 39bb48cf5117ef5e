//! The matrix file: payloads, the link, axes and their Cartesian product.
//!
//! ```toml
//! [sweep]
//! runs = 5                      # runs per configuration (--runs overrides)
//! seed = 7                      # order seed (--seed overrides; random and recorded if absent)
//! timeout = "15m"               # per run (--timeout overrides; a `timeout` axis wins)
//! reference = { mode = "tcp-bundle", cc = "cubic" }   # ratio columns, per payload
//!
//! [link]                        # a local emulated link …
//! name = "sw"
//! rtt = "141ms"
//! rate = "300mbit"
//! queue = "1bdp"
//! # … or a remote receiver: receiver = "hostB:7474", pin = "sha256:…", token_file = "…"
//!
//! [payload.small]               # generated …
//! files = 65536
//! size = "4KiB"
//! dirs = 256
//! seed = 1
//! [payload.tree]                # … or an existing folder
//! path = "/data/tree"
//!
//! [axes]                        # the main product
//! payload = ["small"]
//! mode = ["tcp-bundle", "quic-bundle"]
//! cc = ["cubic", "bbr"]
//!
//! [[also]]                      # further products, appended
//! kind = ["tar-ssh", "rsync-ssh", "sftp"]
//! payload = ["small"]
//!
//! [[exclude]]                   # drop every configuration that matches all pairs
//! mode = "quic-bundle"
//! cc = "bbr"
//! ```
//!
//! Axis names: `payload` and `kind` (`shoal`, `tar-ssh`, `rsync-ssh`, `sftp`) are the sweep's
//! own; `timeout` is the run's time limit; `recv.NAME` is a `shoal recv --NAME` flag; any other
//! name is a `shoal send --NAME` flag, also given to the receiver when listed in
//! `[flags] receiver` (default: the flow-control flags both ends take). `plain = true` also
//! makes the receiver accept plain transfers. `true` means the bare flag, `false` leaves it out.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::arm::Arm;
use crate::axis::{self, AxisValue};
use crate::conditions::dest_fs::{self, DestFs};
use crate::conditions::Conditions;
use crate::linkspec::LinkSpec;
use crate::product;
use crate::quantity::Size;
use crate::schema::{self, MatrixFile, Ordered, PayloadSection};

/// Flags that `shoal recv` takes too, with the same meaning; an axis of one of these names is
/// passed to both ends.
pub const DEFAULT_RECEIVER_FLAGS: &[&str] = &[
    "max-streams",
    "stream-window",
    "conn-window",
    "sndbuf",
    "rcvbuf",
    "udp-rcvbuf",
];

/// A generated payload's seed when `[payload.NAME] seed` is not given.
pub const DEFAULT_PAYLOAD_SEED: u64 = 1;

/// A payload to send: generated from a seed, or an existing folder.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum PayloadSource {
    Generated {
        files: u64,
        size: u64,
        dirs: Option<u64>,
        seed: u64,
    },
    Existing {
        path: PathBuf,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PayloadSpec {
    pub name: String,
    pub source: PayloadSource,
}

/// One configuration: a point of the product.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Config {
    /// `c01`, `c02`, … in matrix order.
    pub id: String,
    /// Axis name → value, in matrix order (payload and kind always present).
    pub params: Vec<(String, AxisValue)>,
    /// The kind of arm (the `kind` axis).
    pub arm: Arm,
    /// The `timeout` axis, when there is one.
    pub timeout: Option<Duration>,
    /// The host conditions its axes ask for, typed (the axes stay in `params` too).
    #[serde(skip)]
    pub conditions: Conditions,
    /// Settings in effect that are not axes but differ between configurations (the
    /// congestion controller when `cc` is not an axis: TCP's host default against quinn's
    /// CUBIC), name → value; shown in the label as `[cc=quinn-cubic]`. See
    /// [`Matrix::note_cc_in_effect`].
    pub implied: Vec<(String, String)>,
}

impl Config {
    pub fn get(&self, axis: &str) -> Option<&AxisValue> {
        self.params.iter().find(|(k, _)| k == axis).map(|(_, v)| v)
    }

    /// The transport a Shoal arm runs (its `mode` axis, else `shoal send`'s default).
    pub fn shoal_mode(&self) -> String {
        self.get(axis::MODE)
            .map(|v| v.text())
            .unwrap_or_else(|| axis::DEFAULT_MODE.to_string())
    }

    /// This configuration's time limit: its `timeout` axis, else the sweep's.
    pub fn time_limit(&self, default: Duration) -> Duration {
        self.timeout.unwrap_or(default)
    }

    pub fn payload(&self) -> &str {
        match self.get(axis::PAYLOAD) {
            Some(AxisValue::Str(s)) => s,
            _ => "",
        }
    }

    /// `payload=small kind=shoal mode=tcp-bundle cc=bbr`; settings in effect that are not
    /// axes follow in brackets: `payload=small kind=shoal mode=quic-bundle [cc=quinn-cubic]`.
    pub fn label(&self) -> String {
        self.params
            .iter()
            .map(|(k, v)| format!("{k}={}", v.text()))
            .chain(self.implied.iter().map(|(k, v)| format!("[{k}={v}]")))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The congestion controller this configuration's transfer will use when no `cc` axis
    /// chooses one: QUIC modes quinn's CUBIC, TCP modes and the baselines over the link the
    /// sending host's default (`tcp_default`); `tar-local` none.
    fn cc_in_effect(&self, tcp_default: &str) -> Option<String> {
        if self.get(axis::CC).is_some() {
            return None;
        }
        match self.arm {
            Arm::Shoal => Some(if self.shoal_mode().starts_with(axis::QUIC_MODE_PREFIX) {
                axis::QUINN_DEFAULT_CC.to_string()
            } else {
                tcp_default.to_string()
            }),
            a if !a.crosses_link() => None,
            _ => Some(tcp_default.to_string()),
        }
    }

    /// Whether every pair of `sel` holds for this configuration.
    pub fn matches(&self, sel: &[(String, AxisValue)]) -> bool {
        sel.iter().all(|(k, v)| match self.get(k) {
            Some(mine) => mine.text() == v.text(),
            None => k == axis::KIND && v.text() == Arm::Shoal.name(),
        })
    }
}

/// The whole matrix file, checked.
#[derive(Clone, Debug, Serialize)]
pub struct Matrix {
    pub runs: Option<u32>,
    pub seed: Option<u64>,
    pub timeout: Option<Duration>,
    pub quiet_load: Option<f64>,
    /// `[sweep] traces`: keep every Shoal run's traces (`None`: yes).
    pub traces: Option<bool>,
    /// `[sweep] probe`: two hosts, probe the path before and after (`None`: yes).
    pub probe: Option<bool>,
    /// `[sweep] dest_fs`: the receiver's destination file system.
    pub dest_fs: DestFs,
    /// `[sweep] dest_fs_size`: bytes per run's volume (`None`: from the payload).
    pub dest_fs_size: Option<u64>,
    pub reference: Vec<(String, AxisValue)>,
    pub link: LinkSpec,
    pub payloads: Vec<PayloadSpec>,
    /// Every axis name used anywhere, in first-seen order.
    pub axes: Vec<String>,
    pub configs: Vec<Config>,
    pub receiver_flags: Vec<String>,
    /// `[binaries]`: label → a `shoal` binary, for the `shoal` axis.
    pub binaries: std::collections::BTreeMap<String, std::path::PathBuf>,
}

impl Matrix {
    pub fn payload(&self, name: &str) -> Option<&PayloadSpec> {
        self.payloads.iter().find(|p| p.name == name)
    }

    /// The `shoal` binary a configuration's `shoal` axis names (`None`: the sweep's own).
    pub fn binary(&self, cfg: &Config) -> Option<&std::path::Path> {
        let label = cfg.get(axis::SHOAL)?.text();
        self.binaries.get(&label).map(|p| p.as_path())
    }

    pub fn is_remote(&self) -> bool {
        matches!(self.link, LinkSpec::Remote(_))
    }

    /// Names the congestion controller in the label of every configuration that has no `cc`
    /// axis, when the controllers in effect differ between configurations (e.g. a `mode` axis
    /// over TCP and QUIC: the host's default, often cubic, against quinn's CUBIC, which are
    /// different implementations). `tcp_default` is the sending host's
    /// `net.ipv4.tcp_congestion_control`.
    pub fn note_cc_in_effect(&mut self, tcp_default: &str) {
        let ccs: Vec<Option<String>> = self
            .configs
            .iter()
            .map(|c| c.cc_in_effect(tcp_default))
            .collect();
        let mut distinct: Vec<&String> = ccs.iter().flatten().collect();
        distinct.sort();
        distinct.dedup();
        // Configurations whose cc axis sets it differ from those running a default, too.
        let some_set = self.configs.iter().any(|c| c.get(axis::CC).is_some());
        let differ = distinct.len() > 1 || (some_set && !distinct.is_empty());
        if !differ {
            return;
        }
        for (c, cc) in self.configs.iter_mut().zip(ccs) {
            if let Some(cc) = cc {
                c.implied.retain(|(k, _)| k != axis::CC);
                c.implied.push((axis::CC.into(), cc));
            }
        }
    }

    pub fn load(path: &std::path::Path) -> Result<Matrix> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read matrix {}", path.display()))?;
        let mut m =
            Matrix::parse(&text).with_context(|| format!("in matrix {}", path.display()))?;
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        crate::binaries::resolve(&mut m.binaries, dir);
        Ok(m)
    }

    /// [`Matrix::load`], with the reference's problem returned beside the matrix instead of
    /// as the error: the sweep reports a misspelt axis (found by the pre-flight's command-line
    /// check) before the reference that names the axis as it should be spelt.
    pub fn load_deferring_reference(
        path: &std::path::Path,
    ) -> Result<(Matrix, Option<anyhow::Error>)> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read matrix {}", path.display()))?;
        let (mut m, reference) = Matrix::parse_deferring_reference(&text)
            .with_context(|| format!("in matrix {}", path.display()))?;
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        crate::binaries::resolve(&mut m.binaries, dir);
        Ok((
            m,
            reference.map(|e| e.context(format!("in matrix {}", path.display()))),
        ))
    }

    pub fn parse(text: &str) -> Result<Matrix> {
        match Matrix::parse_deferring_reference(text)? {
            (_, Some(e)) => Err(e),
            (m, None) => Ok(m),
        }
    }

    fn parse_deferring_reference(text: &str) -> Result<(Matrix, Option<anyhow::Error>)> {
        let MatrixFile {
            sweep,
            link,
            payload,
            axes,
            also,
            exclude,
            flags,
            binaries,
        } = schema::read(text).map_err(anyhow::Error::msg)?;
        if sweep.runs == Some(0) {
            bail!("[sweep] runs must be a positive number");
        }
        let reference = sweep.reference.map(|r| r.0).unwrap_or_default();
        let link = LinkSpec::try_from(link.context("missing [link] section")?)?;
        let dest_fs = match &sweep.dest_fs {
            None => DestFs::default(),
            Some(n) => DestFs::from_name(n).with_context(|| {
                format!(
                    "[sweep] dest_fs = {n:?}: unknown (known: {})",
                    dest_fs::NAMES
                )
            })?,
        };
        if dest_fs.is_volume() && matches!(link, LinkSpec::Remote(_)) {
            bail!(
                "[sweep] dest_fs = {:?}: a remote receiver writes to its own --dest; dest_fs is for a local sweep",
                dest_fs.name()
            );
        }
        let payloads = payloads(payload.context("missing [payload.NAME]")?)?;
        let receiver_flags = match flags.and_then(|f| f.receiver) {
            Some(names) => names,
            None => DEFAULT_RECEIVER_FLAGS
                .iter()
                .map(|s| s.to_string())
                .collect(),
        };

        let mut products = vec![(
            "[axes]".to_string(),
            product::axes_of(axes.context("missing [axes] section")?, "[axes]")?,
        )];
        for (i, t) in also.into_iter().enumerate() {
            let what = format!("[[also]] #{}", i + 1);
            products.push((what.clone(), product::axes_of(t, &what)?));
        }
        let excludes: Vec<Vec<(String, AxisValue)>> = exclude.into_iter().map(|e| e.0).collect();

        let mut axes: Vec<String> = vec![axis::PAYLOAD.into(), axis::KIND.into()];
        for (_, p) in &products {
            for (k, _) in p {
                if !axes.contains(k) {
                    axes.push(k.clone());
                }
            }
        }

        let names: Vec<&str> = payloads.iter().map(|p| p.name.as_str()).collect();
        let mut configs: Vec<Config> = Vec::new();
        let mut seen = BTreeSet::new();
        for (what, product) in &products {
            for params in product::cartesian(product) {
                let point = product::normalise(params, &names, what)?;
                let config = Config {
                    id: String::new(),
                    params: point.params,
                    arm: point.arm,
                    timeout: point.timeout,
                    conditions: point.conditions,
                    implied: Vec::new(),
                };
                if excludes.iter().any(|ex| config.matches(ex)) {
                    continue;
                }
                if seen.insert(config.label()) {
                    configs.push(config);
                }
            }
        }
        if configs.is_empty() {
            bail!("the matrix has no configuration (everything excluded?)");
        }
        let width = configs.len().to_string().len().max(2);
        for (i, c) in configs.iter_mut().enumerate() {
            c.id = format!("c{:0width$}", i + 1);
        }
        let reference_problem = check_reference(&configs, &reference).err();
        if let LinkSpec::Remote(r) = &link {
            crate::remote_arms::check_arms(configs.iter().map(|c| (c.arm, c.label())), r)?;
        }
        // These act on the local namespaces, emulator and receiver process: across two hosts
        // the rows would name settings that were not in effect.
        if matches!(link, LinkSpec::Remote(_)) {
            if let Some(a) = axes
                .iter()
                .find(|a| axis::LOCAL_ONLY_AXES.contains(&a.as_str()))
            {
                bail!("axis {a}: acts on the local emulated link's namespaces, emulator and receiver; a remote receiver's sweep cannot set it (set it on the hosts themselves)");
            }
        }
        let binaries = binaries.unwrap_or_default();
        crate::binaries::check(
            &binaries,
            configs
                .iter()
                .filter_map(|c| c.get(crate::axis::SHOAL).map(|v| v.text())),
        )?;
        let m = Matrix {
            runs: sweep.runs,
            seed: sweep.seed,
            timeout: sweep.timeout.map(|t| t.value),
            quiet_load: sweep.quiet_load,
            traces: sweep.traces,
            probe: sweep.probe,
            dest_fs,
            dest_fs_size: sweep.dest_fs_size.map(|s| s.0),
            reference,
            link,
            payloads,
            axes,
            configs,
            receiver_flags,
            binaries,
        };
        Ok((m, reference_problem))
    }
}

/// A reference must pick exactly one configuration per payload it picks any of.
fn check_reference(configs: &[Config], reference: &[(String, AxisValue)]) -> Result<()> {
    if reference.is_empty() {
        return Ok(());
    }
    let sel = reference
        .iter()
        .map(|(k, v)| format!("{k}={}", v.text()))
        .collect::<Vec<_>>()
        .join(", ");
    let chosen: Vec<&Config> = configs.iter().filter(|c| c.matches(reference)).collect();
    if chosen.is_empty() {
        bail!("[sweep] reference {{ {sel} }}: no configuration matches");
    }
    for c in &chosen {
        let same: Vec<&&Config> = chosen
            .iter()
            .filter(|o| o.payload() == c.payload())
            .collect();
        if same.len() > 1 {
            bail!(
                    "[sweep] reference {{ {sel} }}: {} configurations match for payload {} ({}); name more axes so that one remains",
                    same.len(),
                    c.payload(),
                    same.iter()
                        .map(|o| format!("{} {}", o.id, o.label()))
                        .collect::<Vec<_>>()
                        .join("; ")
                );
        }
    }
    Ok(())
}

/// The `[payload.NAME]` tables, checked.
fn payloads(t: Ordered<PayloadSection>) -> Result<Vec<PayloadSpec>> {
    let mut out = Vec::new();
    for (name, p) in t.0 {
        let what = format!("[payload.{name}]");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            bail!("{what}: payload names may hold only letters, digits, '-' and '_'");
        }
        let source = match p {
            PayloadSection {
                path: Some(path),
                files: None,
                size: None,
                dirs: None,
                seed: None,
            } => PayloadSource::Existing { path },
            PayloadSection { path: Some(_), .. } => {
                bail!("{what}: path names an existing folder; files, size, dirs and seed describe a generated one (give one or the other)")
            }
            PayloadSection {
                path: None,
                files,
                size,
                dirs,
                seed,
            } => {
                let files =
                    files.with_context(|| format!("{what} needs files and size, or path"))?;
                let Size(size) = size.with_context(|| format!("{what} needs size"))?;
                if files == 0 {
                    bail!("{what} files must be positive");
                }
                if dirs == Some(0) {
                    bail!("{what} dirs must be positive");
                }
                PayloadSource::Generated {
                    files,
                    size,
                    dirs,
                    seed: seed.unwrap_or(DEFAULT_PAYLOAD_SEED),
                }
            }
        };
        out.push(PayloadSpec { name, source });
    }
    if out.is_empty() {
        bail!("no payload defined ([payload.NAME])");
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
