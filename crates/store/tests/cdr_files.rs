//! CDR files: rotation by size and age, the pick-up contract, and the
//! `gyro cdr` logic.

mod common;

use common::*;
use gyro_charging::Timestamp;
use gyro_store::cdr_tool::{self, Follower, Format};
use gyro_store::names::CdrName;
use gyro_store::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Closed files of shard 0 and their contents.
fn closed_files(data_dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let dir = cdr_dir(data_dir, 0);
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_str().unwrap().ends_with(".part"))
        .map(|p| {
            (
                p.file_name().unwrap().to_str().unwrap().to_string(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

fn part_files(data_dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(cdr_dir(data_dir, 0))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().unwrap().ends_with(".part"))
        .collect()
}

/// Checks the pick-up contract over the closed files: names parse and
/// sort in sequence order, ranges are contiguous from `first`, and each
/// file holds exactly the records its name says.
fn check_closed(files: &BTreeMap<String, Vec<u8>>, mut first: u64) -> u64 {
    for (name, data) in files {
        let Some(CdrName::Final {
            shard: 0,
            first: f,
            last,
        }) = CdrName::parse(name)
        else {
            panic!("bad name {name}");
        };
        assert_eq!(f, first, "{name}");
        assert_eq!(*data.last().unwrap(), b'\n');
        let seqs: Vec<u64> = data
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| {
                serde_json::from_slice::<gyro_charging::Cdr>(l)
                    .unwrap()
                    .sequence
            })
            .collect();
        assert_eq!(seqs, (f..=last).collect::<Vec<_>>(), "{name}");
        first = last + 1;
    }
    first
}

#[test]
fn files_rotate_by_size_and_closed_files_never_change() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        cdr_max_bytes: 8 << 10,
        ..options()
    };
    let (mut store, mut engine, _) = open(dir.path(), opts.clone(), T0);
    let mut rotated = 0;
    for r in 0..10 {
        let s = run(&mut engine, &mut store, &round(r), T0.plus_secs(r as u64));
        if let Some(p) = s.rotated {
            rotated += 1;
            assert!(p.exists());
            assert_eq!(s.syncs, 3, "journal, closed file, directory");
        }
    }
    assert!(rotated >= 2, "{rotated}");
    let closed = closed_files(dir.path());
    assert_eq!(closed.len(), rotated);
    for data in closed.values() {
        // At least the size limit; at most one commit more.
        assert!(data.len() as u64 >= opts.cdr_max_bytes);
    }
    let next = check_closed(&closed, 1);
    assert_eq!(part_files(dir.path()).len(), 1);

    // More commits, a crash, a restart, more commits: closed files stay
    // byte for byte what they were.
    for r in 10..14 {
        run(&mut engine, &mut store, &round(r), T0);
    }
    drop(store);
    let (mut store, mut engine, _) = open(dir.path(), opts.clone(), T0);
    for r in 14..20 {
        run(&mut engine, &mut store, &round(r), T0);
    }
    let later = closed_files(dir.path());
    for (name, data) in &closed {
        assert_eq!(later.get(name), Some(data), "{name} changed");
    }
    assert!(later.len() > closed.len());
    let end = check_closed(&later, 1);
    assert!(end > next);
    store.close_cdr_file(T0).unwrap();
    let all = closed_files(dir.path());
    assert_eq!(check_closed(&all, 1), store.next_cdr_sequence());
}

#[test]
fn files_rotate_by_age_even_when_idle() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        cdr_max_age: secs(60),
        ..options()
    };
    let (mut store, mut engine, _) = open(dir.path(), opts, T0);
    // An empty file is never closed.
    assert!(store.tick(T0.plus_secs(600)).unwrap().rotated.is_none());
    run(&mut engine, &mut store, &round(0), T0.plus_secs(1000));
    assert!(store.tick(T0.plus_secs(1059)).unwrap().rotated.is_none());
    run(&mut engine, &mut store, &round(1), T0.plus_secs(1030));
    let s = store.tick(T0.plus_secs(1060)).unwrap();
    let p = s.rotated.expect("closed by age");
    let name = p.file_name().unwrap().to_str().unwrap();
    // Named after the time it was closed.
    assert!(
        name.ends_with(&format!(
            "-{}.jsonl",
            gyro_store::names::utc_compact(T0.plus_secs(1060))
        )),
        "{name}"
    );
    assert!(store.tick(T0.plus_secs(5000)).unwrap().rotated.is_none());
    check_closed(&closed_files(dir.path()), 1);
}

#[test]
fn a_billing_system_taking_files_does_not_reset_sequence_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        cdr_max_bytes: 4 << 10,
        ..options()
    };
    let (mut store, mut engine, _) = open(dir.path(), opts.clone(), T0);
    for r in 0..6 {
        run(&mut engine, &mut store, &round(r), T0);
    }
    store.close_cdr_file(T0).unwrap();
    store.snapshot(&engine.snapshot(), T0).unwrap();
    drop(store);
    // Pick-up: move every closed file away.
    let taken = tempfile::tempdir().unwrap();
    let picked = closed_files(dir.path());
    let next = check_closed(&picked, 1);
    for name in picked.keys() {
        std::fs::rename(cdr_dir(dir.path(), 0).join(name), taken.path().join(name)).unwrap();
    }
    let (mut store, mut engine, report) = open(dir.path(), opts, T0);
    assert_eq!(report.cdr.rewritten, 0);
    assert_eq!(store.next_cdr_sequence(), next);
    run(&mut engine, &mut store, &round(7), T0);
    store.close_cdr_file(T0).unwrap();
    check_closed(&closed_files(dir.path()), next);
}

#[test]
fn an_interrupted_rotation_is_finished_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    run(&mut engine, &mut store, &round(0), T0);
    let next = store.next_cdr_sequence();
    let cdir = cdr_dir(dir.path(), 0);
    drop(store);
    // The crash came after the next file was created, before the rename.
    std::fs::write(cdir.join(gyro_store::names::part_name(0, next)), b"").unwrap();
    let (mut store, mut engine, report) = open(dir.path(), options(), T0);
    assert_eq!(report.cdr.closed.len(), 1);
    assert_eq!(part_files(dir.path()).len(), 1);
    run(&mut engine, &mut store, &round(1), T0);
    store.close_cdr_file(T0).unwrap();
    let all = closed_files(dir.path());
    assert_eq!(all.len(), 2);
    assert_eq!(check_closed(&all, 1), store.next_cdr_sequence());
}

#[test]
fn the_cdr_tool_lists_prints_converts_and_follows() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        cdr_max_bytes: 6 << 10,
        ..options()
    };
    let (mut store, mut engine, _) = open(dir.path(), opts, T0);
    for r in 0..4 {
        run(&mut engine, &mut store, &round(r), T0);
    }
    let n = store.next_cdr_sequence() - 1;

    // list: from the data directory, the CDR root or a shard directory.
    for d in [
        dir.path().to_path_buf(),
        dir.path().join("cdr"),
        cdr_dir(dir.path(), 0),
    ] {
        let files = cdr_tool::list(&d).unwrap();
        assert!(files.len() >= 2);
        assert!(files.last().unwrap().open);
        assert_eq!(files.iter().map(|f| f.records).sum::<u64>(), n);
        assert_eq!(files[0].first, Some(1));
        let ranges: Vec<_> = files.iter().filter(|f| f.records > 0).collect();
        for w in ranges.windows(2) {
            assert_eq!(w[0].last.unwrap() + 1, w[1].first.unwrap());
        }
    }
    let mut table = Vec::new();
    cdr_tool::write_list(&cdr_tool::list(dir.path()).unwrap(), &mut table).unwrap();
    assert!(String::from_utf8(table).unwrap().contains("closed"));

    // print: JSON lines as stored, CSV with the header.
    let mut json = Vec::new();
    assert_eq!(
        cdr_tool::print(dir.path(), Format::Json, &mut json).unwrap(),
        n
    );
    assert_eq!(json.iter().filter(|&&b| b == b'\n').count() as u64, n);
    let mut csv = Vec::new();
    assert_eq!(cdr_tool::to_csv(dir.path(), &mut csv).unwrap(), n);
    let csv = String::from_utf8(csv).unwrap();
    assert!(csv.starts_with(gyro_charging::cdr::CSV_HEADER));
    assert_eq!(csv.lines().count() as u64, n + 1);
    assert!(csv.lines().nth(1).unwrap().starts_with("1,gyro-demo,"));

    // tail: the last 3 records.
    let mut t = Vec::new();
    assert_eq!(
        cdr_tool::tail(dir.path(), 3, Format::Json, &mut t).unwrap(),
        3
    );
    let seqs: Vec<u64> = t
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_slice::<gyro_charging::Cdr>(l)
                .unwrap()
                .sequence
        })
        .collect();
    assert_eq!(seqs, [n - 2, n - 1, n]);

    // follow: new records, across rotations and a half-written line.
    let mut f = Follower::new(dir.path(), 0);
    let mut got = Vec::new();
    assert_eq!(
        f.poll(|c| {
            got.push(c.sequence);
            Ok(())
        })
        .unwrap(),
        0
    );
    for r in 4..12 {
        run(&mut engine, &mut store, &round(r), T0);
        if r % 3 == 0 {
            f.poll(|c| {
                got.push(c.sequence);
                Ok(())
            })
            .unwrap();
        }
    }
    let part = store.cdr_path().to_path_buf();
    let mut half = std::fs::OpenOptions::new()
        .append(true)
        .open(&part)
        .unwrap();
    std::io::Write::write_all(&mut half, b"{\"sequence\":").unwrap();
    f.poll(|c| {
        got.push(c.sequence);
        Ok(())
    })
    .unwrap();
    let m = store.next_cdr_sequence() - 1;
    assert_eq!(got, (n + 1..=m).collect::<Vec<_>>());

    // The function form stops when told.
    let mut polls = 0;
    let mut out = Vec::new();
    let printed = cdr_tool::follow(
        dir.path(),
        2,
        Format::Csv,
        std::time::Duration::from_millis(1),
        &mut out,
        || {
            polls += 1;
            polls == 3
        },
    )
    .unwrap();
    assert_eq!(printed, 2);
    assert_eq!(polls, 3);
    let _ = Timestamp(0);
}
