//! The userspace delay line: one thread per direction reads packets from one TUN, schedules
//! them with [`LinkSchedule`] and writes them to the other TUN when they are due.
//!
//! Timing: the thread sleeps in `ppoll` (nanosecond timeout, timer slack set to 1 ns) until
//! shortly before the head packet is due, then spins the last stretch, so packets leave within
//! microseconds of their deadline instead of on a 1 ms tick. Arrivals are timestamped with
//! `CLOCK_MONOTONIC` as they are read. Writing into the receiving TUN runs the receiving
//! kernel stack in this thread, so this thread's CPU includes that work (see docs/link.md).

pub mod admit;
pub mod loss;
pub mod schedule;
pub mod segment;

use std::collections::VecDeque;
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rustix::event::{PollFd, PollFlags};

use crate::forwarder::admit::{admit, Piece};
use crate::forwarder::schedule::{LinkSchedule, LossGen};
use crate::ipc::{
    BlackholeStats, DirStats, DirectionConfig, ForwarderConfig, ForwarderStats, BLACKHOLE_SIGNAL,
    LOSS_SIGNAL,
};
use crate::tun::Tun;
use crate::vnet::{self, VNET_HDR_LEN};

/// Sleep until this long before a deadline, then spin: a VM's timer wake-ups are tens of
/// microseconds late, spinning the rest keeps delivery within a few microseconds.
const SPIN_NS: u64 = 15_000;
/// Deliver a packet this early rather than spin for it: far below anything a link models.
const EARLY_NS: u64 = 10_000;
/// Longest sleep, so a stop request is noticed promptly.
const MAX_SLEEP_NS: u64 = 50_000_000;
/// Read at most this many packets before checking for due deliveries again.
const READ_BATCH: usize = 64;
/// Largest frame: a 64 KiB GSO packet plus the vnet header, with room to spare.
const FRAME_BUF: usize = 65_536 + VNET_HDR_LEN + 4096;

pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Makes this thread's timer wake-ups precise (the default slack is 50 µs).
pub fn set_fine_timer_slack() {
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
}

/// Puts the calling thread in SCHED_FIFO at a low real-time priority, so builds or other
/// CPU hogs on the machine cannot delay deliveries by a whole scheduler slice (observed: tens
/// of ms on a busy 2-core VM). The threads sleep between packets, and the kernel's RT
/// throttling still reserves CPU for everything else. Returns whether it worked.
pub fn set_realtime(priority: i32) -> bool {
    shoal_sys::process::set_sched_fifo(priority)
}

/// Holds `/dev/cpu_dma_latency` at 0 µs for as long as the returned file stays open (the
/// kernel drops the request when it closes, i.e. when the forwarder exits). Under a VM's
/// `haltpoll` cpuidle driver an idle vCPU otherwise halts, and waking it took 1–10 ms here:
/// with the hold, >1 ms-late deliveries of sparse probes fell from ~6 % to ~0.1 %. The cost:
/// idle CPUs poll instead of halting while the link is up (host-wide).
pub fn hold_cpu_latency_zero() -> io::Result<std::fs::File> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")?;
    f.write_all(&0i32.to_ne_bytes())?;
    Ok(f)
}

/// Live counters of one direction, shared with the stats writer.
#[derive(Default, Debug)]
pub struct DirCounters {
    pub received: AtomicU64,
    pub forwarded: AtomicU64,
    pub forwarded_wire_bytes: AtomicU64,
    pub forwarded_segments: AtomicU64,
    pub dropped_queue: AtomicU64,
    pub dropped_loss: AtomicU64,
    pub dropped_blackhole: AtomicU64,
    pub write_errors: AtomicU64,
    pub late_max_ns: AtomicU64,
    pub late_over_1ms: AtomicU64,
}

impl DirCounters {
    pub fn snapshot(&self) -> DirStats {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        DirStats {
            received: g(&self.received),
            forwarded: g(&self.forwarded),
            forwarded_wire_bytes: g(&self.forwarded_wire_bytes),
            forwarded_segments: g(&self.forwarded_segments),
            dropped_queue: g(&self.dropped_queue),
            dropped_loss: g(&self.dropped_loss),
            dropped_blackhole: g(&self.dropped_blackhole),
            write_errors: g(&self.write_errors),
            late_max_us: g(&self.late_max_ns) / 1000,
            late_over_1ms: g(&self.late_over_1ms),
        }
    }
}

/// A blackhole deadline shared by the daemon (which sets it) and both directions (which
/// drop every packet that arrives before it): CLOCK_MONOTONIC ns, 0 = none.
#[derive(Debug, Default)]
pub struct Blackhole {
    until_ns: AtomicU64,
    requests: AtomicU64,
}

impl Blackhole {
    /// Black-holes the link for `ms` milliseconds from now (0: ends it now).
    pub fn set_for_ms(&self, ms: u64) {
        let until = if ms == 0 {
            0
        } else {
            monotonic_ns().saturating_add(ms.saturating_mul(1_000_000))
        };
        self.until_ns.store(until, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether a packet that arrived at `now_ns` falls into a blackhole.
    pub fn drops_at(&self, now_ns: u64) -> bool {
        now_ns < self.until_ns.load(Ordering::Relaxed)
    }

    pub fn snapshot(&self) -> BlackholeStats {
        let left = self
            .until_ns
            .load(Ordering::Relaxed)
            .saturating_sub(monotonic_ns());
        BlackholeStats {
            active: left > 0,
            remaining_ms: left.div_ceil(1_000_000),
            requests: self.requests.load(Ordering::Relaxed),
        }
    }
}

/// Waits until `fd` is readable or `timeout_ns` passes.
fn wait_readable(fd: impl AsFd, timeout_ns: u64) {
    let mut pfd = [PollFd::new(&fd, PollFlags::IN)];
    let ts = rustix::event::Timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as _,
        tv_nsec: (timeout_ns % 1_000_000_000) as _,
    };
    let _ = rustix::event::poll(&mut pfd, Some(&ts));
}

/// Moves packets from `input` to `output` until `stop` is set. A packet that arrives while
/// `blackhole` is active is dropped before it enters the link (like netem's `loss 100%`);
/// packets already on the link are delivered.
pub fn run_direction(
    input: &Tun,
    output: &Tun,
    cfg: &DirectionConfig,
    counters: &DirCounters,
    blackhole: &Blackhole,
    live_loss: &crate::forwarder::loss::LiveLoss,
    stop: &AtomicBool,
) -> Result<()> {
    set_fine_timer_slack();
    if !set_realtime(10) {
        eprintln!("forwarder: SCHED_FIFO refused; timing will suffer when the CPU is busy");
    }
    let vnet = input.offload.vnet_hdr;
    let mut sched = LinkSchedule::new(cfg.rate_bps, cfg.delay_ns, cfg.queue_bytes);
    let mut loss = LossGen::new(cfg.loss, cfg.seed);
    let mut queue: VecDeque<Piece> = VecDeque::new();
    let mut admitted: Vec<Piece> = Vec::new();
    let mut buf = vec![0u8; FRAME_BUF];
    let c = counters;

    while !stop.load(Ordering::Relaxed) {
        // 1. Take in what has arrived, timestamping each packet as it is read.
        for _ in 0..READ_BATCH {
            match input.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let now = monotonic_ns();
                    c.received.fetch_add(1, Ordering::Relaxed);
                    let frame = &buf[..n];
                    if blackhole.drops_at(now) {
                        let n = vnet::wire_size(frame, vnet).segments as u64;
                        c.dropped_blackhole.fetch_add(n, Ordering::Relaxed);
                        continue;
                    }
                    // The loss rate may change while the link runs (the sweep's loss axis).
                    loss.set_p(live_loss.p());
                    let d = admit(frame, vnet, now, &mut sched, &mut loss, &mut admitted);
                    c.dropped_loss.fetch_add(d.loss, Ordering::Relaxed);
                    c.dropped_queue.fetch_add(d.queue, Ordering::Relaxed);
                    queue.extend(admitted.drain(..));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("reading from TUN"),
            }
        }

        // 2. Deliver everything that is due.
        let mut now = monotonic_ns();
        while let Some(p) = queue.front() {
            if p.deliver_ns > now + EARLY_NS {
                break;
            }
            let p = queue.pop_front().expect("front exists");
            match output.write(&p.frame) {
                Ok(_) => {
                    let w = p.wire;
                    c.forwarded.fetch_add(1, Ordering::Relaxed);
                    c.forwarded_wire_bytes.fetch_add(w.bytes, Ordering::Relaxed);
                    c.forwarded_segments
                        .fetch_add(w.segments as u64, Ordering::Relaxed);
                }
                // The receiving side is gone or refuses the frame: count it, keep going.
                Err(_) => {
                    c.write_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            now = monotonic_ns();
            let late = now.saturating_sub(p.deliver_ns);
            c.late_max_ns.fetch_max(late, Ordering::Relaxed);
            if late > 1_000_000 {
                c.late_over_1ms.fetch_add(1, Ordering::Relaxed);
            }
        }

        // 3. Sleep until the next deadline (minus the spin margin) or the next arrival.
        let wait = match queue.front() {
            Some(p) => p.deliver_ns.saturating_sub(now),
            None => MAX_SLEEP_NS,
        };
        if wait > SPIN_NS {
            wait_readable(input, (wait - SPIN_NS).min(MAX_SLEEP_NS));
        }
        // Otherwise loop straight round: a non-blocking read, then the deadline check.
    }
    Ok(())
}

fn write_stats(path: &Path, stats: &ForwarderStats) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(stats)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

/// Blocks the termination signals and the blackhole signal in this thread (and threads it
/// spawns later) so they can be taken synchronously with `sigtimedwait`: no handler, no
/// global flag.
fn block_daemon_signals() -> libc::sigset_t {
    shoal_sys::signal::block_signals(&[
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        BLACKHOLE_SIGNAL,
        LOSS_SIGNAL,
    ])
}

/// Waits up to `timeout` for one of `set`; the signal's info if one arrived.
fn wait_signal(set: &libc::sigset_t, timeout: Duration) -> Option<libc::siginfo_t> {
    shoal_sys::signal::wait_signal(set, timeout)
}

/// Acts on a blackhole request: the duration (ms) travels as the signal's value, so a plain
/// `kill -USR1` (no value) is ignored rather than guessed at.
fn take_blackhole_request(info: &libc::siginfo_t, blackhole: &Blackhole) {
    let Some(ms) = shoal_sys::signal::queued_value(info) else {
        eprintln!(
            "forwarder: ignored a blackhole signal without a duration (use `shoal link blackhole`)"
        );
        return;
    };
    let ms = ms as u64;
    blackhole.set_for_ms(ms);
    if ms == 0 {
        eprintln!("forwarder: blackhole ended");
    } else {
        eprintln!("forwarder: blackhole for {ms} ms: dropping every packet, both directions");
    }
}

/// Redirects stdout to /dev/null, which tells the parent (reading our stdout) that we are
/// detached, and keeps stray prints from failing on a closed pipe.
fn detach_stdout() -> Result<()> {
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .context("opening /dev/null")?;
    rustix::stdio::dup2_stdout(&null)
        .map_err(io::Error::from)
        .context("dup2 stdout")
}

/// The forwarder daemon: creates both TUN devices, reports `ready <offload>` on stdout,
/// forwards until SIGTERM/SIGINT, writing counters to the stats file every 250 ms.
pub fn run_daemon(cfg: &ForwarderConfig) -> Result<()> {
    let sigs = block_daemon_signals();
    let _pm_qos = if cfg.pm_qos {
        match hold_cpu_latency_zero() {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!(
                    "forwarder: cannot hold /dev/cpu_dma_latency at 0 ({e}); timing may suffer"
                );
                None
            }
        }
    } else {
        None
    };
    let (dev, off) = (cfg.device.clone(), cfg.offload);
    let snd = crate::netns::run_in(&cfg.snd_ns, || Tun::open(&dev, off))
        .with_context(|| format!("creating TUN {} in {}", cfg.device, cfg.snd_ns))?;
    let rcv = crate::netns::run_in(&cfg.rcv_ns, || Tun::open(&dev, off))
        .with_context(|| format!("creating TUN {} in {}", cfg.device, cfg.rcv_ns))?;
    let offload = if snd.offload == rcv.offload {
        snd.offload
    } else {
        anyhow::bail!("the two TUN devices accepted different offloads")
    };
    println!("ready {}", serde_json::to_string(&offload)?);
    detach_stdout()?;

    let stop = Arc::new(AtomicBool::new(false));
    let blackhole = Arc::new(Blackhole::default());
    // Both directions start with the same loss (`shoal link up --loss`).
    let live_loss = Arc::new(crate::forwarder::loss::LiveLoss::new(cfg.up.loss));
    let up = Arc::new(DirCounters::default());
    let down = Arc::new(DirCounters::default());
    let snd = Arc::new(snd);
    let rcv = Arc::new(rcv);

    let spawn = |name: &str,
                 input: Arc<Tun>,
                 output: Arc<Tun>,
                 dcfg: DirectionConfig,
                 counters: Arc<DirCounters>| {
        let stop = stop.clone();
        let blackhole = blackhole.clone();
        let live_loss = live_loss.clone();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let r = run_direction(
                    &input, &output, &dcfg, &counters, &blackhole, &live_loss, &stop,
                );
                if let Err(e) = &r {
                    eprintln!("forwarder direction failed: {e:#}");
                }
                // One direction dying makes the link useless: stop the other as well.
                stop.store(true, Ordering::Relaxed);
                r
            })
    };
    let t_up = spawn(
        "fwd-up",
        snd.clone(),
        rcv.clone(),
        cfg.up.clone(),
        up.clone(),
    )?;
    let t_down = spawn("fwd-down", rcv, snd, cfg.down.clone(), down.clone())?;

    let snapshot = |stopped| ForwarderStats {
        up: up.snapshot(),
        down: down.snapshot(),
        stopped,
        blackhole: Some(blackhole.snapshot()),
        loss: Some(live_loss.snapshot()),
    };
    write_stats(&cfg.stats_path, &snapshot(false))?;
    while !stop.load(Ordering::Relaxed) {
        // Stats are written after every signal, so a blackhole request is confirmed at once.
        match wait_signal(&sigs, Duration::from_millis(250)) {
            Some(info) if info.si_signo == BLACKHOLE_SIGNAL => {
                take_blackhole_request(&info, &blackhole)
            }
            Some(info) if info.si_signo == LOSS_SIGNAL => {
                // A plain `kill -USR2` (no value) is ignored rather than read as 0.
                match shoal_sys::signal::queued_value(&info) {
                    Some(ppb) => live_loss.take(ppb),
                    None => eprintln!("forwarder: ignored a loss signal without a value"),
                }
            }
            Some(_) => stop.store(true, Ordering::Relaxed),
            None => {}
        }
        if let Err(e) = write_stats(&cfg.stats_path, &snapshot(false)) {
            eprintln!("{e:#}");
        }
    }
    let r1 = t_up
        .join()
        .map_err(|_| anyhow::anyhow!("up thread panicked"))?;
    let r2 = t_down
        .join()
        .map_err(|_| anyhow::anyhow!("down thread panicked"))?;
    write_stats(&cfg.stats_path, &snapshot(true))?;
    r1.and(r2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_comes_from_the_link_state_and_survives_its_file() {
        let st: crate::state::LinkState = serde_json::from_value(serde_json::json!({
            "name": "n", "backend": "tun", "snd_ns": "n-snd", "rcv_ns": "n-rcv",
            "device": "shoal0", "snd_addr": "198.18.0.1", "rcv_addr": "198.18.0.2",
            "prefix_len": 30, "rtt_ns": 141_000_000u64, "rate_bps": 300_000_000u64,
            "down_rate_bps": 100_000_000u64, "queue_spec": "1bdp",
            "queue_bytes": 5_287_500u64, "down_queue_bytes": 1_762_500u64, "loss": 0.001,
            "mtu": 1500, "seed": 9,
            "offload": serde_json::to_value(crate::tun::Offload::default()).unwrap(),
            "sysctls": serde_json::to_value(crate::state::Sysctls::default()).unwrap(),
            "forwarder_pid": null, "created_unix_s": 0
        }))
        .unwrap();
        let c = ForwarderConfig::from_state(&st, false, true);
        assert_eq!(c.up.delay_ns, 70_500_000);
        assert_eq!(c.down.rate_bps, 100_000_000);
        assert_eq!(c.up.loss, 0.001);
        assert_ne!(c.up.seed, c.down.seed);
        assert!(!c.offload);
        assert!(c.pm_qos);
        let back: ForwarderConfig =
            serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn blackhole_drops_until_its_deadline() {
        let b = Blackhole::default();
        let now = monotonic_ns();
        assert!(!b.drops_at(now));
        assert_eq!(b.snapshot(), BlackholeStats::default());
        b.set_for_ms(60_000);
        assert!(b.drops_at(monotonic_ns()));
        assert!(!b.drops_at(now + 61_000_000_000));
        let s = b.snapshot();
        assert!(
            s.active && (59_000..=60_000).contains(&s.remaining_ms),
            "{s:?}"
        );
        assert_eq!(s.requests, 1);
        b.set_for_ms(0);
        assert!(!b.drops_at(monotonic_ns()));
        assert!(!b.snapshot().active);
        assert_eq!(b.snapshot().requests, 2);
    }

    #[test]
    fn stats_from_an_older_forwarder_have_no_blackhole() {
        let mut v = serde_json::to_value(ForwarderStats::default()).unwrap();
        v.as_object_mut().unwrap().remove("blackhole");
        v["up"].as_object_mut().unwrap().remove("dropped_blackhole");
        let s: ForwarderStats = serde_json::from_value(v).unwrap();
        assert_eq!(s.blackhole, None);
        assert_eq!(s.up.dropped_blackhole, 0);
    }
}
