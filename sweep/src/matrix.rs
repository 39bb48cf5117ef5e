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

/// Flags that `shoal recv` takes too, with the same meaning; an axis of one of these names is
/// passed to both ends.
pub const DEFAULT_RECEIVER_FLAGS: &[&str] = &[
    "max-streams",
    "stream-window",
    "conn-window",
    "sndbuf",
    "rcvbuf",
];

/// The kinds of arm a configuration can be.
pub const KINDS: &[&str] = &[
    "shoal",
    "tar-ssh",
    "rsync-ssh",
    "sftp",
    "tar-tcp",
    "tar-local",
];

/// Baseline kinds that run over ssh to the sshd the sweep starts in the receiver namespace.
/// (`tar-tcp` is tar over one plain TCP connection across the link, socat at both ends: what
/// the link allows this payload; `tar-local` is `tar | tar` on this host: what its disk does
/// without any network.)
pub const SSH_KINDS: &[&str] = &["tar-ssh", "rsync-ssh", "sftp"];

/// Axes that apply to a baseline arm (all others are Shoal flags and are dropped).
const BASELINE_AXES: &[&str] = &["payload", "kind", "timeout"];

/// One value on an axis, as written in the matrix.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AxisValue {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl AxisValue {
    fn from_toml(v: &toml::Value, what: &str) -> Result<AxisValue> {
        Ok(match v {
            toml::Value::String(s) => AxisValue::Str(s.clone()),
            toml::Value::Integer(i) => AxisValue::Int(*i),
            toml::Value::Float(f) => AxisValue::Float(*f),
            toml::Value::Boolean(b) => AxisValue::Bool(*b),
            other => bail!("{what}: values must be strings, numbers or booleans, not {other}"),
        })
    }

    /// The value as text (a flag argument, a CSV cell).
    pub fn text(&self) -> String {
        match self {
            AxisValue::Str(s) => s.clone(),
            AxisValue::Int(i) => i.to_string(),
            AxisValue::Float(f) => f.to_string(),
            AxisValue::Bool(b) => b.to_string(),
        }
    }
}

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

/// The link the runs cross.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum LinkSpec {
    /// A local emulated link brought up (and torn down) by the sweep.
    Emulated {
        name: String,
        rtt: String,
        rate: String,
        down_rate: Option<String>,
        queue: String,
        loss: String,
        backend: String,
        seed: u64,
        offload: bool,
        /// Run `shoal link check` before the first run (its result goes in meta.json).
        check: bool,
    },
    /// A `shoal recv` already running on another host.
    Remote {
        receiver: String,
        pin: Option<String>,
        token_file: Option<PathBuf>,
    },
}

/// One configuration: a point of the product.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Config {
    /// `c01`, `c02`, … in matrix order.
    pub id: String,
    /// Axis name → value, in matrix order (payload and kind always present).
    pub params: Vec<(String, AxisValue)>,
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

    pub fn kind(&self) -> &str {
        match self.get("kind") {
            Some(AxisValue::Str(s)) => s,
            _ => "shoal",
        }
    }

    pub fn payload(&self) -> &str {
        match self.get("payload") {
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
        if self.get("cc").is_some() {
            return None;
        }
        match self.kind() {
            "shoal" => {
                let mode = self.get("mode").map(|v| v.text()).unwrap_or_default();
                Some(if mode.starts_with("quic") {
                    "quinn-cubic".to_string()
                } else {
                    tcp_default.to_string()
                })
            }
            "tar-local" => None,
            _ => Some(tcp_default.to_string()),
        }
    }

    /// Whether every pair of `sel` holds for this configuration.
    pub fn matches(&self, sel: &[(String, AxisValue)]) -> bool {
        sel.iter().all(|(k, v)| match self.get(k) {
            Some(mine) => mine.text() == v.text(),
            None => k == "kind" && v.text() == "shoal",
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
    pub reference: Vec<(String, AxisValue)>,
    pub link: LinkSpec,
    pub payloads: Vec<PayloadSpec>,
    /// Every axis name used anywhere, in first-seen order.
    pub axes: Vec<String>,
    pub configs: Vec<Config>,
    pub receiver_flags: Vec<String>,
}

impl Matrix {
    pub fn payload(&self, name: &str) -> Option<&PayloadSpec> {
        self.payloads.iter().find(|p| p.name == name)
    }

    pub fn is_remote(&self) -> bool {
        matches!(self.link, LinkSpec::Remote { .. })
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
        let some_set = self.configs.iter().any(|c| c.get("cc").is_some());
        let differ = distinct.len() > 1 || (some_set && !distinct.is_empty());
        if !differ {
            return;
        }
        for (c, cc) in self.configs.iter_mut().zip(ccs) {
            if let Some(cc) = cc {
                c.implied.retain(|(k, _)| k != "cc");
                c.implied.push(("cc".into(), cc));
            }
        }
    }

    pub fn load(path: &std::path::Path) -> Result<Matrix> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read matrix {}", path.display()))?;
        Matrix::parse(&text).with_context(|| format!("in matrix {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Matrix> {
        let doc: toml::Table = toml::from_str(text).context("not valid TOML")?;
        for key in doc.keys() {
            if ![
                "sweep", "link", "payload", "axes", "also", "exclude", "flags",
            ]
            .contains(&key.as_str())
            {
                bail!("unknown section [{key}] (known: sweep, link, payload, axes, also, exclude, flags)");
            }
        }
        let empty = toml::Table::new();
        let sweep = table(&doc, "sweep")?.unwrap_or(&empty);
        check_keys(
            sweep,
            "[sweep]",
            &["runs", "seed", "timeout", "reference", "quiet_load"],
        )?;
        let runs = match sweep.get("runs") {
            Some(v) => Some(
                u32::try_from(int(v, "[sweep] runs")?)
                    .ok()
                    .filter(|n| *n > 0)
                    .context("[sweep] runs must be a positive number")?,
            ),
            None => None,
        };
        let seed = match sweep.get("seed") {
            Some(v) => {
                Some(u64::try_from(int(v, "[sweep] seed")?).context("[sweep] seed must be ≥ 0")?)
            }
            None => None,
        };
        let timeout = match sweep.get("timeout") {
            Some(v) => Some(duration(v, "[sweep] timeout")?),
            None => None,
        };
        let quiet_load = match sweep.get("quiet_load") {
            Some(toml::Value::Float(f)) => Some(*f),
            Some(toml::Value::Integer(i)) => Some(*i as f64),
            Some(_) => bail!("[sweep] quiet_load must be a number"),
            None => None,
        };
        let reference = match sweep.get("reference") {
            Some(toml::Value::Table(t)) => t
                .iter()
                .map(|(k, v)| Ok((k.clone(), AxisValue::from_toml(v, "[sweep] reference")?)))
                .collect::<Result<Vec<_>>>()?,
            Some(_) => bail!("[sweep] reference must be a table, e.g. {{ mode = \"tcp-bundle\" }}"),
            None => Vec::new(),
        };

        let link = parse_link(table(&doc, "link")?.context("missing [link] section")?)?;
        let payloads = parse_payloads(table(&doc, "payload")?.context("missing [payload.NAME]")?)?;

        let receiver_flags = match table(&doc, "flags")? {
            Some(t) => {
                check_keys(t, "[flags]", &["receiver"])?;
                match t.get("receiver") {
                    Some(toml::Value::Array(a)) => a
                        .iter()
                        .map(|v| {
                            v.as_str()
                                .map(str::to_string)
                                .context("[flags] receiver must list flag names")
                        })
                        .collect::<Result<Vec<_>>>()?,
                    Some(_) => bail!("[flags] receiver must be a list of flag names"),
                    None => default_receiver_flags(),
                }
            }
            None => default_receiver_flags(),
        };

        let mut products = Vec::new();
        products.push(parse_axes(
            table(&doc, "axes")?.context("missing [axes] section")?,
            "[axes]",
        )?);
        if let Some(also) = doc.get("also") {
            let arr = also
                .as_array()
                .context("[[also]] must be an array of tables")?;
            for (i, t) in arr.iter().enumerate() {
                let t = t.as_table().context("[[also]] entries must be tables")?;
                products.push(parse_axes(t, &format!("[[also]] #{}", i + 1))?);
            }
        }
        let mut excludes = Vec::new();
        if let Some(ex) = doc.get("exclude") {
            for t in ex
                .as_array()
                .context("[[exclude]] must be an array of tables")?
            {
                let t = t.as_table().context("[[exclude]] entries must be tables")?;
                excludes.push(
                    t.iter()
                        .map(|(k, v)| Ok((k.clone(), AxisValue::from_toml(v, "[[exclude]]")?)))
                        .collect::<Result<Vec<_>>>()?,
                );
            }
        }

        let mut axes: Vec<String> = vec!["payload".into(), "kind".into()];
        for p in &products {
            for (k, _) in p {
                if !axes.contains(k) {
                    axes.push(k.clone());
                }
            }
        }

        let mut configs: Vec<Config> = Vec::new();
        let mut seen = BTreeSet::new();
        for product in &products {
            for params in cartesian(product) {
                let params = normalise(params, &payloads)?;
                let probe = Config {
                    id: String::new(),
                    params: params.clone(),
                    implied: Vec::new(),
                };
                if excludes.iter().any(|ex| probe.matches(ex)) {
                    continue;
                }
                if seen.insert(probe.label()) {
                    configs.push(Config {
                        id: String::new(),
                        params,
                        implied: Vec::new(),
                    });
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
        if !reference.is_empty() {
            let sel = reference
                .iter()
                .map(|(k, v)| format!("{k}={}", v.text()))
                .collect::<Vec<_>>()
                .join(", ");
            let chosen: Vec<&Config> = configs.iter().filter(|c| c.matches(&reference)).collect();
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
        }
        if matches!(link, LinkSpec::Remote { .. }) {
            if let Some(c) = configs.iter().find(|c| c.kind() != "shoal") {
                bail!(
                    "{}: baseline arms need the local emulated link (their receiving end runs in the receiver namespace)",
                    c.label()
                );
            }
        }
        Ok(Matrix {
            runs,
            seed,
            timeout,
            quiet_load,
            reference,
            link,
            payloads,
            axes,
            configs,
            receiver_flags,
        })
    }
}

fn default_receiver_flags() -> Vec<String> {
    DEFAULT_RECEIVER_FLAGS
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn table<'a>(doc: &'a toml::Table, key: &str) -> Result<Option<&'a toml::Table>> {
    match doc.get(key) {
        Some(toml::Value::Table(t)) => Ok(Some(t)),
        Some(_) => bail!("[{key}] must be a table"),
        None => Ok(None),
    }
}

fn check_keys(t: &toml::Table, what: &str, known: &[&str]) -> Result<()> {
    for k in t.keys() {
        if !known.contains(&k.as_str()) {
            bail!("{what}: unknown key {k:?} (known: {})", known.join(", "));
        }
    }
    Ok(())
}

fn int(v: &toml::Value, what: &str) -> Result<i64> {
    v.as_integer()
        .with_context(|| format!("{what} must be an integer"))
}

fn string<'a>(v: &'a toml::Value, what: &str) -> Result<&'a str> {
    v.as_str()
        .with_context(|| format!("{what} must be a string"))
}

fn duration(v: &toml::Value, what: &str) -> Result<Duration> {
    shoal_common::units::parse_duration(string(v, what)?)
        .map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

fn size(v: &toml::Value, what: &str) -> Result<u64> {
    match v {
        toml::Value::Integer(i) => u64::try_from(*i).with_context(|| format!("{what} < 0")),
        toml::Value::String(s) => {
            shoal_common::units::parse_size(s).map_err(|e| anyhow::anyhow!("{what}: {e}"))
        }
        _ => bail!("{what} must be a number of bytes or a size like \"4KiB\""),
    }
}

fn parse_link(t: &toml::Table) -> Result<LinkSpec> {
    if t.contains_key("receiver") {
        check_keys(t, "[link] (remote)", &["receiver", "pin", "token_file"])?;
        return Ok(LinkSpec::Remote {
            receiver: string(&t["receiver"], "[link] receiver")?.to_string(),
            pin: t
                .get("pin")
                .map(|v| string(v, "[link] pin").map(str::to_string))
                .transpose()?,
            token_file: t
                .get("token_file")
                .map(|v| string(v, "[link] token_file").map(PathBuf::from))
                .transpose()?,
        });
    }
    check_keys(
        t,
        "[link]",
        &[
            "name",
            "rtt",
            "rate",
            "down_rate",
            "queue",
            "loss",
            "backend",
            "seed",
            "offload",
            "check",
        ],
    )?;
    let get = |k: &str, def: &str| -> Result<String> {
        match t.get(k) {
            Some(v) => Ok(string(v, &format!("[link] {k}"))?.to_string()),
            None => Ok(def.to_string()),
        }
    };
    let name = get("name", "sweep")?;
    if name.len() > 8 {
        bail!(
            "[link] name {name:?}: at most 8 characters (it becomes namespace and interface names)"
        );
    }
    shoal_link::state::validate_name(&name)?;
    let spec = LinkSpec::Emulated {
        name,
        rtt: t
            .get("rtt")
            .map(|v| string(v, "[link] rtt").map(str::to_string))
            .transpose()?
            .context("[link] needs rtt (e.g. \"141ms\") or receiver = \"host:port\"")?,
        rate: t
            .get("rate")
            .map(|v| string(v, "[link] rate").map(str::to_string))
            .transpose()?
            .context("[link] needs rate (e.g. \"300mbit\")")?,
        down_rate: t
            .get("down_rate")
            .map(|v| string(v, "[link] down_rate").map(str::to_string))
            .transpose()?,
        queue: get("queue", "1bdp")?,
        loss: get("loss", "0%")?,
        backend: get("backend", "tun")?,
        seed: match t.get("seed") {
            Some(v) => u64::try_from(int(v, "[link] seed")?).context("[link] seed < 0")?,
            None => 1,
        },
        offload: match t.get("offload") {
            Some(v) => v
                .as_bool()
                .context("[link] offload must be true or false")?,
            None => true,
        },
        check: match t.get("check") {
            Some(v) => v.as_bool().context("[link] check must be true or false")?,
            None => true,
        },
    };
    // Parse now so a typo fails before anything is built.
    if let LinkSpec::Emulated {
        rtt,
        rate,
        down_rate,
        queue,
        loss,
        backend,
        ..
    } = &spec
    {
        shoal_link::parse::parse_duration(rtt).context("[link] rtt")?;
        shoal_link::parse::parse_rate(rate).context("[link] rate")?;
        if let Some(d) = down_rate {
            shoal_link::parse::parse_rate(d).context("[link] down_rate")?;
        }
        shoal_link::parse::parse_queue(queue).context("[link] queue")?;
        shoal_link::parse::parse_loss(loss).context("[link] loss")?;
        if !["tun", "netem", "auto"].contains(&backend.as_str()) {
            bail!("[link] backend must be tun, netem or auto");
        }
    }
    Ok(spec)
}

fn parse_payloads(t: &toml::Table) -> Result<Vec<PayloadSpec>> {
    let mut out = Vec::new();
    for (name, v) in t {
        let what = format!("[payload.{name}]");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            bail!("{what}: payload names may hold only letters, digits, '-' and '_'");
        }
        let p = v
            .as_table()
            .with_context(|| format!("{what} must be a table"))?;
        let source = if let Some(path) = p.get("path") {
            check_keys(p, &what, &["path"])?;
            PayloadSource::Existing {
                path: PathBuf::from(string(path, &format!("{what} path"))?),
            }
        } else {
            check_keys(p, &what, &["files", "size", "dirs", "seed"])?;
            let files = u64::try_from(int(
                p.get("files")
                    .with_context(|| format!("{what} needs files and size, or path"))?,
                &format!("{what} files"),
            )?)
            .ok()
            .filter(|n| *n > 0)
            .with_context(|| format!("{what} files must be positive"))?;
            let size = size(
                p.get("size")
                    .with_context(|| format!("{what} needs size"))?,
                &format!("{what} size"),
            )?;
            let dirs = match p.get("dirs") {
                Some(v) => Some(
                    u64::try_from(int(v, &format!("{what} dirs"))?)
                        .ok()
                        .filter(|n| *n > 0)
                        .with_context(|| format!("{what} dirs must be positive"))?,
                ),
                None => None,
            };
            let seed = match p.get("seed") {
                Some(v) => u64::try_from(int(v, &format!("{what} seed"))?)
                    .with_context(|| format!("{what} seed < 0"))?,
                None => 1,
            };
            PayloadSource::Generated {
                files,
                size,
                dirs,
                seed,
            }
        };
        out.push(PayloadSpec {
            name: name.clone(),
            source,
        });
    }
    if out.is_empty() {
        bail!("no payload defined ([payload.NAME])");
    }
    Ok(out)
}

type Product = Vec<(String, Vec<AxisValue>)>;

fn parse_axes(t: &toml::Table, what: &str) -> Result<Product> {
    let mut out = Vec::new();
    for (k, v) in t {
        if k.is_empty()
            || !k
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        {
            bail!("{what}: axis name {k:?} is not a flag name");
        }
        if k.starts_with("recv.") && k.len() == 5 {
            bail!("{what}: recv. needs a flag name");
        }
        let values = match v {
            toml::Value::Array(a) => a
                .iter()
                .map(|x| AxisValue::from_toml(x, &format!("{what} {k}")))
                .collect::<Result<Vec<_>>>()?,
            other => vec![AxisValue::from_toml(other, &format!("{what} {k}"))?],
        };
        if values.is_empty() {
            bail!("{what}: axis {k} has no value");
        }
        if k == "kind" {
            for v in &values {
                if !KINDS.contains(&v.text().as_str()) {
                    bail!(
                        "{what}: kind {} unknown (known: {})",
                        v.text(),
                        KINDS.join(", ")
                    );
                }
            }
        }
        if k == "timeout" {
            for v in &values {
                shoal_common::units::parse_duration(&v.text())
                    .map_err(|e| anyhow::anyhow!("{what} timeout: {e}"))?;
            }
        }
        out.push((k.clone(), values));
    }
    Ok(out)
}

fn cartesian(product: &Product) -> Vec<Vec<(String, AxisValue)>> {
    let mut out: Vec<Vec<(String, AxisValue)>> = vec![Vec::new()];
    for (k, values) in product {
        let mut next = Vec::with_capacity(out.len() * values.len());
        for partial in &out {
            for v in values {
                let mut p = partial.clone();
                p.push((k.clone(), v.clone()));
                next.push(p);
            }
        }
        out = next;
    }
    out
}

/// Puts payload and kind first, checks the payload exists, and drops Shoal axes from
/// baseline arms.
fn normalise(
    params: Vec<(String, AxisValue)>,
    payloads: &[PayloadSpec],
) -> Result<Vec<(String, AxisValue)>> {
    let find = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let payload = match find("payload") {
        Some(v) => v,
        None if payloads.len() == 1 => AxisValue::Str(payloads[0].name.clone()),
        None => bail!("an axes table has no payload axis and there are several payloads"),
    };
    if !payloads.iter().any(|p| p.name == payload.text()) {
        bail!("payload {} is not defined ([payload.NAME])", payload.text());
    }
    let kind = find("kind").unwrap_or(AxisValue::Str("shoal".into()));
    let baseline = kind.text() != "shoal";
    let mut out = vec![("payload".to_string(), payload), ("kind".to_string(), kind)];
    for (k, v) in params {
        if k == "payload" || k == "kind" {
            continue;
        }
        if baseline && !BASELINE_AXES.contains(&k.as_str()) {
            continue;
        }
        out.push((k, v));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &str = r#"
[sweep]
runs = 3
reference = { mode = "tcp-bundle", connections = 1 }
[link]
name = "t1"
rtt = "20ms"
rate = "100mbit"
[payload.small]
files = 10
size = "4KiB"
[payload.big]
files = 1
size = 4096
[axes]
payload = ["small", "big"]
mode = ["tcp-bundle", "quic-bundle"]
connections = [1, 8]
[[also]]
kind = ["tar-ssh", "sftp"]
mode = ["tcp-bundle", "quic-bundle"]
[[exclude]]
payload = "big"
connections = 8
"#;

    #[test]
    fn product_exclude_and_baselines() {
        let m = Matrix::parse(
            M.replace("[[also]]\n", "[[also]]\npayload = \"small\"\n")
                .as_str(),
        )
        .unwrap();
        let labels: Vec<String> = m.configs.iter().map(|c| c.label()).collect();
        // small: 2 modes × 2 connections; big: 2 modes × 1; baselines deduplicated: 2.
        assert_eq!(labels.len(), 4 + 2 + 2, "{labels:#?}");
        assert_eq!(
            labels[0],
            "payload=small kind=shoal mode=tcp-bundle connections=1"
        );
        assert_eq!(labels[6], "payload=small kind=tar-ssh");
        assert_eq!(m.configs[0].id, "c01");
        assert_eq!(m.axes, vec!["payload", "kind", "mode", "connections"]);
        assert!(m.configs[0].matches(&m.reference));
        assert!(!m.configs[6].matches(&m.reference));
    }

    #[test]
    fn shipped_matrices_parse() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/matrices");
        let count = |name: &str| Matrix::load(&dir.join(name)).unwrap().configs.len();
        assert_eq!(count("quick.toml"), 8 + 4 + 1);
        // 2 payloads × 4 modes × 2 controllers × 2 connection counts, 3 baselines, 2 on the
        // 1,024-file subset.
        assert_eq!(count("study.toml"), 32 + 3 + 2);
        assert_eq!(count("flow-control.toml"), 2 * 3 * 2 - 3);
        assert_eq!(count("study-session.toml"), 32 + 3 + 2);
        // 4 modes × 2 controllers × 2 connection counts, tar-local and tar-tcp.
        assert_eq!(count("study-1gbit.toml"), 16 + 2);
        // 2 QUIC modes × 2 controllers × 8 connections, and the tcp-bundle bbr ×8 anchor.
        assert_eq!(count("study-quic8.toml"), 4 + 1);
        // 2 modes × 2 controllers × 2 connection counts, and 2 per-file modes with BBR.
        assert_eq!(count("study-loss.toml"), 8 + 2);
        let study = Matrix::load(&dir.join("study.toml")).unwrap();
        let refs: Vec<_> = study
            .configs
            .iter()
            .filter(|c| c.matches(&study.reference))
            .map(|c| c.payload().to_string())
            .collect();
        assert_eq!(refs, ["small", "large", "subset"]);
    }

    #[test]
    fn the_controller_in_effect_is_named_when_it_is_not_an_axis_and_differs() {
        let m = |axes: &str| {
            let mut m = Matrix::parse(&format!(
                "[link]\nrtt = \"20ms\"\nrate = \"1gbit\"\n[payload.p]\nfiles = 1\nsize = 1\n{axes}"
            ))
            .unwrap();
            m.note_cc_in_effect("cubic");
            m.configs.iter().map(|c| c.label()).collect::<Vec<_>>()
        };
        assert_eq!(
            m("[axes]\nmode = [\"tcp-bundle\", \"quic-bundle\"]\n"),
            [
                "payload=p kind=shoal mode=tcp-bundle [cc=cubic]",
                "payload=p kind=shoal mode=quic-bundle [cc=quinn-cubic]"
            ]
        );
        // All TCP, one controller: nothing to say.
        assert_eq!(
            m("[axes]\nmode = [\"tcp-bundle\", \"tcp-streams\"]\n"),
            [
                "payload=p kind=shoal mode=tcp-bundle",
                "payload=p kind=shoal mode=tcp-streams"
            ]
        );
        // A cc axis names it; the baseline beside it (no cc axis) gets the host's.
        assert_eq!(
            m("[axes]\nmode = [\"quic-bundle\"]\ncc = [\"bbr\"]\n[[also]]\nkind = [\"tar-ssh\", \"tar-local\"]\n"),
            [
                "payload=p kind=shoal mode=quic-bundle cc=bbr",
                "payload=p kind=tar-ssh [cc=cubic]",
                "payload=p kind=tar-local"
            ]
        );
    }

    #[test]
    fn errors_are_named() {
        let e = Matrix::parse(&M.replace("size = 4096", "size = \"4 potatoes\"")).unwrap_err();
        assert!(format!("{e:#}").contains("[payload.big] size"), "{e:#}");
        let e =
            Matrix::parse(&M.replace("[[also]]\n", "[[also]]\npayload = \"nope\"\n")).unwrap_err();
        assert!(format!("{e:#}").contains("payload nope"), "{e:#}");
        let e = Matrix::parse(&M.replace("name = \"t1\"", "name = \"waytoolong\"")).unwrap_err();
        assert!(format!("{e:#}").contains("8 characters"), "{e:#}");
        // A reference that picks nothing, or two configurations of one payload.
        let m = M.replace("[[also]]\n", "[[also]]\npayload = \"small\"\n");
        let e =
            Matrix::parse(&m.replace("\"tcp-bundle\", connections", "\"tcp-bundel\", connections"))
                .unwrap_err();
        assert!(
            format!("{e:#}").contains("no configuration matches"),
            "{e:#}"
        );
        let e = Matrix::parse(&m.replace(
            "mode = \"tcp-bundle\", connections = 1 }",
            "kind = \"shoal\" }",
        ))
        .unwrap_err();
        assert!(
            format!("{e:#}").contains("4 configurations match for payload small"),
            "{e:#}"
        );
    }
}
