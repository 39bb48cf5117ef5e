//! The `rclone` arm's SFTP login and command line. rclone's SFTP client is its own (Go), not
//! OpenSSH: it takes host, port, user and key file as settings, so across two hosts `[link]
//! ssh` and the `ssh_opts` it can take (`-i KEY`, `-p PORT`, `-o Port=N`, `-o
//! IdentityFile=KEY`, `-l USER`) are translated, and any other option is refused before the
//! first run rather than silently dropped.

use anyhow::{bail, Result};

/// `--transfers` (and `--checkers`) when the configuration has no `rclone-transfers` axis:
/// rclone's own default number of transfers.
pub const DEFAULT_TRANSFERS: i64 = 4;

/// Options that change nothing rclone does (it fails rather than prompts, checks no host key
/// unless given a known_hosts file, offers only the key it is given, and logs on its own).
const HARMLESS: &[&str] = &[
    "BatchMode",
    "StrictHostKeyChecking",
    "UserKnownHostsFile",
    "IdentitiesOnly",
    "LogLevel",
];

/// Where rclone's SFTP client logs in.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Login {
    pub host: String,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub key_file: Option<String>,
}

impl Login {
    /// rclone's on-the-fly remote for `path` on that host: `:sftp,host=H,…:PATH` (values
    /// double-quoted, a `"` doubled, as rclone's connection strings take them).
    pub fn remote(&self, path: &str) -> String {
        let q = |v: &str| format!("\"{}\"", v.replace('"', "\"\""));
        let mut s = format!(":sftp,host={}", q(&self.host));
        if let Some(u) = &self.user {
            s.push_str(&format!(",user={}", q(u)));
        }
        if let Some(p) = self.port {
            s.push_str(&format!(",port={p}"));
        }
        if let Some(k) = &self.key_file {
            s.push_str(&format!(",key_file={}", q(k)));
        }
        format!("{s}:{path}")
    }
}

/// `rclone copy SRC REMOTE --transfers N --checkers N`, as words (no shell). No config file
/// (`--config /dev/null`): the remote is on the command line. Its progress every 5 s goes to
/// the run's log (`--stats 5s`, one line, at the default log level). Everything else is rclone's
/// default, as a user gets it: size-and-time checks against the (fresh, empty) destination,
/// modification times set, and the upload's MD5 checked by running `md5sum` on the receiving
/// host, which its sshd allows.
pub fn argv(src: &str, remote: &str, transfers: i64) -> Vec<String> {
    let n = transfers.to_string();
    ["copy", src, remote, "--transfers", &n, "--checkers", &n]
        .into_iter()
        .chain(["--config", "/dev/null", "--stats", "5s", "--stats-one-line"])
        .chain(["--stats-log-level", "NOTICE"])
        .map(String::from)
        .collect()
}

/// The login for `target` (`[link] ssh`, `user@host` or `host`) and `opts` (`[link]
/// ssh_opts`), or the option rclone cannot take.
pub fn login(target: &str, opts: &[String]) -> Result<Login> {
    let (user, host) = match target.split_once('@') {
        Some((u, h)) => (Some(u.to_string()), h.to_string()),
        None => (None, target.to_string()),
    };
    let mut l = Login {
        host,
        user,
        ..Default::default()
    };
    let mut it = opts.iter();
    while let Some(o) = it.next() {
        // `-i KEY` or `-iKEY`, likewise -p, -l and -o.
        let (flag, attached) = match o.strip_prefix('-') {
            Some(rest) if !rest.is_empty() => rest.split_at(1),
            _ => bail!("rclone: ssh_opts {o:?} is not an option"),
        };
        let mut value = || -> Result<String> {
            if !attached.is_empty() {
                return Ok(attached.to_string());
            }
            it.next()
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("rclone: ssh_opts {o:?} without its value"))
        };
        match flag {
            "i" => l.key_file = Some(value()?),
            "l" => l.user = Some(value()?),
            "p" => l.port = Some(port(&value()?)?),
            "o" => {
                let v = value()?;
                let (k, val) = v.split_once('=').unwrap_or((v.as_str(), ""));
                match k {
                    "Port" => l.port = Some(port(val)?),
                    "IdentityFile" => l.key_file = Some(val.to_string()),
                    "User" => l.user = Some(val.to_string()),
                    k if HARMLESS.contains(&k) => {}
                    _ => bail!(
                        "rclone's SFTP client cannot take ssh_opts -o {v} (it takes -i, -p, -l and -o Port=, IdentityFile=, User=)"
                    ),
                }
            }
            _ => bail!(
                "rclone's SFTP client cannot take ssh_opts {o} (it takes -i, -p, -l and -o Port=, IdentityFile=, User=)"
            ),
        }
    }
    Ok(l)
}

fn port(v: &str) -> Result<u16> {
    v.parse()
        .map_err(|_| anyhow::anyhow!("rclone: port {v:?} is not a port number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn logins_from_ssh_options() {
        let l = login("me@hostB", &s(&["-i", "/k/id key", "-o", "Port=2222"])).unwrap();
        assert_eq!(
            l.remote("/in/0a"),
            ":sftp,host=\"hostB\",user=\"me\",port=2222,key_file=\"/k/id key\":/in/0a"
        );
        let l = login(
            "hostB",
            &s(&["-p2200", "-oIdentityFile=k", "-o", "BatchMode=yes"]),
        )
        .unwrap();
        assert_eq!(
            l,
            Login {
                host: "hostB".into(),
                port: Some(2200),
                user: None,
                key_file: Some("k".into())
            }
        );
        for bad in [
            &["-F", "cfg"][..],
            &["-o", "ProxyJump=x"],
            &["-i"],
            &["-o", "Port=x"],
        ] {
            assert!(login("me@b", &s(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn command_words() {
        assert_eq!(
            argv("/src", ":sftp,host=\"h\":/d", 16).join(" "),
            "copy /src :sftp,host=\"h\":/d --transfers 16 --checkers 16 --config /dev/null \
             --stats 5s --stats-one-line --stats-log-level NOTICE"
        );
    }
}
