#!/usr/bin/env bash
# Installs what Shoal's tests and main job need on a fresh Debian machine of this kind.
# Idempotent: installs only what is missing. Needs root for apt-get (skipped otherwise).
set -euo pipefail

need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v tc >/dev/null 2>&1 || need+=(iproute2)
command -v tar >/dev/null 2>&1 || need+=(tar)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# Sweep baselines (tar|ssh, rsync -e ssh, sftp) against an sshd in the receiver namespace.
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
[ -x /usr/lib/openssh/sftp-server ] || need+=(openssh-sftp-server)
command -v rsync >/dev/null 2>&1 || need+=(rsync)
# Sweep baseline tar-tcp (tar over one plain TCP connection, socat at both ends).
command -v socat >/dev/null 2>&1 || need+=(socat)
# Sweep baselines rclone (over SFTP to that sshd) and iperf3 (one bulk TCP flow; Debian's
# package leaves its daemon off when installed non-interactively).
command -v rclone >/dev/null 2>&1 || need+=(rclone)
command -v iperf3 >/dev/null 2>&1 || need+=(iperf3)
# tests/sweep/html.rs: report.html drawn by a real browser (headless Chromium).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# docs/sweep.md's pandas example (tests/sweep/pandas_example.rs): load runs.csv, draw a chart.
python3 -c 'import pandas' >/dev/null 2>&1 || need+=(python3-pandas)
python3 -c 'import matplotlib' >/dev/null 2>&1 || need+=(python3-matplotlib)
# Host facts in meta.json: the offloads of the interface a run uses.
command -v ethtool >/dev/null 2>&1 || need+=(ethtool)
# Sweep option [sweep] dest_fs: fresh loop volumes per run (ext4 comes with e2fsprogs).
command -v mkfs.btrfs >/dev/null 2>&1 || [ -x /usr/sbin/mkfs.btrfs ] || need+=(btrfs-progs)
command -v mkfs.xfs >/dev/null 2>&1 || [ -x /usr/sbin/mkfs.xfs ] || need+=(xfsprogs)
# scripts/check/check-vendor.sh applies vendor/yamux/shoal.patch to upstream yamux.
command -v patch >/dev/null 2>&1 || need+=(patch)
command -v bash >/dev/null 2>&1 || need+=(bash)

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "setup: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # sort -u: several checks can name the same package.
    mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
    apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "setup: missing ${need[*]} (run as root to install); tests that need them will skip"
  fi
fi
