//! The writer's unit tests.
use super::*;
use shoal_proto::relpath::PathLimits;
use std::collections::HashSet;
use std::sync::Arc;

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
fn refuses_overruns_and_collisions() {
    refuses_overruns_and_collisions_with(false);
    refuses_overruns_and_collisions_with(true);
}

/// (A path sent twice in one run is the run's names' to refuse, before any writer:
/// receiver/src/names.rs.)
fn refuses_overruns_and_collisions_with(named: bool) {
    let t = tempfile::tempdir().unwrap();
    let mut w = writer(t.path(), named);
    w.open_file(1, &rel("f"), 2, 0).unwrap();
    assert!(w.write(1, b"abc").is_err());
    w.write(1, b"ab").unwrap();
    w.close_file(1).unwrap();
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

/// Ops of `files` (path, content) as the network side makes them: one batch per file.
fn file_batches(files: &[(&str, &[u8])], first_seq: u64) -> Vec<WriteBatch> {
    files
        .iter()
        .enumerate()
        .map(|(i, (path, content))| {
            let path = rel(path);
            let id = file_id(first_seq + i as u64, &path);
            WriteBatch {
                ops: vec![
                    WriteOp::Open {
                        id,
                        path,
                        size: content.len() as u64,
                        sent_at_us: 0,
                    },
                    WriteOp::Data {
                        id,
                        bytes: Bytes::copy_from_slice(content),
                    },
                    WriteOp::Close { id },
                ],
                permit: None,
            }
        })
        .collect()
}

fn pool(root: &std::path::Path, writers: usize) -> WriterPool {
    WriterPool::spawn(WriterOptions {
        dest: WriterDest::Root(root.to_path_buf()),
        fsync: false,
        tag: "t".into(),
        on_fail: None,
        writers,
    })
    .unwrap()
}

#[test]
fn a_file_s_id_carries_its_folder_s_key() {
    let (a, b) = (rel("d1/x"), rel("d1/y"));
    assert_eq!(
        file_id(1, &a) & 0xff,
        file_id(900, &b) & 0xff,
        "same folder"
    );
    assert_ne!(file_id(1, &a), file_id(2, &b), "different files");
    let keys: HashSet<u64> = (0..64)
        .map(|i| file_id(0, &rel(&format!("d{i}/f"))) & 0xff)
        .collect();
    assert!(
        keys.len() > 32,
        "folders spread over the keys: {}",
        keys.len()
    );
}

/// Several writers: every file is written once under its final name and the report adds up;
/// one writer's failure is the run's, and the others' files stay whole.
#[tokio::test]
async fn a_pool_of_writers_writes_a_tree_and_reports_it_whole() {
    let t = tempfile::tempdir().unwrap();
    let p = pool(t.path(), 3);
    let names: Vec<String> = (0..40).map(|i| format!("d{}/f{i}", i % 8)).collect();
    let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), n.as_bytes())).collect();
    // Two files per batch, so some batches are split between writers.
    let mut batches = file_batches(&files, 0).into_iter();
    while let Some(mut a) = batches.next() {
        if let Some(b) = batches.next() {
            a.ops.extend(b.ops);
        }
        p.batches.send(a).await.unwrap();
    }
    p.batches
        .send(WriteBatch {
            ops: vec![WriteOp::Dir(rel("empty/folder"))],
            permit: None,
        })
        .await
        .unwrap();
    let report = p.finish().await;
    assert!(report.error.is_none(), "{:?}", report.error);
    assert_eq!(report.writers, 3);
    assert_eq!(report.files_ready, 40);
    let bytes: usize = names.iter().map(String::len).sum();
    assert_eq!(report.bytes_written, bytes as u64);
    for n in &names {
        assert_eq!(std::fs::read(t.path().join(n)).unwrap(), n.as_bytes());
    }
    assert!(t.path().join("empty/folder").is_dir());

    // A file on the way of another (on disk before the run): that writer fails, the run
    // reports it, and the other writers' files are whole.
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("blocker"), b"mine").unwrap();
    let p = pool(t.path(), 3);
    let names: Vec<String> = (0..12).map(|i| format!("ok{}/f", i % 6)).collect();
    let mut files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"x"[..])).collect();
    files.push(("blocker/x", b"2"));
    for b in file_batches(&files, 0) {
        let _ = p.batches.send(b).await;
    }
    let report = p.finish().await;
    let err = format!(
        "{:#}",
        report.error.expect("the blocked file fails the run")
    );
    assert!(
        err.contains("\"blocker\"") && err.contains("not a folder"),
        "{err}"
    );
    assert_eq!(std::fs::read(t.path().join("blocker")).unwrap(), b"mine");
    for n in names.iter().filter(|n| t.path().join(n).exists()) {
        assert_eq!(std::fs::read(t.path().join(n)).unwrap(), b"x", "{n}");
    }
}

/// A batch split between writers: each gets its folders' ops in order, a signal goes with
/// the op before it, and the batch's room is shared out, none lost.
#[tokio::test]
async fn a_split_batch_keeps_order_signals_and_room() {
    let budget = Arc::new(tokio::sync::Semaphore::new(1000));
    let (txs, mut rxs): (Vec<_>, Vec<_>) = (0..4).map(|_| mpsc::channel(8)).unzip();
    let sender = BatchSender::new(txs, Arc::new(batches::Recycle::default()));
    // Two folders on different writers.
    let folder = |i: usize| format!("d{i}/f");
    let (a, b) = (0..)
        .map(|i| (rel(&folder(0)), rel(&folder(i))))
        .find(|(a, b)| (file_id(0, a) & 0xff) % 4 != (file_id(0, b) & 0xff) % 4)
        .unwrap();
    let (ia, ib) = (file_id(0, &a), file_id(1, &b));
    let (signal, mut signalled) = mpsc::unbounded_channel();
    let data = |id, n: usize| WriteOp::Data {
        id,
        bytes: Bytes::from(vec![0u8; n]),
    };
    let open = |id, path: &RelPath| WriteOp::Open {
        id,
        path: path.clone(),
        size: 0,
        sent_at_us: 0,
    };
    let ops = vec![
        open(ia, &a),
        open(ib, &b),
        data(ia, 300),
        data(ib, 200),
        WriteOp::Close { id: ia },
        WriteOp::Signal(signal),
        WriteOp::Close { id: ib },
    ];
    let permit = budget.clone().try_acquire_many_owned(600).unwrap();
    sender
        .send(WriteBatch {
            ops,
            permit: Some(permit),
        })
        .await
        .unwrap();
    drop(sender);
    let (wa, wb) = (((ia & 0xff) % 4) as usize, ((ib & 0xff) % 4) as usize);
    let mut got = vec![None; 4];
    let mut held = Vec::new();
    for (w, rx) in rxs.iter_mut().enumerate() {
        if let Some(batch) = rx.recv().await {
            let kinds: Vec<&str> = batch
                .ops
                .iter()
                .map(|op| match op {
                    WriteOp::Open { .. } => "open",
                    WriteOp::Data { .. } => "data",
                    WriteOp::Close { .. } => "close",
                    WriteOp::Signal(_) => "signal",
                    _ => "other",
                })
                .collect();
            got[w] = Some(kinds.join(" "));
            held.push(batch.permit);
            for op in batch.ops {
                if let WriteOp::Signal(tx) = op {
                    tx.send(()).unwrap();
                }
            }
        }
    }
    assert_eq!(got[wa].as_deref(), Some("open data close signal"));
    assert_eq!(got[wb].as_deref(), Some("open data close"));
    assert_eq!(got.iter().flatten().count(), 2, "{got:?}");
    let shares: Vec<usize> = held.iter().flatten().map(|p| p.num_permits()).collect();
    assert_eq!(
        shares.iter().sum::<usize>(),
        600,
        "the room, shared: {shares:?}"
    );
    assert_eq!(shares.len(), 2, "each part holds its share: {shares:?}");
    assert_eq!(budget.available_permits(), 400);
    drop(held);
    assert_eq!(budget.available_permits(), 1000, "and it all comes back");
    assert!(signalled.recv().await.is_some());
}
