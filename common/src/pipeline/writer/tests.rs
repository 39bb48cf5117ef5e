//! The writer's unit tests.
use super::*;
use crate::relpath::PathLimits;

/// A writer over `root`: unnamed inodes (`O_TMPFILE`, where the file system has them) or
/// named temporary files only (the fallback), so both are tested.
fn writer(root: &std::path::Path, named: bool) -> DestWriter {
    let w = DestWriter::open(root, "t").unwrap();
    if named {
        w.named_temps_only()
    } else {
        w
    }
}

fn rel(s: &str) -> RelPath {
    RelPath::from_bytes(s.as_bytes(), &PathLimits::default()).unwrap()
}

#[test]
fn writes_files_and_folders() {
    writes_files_and_folders_with(false);
    writes_files_and_folders_with(true);
}

fn writes_files_and_folders_with(named: bool) {
    let t = tempfile::tempdir().unwrap();
    let mut w = writer(t.path(), named);
    w.open_file(1, &rel("a/b/c"), 3, 0).unwrap();
    w.write(1, b"abc").unwrap();
    w.close_file(1).unwrap();
    w.make_dir(&rel("x/y")).unwrap();
    assert_eq!(std::fs::read(t.path().join("a/b/c")).unwrap(), b"abc");
    assert!(t.path().join("x/y").is_dir());
    assert_eq!(w.files_ready(), 1);
}

#[test]
fn never_follows_destination_symlinks() {
    never_follows_destination_symlinks_with(false);
    never_follows_destination_symlinks_with(true);
}

fn never_follows_destination_symlinks_with(named: bool) {
    let outside = tempfile::tempdir().unwrap();
    let t = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), t.path().join("d")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("f"), t.path().join("leaf")).unwrap();
    let mut w = writer(t.path(), named);
    let err = w.open_file(1, &rel("d/f"), 1, 0).unwrap_err().to_string();
    assert!(err.contains("\"d\""), "{err}");
    // A symbolic link under a file's final name is replaced, not followed.
    w.open_file(2, &rel("leaf"), 1, 0).unwrap();
    w.write(2, b"x").unwrap();
    w.close_file(2).unwrap();
    assert!(t.path().join("leaf").symlink_metadata().unwrap().is_file());
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[test]
fn replaces_hard_links_and_keeps_final_names_complete() {
    replaces_hard_links_and_keeps_final_names_complete_with(false);
    replaces_hard_links_and_keeps_final_names_complete_with(true);
}

fn replaces_hard_links_and_keeps_final_names_complete_with(named: bool) {
    let outside = tempfile::tempdir().unwrap();
    let t = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, b"outside").unwrap();
    std::fs::hard_link(&victim, t.path().join("hl")).unwrap();
    std::fs::write(t.path().join("old"), b"previous run").unwrap();
    let mut w = writer(t.path(), named);
    w.open_file(1, &rel("hl"), 3, 0).unwrap();
    w.write(1, b"new").unwrap();
    w.close_file(1).unwrap();
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"outside",
        "written through"
    );
    assert_eq!(std::fs::read(t.path().join("hl")).unwrap(), b"new");
    // While a file is written, its final name holds what it held before; a partial file
    // never reaches it.
    w.open_file(2, &rel("old"), 10, 0).unwrap();
    w.write(2, b"half").unwrap();
    assert_eq!(
        std::fs::read(t.path().join("old")).unwrap(),
        b"previous run"
    );
    w.open_file(3, &rel("d/new"), 10, 0).unwrap();
    w.write(3, b"half").unwrap();
    assert!(!t.path().join("d/new").exists());
    assert_eq!(w.abort().len(), 2);
    assert_eq!(
        std::fs::read(t.path().join("old")).unwrap(),
        b"previous run"
    );
    let mut left: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["d", "hl", "old"]);
    assert_eq!(std::fs::read_dir(t.path().join("d")).unwrap().count(), 0);
    // A name reserved for temporary files is refused.
    let err = w
        .open_file(4, &rel("x/.shoal-tmp.1.a.0"), 0, 0)
        .unwrap_err();
    assert!(err.to_string().contains("reserved"), "{err}");
}

#[test]
fn stale_temporary_files_of_dead_receivers_are_removed() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("a/b")).unwrap();
    // pid 4294967295 is above any pid_max: that receiver is not running.
    let dead = ".shoal-tmp.4294967295.00ff.7";
    let live = format!(".shoal-tmp.{}.00ff.8", std::process::id());
    for p in [dead.to_string(), format!("a/b/{dead}"), live.clone()] {
        std::fs::write(t.path().join(p), b"partial").unwrap();
    }
    std::fs::write(t.path().join("a/.shoal-tmpx"), b"not ours").unwrap();
    std::os::unix::fs::symlink("/", t.path().join("a/root")).unwrap();
    assert_eq!(remove_stale_temps(t.path()).unwrap(), 2);
    assert!(!t.path().join(dead).exists());
    assert!(!t.path().join("a/b").join(dead).exists());
    assert!(
        t.path().join(live).exists(),
        "this process's own file stays"
    );
    assert!(t.path().join("a/.shoal-tmpx").exists());
}

#[test]
fn refuses_overruns_duplicates_and_collisions() {
    refuses_overruns_duplicates_and_collisions_with(false);
    refuses_overruns_duplicates_and_collisions_with(true);
}

fn refuses_overruns_duplicates_and_collisions_with(named: bool) {
    let t = tempfile::tempdir().unwrap();
    let mut w = writer(t.path(), named);
    w.open_file(1, &rel("f"), 2, 0).unwrap();
    assert!(w.write(1, b"abc").is_err());
    w.write(1, b"ab").unwrap();
    w.close_file(1).unwrap();
    assert!(w.open_file(2, &rel("f"), 1, 0).is_err(), "duplicate");
    let err = w.open_file(3, &rel("f/g"), 1, 0).unwrap_err().to_string();
    assert!(err.contains("not a folder"), "{err}");
    w.open_file(4, &rel("short"), 10, 0).unwrap();
    w.write(4, b"x").unwrap();
    assert!(w.close_file(4).is_err());
    assert!(!t.path().join("short").exists(), "partial file removed");
}

#[test]
fn blocks_are_written_at_their_offsets_and_complete_with_the_last() {
    blocks_are_written_at_their_offsets_and_complete_with_the_last_with(false);
    blocks_are_written_at_their_offsets_and_complete_with_the_last_with(true);
}

fn blocks_are_written_at_their_offsets_and_complete_with_the_last_with(named: bool) {
    let t = tempfile::tempdir().unwrap();
    let mut w = writer(t.path(), named);
    let names = |t: &tempfile::TempDir| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    // Last block first, as if from another connection.
    w.open_block(9, &rel("big"), 9, 500).unwrap();
    w.write_at(9, 6, b"ghi").unwrap();
    w.open_block(9, &rel("big"), 9, 400).unwrap();
    w.write_at(9, 0, b"abc").unwrap();
    assert!(
        !t.path().join("big").exists(),
        "no final name before the last block"
    );
    if named {
        assert!(names(&t)[0].starts_with(TEMP_PREFIX));
    } else {
        assert!(names(&t).is_empty(), "an unnamed inode: {:?}", names(&t));
    }
    assert!(w.write_at(9, 7, b"xyz").is_err(), "past the end");
    assert!(w.open_block(9, &rel("big"), 10, 0).is_err(), "another size");
    w.write_at(9, 3, b"def").unwrap();
    assert_eq!(std::fs::read(t.path().join("big")).unwrap(), b"abcdefghi");
    assert_eq!(names(&t), vec!["big"]);
    assert_eq!((w.files_ready(), w.bytes_written()), (1, 9));
    // A block file missing a block is removed at abort: no complete-looking file stays.
    w.open_block(10, &rel("part"), 6, 0).unwrap();
    w.write_at(10, 3, b"def").unwrap();
    assert_eq!(w.abort(), vec![rel("part")]);
    assert_eq!(names(&t), vec!["big"]);
}
