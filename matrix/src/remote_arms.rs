//! Which baseline arms a two-host sweep can run, decided before anything runs: `tar-tcp` needs
//! a receiver started with `--allow-baselines` (asked at first contact), the ssh arms need
//! `[link] ssh`, and `tar-local` has no place across hosts (it copies on one host).

use std::collections::BTreeMap;

use anyhow::{bail, Result};

use crate::arm::Arm;
use crate::linkspec::RemoteReceiver;

/// Refuses, naming the configuration, an arm the matrix cannot run against remote receiver `r`.
pub fn check_arms(
    configs: impl IntoIterator<Item = (Arm, String)>,
    r: &RemoteReceiver,
) -> Result<()> {
    for (arm, label) in configs {
        match arm {
            Arm::TarLocal => bail!(
                "{label}: tar-local copies on one host (the local file-system bound); run it in a local sweep, not across hosts"
            ),
            Arm::Iperf3 if r.ssh.is_none() => bail!(
                "{label}: iperf3 across hosts starts its server on {} through [link] ssh = \"user@host\" (docs/two-hosts.md, \"Baselines across two hosts\")",
                r.receiver
            ),
            Arm::Rclone if r.ssh.is_some() => {
                let target = r.ssh.as_deref().unwrap_or_default();
                crate::rclone::login(target, &r.ssh_opts)
                    .map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
            }
            a if a.over_ssh() && r.ssh.is_none() => bail!(
                "{label}: {a} across hosts needs [link] ssh = \"user@host\", the login on {} it copies through (docs/two-hosts.md, \"Baselines across two hosts\")",
                r.receiver
            ),
            _ => {}
        }
    }
    Ok(())
}

/// At first contact: a `tar-tcp` arm needs the receiver to say it runs baselines.
pub fn check_receiver(
    arms: impl IntoIterator<Item = Arm>,
    receiver: &str,
    facts: &BTreeMap<String, String>,
) -> Result<()> {
    let allowed = facts.get("allow_baselines").map(String::as_str) == Some("true");
    if !allowed && arms.into_iter().any(|a| a == Arm::TarTcp) {
        bail!(
            "the matrix has a tar-tcp arm, but the receiver at {receiver} was not started with \
             --allow-baselines (it would refuse to run tar -x for it): restart it as `shoal recv \
             --control --allow-baselines …` (docs/two-hosts.md) or drop the tar-tcp arm"
        );
    }
    Ok(())
}

/// The host part of `host:port` (brackets of an IPv6 address removed).
pub fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(ssh: Option<&str>) -> RemoteReceiver {
        RemoteReceiver {
            receiver: "hostB:7474".into(),
            pin: None,
            token_file: None,
            ssh: ssh.map(String::from),
            ssh_opts: Vec::new(),
        }
    }

    #[test]
    fn ssh_arms_need_a_login_and_tar_local_stays_local() {
        let tar_tcp = [(Arm::TarTcp, "c1".to_string())];
        assert!(check_arms(tar_tcp.clone(), &remote(None)).is_ok());
        let e = check_arms([(Arm::Sftp, "c2".into())], &remote(None)).unwrap_err();
        assert!(e.to_string().contains("[link] ssh"), "{e}");
        assert!(check_arms([(Arm::Sftp, "c2".into())], &remote(Some("me@b"))).is_ok());
        let e = check_arms([(Arm::TarLocal, "c3".into())], &remote(Some("me@b"))).unwrap_err();
        assert!(e.to_string().contains("one host"), "{e}");
    }

    #[test]
    fn tar_tcp_needs_the_receivers_consent() {
        let mut facts = BTreeMap::new();
        let e = check_receiver([Arm::TarTcp], "b:1", &facts).unwrap_err();
        assert!(e.to_string().contains("--allow-baselines"), "{e}");
        assert!(check_receiver([Arm::Shoal, Arm::TarSsh], "b:1", &facts).is_ok());
        facts.insert("allow_baselines".into(), "true".into());
        assert!(check_receiver([Arm::TarTcp], "b:1", &facts).is_ok());
    }

    #[test]
    fn ssh_targets_are_one_login_never_an_option() {
        use crate::linkspec::check_ssh_target;
        for good in [
            "me@hostB",
            "hostB",
            "root@198.18.0.2",
            "me@host.example.org",
        ] {
            assert!(check_ssh_target(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "me@",
            "-oProxyCommand=x",
            "me@b c",
            "me@b:22",
            "a@b@c",
            "me@b\n",
        ] {
            assert!(check_ssh_target(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn hosts_of_addresses() {
        assert_eq!(host_of("hostB:7474"), "hostB");
        assert_eq!(host_of("198.18.0.2:5"), "198.18.0.2");
        assert_eq!(host_of("[::1]:7474"), "::1");
    }
}
