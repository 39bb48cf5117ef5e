//! The link a sweep's runs cross, typed: a local emulated link the sweep brings up (its
//! settings parsed once, defaults those of `shoal link up`), or a `shoal recv` on another host.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::quantity::{Backend, LinkLoss, LinkQueue, LinkRate, LinkTime, Size, Spelled};
use crate::schema::LinkSection;

/// The emulated link's name when `[link] name` is not given.
pub const DEFAULT_LINK_NAME: &str = "sweep";
/// Longest link name: it becomes namespace and interface names.
pub const MAX_LINK_NAME: usize = 8;

/// The link the runs cross.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum LinkSpec {
    /// A local emulated link brought up (and torn down) by the sweep.
    Emulated(EmulatedLink),
    /// A `shoal recv` already running on another host.
    Remote(RemoteReceiver),
}

/// A local emulated link's settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EmulatedLink {
    pub name: String,
    pub rtt: Spelled<LinkTime>,
    pub rate: Spelled<LinkRate>,
    pub down_rate: Option<Spelled<LinkRate>>,
    pub queue: Spelled<LinkQueue>,
    pub loss: Spelled<LinkLoss>,
    pub backend: Backend,
    pub seed: u64,
    pub offload: bool,
    /// Max of `tcp_rmem`/`tcp_wmem` inside both namespaces, bytes (`shoal link up
    /// --tcp-mem-max`; default 64 MiB).
    pub tcp_mem_max: u64,
    /// Run `shoal link check` before the first run (its result goes in meta.json).
    pub check: bool,
}

/// A remote receiver: its address, and how to trust and authenticate to it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RemoteReceiver {
    pub receiver: String,
    pub pin: Option<String>,
    pub token_file: Option<PathBuf>,
    /// The ssh baselines' login on the receiving host (`[link] ssh`), checked by
    /// [`check_ssh_target`].
    pub ssh: Option<String>,
    /// `[link] ssh_opts`, given to ssh and sftp before the target.
    pub ssh_opts: Vec<String>,
}

/// `[link] ssh`: `user@host` or `host`, never an option (a leading `-`) or more than one word.
pub fn check_ssh_target(t: &str) -> Result<()> {
    let (user, host) = t.rsplit_once('@').unwrap_or(("", t));
    if host.is_empty()
        || t.starts_with('-')
        || t.chars().any(|c| c.is_whitespace() || c.is_control())
        || user.contains('@')
        || host.contains(':')
    {
        bail!(
            "[link] ssh {t:?}: expected user@host (one word, no port: give a port with ssh_opts = [\"-o\", \"Port=2222\"])"
        );
    }
    Ok(())
}

impl EmulatedLink {
    /// The settings `shoal link up` takes.
    pub fn up_config(&self) -> shoal_link::UpConfig {
        let mut cfg = shoal_link::UpConfig::new(&self.name, self.rtt.value, self.rate.value);
        cfg.down_rate_bps = self.down_rate.as_ref().map(|r| r.value);
        cfg.queue = self.queue.value;
        cfg.loss = self.loss.value;
        cfg.backend = self.backend.into();
        cfg.seed = self.seed;
        cfg.offload = self.offload;
        cfg.tcp_mem_max = self.tcp_mem_max;
        cfg
    }
}

impl TryFrom<LinkSection> for LinkSpec {
    type Error = anyhow::Error;

    fn try_from(t: LinkSection) -> Result<LinkSpec> {
        if let Some(receiver) = t.receiver.clone() {
            let extra = t.emulated_keys();
            if !extra.is_empty() {
                bail!(
                    "[link] (remote): {} is a setting of an emulated link; a remote receiver's [link] takes receiver, pin, token_file, ssh and ssh_opts",
                    extra.join(", ")
                );
            }
            if let Some(s) = &t.ssh {
                check_ssh_target(s)?;
            }
            let ssh_opts = t.ssh_opts.unwrap_or_default();
            if !ssh_opts.is_empty() && t.ssh.is_none() {
                bail!(
                    "[link] ssh_opts needs ssh = \"user@host\" (the login the ssh baselines use)"
                );
            }
            if let Some(o) = ssh_opts.iter().find(|o| o.is_empty()) {
                bail!("[link] ssh_opts: an empty option {o:?}");
            }
            return Ok(LinkSpec::Remote(RemoteReceiver {
                receiver,
                pin: t.pin,
                token_file: t.token_file,
                ssh: t.ssh,
                ssh_opts,
            }));
        }
        if let Some(k) = [
            ("pin", t.pin.is_some()),
            ("token_file", t.token_file.is_some()),
            ("ssh", t.ssh.is_some()),
            ("ssh_opts", t.ssh_opts.is_some()),
        ]
        .into_iter()
        .find_map(|(k, given)| given.then_some(k))
        {
            bail!("[link] {k} is a setting of a remote receiver; name it with receiver = \"host:port\"");
        }
        let name = t.name.unwrap_or_else(|| DEFAULT_LINK_NAME.to_string());
        if name.len() > MAX_LINK_NAME {
            bail!(
                "[link] name {name:?}: at most {MAX_LINK_NAME} characters (it becomes namespace and interface names)"
            );
        }
        shoal_link::state::validate_name(&name)?;
        let rtt = t
            .rtt
            .context("[link] needs rtt (e.g. \"141ms\") or receiver = \"host:port\"")?;
        let rate = t.rate.context("[link] needs rate (e.g. \"300mbit\")")?;
        // What `shoal link up` does by default, for every setting the matrix leaves out.
        let defaults = shoal_link::UpConfig::new(&name, rtt.value, rate.value);
        Ok(LinkSpec::Emulated(EmulatedLink {
            rtt,
            rate,
            down_rate: t.down_rate,
            queue: t
                .queue
                .unwrap_or_else(|| Spelled::implied(defaults.queue, defaults.queue.to_string())),
            loss: t.loss.unwrap_or_else(|| {
                Spelled::implied(
                    defaults.loss,
                    shoal_link::parse::Loss(defaults.loss).to_string(),
                )
            }),
            backend: t.backend.unwrap_or(defaults.backend.into()),
            seed: t.seed.unwrap_or(defaults.seed),
            offload: t.offload.unwrap_or(defaults.offload),
            tcp_mem_max: match t.tcp_mem_max {
                Some(Size(b)) => {
                    shoal_link::ranges::count_value_in("tcp-mem-max", &b.to_string(), b)
                        .map_err(|e| anyhow::anyhow!("[link] tcp_mem_max {b}: {e:#}"))?
                }
                None => defaults.tcp_mem_max,
            },
            check: t.check.unwrap_or(true),
            name,
        }))
    }
}
