//! Baseline arms: `tar c | ssh tar x`, `rsync -a -e ssh` and `sftp -b` (recursive put) over the
//! same emulated link, against an sshd started inside the receiver namespace with throw-away
//! keys; `tar-tcp`, `tar c | tar x` over one plain TCP connection across the same link (socat at
//! both ends: no SSH window, no encryption — what the link and its cold start allow this
//! payload); and `tar-local`, `tar c | tar x` on this host with no network at all (the
//! file-system bound). Timed and verified exactly like Shoal's modes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use shoal_hostctl::proc::Proc;
pub use shoal_hostctl::shell::{command_line, shell_quote};
use shoal_matrix::arm::Arm;

/// Host alias the generated ssh_config defines.
pub const HOST: &str = "shoal-rcv";

/// An sshd inside the receiver namespace, ended (by its PID) when dropped.
pub struct Sshd {
    proc: Proc,
    pub dir: PathBuf,
    pub client_config: PathBuf,
    /// `ssh -V` output, for meta.json.
    pub version: String,
}

fn keygen(path: &Path) -> Result<()> {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "shoal-sweep", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .context("cannot run ssh-keygen (install openssh-client: scripts/setup.sh)")?;
    if !st.success() {
        bail!("ssh-keygen failed for {}", path.display());
    }
    Ok(())
}

fn user_key(dir: &Path) -> PathBuf {
    dir.join("user_ed25519")
}

fn find_sshd() -> Result<PathBuf> {
    for p in ["/usr/sbin/sshd", "/usr/bin/sshd", "/sbin/sshd"] {
        if Path::new(p).exists() {
            return Ok(PathBuf::from(p));
        }
    }
    bail!("sshd not found (install openssh-server: scripts/setup.sh)")
}

impl Sshd {
    /// Generates host and user keys under `dir`, writes sshd and client configs, starts sshd
    /// in `rcv_ns` on `addr`:22 and waits until a login from `snd_ns` works.
    pub fn start(dir: &Path, rcv_ns: &str, snd_ns: &str, addr: &str) -> Result<Sshd> {
        let sshd = find_sshd()?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        // sshd refuses to start without its privilege-separation directory.
        std::fs::create_dir_all("/run/sshd").context("creating /run/sshd")?;
        let host_key = dir.join("host_ed25519");
        let user_key = user_key(dir);
        for k in [&host_key, &user_key] {
            if !k.exists() {
                keygen(k)?;
            }
        }
        let auth = dir.join("authorized_keys");
        std::fs::copy(user_key.with_extension("pub"), &auth)?;
        let sftp_server = ["/usr/lib/openssh/sftp-server", "/usr/libexec/sftp-server"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or("internal-sftp");
        let cfg = dir.join("sshd_config");
        std::fs::write(
            &cfg,
            format!(
                "Port 22\nListenAddress {addr}\nHostKey {}\nAuthorizedKeysFile {}\n\
                 StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PermitRootLogin prohibit-password\nUsePAM no\nPidFile none\nUseDNS no\n\
                 MaxStartups 100\nCompression no\nSubsystem sftp {sftp_server}\n",
                host_key.display(),
                auth.display()
            ),
        )?;
        let client_config = dir.join("ssh_config");
        std::fs::write(
            &client_config,
            format!(
                "Host {HOST}\n  HostName {addr}\n  Port 22\n  User root\n  IdentityFile {}\n  \
                 IdentitiesOnly yes\n  UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n  \
                 BatchMode yes\n  Compression no\n  LogLevel ERROR\n",
                user_key.display()
            ),
        )?;
        let log = std::fs::File::create(dir.join("sshd.log"))?;
        let mut cmd = Command::new(&sshd);
        cmd.arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let mut proc = Proc::spawn(&mut cmd, Some(rcv_ns), "sshd")?;
        let t0 = Instant::now();
        loop {
            let mut probe = Command::new("ssh");
            probe
                .arg("-F")
                .arg(&client_config)
                .args([HOST, "true"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let mut p = Proc::spawn(&mut probe, Some(snd_ns), "ssh")?;
            let ok = p
                .wait_until(Instant::now() + Duration::from_secs(10))
                .is_some_and(|e| e.success());
            if ok {
                break;
            }
            if let Some(e) = proc.wait_until(Instant::now()) {
                bail!(
                    "sshd exited ({}): {}",
                    e.describe(),
                    shoal_hostctl::proc::tail_of(&dir.join("sshd.log"), 400)
                );
            }
            if t0.elapsed() > Duration::from_secs(15) {
                proc.kill(Duration::from_secs(1));
                bail!(
                    "no ssh login to the receiver namespace within 15 s: {}",
                    shoal_hostctl::proc::tail_of(&dir.join("sshd.log"), 400)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let version = Command::new("ssh")
            .arg("-V")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_string())
            .unwrap_or_default();
        Ok(Sshd {
            proc,
            dir: dir.to_path_buf(),
            client_config,
            version,
        })
    }

    /// The shell pipeline of one baseline arm, copying the *contents* of `src` into the
    /// existing folder `dest` on the receiver.
    pub fn command(&self, arm: Arm, src: &Path, dest: &Path, batch: &Path) -> Result<String> {
        let q = |p: &Path| shell_quote(&p.display().to_string());
        let cfg = q(&self.client_config);
        Ok(match arm {
            Arm::TarSsh => format!(
                "tar -C {} -cf - . | ssh -F {cfg} {HOST} {}",
                q(src),
                shell_quote(&format!("tar -C {} -xf -", q(dest)))
            ),
            Arm::RsyncSsh => format!(
                "rsync -a -e {} {}/ {HOST}:{}/",
                shell_quote(&format!("ssh -F {cfg}")),
                q(src),
                q(dest)
            ),
            Arm::Sftp => {
                std::fs::write(
                    batch,
                    format!(
                        "put -r {}/. {}\n",
                        sftp_quote(&src.display().to_string()),
                        sftp_quote(&dest.display().to_string())
                    ),
                )?;
                format!("sftp -F {cfg} -b {} {HOST}", q(batch))
            }
            other => bail!("{other} does not run over ssh"),
        })
    }

    /// The private key that logs in as root (for clients that take a key file: rclone).
    pub fn user_key(&self) -> PathBuf {
        user_key(&self.dir)
    }

    /// Ends sshd (and any session it still has) by its process group.
    pub fn stop(mut self) {
        self.proc.kill(Duration::from_secs(2));
    }
}

/// `tar c | tar x` on this host, copying the contents of `src` into the existing folder `dest`.
pub fn tar_local(src: &Path, dest: &Path) -> String {
    let q = |p: &Path| shell_quote(&p.display().to_string());
    format!("tar -C {} -cf - . | tar -C {} -xf -", q(src), q(dest))
}

/// Port the `tar-tcp` receiver listens on (inside the receiver namespace, on the link address).
pub const TAR_TCP_PORT: u16 = 5399;

/// What the `tar-tcp` receiver prints once it listens (socat's `-d -d` notice), so the sender
/// starts, and the clock with it, only once the receiver is ready.
pub const TAR_TCP_LISTENING: &str = "listening on";

/// The `tar-tcp` receiver: accepts one TCP connection on `addr:port` and unpacks what arrives
/// into the existing folder `dest`. It exits once tar has written the last file.
pub fn tar_tcp_receiver(dest: &Path, addr: &str, port: u16) -> String {
    format!(
        "socat -d -d -u TCP-LISTEN:{port},bind={},reuseaddr STDOUT | tar -C {} -xf -",
        shell_quote(addr),
        shell_quote(&dest.display().to_string())
    )
}

/// The `tar-tcp` sender: packs the contents of `src` into one TCP connection to `addr:port`.
/// The connection uses the namespace's default congestion controller.
pub fn tar_tcp_sender(src: &Path, addr: &str, port: u16) -> String {
    format!(
        "tar -C {} -cf - . | socat -u STDIN TCP:{}:{port}",
        shell_quote(&src.display().to_string()),
        shell_quote(addr)
    )
}

fn sftp_quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Stops a sweep before anything is created when an arm's tool is not installed on this host
/// (rclone, iperf3: the other tools come with every install of scripts/setup.sh).
pub fn check_tools(arms: impl IntoIterator<Item = Arm>) -> Result<()> {
    for arm in arms {
        let tool = match arm {
            Arm::Rclone => "rclone",
            Arm::Iperf3 => "iperf3",
            _ => continue,
        };
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            bail!("the matrix has a {arm} arm, but {tool} is not installed here (scripts/setup.sh installs it)");
        }
    }
    Ok(())
}

/// Versions of the baseline tools, for meta.json.
pub fn tool_versions() -> Vec<(String, String)> {
    // The first line of `prog arg` that contains `want` (socat's first line is its authors).
    let line = |prog: &str, arg: &str, want: &str| -> String {
        Command::new(prog)
            .arg(arg)
            .output()
            .map(|o| {
                let s = if o.stdout.is_empty() {
                    o.stderr
                } else {
                    o.stdout
                };
                String::from_utf8_lossy(&s)
                    .lines()
                    .find(|l| l.contains(want))
                    .unwrap_or_default()
                    .trim()
                    .to_string()
            })
            .unwrap_or_default()
    };
    vec![
        ("ssh".into(), line("ssh", "-V", "")),
        ("rsync".into(), line("rsync", "--version", "")),
        ("tar".into(), line("tar", "--version", "")),
        ("socat".into(), line("socat", "-V", "version")),
        ("rclone".into(), line("rclone", "version", "rclone")),
        ("iperf3".into(), line("iperf3", "--version", "iperf")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("/tmp/a-b_c.d"), "/tmp/a-b_c.d");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
