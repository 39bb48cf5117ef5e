//! Every result says which build produced it: `shoal --version` names the commit and whether
//! the tree was dirty, and every row carries them with the SHA-256 of the binary that ran.

use crate::support;

use support::*;

#[test]
fn version_and_every_row_name_the_build() {
    let out = run(&["--version"]);
    assert!(out.status.success());
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let commit = version
        .split("commit ")
        .nth(1)
        .and_then(|r| r.get(..40))
        .unwrap_or_else(|| panic!("no commit in {version:?}"))
        .to_string();
    assert!(commit.chars().all(|c| c.is_ascii_hexdigit()), "{version}");

    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    gen(&src, 20, "1KiB", 2, 3);
    let rx = ReceiverProc::start(&t.path().join("id"), &t.path().join("dst"), &[]);
    let out = rx.send(&src, &["--mode", "quic-bundle", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let row: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(row["shoal_commit"], commit.as_str());
    assert_eq!(
        row["shoal_dirty"].as_bool().unwrap(),
        version.contains("dirty tree")
    );
    let sha = std::process::Command::new("sha256sum")
        .arg(env!("CARGO_BIN_EXE_shoal"))
        .output()
        .unwrap();
    let sha = String::from_utf8_lossy(&sha.stdout);
    assert_eq!(row["shoal_sha256"], sha.split_whitespace().next().unwrap());
    // QUIC rows say whether a namespace dropped datagrams during the run.
    assert!(row["sender_udp_rcvbuf_errors"].is_u64(), "{row}");
    assert!(row["sender_udp_in_errors"].is_u64(), "{row}");
    assert!(row["cpu_steal_seconds"].is_f64(), "{row}");
}

/// Where the build host's glibc loads packed relative relocations (2.36 and later), the binary
/// carries them packed (`DT_RELR`): the loader reads a few KB at start instead of ~0.5 MB of
/// `.rela.dyn`, so every Shoal process is that much smaller resident
/// (docs/decisions/0031-packed-relocations.md).
#[test]
fn the_binary_packs_its_relative_relocations_where_glibc_loads_them() {
    let glibc = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let version: Vec<u32> = glibc
        .trim_start_matches("glibc ")
        .split('.')
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    if version.len() < 2 || (version[0], version[1]) < (2, 36) {
        eprintln!("skipped: build host glibc {glibc:?} predates DT_RELR");
        return;
    }
    let elf = std::fs::read(shoal_bin()).unwrap();
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
    assert_eq!(&elf[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
    // PT_DYNAMIC's entries (d_tag, d_val), up to DT_NULL.
    let dynamic = (0..phnum)
        .map(|i| phoff + i * phentsize)
        .find(|&p| u32::from_le_bytes(elf[p..p + 4].try_into().unwrap()) == 2)
        .map(|p| u64_at(p + 8) as usize)
        .expect("a dynamically linked binary");
    let tags: Vec<u64> = (0..)
        .map(|i| u64_at(dynamic + 16 * i))
        .take_while(|&tag| tag != 0)
        .collect();
    const DT_RELR: u64 = 36;
    assert!(tags.contains(&DT_RELR), "no DT_RELR among {tags:?}");
}
