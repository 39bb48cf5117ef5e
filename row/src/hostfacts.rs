//! What one end of a run had in effect, read back from the kernel: the facts a sweep records
//! for each end in meta.json (`shoal host-facts`, run inside each namespace), and the per-run
//! counters a row carries (UDP receive errors, CPU steal).
//!
//! Everything here reads the calling process's view: `/proc/net/*` and `/proc/sys/net/*` are
//! those of its network namespace, so run it inside the namespace whose facts you want.

use std::net::IpAddr;
use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// One end's settings as the kernel reports them (strings as read, whitespace collapsed;
/// empty where unreadable).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct HostFacts {
    pub host: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub tcp_congestion_control: String,
    pub tcp_rmem: String,
    pub tcp_wmem: String,
    pub rmem_max: String,
    pub wmem_max: String,
    pub udp_mem: String,
    /// `1`: the kernel keeps no TCP metrics (ssthresh, RTT) from one connection to the next.
    pub tcp_no_metrics_save: String,
    /// The interface the route to the peer leaves by (empty without a peer).
    pub interface: String,
    pub qdisc: String,
    /// `ethtool -k` of that interface: the segmentation and checksum offloads, `feature: on|off`.
    pub offloads: Vec<String>,
    /// The destination's file system (receiver end only).
    pub dest_fs: String,
    pub dest_mount_point: String,
    pub dest_mount_options: String,
}

/// Offloads that change what a run's packets look like on the way.
const OFFLOADS: &[&str] = &[
    "tx-checksumming",
    "rx-checksumming",
    "tcp-segmentation-offload",
    "generic-segmentation-offload",
    "generic-receive-offload",
    "large-receive-offload",
    "tx-udp-segmentation",
    "rx-udp-gro-forwarding",
];

impl HostFacts {
    /// Reads this end's facts; `peer` selects the interface, `dest` the file system.
    pub fn collect(peer: Option<IpAddr>, dest: Option<&Path>) -> HostFacts {
        let sys = |p: &str| read_trimmed(&format!("/proc/sys/{p}"));
        let mut f = HostFacts {
            host: crate::metrics::host_name(),
            kernel: crate::metrics::kernel_release(),
            cpu_model: std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|t| cpu_model(&t))
                .unwrap_or_default(),
            cpus: cpus(),
            tcp_congestion_control: sys("net/ipv4/tcp_congestion_control"),
            tcp_rmem: sys("net/ipv4/tcp_rmem"),
            tcp_wmem: sys("net/ipv4/tcp_wmem"),
            rmem_max: sys("net/core/rmem_max"),
            wmem_max: sys("net/core/wmem_max"),
            udp_mem: sys("net/ipv4/udp_mem"),
            tcp_no_metrics_save: sys("net/ipv4/tcp_no_metrics_save"),
            ..Default::default()
        };
        if let Some(peer) = peer {
            f.interface = output("ip", &["-o", "route", "get", &peer.to_string()])
                .and_then(|t| route_device(&t))
                .unwrap_or_default();
        }
        if !f.interface.is_empty() {
            f.qdisc = output("tc", &["qdisc", "show", "dev", &f.interface])
                .map(|t| collapse(&t))
                .unwrap_or_default();
            f.offloads = output("ethtool", &["-k", &f.interface])
                .map(|t| offloads(&t))
                .unwrap_or_else(|| vec!["ethtool not available".into()]);
        }
        if let Some(dest) = dest {
            let dest = std::fs::canonicalize(dest).unwrap_or_else(|_| dest.to_path_buf());
            if let Some(m) = std::fs::read_to_string("/proc/self/mountinfo")
                .ok()
                .and_then(|t| mount_of(&t, &dest))
            {
                f.dest_fs = m.fs_type;
                f.dest_mount_point = m.mount_point;
                f.dest_mount_options = m.options;
            }
        }
        f
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|t| collapse(&t))
        .unwrap_or_default()
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn output(program: &str, args: &[&str]) -> Option<String> {
    let o = Command::new(program).args(args).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// `ip -o route get` → the device after `dev`.
fn route_device(text: &str) -> Option<String> {
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == "dev" {
            return words.next().map(str::to_string);
        }
    }
    None
}

fn offloads(ethtool_k: &str) -> Vec<String> {
    ethtool_k
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| OFFLOADS.contains(&k.trim()))
        .map(|(k, v)| format!("{}: {}", k.trim(), v.trim()))
        .collect()
}

struct Mount {
    mount_point: String,
    fs_type: String,
    options: String,
}

/// The mount holding `path` (the longest mount point that is a prefix of it), from
/// `/proc/self/mountinfo`: mount options from field 6, super options after the separator.
fn mount_of(mountinfo: &str, path: &Path) -> Option<Mount> {
    let mut best: Option<Mount> = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        let (Some(point), Some(opts), Some(fs)) = (left.get(4), left.get(5), right.first()) else {
            continue;
        };
        let point = point.replace("\\040", " ");
        if !path.starts_with(&point) {
            continue;
        }
        if best
            .as_ref()
            .is_some_and(|b| b.mount_point.len() > point.len())
        {
            continue;
        }
        let super_opts = right.get(2).copied().unwrap_or("");
        best = Some(Mount {
            mount_point: point,
            fs_type: fs.to_string(),
            options: format!("{opts} ({super_opts})"),
        });
    }
    best
}

/// The UDP counters that show datagrams a host dropped (`/proc/net/snmp`, `Udp:` lines).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpDrops {
    /// Datagrams dropped because the socket's receive buffer was full.
    pub rcvbuf_errors: u64,
    /// Every datagram that could not be delivered (receive-buffer errors included).
    pub in_errors: u64,
}

impl UdpDrops {
    /// This process's network namespace, now.
    pub fn read() -> Option<UdpDrops> {
        parse_snmp_udp(&std::fs::read_to_string("/proc/net/snmp").ok()?)
    }

    /// Counts since `earlier` (counters only grow; a reset reads as 0).
    pub fn since(self, earlier: UdpDrops) -> UdpDrops {
        UdpDrops {
            rcvbuf_errors: self.rcvbuf_errors.saturating_sub(earlier.rcvbuf_errors),
            in_errors: self.in_errors.saturating_sub(earlier.in_errors),
        }
    }
}

/// Parses the two `Udp:` lines of `/proc/net/snmp` (names, then values).
pub fn parse_snmp_udp(snmp: &str) -> Option<UdpDrops> {
    let mut lines = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let names: Vec<&str> = lines.next()?.split_whitespace().collect();
    let values: Vec<&str> = lines.next()?.split_whitespace().collect();
    let get = |name: &str| -> Option<u64> {
        let i = names.iter().position(|n| *n == name)?;
        values.get(i)?.parse().ok()
    };
    Some(UdpDrops {
        rcvbuf_errors: get("RcvbufErrors")?,
        in_errors: get("InErrors")?,
    })
}

/// This host's processors as the process may use them (affinity included); 0 when unknown.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// CPU time stolen from this (virtual) machine by its host so far, all CPUs, seconds.
pub fn cpu_steal_seconds() -> Option<f64> {
    parse_steal(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// This process's CPU bandwidth limit in cores (quota / period): cgroup v1's `cpu` controller
/// (`cpu.cfs_quota_us`, `cpu.cfs_period_us`) where the process has a `cpu` line, else cgroup
/// v2's `cpu.max`. None when unlimited (`-1`, `max`) or unreadable.
pub fn cpu_quota_cores() -> Option<f64> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let read = |p: String| std::fs::read_to_string(p).ok();
    match cgroup_path(&cg)? {
        (true, path) => {
            let dir = format!("/sys/fs/cgroup/cpu{}", path.trim_end_matches('/'));
            quota_v1(
                &read(format!("{dir}/cpu.cfs_quota_us"))?,
                &read(format!("{dir}/cpu.cfs_period_us"))?,
            )
        }
        (false, path) => quota_v2(&read(format!(
            "/sys/fs/cgroup{}/cpu.max",
            path.trim_end_matches('/')
        ))?),
    }
}

/// The process's group in `/proc/self/cgroup`: `(true, path)` from the v1 line whose
/// controllers include `cpu`, else `(false, path)` from the v2 line (`0::path`).
fn cgroup_path(text: &str) -> Option<(bool, &str)> {
    let v1 = text.lines().find_map(|l| {
        let mut it = l.splitn(3, ':');
        let (_, ctrl, path) = (it.next()?, it.next()?, it.next()?);
        ctrl.split(',').any(|c| c == "cpu").then_some(path)
    });
    match v1 {
        Some(p) => Some((true, p)),
        None => text
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .map(|p| (false, p)),
    }
}

/// Cores from v1's quota and period files (quota `-1`: unlimited).
fn quota_v1(quota: &str, period: &str) -> Option<f64> {
    let q: i64 = quota.trim().parse().ok()?;
    let p: i64 = period.trim().parse().ok()?;
    (q > 0 && p > 0).then(|| q as f64 / p as f64)
}

/// Cores from v2's `cpu.max` (`quota period`; quota `max`: unlimited).
fn quota_v2(max: &str) -> Option<f64> {
    let mut it = max.split_whitespace();
    let (q, p) = (it.next()?, it.next()?);
    quota_v1(q, p)
}

fn parse_steal(stat: &str) -> Option<f64> {
    // cpu user nice system idle iowait irq softirq steal …, in USER_HZ (100 on Linux).
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let steal: u64 = line.split_whitespace().nth(8)?.parse().ok()?;
    Some(steal as f64 / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_counters_are_read_by_name() {
        let snmp = "Tcp: RtoAlgorithm RtoMin\nTcp: 1 200\n\
            Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
            Udp: 100 2 37 90 35 0 0 0 0\n\
            UdpLite: InDatagrams NoPorts InErrors\nUdpLite: 0 0 9\n";
        let d = parse_snmp_udp(snmp).unwrap();
        assert_eq!(
            d,
            UdpDrops {
                rcvbuf_errors: 35,
                in_errors: 37
            }
        );
        let later = UdpDrops {
            rcvbuf_errors: 40,
            in_errors: 45,
        };
        assert_eq!(later.since(d).rcvbuf_errors, 5);
        assert_eq!(later.since(d).in_errors, 8);
        assert!(parse_snmp_udp("Tcp: a\nTcp: 1\n").is_none());
    }

    #[test]
    fn cpu_quota_under_both_cgroup_versions() {
        let v1 = "12:pids:/user.slice\n4:cpu,cpuacct:/shoal-q\n1:name=systemd:/x\n0::/\n";
        assert_eq!(cgroup_path(v1), Some((true, "/shoal-q")));
        assert_eq!(
            cgroup_path("0::/system.slice/a\n"),
            Some((false, "/system.slice/a"))
        );
        assert_eq!(cgroup_path("3:memory:/m\n"), None);
        assert_eq!(quota_v1("20000\n", "100000\n"), Some(0.2));
        assert_eq!(quota_v1("-1\n", "100000\n"), None);
        assert_eq!(quota_v2("150000 100000\n"), Some(1.5));
        assert_eq!(quota_v2("max 100000\n"), None);
    }

    #[test]
    fn steal_is_the_eighth_cpu_field() {
        let stat = "cpu  100 0 50 1000 5 0 2 250 0 0\ncpu0 50 0 25 500 2 0 1 125 0 0\n";
        assert_eq!(parse_steal(stat), Some(2.5));
    }

    #[test]
    fn the_longest_mount_prefix_wins() {
        let mi = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
            30 22 0:26 / /dev/shm rw,nosuid shared:2 - tmpfs tmpfs rw,size=100k\n";
        let m = mount_of(mi, Path::new("/dev/shm/x")).unwrap();
        assert_eq!(
            (m.fs_type.as_str(), m.mount_point.as_str()),
            ("tmpfs", "/dev/shm")
        );
        assert_eq!(m.options, "rw,nosuid (rw,size=100k)");
        let m = mount_of(mi, Path::new("/work/dst")).unwrap();
        assert_eq!(m.fs_type, "ext4");
    }

    #[test]
    fn route_and_offload_parsing() {
        assert_eq!(
            route_device("198.18.0.2 dev shoal0 src 198.18.0.1 uid 0 \\    cache").as_deref(),
            Some("shoal0")
        );
        let k = "Features for lo:\nrx-checksumming: on [fixed]\ntx-checksumming: on\n\
            \ttx-checksum-ipv4: off [fixed]\ntcp-segmentation-offload: on\nntuple-filters: off\n";
        assert_eq!(
            offloads(k),
            vec![
                "rx-checksumming: on [fixed]",
                "tx-checksumming: on",
                "tcp-segmentation-offload: on"
            ]
        );
    }
}
