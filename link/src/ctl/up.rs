//! Bringing a link up and down, and reading its live state: the orchestration over
//! namespaces, sysctls, the forwarder daemon (or netem) and the state file.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use rustix::process::{Pid, Signal};

use crate::ipc::{is_forwarder, is_running, ForwarderConfig};
use crate::netns::{self, ip};
use crate::parse::QueueSpec;
use crate::state::{self, Backend, LinkState, Sysctls};
use crate::tun::Offload;

/// Interface name of the link on both sides.
pub const DEVICE: &str = "shoal0";
pub const SND_ADDR: &str = "198.18.0.1";
pub const RCV_ADDR: &str = "198.18.0.2";
pub const PREFIX_LEN: u8 = 30;
/// Default upper bound for the per-namespace TCP buffer autotuning (tcp_rmem/tcp_wmem max):
/// a 1 Gbit/s × 141 ms path needs ~17.6 MB of window plus a BDP of queue.
pub const DEFAULT_TCP_MEM_MAX: u64 = 64 << 20;

/// Which emulator to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// netem if the kernel has it, else tun.
    Auto,
    /// Userspace TUN delay line.
    Tun,
    /// veth + tc netem.
    Netem,
}

/// Settings of a link to bring up.
#[derive(Clone, Debug)]
pub struct UpConfig {
    pub name: String,
    pub rtt: Duration,
    /// sender → receiver.
    pub rate_bps: u64,
    /// receiver → sender; `None` = same as `rate_bps`.
    pub down_rate_bps: Option<u64>,
    pub queue: QueueSpec,
    /// Per-packet random loss, each direction, as a fraction.
    pub loss: f64,
    pub mtu: u32,
    pub backend: BackendChoice,
    pub seed: u64,
    /// TUN backend: pass TSO/USO super-packets through instead of 1-MTU packets.
    pub offload: bool,
    /// TUN backend: hold /dev/cpu_dma_latency at 0 while the link is up (see
    /// `forwarder::hold_cpu_latency_zero`).
    pub pm_qos: bool,
    /// Max of tcp_rmem/tcp_wmem inside both namespaces (and floor for the global
    /// rmem_max/wmem_max).
    pub tcp_mem_max: u64,
}

/// The link's name when none is given: namespaces `shoal-snd` and `shoal-rcv`.
pub const DEFAULT_NAME: &str = "shoal";

/// Every default of `shoal link up`; `rtt` and `rate_bps` have none (zero) and must be set.
impl Default for UpConfig {
    fn default() -> Self {
        UpConfig {
            name: DEFAULT_NAME.to_string(),
            rtt: Duration::ZERO,
            rate_bps: 0,
            down_rate_bps: None,
            // One bandwidth-delay product: what a well-sized router buffer holds.
            queue: QueueSpec::Bdp(1.0),
            loss: 0.0,
            // Ethernet's.
            mtu: 1500,
            // Needs no netem in the kernel, and its timing is Shoal's own.
            backend: BackendChoice::Tun,
            // A fixed seed: the same loss pattern on every run.
            seed: 1,
            // Super-packets cost the forwarder far less CPU per byte than 1-MTU packets.
            offload: true,
            // Late wake-ups from idle otherwise delay deliveries by milliseconds in a VM.
            pm_qos: true,
            tcp_mem_max: DEFAULT_TCP_MEM_MAX,
        }
    }
}

impl UpConfig {
    /// A link of `rtt` and `rate_bps` named `name`, every other setting its default.
    pub fn new(name: &str, rtt: Duration, rate_bps: u64) -> UpConfig {
        UpConfig {
            name: name.to_string(),
            rtt,
            rate_bps,
            ..UpConfig::default()
        }
    }
}

/// How to start the forwarder daemon: a program and the arguments that lead to the hidden
/// `forward` subcommand (`shoal link forward …` by default).
#[derive(Clone, Debug)]
pub struct Launcher {
    pub exe: PathBuf,
    pub prefix: Vec<String>,
}

impl Launcher {
    /// This very program, as `EXE link forward …`: right for the `shoal` binary.
    pub fn current_exe() -> Result<Launcher> {
        Ok(Launcher {
            exe: std::env::current_exe().context("locating the running program")?,
            prefix: vec!["link".into(), "forward".into()],
        })
    }
}

/// What `up` produced.
#[derive(Debug)]
pub struct UpOutcome {
    pub state: LinkState,
    /// The forwarder, when this process started it (the CLI drops it; the daemon lives on).
    pub child: Option<Child>,
    /// Things the user should know (global sysctls changed, backend picked by `auto`).
    pub notes: Vec<String>,
}

/// Undoes a half-built link if `up` fails part way.
struct Rollback {
    name: String,
    child: Option<Child>,
    armed: bool,
}

impl Drop for Rollback {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in [state::snd_ns(&self.name), state::rcv_ns(&self.name)] {
            if netns::exists(&ns) {
                let _ = netns::del(&ns);
            }
        }
        let _ = std::fs::remove_file(state::stats_path(&self.name));
        let _ = std::fs::remove_file(state::forwarder_config_path(&self.name));
    }
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Creates the namespaces, the emulator and the state file.
pub fn up(cfg: &UpConfig, launcher: &Launcher) -> Result<UpOutcome> {
    let name = cfg.name.as_str();
    state::validate_name(name)?;
    if cfg.rate_bps == 0 || cfg.down_rate_bps == Some(0) {
        bail!("rate must be positive");
    }
    if !(68..=65_535).contains(&cfg.mtu) {
        bail!("mtu {} out of range 68..65535", cfg.mtu);
    }
    let (snd, rcv) = (state::snd_ns(name), state::rcv_ns(name));
    if state::state_path(name).exists() || netns::exists(&snd) || netns::exists(&rcv) {
        bail!(
            "link {name:?} already exists (namespace {snd} or {}); run `shoal link down --name {name}` first",
            state::state_path(name).display()
        );
    }
    std::fs::create_dir_all(state::RUN_DIR)
        .with_context(|| format!("creating {}", state::RUN_DIR))?;

    let mut notes = Vec::new();
    let backend = match cfg.backend {
        BackendChoice::Tun => Backend::Tun,
        BackendChoice::Netem => Backend::Netem,
        BackendChoice::Auto => {
            let b = if crate::netem::available() {
                Backend::Netem
            } else {
                Backend::Tun
            };
            notes.push(format!(
                "backend auto: {b} ({})",
                if b == Backend::Netem {
                    "the kernel has netem"
                } else {
                    "no sch_netem in this kernel"
                }
            ));
            b
        }
    };

    let down_rate = cfg.down_rate_bps.unwrap_or(cfg.rate_bps);
    let mut st = LinkState {
        name: name.to_string(),
        backend,
        snd_ns: snd.clone(),
        rcv_ns: rcv.clone(),
        device: DEVICE.to_string(),
        snd_addr: SND_ADDR.to_string(),
        rcv_addr: RCV_ADDR.to_string(),
        prefix_len: PREFIX_LEN,
        rtt_ns: cfg.rtt.as_nanos() as u64,
        rate_bps: cfg.rate_bps,
        down_rate_bps: down_rate,
        queue_spec: cfg.queue.to_string(),
        queue_bytes: cfg.queue.resolve(cfg.rate_bps, cfg.rtt),
        down_queue_bytes: cfg.queue.resolve(down_rate, cfg.rtt),
        loss: cfg.loss,
        mtu: cfg.mtu,
        seed: cfg.seed,
        offload: Offload::default(),
        pm_qos: false,
        sysctls: Sysctls::default(),
        forwarder_pid: None,
        created_unix_s: now_unix(),
    };

    let mut rb = Rollback {
        name: name.to_string(),
        child: None,
        armed: true,
    };
    netns::add(&snd)?;
    netns::add(&rcv)?;
    for ns in [&snd, &rcv] {
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
    }
    st.sysctls = tune_sysctls(&snd, &rcv, cfg.tcp_mem_max, &mut notes)?;

    match backend {
        Backend::Tun => {
            let (child, offload) = start_forwarder(&st, cfg.offload, cfg.pm_qos, launcher)?;
            if cfg.pm_qos {
                notes.push(
                    "the forwarder holds /dev/cpu_dma_latency at 0 while the link is up: idle CPUs poll instead of halting (--no-pm-qos to let them sleep)"
                        .into(),
                );
            }
            st.pm_qos = cfg.pm_qos;
            st.forwarder_pid = Some(child.id());
            st.offload = offload;
            rb.child = Some(child);
        }
        Backend::Netem => crate::netem::setup(&st)?,
    }
    for (ns, addr) in [(&snd, SND_ADDR), (&rcv, RCV_ADDR)] {
        let mtu = cfg.mtu.to_string();
        ip(&[
            "-n",
            ns,
            "link",
            "set",
            "dev",
            DEVICE,
            "mtu",
            &mtu,
            "txqueuelen",
            "10000",
            "up",
        ])?;
        let cidr = format!("{addr}/{PREFIX_LEN}");
        ip(&["-n", ns, "addr", "add", &cidr, "dev", DEVICE])?;
    }
    st.save()?;
    rb.armed = false;
    Ok(UpOutcome {
        state: st,
        child: rb.child.take(),
        notes,
    })
}

/// Raises the TCP buffer limits inside both namespaces and, with a notice, the global
/// SO_RCVBUF/SO_SNDBUF caps; returns the values in effect.
fn tune_sysctls(snd: &str, rcv: &str, max: u64, notes: &mut Vec<String>) -> Result<Sysctls> {
    let rmem = format!("4096 131072 {max}");
    let wmem = format!("4096 16384 {max}");
    let mut got = Vec::new();
    for ns in [snd, rcv] {
        got.push(netns::set_sysctl_in(ns, "net.ipv4.tcp_rmem", &rmem)?);
        got.push(netns::set_sysctl_in(ns, "net.ipv4.tcp_wmem", &wmem)?);
        // A closed connection's cached ssthresh would make the next flow to the same peer
        // leave slow start early; every measurement should start from the same state.
        netns::set_sysctl_in(ns, "net.ipv4.tcp_no_metrics_save", "1")?;
    }
    // rmem_max/wmem_max are global (EINVAL inside a netns): only ever raise them, and say so.
    let mut global = Vec::new();
    for key in ["net.core.rmem_max", "net.core.wmem_max"] {
        let cur: u64 = netns::read_sysctl(key)?.trim().parse().unwrap_or(0);
        if cur < max {
            netns::write_sysctl(key, &max.to_string())?;
            notes.push(format!(
                "raised global {key} from {cur} to {max} (host-wide; not restored by down)"
            ));
        }
        global.push(netns::read_sysctl(key)?);
    }
    Ok(Sysctls {
        snd_tcp_rmem: got[0].clone(),
        snd_tcp_wmem: got[1].clone(),
        rcv_tcp_rmem: got[2].clone(),
        rcv_tcp_wmem: got[3].clone(),
        rmem_max: global[0].clone(),
        wmem_max: global[1].clone(),
    })
}

/// Starts the forwarder daemon and waits for it to report its TUN devices ready.
fn start_forwarder(
    st: &LinkState,
    offload: bool,
    pm_qos: bool,
    launcher: &Launcher,
) -> Result<(Child, Offload)> {
    let fwd = ForwarderConfig::from_state(st, offload, pm_qos);
    let config_path = state::forwarder_config_path(&st.name);
    std::fs::write(&config_path, serde_json::to_vec_pretty(&fwd)?)
        .with_context(|| format!("writing {}", config_path.display()))?;
    let log = std::fs::File::create(state::log_path(&st.name))
        .with_context(|| format!("creating {}", state::log_path(&st.name).display()))?;
    let mut cmd = Command::new(&launcher.exe);
    cmd.args(&launcher.prefix)
        .args(["--name", st.name.as_str(), "--config"])
        .arg(&config_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    // A session of its own: a Ctrl-C aimed at `up` (or at a test runner) does not reach the
    // daemon; `down` ends it by PID.
    shoal_sys::process::setsid_before_exec(&mut cmd);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting forwarder {}", launcher.exe.display()))?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let fail = |child: &mut Child, why: String| -> anyhow::Error {
        let _ = child.kill();
        let _ = child.wait();
        let log = std::fs::read_to_string(state::log_path(&st.name)).unwrap_or_default();
        anyhow::anyhow!("forwarder did not start: {why}\n{}", log.trim())
    };
    let line = match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(l) => l,
        Err(_) => return Err(fail(&mut child, "no ready line within 10 s".into())),
    };
    let Some(json) = line.trim().strip_prefix("ready ") else {
        return Err(fail(&mut child, format!("unexpected output {line:?}")));
    };
    let off: Offload = serde_json::from_str(json).context("parsing the forwarder's ready line")?;
    Ok((child, off))
}

/// kill(2) `pid` (errors ignored: the caller then waits for the process to be gone).
fn signal(pid: u32, sig: Signal) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

fn wait_gone(pid: u32, name: &str, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if !is_forwarder(pid, name) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !is_forwarder(pid, name)
}

/// SIGTERM to every process, SIGKILL to those still there after 3 s; fails naming the ones
/// that survive both.
fn stop_processes(procs: &[netns::NsProcess], ns: &str) -> Result<()> {
    let alive = |p: &netns::NsProcess| {
        std::fs::read_to_string(format!("/proc/{}/comm", p.pid))
            .map(|c| c.trim() == p.comm)
            .unwrap_or(false)
            && is_running(p.pid)
    };
    for (sig, wait) in [
        (Signal::TERM, Duration::from_secs(3)),
        (Signal::KILL, Duration::from_secs(2)),
    ] {
        // Each PID was just found in this link's namespace and is checked again by its name.
        for p in procs.iter().filter(|p| alive(p)) {
            signal(p.pid, sig);
        }
        let t0 = Instant::now();
        while t0.elapsed() < wait && procs.iter().any(alive) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let survivors: Vec<String> = procs
        .iter()
        .filter(|p| alive(p))
        .map(|p| p.to_string())
        .collect();
    if !survivors.is_empty() {
        bail!(
            "processes in {ns} survive SIGKILL: {}; the namespace is left in place",
            survivors.join(", ")
        );
    }
    Ok(())
}

/// What `down` did.
#[derive(Debug, Default)]
pub struct DownOutcome {
    /// Whether there was anything to remove.
    pub existed: bool,
    pub notes: Vec<String>,
}

/// Ends the forwarder (by its recorded PID), removes both namespaces and the state files.
pub fn down(name: &str) -> Result<DownOutcome> {
    state::validate_name(name)?;
    let mut out = DownOutcome::default();
    let st = LinkState::load(name).ok();
    if let Some(pid) = st.as_ref().and_then(|s| s.forwarder_pid) {
        out.existed = true;
        if is_forwarder(pid, name) {
            // A PID verified above to be this link's forwarder.
            signal(pid, Signal::TERM);
            if !wait_gone(pid, name, Duration::from_secs(3)) {
                out.notes
                    .push(format!("forwarder {pid} ignored SIGTERM; killed"));
                signal(pid, Signal::KILL);
                if !wait_gone(pid, name, Duration::from_secs(2)) {
                    bail!("forwarder {pid} of link {name} does not exit");
                }
            }
        } else {
            out.notes.push(format!("forwarder {pid} was not running"));
        }
    }
    for ns in [state::snd_ns(name), state::rcv_ns(name)] {
        if netns::exists(&ns) {
            out.existed = true;
            // Processes left inside would keep running, cut off, after the namespace's name
            // is gone: say which they are and stop them.
            let left = netns::processes_in(&ns)?;
            if !left.is_empty() {
                let names: Vec<String> = left.iter().map(|p| p.to_string()).collect();
                stop_processes(&left, &ns)?;
                out.notes.push(format!(
                    "stopped {} process(es) still running in {ns}: {}",
                    left.len(),
                    names.join(", ")
                ));
            }
            netns::del(&ns).with_context(|| format!("removing namespace {ns}"))?;
        }
    }
    for p in [
        state::state_path(name),
        state::stats_path(name),
        state::forwarder_config_path(name),
        state::log_path(name),
    ] {
        if p.exists() {
            out.existed = true;
            std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
        }
    }
    Ok(out)
}

/// A link that exists while this value does: `up` on creation, `down` on drop. Tests give
/// each guard a unique name so they can run in parallel.
pub struct LinkGuard {
    name: String,
    child: Option<Child>,
    state: LinkState,
    done: bool,
}

impl LinkGuard {
    /// Brings a link up, starting the forwarder as `current_exe link forward …`.
    pub fn up(cfg: &UpConfig) -> Result<LinkGuard> {
        Self::up_with(cfg, &Launcher::current_exe()?)
    }

    /// Brings a link up with an explicit forwarder program (tests use the `shoal-link` bin).
    pub fn up_with(cfg: &UpConfig, launcher: &Launcher) -> Result<LinkGuard> {
        let out = up(cfg, launcher)?;
        for n in &out.notes {
            eprintln!("shoal link: {n}");
        }
        Ok(LinkGuard {
            name: cfg.name.clone(),
            child: out.child,
            state: out.state,
            done: false,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn state(&self) -> &LinkState {
        &self.state
    }

    /// Tears the link down now, reporting errors (Drop can only ignore them).
    pub fn down(mut self) -> Result<()> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<()> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let r = down(&self.name).map(|_| ());
        // The daemon is our child here: reap it so no zombie is left behind.
        if let Some(mut c) = self.child.take() {
            if r.is_err() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        r
    }
}

impl Drop for LinkGuard {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("shoal link: tearing down {}: {e:#}", self.name);
        }
    }
}
