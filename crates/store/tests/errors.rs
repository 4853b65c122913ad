//! A full disk and an unwritable directory: errors the caller can act on,
//! and nothing already written is damaged.
//!
//! The full-disk and read-only-mount tests need a small tmpfs, so they run
//! only where `mount` works (as root); elsewhere they say so and pass.

mod common;

use common::*;
use gyro_store::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !ok {
            eprintln!("cannot mount a tmpfs here: skipped");
            return None;
        }
        Some(Tmpfs {
            path: dir.path().to_path_buf(),
            _dir: dir,
        })
    }

    fn remount(&self, mode: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,{mode}")])
            .arg(&self.path)
            .status()
            .unwrap()
            .success();
        assert!(ok, "remount {mode}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_data_directory_that_is_a_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data");
    std::fs::write(&file, b"x").unwrap();
    let err = ShardStore::open(&file, 0, options(), T0).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(err.path().unwrap().starts_with(&file));
    assert!(err.to_string().contains(file.to_str().unwrap()), "{err}");
}

#[test]
fn an_unwritable_directory_is_a_clear_error_and_nothing_written_changes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (mut store, mut engine, _) = open(&data, options(), T0);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    run(&mut engine, &mut store, &round(0), T0);
    let before = engine.snapshot();
    drop(store);
    let files = tree(&data);

    // Take write permission away from everything.
    let set = |mode_dir: u32, mode_file: u32| {
        for (p, _) in &files {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode_file)).unwrap();
        }
        let mut dirs = vec![data.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                }
            }
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode_dir)).unwrap();
        }
    };
    set(0o555, 0o444);
    let privileged = std::fs::write(data.join("probe"), b"").is_ok();
    let result = ShardStore::open(&data, 0, options(), T0);
    set(0o755, 0o644);
    if privileged {
        // Permission bits do not stop this user; the read-only mount test
        // below covers it.
        let _ = std::fs::remove_file(data.join("probe"));
        eprintln!("permissions do not apply to this user: skipped");
        return;
    }
    let err = result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.path().unwrap().starts_with(&data), "{err}");
    assert_eq!(tree(&data), files);
    let (_s, engine2, _) = open(&data, options(), T0);
    assert_eq!(engine2.snapshot(), before);
}

#[test]
fn a_read_only_file_system_is_a_clear_error_and_nothing_written_changes() {
    let Some(fs) = Tmpfs::mount("8m") else { return };
    let data = fs.path.join("data");
    let (mut store, mut engine, _) = open(&data, options(), T0);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    run(&mut engine, &mut store, &round(0), T0);
    let before = engine.snapshot();
    drop(store);
    let files = tree(&data);
    fs.remount("ro");
    let err = ShardStore::open(&data, 0, options(), T0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.path().unwrap().starts_with(&data), "{err}");
    // A fresh shard cannot even create its directory.
    let err = ShardStore::open(&data, 1, options(), T0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    fs.remount("rw");
    assert_eq!(tree(&data), files);
    let (_s, engine2, _) = open(&data, options(), T0);
    assert_eq!(engine2.snapshot(), before);
}

/// Fills the tmpfs with a file; returns its path (remove it to free the
/// space).
fn fill(fs: &Tmpfs) -> PathBuf {
    let filler = fs.path.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let chunk = vec![0u8; 4096];
    while std::io::Write::write_all(&mut f, &chunk).is_ok() {}
    filler
}

/// Handles round `k` and appends its output, without committing it.
fn append_round(engine: &mut gyro_charging::Engine, store: &mut ShardStore, k: u32) {
    let mut out = gyro_charging::Output::default();
    let mut answer = gyro_charging::CcAnswer::default();
    for r in &round(k) {
        engine.handle(r, T0, &mut answer, &mut out);
        store.append_output(&out).unwrap();
        out.clear();
    }
}

#[test]
fn a_full_disk_fails_the_commit_cleanly_and_a_retry_succeeds_once_space_is_freed() {
    let Some(fs) = Tmpfs::mount("1m") else { return };
    let data = fs.path.join("data");
    let (mut store, mut engine, _) = open(&data, options(), T0);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    run(&mut engine, &mut store, &round(0), T0);
    let durable = engine.snapshot();
    let journal = store.journal_path().to_path_buf();
    let journal_len = std::fs::metadata(&journal).unwrap().len();

    let filler = fill(&fs);

    // A batch that cannot be made durable.
    append_round(&mut engine, &mut store, 1);
    let err = store.commit(T0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DiskFull, "{err}");
    assert_eq!(err.path(), Some(journal.as_path()));
    // The journal was cut back to its last whole frame.
    assert_eq!(std::fs::metadata(&journal).unwrap().len(), journal_len);
    assert!(store.has_pending());
    assert_eq!(store.commit(T0).unwrap_err().kind(), ErrorKind::DiskFull);

    // A crash now: the state on disk is that of the last good commit.
    let files = tree(&data);
    {
        let (_s, rec) = ShardStore::open(&data, 0, options(), T0).unwrap();
        assert!(rec.snapshot.is_some());
        let cfg = config();
        let mut e = gyro_charging::Engine::restore(
            cfg.catalog().unwrap(),
            cfg.engine.clone(),
            rec.snapshot.clone().unwrap(),
        );
        for x in &rec.effects().unwrap() {
            e.apply(x).unwrap();
        }
        rec.replay_answers(|first, _, records| e.replay_answers(first, records, T0))
            .unwrap();
        assert_eq!(e.snapshot(), durable);
    }
    assert_eq!(tree(&data), files);

    // Space is freed: the retry makes the batch durable.
    std::fs::remove_file(&filler).unwrap();
    let s = store.commit(T0).unwrap();
    assert!(s.cdrs > 0);
    assert!(s.cdr_error.is_none());
    let after = engine.snapshot();
    drop(store);
    let (_s, engine2, _) = open(&data, options(), T0);
    assert_eq!(engine2.snapshot(), after);
    assert_gap_free(&all_cdrs(&data));
}

/// The CDR directory on its own small tmpfs, the journal elsewhere: CDR
/// writes fail while journal commits succeed.
fn cdr_disk_full(restart: bool) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cdrs = cdr_dir(&data, 0);
    std::fs::create_dir_all(&cdrs).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&cdrs)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("cannot mount a tmpfs here: skipped");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _guard = Unmount(cdrs.clone());
    let (mut store, mut engine, _) = open(&data, options(), T0);
    let mut errors = 0;
    for r in 0..200 {
        let s = run(&mut engine, &mut store, &round(r), T0);
        if let Some(e) = s.cdr_error {
            assert_eq!(e.kind(), ErrorKind::DiskFull, "{e}");
            assert!(e.path().unwrap().starts_with(&cdrs));
            errors += 1;
            if errors == 3 {
                break;
            }
        }
    }
    assert_eq!(errors, 3, "the CDR disk never filled");
    // Every line in the file is whole: a failed write was cut back.
    let part = store.cdr_path().to_path_buf();
    assert_eq!(*std::fs::read(&part).unwrap().last().unwrap(), b'\n');
    let grow = || {
        let ok = Command::new("mount")
            .args(["-o", "remount,size=4m"])
            .arg(&cdrs)
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    if restart {
        // A crash while the CDR disk is full; space is added; the journal
        // gives back what the file missed.
        let after = engine.snapshot();
        drop(store);
        grow();
        let (store, engine2, report) = open(&data, options(), T0);
        assert!(report.cdr.rewritten > 0);
        assert_eq!(engine2.snapshot(), after);
        assert_eq!(all_cdrs(&data).len() as u64, store.next_cdr_sequence() - 1);
    } else {
        // Space is added; the next tick writes the pending lines.
        grow();
        let s = store.tick(T0).unwrap();
        assert!(s.cdr_error.is_none());
        assert_eq!(all_cdrs(&data).len() as u64, store.next_cdr_sequence() - 1);
    }
    assert_gap_free(&all_cdrs(&data));
}

#[test]
fn a_full_cdr_disk_keeps_lines_pending_until_space_returns() {
    cdr_disk_full(false);
}

#[test]
fn a_full_cdr_disk_then_a_crash_loses_no_cdr() {
    cdr_disk_full(true);
}
