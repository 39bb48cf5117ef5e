//! `shoal link …`: clap types and their dispatch. The `shoal` binary (and the stand-alone
//! `shoal-link`) mounts [`LinkCommand`] as a subcommand and exits with the code [`run`]
//! returns. Every default comes from the library's [`UpConfig`] and [`CheckOptions`].

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::LazyLock;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};

use shoal_link::check::CheckOptions;
use shoal_link::ctl::up::{self, BackendChoice, Launcher, UpConfig};
use shoal_link::parse::{format_rate, Loss, QueueSpec, Rate, Span};
use shoal_link::state;

static UP: LazyLock<UpConfig> = LazyLock::new(UpConfig::default);
static CHECK: LazyLock<CheckOptions> = LazyLock::new(CheckOptions::default);

/// `--loss`'s default as `--help` shows it: no loss reads as 0.
fn loss_text(p: f64) -> &'static str {
    if p == 0.0 {
        "0"
    } else {
        crate::defaults::text(Loss(p).to_string())
    }
}

/// Which emulator to use (`BackendChoice`, as clap lists it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// netem if the kernel has it, else tun.
    Auto,
    /// Userspace TUN delay line.
    Tun,
    /// veth + tc netem.
    Netem,
}

impl From<Backend> for BackendChoice {
    fn from(b: Backend) -> Self {
        match b {
            Backend::Auto => BackendChoice::Auto,
            Backend::Tun => BackendChoice::Tun,
            Backend::Netem => BackendChoice::Netem,
        }
    }
}

impl From<BackendChoice> for Backend {
    fn from(b: BackendChoice) -> Self {
        match b {
            BackendChoice::Auto => Backend::Auto,
            BackendChoice::Tun => Backend::Tun,
            BackendChoice::Netem => Backend::Netem,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum LinkCommand {
    /// Create the two namespaces and the emulated link between them.
    Up(UpArgs),
    /// Run a command inside one side of the link.
    Exec(ExecArgs),
    /// Measure the link (RTT idle and loaded, throughput, loss) against its settings.
    Check(CheckArgs),
    /// Show a link's settings, forwarder and counters.
    Status(StatusArgs),
    /// Remove the link: forwarder, namespaces, state.
    Down(DownArgs),
    /// Drop every packet in both directions for a while (an outage mid-run; TUN backend).
    Blackhole(BlackholeArgs),
    /// (internal) The TUN forwarder daemon that `up` starts.
    #[command(hide = true)]
    Forward(ForwardArgs),
    /// (internal) Freeze a cgroup for LENGTH once every PERIOD until standard input ends,
    /// then thaw it and print what was done as JSON (`exec --stall`, a sweep's stall axes).
    #[command(hide = true)]
    StallTimer(StallTimerArgs),
}

#[derive(Debug, Clone, Args)]
pub struct StallTimerArgs {
    #[arg(long)]
    pub cgroup: PathBuf,
    #[arg(long)]
    pub length: Span,
    #[arg(long)]
    pub every: Span,
}

#[derive(Debug, Clone, Args)]
pub struct UpArgs {
    /// Link name; namespaces are NAME-snd and NAME-rcv.
    #[arg(long, default_value = shoal_link::DEFAULT_NAME)]
    pub name: String,
    /// Round-trip time (each direction gets half), e.g. 141ms.
    #[arg(long, value_parser = |v: &str| link_span("rtt", v))]
    pub rtt: Span,
    /// Sender → receiver rate, e.g. 300mbit.
    #[arg(long, value_parser = |v: &str| link_rate("rate", v))]
    pub rate: Rate,
    /// Receiver → sender rate (default: --rate).
    #[arg(long, value_parser = |v: &str| link_rate("down-rate", v))]
    pub down_rate: Option<Rate>,
    /// Drop-tail queue per direction: NBDP (of that direction) or bytes (375000, 4MiB).
    #[arg(long, default_value_t = UP.queue)]
    pub queue: QueueSpec,
    /// Random loss per packet and direction, e.g. 0.1%.
    #[arg(long, default_value = loss_text(UP.loss))]
    pub loss: Loss,
    /// MTU of both ends of the link, in bytes (IP packet size; 1500 as on Ethernet).
    #[arg(long, default_value_t = UP.mtu, value_parser = |v: &str| link_count("mtu", v).map(|n| n as u32))]
    pub mtu: u32,
    /// How the delay line is built: tun (Shoal's userspace forwarder, works without netem),
    /// netem (veth + tc netem, where the kernel has it), auto (netem if available, else tun).
    #[arg(long, value_enum, default_value_t = Backend::from(UP.backend))]
    pub backend: Backend,
    /// Seed of the loss generator.
    #[arg(long, default_value_t = UP.seed)]
    pub seed: u64,
    /// TUN backend: forward 1-MTU packets instead of TSO/USO super-packets.
    #[arg(long)]
    pub no_offload: bool,
    /// TUN backend: let idle CPUs sleep (don't hold /dev/cpu_dma_latency at 0); cheaper for
    /// the host, but wake-ups from idle then come up to milliseconds late in a VM.
    #[arg(long)]
    pub no_pm_qos: bool,
    /// Max TCP buffer (tcp_rmem/tcp_wmem) inside the namespaces, e.g. 64MiB.
    #[arg(long, value_parser = |v: &str| link_count("tcp-mem-max", v), default_value = crate::defaults::size(UP.tcp_mem_max))]
    pub tcp_mem_max: u64,
}

impl UpArgs {
    pub fn to_config(&self) -> UpConfig {
        UpConfig {
            name: self.name.clone(),
            rtt: self.rtt.0,
            rate_bps: self.rate.0,
            down_rate_bps: self.down_rate.map(|r| r.0),
            queue: self.queue,
            loss: self.loss.0,
            mtu: self.mtu,
            backend: self.backend.into(),
            seed: self.seed,
            offload: !self.no_offload,
            pm_qos: !self.no_pm_qos,
            tcp_mem_max: self.tcp_mem_max,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Side {
    Snd,
    Rcv,
}

#[derive(Debug, Clone, Args)]
pub struct ExecArgs {
    /// Which side: snd (198.18.0.1) or rcv (198.18.0.2).
    #[arg(value_enum)]
    pub side: Side,
    /// Link name, as given to `shoal link up --name`.
    #[arg(long, default_value = shoal_link::DEFAULT_NAME)]
    pub name: String,
    /// Freeze the command's processes for a while once every period as long as it runs, e.g.
    /// "20ms every 250ms" (a cgroup freezer on a real-time timer); prints the stalls applied
    /// and the time frozen when it ends.
    #[arg(long, value_name = "LENGTH every PERIOD", value_parser = shoal_hostctl::stall::StallSpec::parse)]
    pub stall: Option<shoal_hostctl::stall::StallSpec>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Link name, as given to `shoal link up --name`.
    #[arg(long, default_value = shoal_link::DEFAULT_NAME)]
    pub name: String,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Length of the bulk TCP flow (default: warm-up + 5 s).
    #[arg(long, value_parser = |v: &str| link_span("duration", v))]
    pub duration: Option<Span>,
    /// Part of the bulk flow not counted, to get past slow start (default: 25 RTTs, 2–5 s).
    #[arg(long, value_parser = |v: &str| link_span("warmup", v))]
    pub warmup: Option<Span>,
    /// Loss probes (when loss is configured).
    #[arg(long, default_value_t = CHECK.loss_probes, value_parser = |v: &str| link_count("loss-probes", v))]
    pub loss_probes: u64,
    /// Longest the bulk TCP loss flow may run (when loss is configured; 0s skips it). It stops
    /// earlier once it has sent 225/loss segments.
    #[arg(long, default_value_t = Span(CHECK.bulk_loss_max), value_parser = |v: &str| link_span("bulk-loss-max", v))]
    pub bulk_loss_max: Span,
}

#[derive(Debug, Clone, Args)]
pub struct DownArgs {
    /// Link name, as given to `shoal link up --name`.
    #[arg(long, default_value = shoal_link::DEFAULT_NAME)]
    pub name: String,
}

#[derive(Debug, Clone, Args)]
pub struct BlackholeArgs {
    /// Link name, as given to `shoal link up --name`.
    #[arg(long, default_value = shoal_link::DEFAULT_NAME)]
    pub name: String,
    /// How long, e.g. 5s or 500ms; a new request replaces a running blackhole.
    #[arg(long = "for", value_name = "DURATION", required_unless_present = "end", value_parser = |v: &str| link_span("for", v))]
    pub duration: Option<Span>,
    /// End a running blackhole now.
    #[arg(long, conflicts_with = "duration")]
    pub end: bool,
}

#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// Link name, as given to `shoal link up --name`.
    #[arg(long, default_value = shoal_link::DEFAULT_NAME)]
    pub name: String,
    /// Print the settings, forwarder and counters as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// The forwarder daemon's arguments (written by `up`, not by people): the link's name (so
/// `down` can recognise the process) and its typed configuration, a JSON file `up` wrote.
#[derive(Debug, Clone, Args)]
pub struct ForwardArgs {
    /// The link's name (so `down` can recognise this process).
    #[arg(long)]
    pub name: String,
    /// The forwarder's configuration, a JSON file `up` wrote.
    #[arg(long)]
    pub config: PathBuf,
}

/// `shoal link`'s duration, rate and count flags within their ranges (`shoal_link::ranges`).
fn link_span(flag: &str, text: &str) -> Result<Span, String> {
    shoal_link::ranges::span_in(flag, text)
        .map(Span)
        .map_err(|e| format!("{e:#}"))
}

fn link_rate(flag: &str, text: &str) -> Result<Rate, String> {
    shoal_link::ranges::rate_in(flag, text)
        .map(Rate)
        .map_err(|e| format!("{e:#}"))
}

fn link_count(flag: &str, text: &str) -> Result<u64, String> {
    shoal_link::ranges::count_in(flag, text).map_err(|e| format!("{e:#}"))
}

/// Runs one `shoal link` command; returns the process exit code.
pub fn run(cmd: LinkCommand) -> Result<i32> {
    match cmd {
        LinkCommand::Up(a) => {
            let out = up::up(&a.to_config(), &Launcher::current_exe()?)?;
            for n in &out.notes {
                eprintln!("note: {n}");
            }
            let st = &out.state;
            println!(
                "link {} up: {} <-> {} ({} backend{}), rtt {}, rate {} / {}, queue {} B / {} B, loss {}",
                st.name,
                st.snd_ns,
                st.rcv_ns,
                st.backend,
                st.forwarder_pid
                    .map(|p| format!(", forwarder pid {p}, offload {}", st.offload.describe()))
                    .unwrap_or_default(),
                shoal_link::parse::format_duration(Duration::from_nanos(st.rtt_ns)),
                format_rate(st.rate_bps),
                format_rate(st.down_rate_bps),
                st.queue_bytes,
                st.down_queue_bytes,
                Loss(st.loss),
            );
            println!(
                "  {} in {}, {} in {}; run commands with `shoal link exec snd|rcv --name {} -- CMD`",
                st.snd_addr, st.snd_ns, st.rcv_addr, st.rcv_ns, st.name
            );
            // Dropping the Child neither kills nor waits: the daemon outlives us (init reaps it).
            drop(out.child);
            Ok(0)
        }
        LinkCommand::Exec(a) => {
            state::validate_name(&a.name)?;
            let ns = match a.side {
                Side::Snd => state::snd_ns(&a.name),
                Side::Rcv => state::rcv_ns(&a.name),
            };
            let (prog, args) = a.command.split_first().context("no command given")?;
            let mut cmd = Command::new(prog);
            cmd.args(args);
            shoal_link::netns::command_in_netns(&ns, &mut cmd)
                .with_context(|| format!("is link {} up?", a.name))?;
            if let Some(spec) = a.stall.filter(|s| !s.is_none()) {
                let exe = std::env::current_exe().context("locating this program")?;
                let end = match a.side {
                    Side::Snd => shoal_hostctl::stall::End::Sender,
                    Side::Rcv => shoal_hostctl::stall::End::Receiver,
                };
                return shoal_hostctl::stall::exec::run(&mut cmd, end, spec, &exe);
            }
            // exec only returns on failure.
            let e = cmd.exec();
            bail!("running {prog:?} in {ns}: {e}")
        }
        LinkCommand::Check(a) => {
            let opts = CheckOptions {
                duration: a.duration.map(|s| s.0),
                warmup: a.warmup.map(|s| s.0),
                loss_probes: a.loss_probes,
                bulk_loss_max: a.bulk_loss_max.0,
            };
            let report = shoal_link::check::check(&a.name, &opts)?;
            if a.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.table());
            }
            Ok(if report.pass { 0 } else { 1 })
        }
        LinkCommand::Status(a) => {
            let info = shoal_link::ctl::status::link_info(&a.name)?;
            if a.json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                print!("{}", shoal_link::report::status_text(&info));
            }
            Ok(0)
        }
        LinkCommand::Down(a) => {
            let out = up::down(&a.name)?;
            for n in &out.notes {
                eprintln!("note: {n}");
            }
            // A claim left by a sweep that is gone would only be released by the next sweep
            // of that name; the link it claimed is down now, so it goes too.
            if let Some(owner) = shoal_hostctl::owned::claim::forget_dead(&a.name) {
                eprintln!(
                    "note: removed {} (its sweep, {owner}, is gone)",
                    shoal_hostctl::owned::claim::path(&a.name).display()
                );
            }
            if out.existed {
                println!("link {} down", a.name);
            } else {
                println!("no link named {} (nothing to do)", a.name);
            }
            Ok(0)
        }
        LinkCommand::Blackhole(a) => {
            let d = a.duration.map(|s| s.0).unwrap_or_default();
            let out = shoal_link::ctl::blackhole::blackhole(&a.name, d)?;
            if d.is_zero() {
                println!("link {}: blackhole ended", a.name);
            } else {
                println!(
                    "link {}: dropping every packet, both directions, for {} (forwarder pid {}); counted as dropped_blackhole in `shoal link status`",
                    a.name,
                    shoal_link::parse::format_duration(d),
                    out.forwarder_pid
                );
            }
            Ok(0)
        }
        LinkCommand::StallTimer(a) => {
            shoal_hostctl::stall::timer::main(&a.cgroup, a.length.0, a.every.0)?;
            Ok(0)
        }
        LinkCommand::Forward(a) => {
            let text = std::fs::read_to_string(&a.config)
                .with_context(|| format!("reading {}", a.config.display()))?;
            let cfg: shoal_link::ipc::ForwarderConfig = serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", a.config.display()))?;
            shoal_link::forwarder::run_daemon(&cfg)?;
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use shoal_link::ctl::up::DEFAULT_TCP_MEM_MAX;

    #[derive(Parser)]
    struct Top {
        #[command(subcommand)]
        cmd: LinkCommand,
    }

    #[test]
    fn parses_up() {
        let t = Top::try_parse_from([
            "x", "up", "--rtt", "141ms", "--rate", "300mbit", "--loss", "0.1%", "--queue", "2bdp",
        ])
        .unwrap();
        let LinkCommand::Up(a) = t.cmd else { panic!() };
        let c = a.to_config();
        assert_eq!(c.name, "shoal");
        assert_eq!(c.rtt, Duration::from_millis(141));
        assert_eq!(c.rate_bps, 300_000_000);
        assert_eq!(c.loss, 0.001);
        assert_eq!(c.queue, QueueSpec::Bdp(2.0));
        assert!(c.offload);
        assert_eq!(c.backend, BackendChoice::Tun);
        // Every default is the library's.
        let d = UpConfig::default();
        assert_eq!(
            (c.name.as_str(), c.mtu, c.seed),
            (d.name.as_str(), d.mtu, d.seed)
        );
        // The help shows 64MiB; it is the library's default.
        assert_eq!(c.tcp_mem_max, DEFAULT_TCP_MEM_MAX);
        // Sizes mean what they mean in `gen --size`: 4M is 4 MiB.
        let t = Top::try_parse_from([
            "x",
            "up",
            "--rtt",
            "141ms",
            "--rate",
            "300mbit/s",
            "--queue",
            "4M",
            "--tcp-mem-max",
            "32M",
        ])
        .unwrap();
        let LinkCommand::Up(a) = t.cmd else { panic!() };
        assert_eq!(a.queue, QueueSpec::Bytes(4 << 20));
        assert_eq!(a.tcp_mem_max, 32 << 20);
        assert_eq!(a.rate.0, 300_000_000);
    }

    #[test]
    fn parses_exec() {
        let t = Top::try_parse_from(["x", "exec", "rcv", "--name", "t1", "--", "ip", "-br", "a"])
            .unwrap();
        let LinkCommand::Exec(a) = t.cmd else {
            panic!()
        };
        assert_eq!(a.side, Side::Rcv);
        assert_eq!(a.command, vec!["ip", "-br", "a"]);
    }

    #[test]
    fn parses_blackhole() {
        let t = Top::try_parse_from(["x", "blackhole", "--name", "b", "--for", "5s"]).unwrap();
        let LinkCommand::Blackhole(a) = t.cmd else {
            panic!()
        };
        assert_eq!(a.duration.map(|s| s.0), Some(Duration::from_secs(5)));
        assert!(!a.end);
        let t = Top::try_parse_from(["x", "blackhole", "--end"]).unwrap();
        let LinkCommand::Blackhole(a) = t.cmd else {
            panic!()
        };
        assert!(a.end && a.duration.is_none());
        assert!(Top::try_parse_from(["x", "blackhole"]).is_err());
        assert!(Top::try_parse_from(["x", "blackhole", "--end", "--for", "1s"]).is_err());
    }
}
