//! Names people really have (issue 7): spaces, newlines, NFC and NFD forms side by side,
//! leading dashes, 255-byte names, invalid UTF-8, empty folders, symbolic links in the source.
//! Every mode must deliver them byte-exact.

use crate::support;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use support::*;

fn write(root: &Path, rel: &[u8], data: &[u8]) {
    let p = root.join(OsStr::from_bytes(rel));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, data).unwrap();
}

#[test]
fn real_world_names_arrive_byte_exact_in_every_mode() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let long = vec![b'L'; 255];
    let names: Vec<Vec<u8>> = vec![
        b"with spaces/and more spaces.txt".to_vec(),
        b"new\nline".to_vec(),
        "caf\u{e9}".as_bytes().to_vec(),   // NFC
        "cafe\u{301}".as_bytes().to_vec(), // NFD: a different name, kept apart
        b"-rf".to_vec(),
        b"--help/-".to_vec(),
        long.clone(),
        [&b"deep/"[..], &long[..], b"/", &long[..]].concat(),
        b"\xff\xfe latin1 caf\xe9".to_vec(),
        b"tab\there/quote\"'`$(x)".to_vec(),
        b".hidden/..dots/...".to_vec(),
    ];
    for (i, n) in names.iter().enumerate() {
        write(&src, n, format!("file {i}\n").as_bytes());
    }
    std::fs::create_dir_all(src.join("empty/nested empty")).unwrap();
    std::fs::create_dir_all(src.join("-empty dash")).unwrap();
    // A symbolic link in the source is skipped (and counted), never followed.
    std::os::unix::fs::symlink("/etc/passwd", src.join("link-to-passwd")).unwrap();
    std::os::unix::fs::symlink("with spaces", src.join("link-to-folder")).unwrap();

    let id = t.path().join("id");
    for mode in all_modes() {
        let dst = t.path().join(format!("dst-{mode}"));
        let rx = ReceiverProc::start(&id, &dst, &[]);
        let out = rx.send(&src, &["--mode", mode]);
        assert!(out.status.success(), "{mode}: {}", text(&out));
        for n in &names {
            let p = dst.join(OsStr::from_bytes(n));
            assert!(
                p.is_file(),
                "{mode}: {:?} missing",
                String::from_utf8_lossy(n)
            );
        }
        assert!(dst.join("empty/nested empty").is_dir(), "{mode}");
        assert!(dst.join("-empty dash").is_dir(), "{mode}");
        assert!(!dst.join("link-to-passwd").exists(), "{mode}");
        assert!(!dst.join("link-to-folder").exists(), "{mode}");
        // Apart from the links, the trees are the same byte for byte.
        let copy = t.path().join(format!("src-nolinks-{mode}"));
        copy_without_links(&src, &copy);
        assert!(trees_identical(&copy, &dst), "{mode}");
    }
}

fn copy_without_links(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let ft = e.file_type().unwrap();
        let dest = to.join(e.file_name());
        if ft.is_dir() {
            copy_without_links(&e.path(), &dest);
        } else if ft.is_file() {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}
