//! zstd-compressed CDR files: the same records as plain files, the
//! pick-up contract, repair after a crash (a torn frame, records the
//! journal never made durable), a changed setting between runs, and the
//! `gyro cdr` logic over them.

mod common;

use common::*;
use gyro_charging::{Engine, Timestamp};
use gyro_store::cdr_tool::{self, Follower, Format};
use gyro_store::names::CdrName;
use gyro_store::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn zstd_options() -> StoreOptions {
    StoreOptions {
        cdr_compression: CdrCompression::Zstd { level: 3 },
        ..options()
    }
}

/// Files of shard 0 (name, bytes), closed ones or open ones.
fn files(data_dir: &Path, open: bool) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(cdr_dir(data_dir, 0))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().unwrap().ends_with(".part") == open)
        .map(|p| {
            (
                p.file_name().unwrap().to_str().unwrap().to_string(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

/// The lines of a file as `zstd -d` gives them.
fn unzstd(data: &[u8]) -> Vec<u8> {
    zstd::stream::decode_all(data).expect("a valid zstd stream")
}

fn sequences(lines: &[u8]) -> Vec<u64> {
    lines
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_slice::<gyro_charging::Cdr>(l)
                .unwrap()
                .sequence
        })
        .collect()
}

/// The pick-up contract over closed compressed files: `.jsonl.zst`
/// names in sequence order, contiguous from `first`, each a valid zstd
/// stream of exactly the records its name says.
fn check_closed(files: &BTreeMap<String, Vec<u8>>, mut first: u64) -> u64 {
    for (name, data) in files {
        assert!(name.ends_with(".jsonl.zst"), "{name}");
        let Some(CdrName::Final {
            shard: 0,
            first: f,
            last,
        }) = CdrName::parse(name)
        else {
            panic!("bad name {name}");
        };
        assert_eq!(f, first, "{name}");
        let lines = unzstd(data);
        assert_eq!(*lines.last().unwrap(), b'\n');
        assert_eq!(sequences(&lines), (f..=last).collect::<Vec<_>>(), "{name}");
        first = last + 1;
    }
    first
}

fn journal_path(data_dir: &Path) -> PathBuf {
    let mut j: Vec<PathBuf> = std::fs::read_dir(ledger_dir(data_dir, 0))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().unwrap().ends_with(".log"))
        .collect();
    j.sort();
    j.pop().expect("a journal")
}

#[test]
fn compressed_files_hold_exactly_the_lines_of_plain_files() {
    let plain = tempfile::tempdir().unwrap();
    let packed = tempfile::tempdir().unwrap();
    for (dir, opts) in [
        (plain.path(), StoreOptions::default()),
        (packed.path(), zstd_options()),
    ] {
        let (mut store, mut engine, _) = open(dir, opts, T0);
        assert_eq!(
            store
                .cdr_path()
                .to_string_lossy()
                .ends_with(".jsonl.zst.part"),
            dir == packed.path()
        );
        for r in 0..20 {
            run(&mut engine, &mut store, &round(r), T0.plus_secs(r as u64));
        }
        admin(&mut engine, &mut store, T0.plus_secs(30));
        store.close_cdr_file(T0.plus_secs(30)).unwrap();
    }
    let a = files(plain.path(), false);
    let b = files(packed.path(), false);
    assert_eq!(a.len(), 1);
    assert_eq!(b.len(), 1);
    let (pa, da) = a.iter().next().unwrap();
    let (pb, db) = b.iter().next().unwrap();
    assert_eq!(format!("{pa}.zst"), *pb);
    assert_eq!(unzstd(db), *da);
    assert!(db.len() * 4 < da.len(), "{} of {}", db.len(), da.len());
    check_closed(&b, 1);
    // The open file left is empty, and the tool reads both the same.
    assert!(files(packed.path(), true).values().all(|d| d.is_empty()));
    let (mut x, mut y) = (Vec::new(), Vec::new());
    cdr_tool::print(plain.path(), Format::Json, &mut x).unwrap();
    cdr_tool::print(packed.path(), Format::Json, &mut y).unwrap();
    assert_eq!(x, y);
    assert_eq!(all_cdrs(packed.path()), all_cdrs(plain.path()));
}

#[test]
fn compressed_files_rotate_by_size_and_age_and_never_change() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        cdr_max_bytes: 2 << 10,
        ..zstd_options()
    };
    let (mut store, mut engine, _) = open(dir.path(), opts.clone(), T0);
    let mut rotated = 0;
    // A frame ends once its oldest line waited a second: every round.
    for r in 0..30 {
        let s = run(
            &mut engine,
            &mut store,
            &round(r),
            T0.plus_secs(2 * r as u64),
        );
        rotated += usize::from(s.rotated.is_some());
    }
    assert!(rotated >= 2, "{rotated}");
    let closed = files(dir.path(), false);
    assert_eq!(closed.len(), rotated);
    for data in closed.values() {
        assert!(data.len() as u64 >= opts.cdr_max_bytes);
    }
    check_closed(&closed, 1);
    // A crash and a restart: closed files stay byte for byte.
    drop(store);
    let (mut store, mut engine, _) = open(dir.path(), opts.clone(), T0.plus_secs(100));
    for r in 30..34 {
        run(&mut engine, &mut store, &round(r), T0.plus_secs(100));
    }
    let later = files(dir.path(), false);
    for (name, data) in &closed {
        assert_eq!(later.get(name), Some(data), "{name} changed");
    }
    // By age: lines still waiting for their frame are closed with it.
    let s = store.tick(T0.plus_secs(100 + 300)).unwrap();
    let p = s.rotated.expect("closed by age");
    assert!(p.to_string_lossy().ends_with(".jsonl.zst"), "{p:?}");
    assert!(store.tick(T0.plus_secs(2000)).unwrap().rotated.is_none());
    let all = files(dir.path(), false);
    assert_eq!(check_closed(&all, 1), store.next_cdr_sequence());
}

#[test]
fn a_quiet_servers_open_file_is_readable_after_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), zstd_options(), T0);
    let stats = run(&mut engine, &mut store, &round(0), T0);
    assert_eq!(stats.cdr_bytes, 0);
    let n = store.next_cdr_sequence() - 1;
    // Still waiting for its frame: only in memory (and the journal).
    assert_eq!(std::fs::metadata(store.cdr_path()).unwrap().len(), 0);
    store.tick(Timestamp(T0.as_millis() + 999)).unwrap();
    assert_eq!(std::fs::metadata(store.cdr_path()).unwrap().len(), 0);
    let stats = store.tick(T0.plus_secs(1)).unwrap();
    let data = std::fs::read(store.cdr_path()).unwrap();
    // The statistics count the compressed bytes written.
    assert_eq!(stats.cdr_bytes, data.len() as u64);
    assert_eq!(sequences(&unzstd(&data)), (1..=n).collect::<Vec<_>>());
    let files = cdr_tool::list(dir.path()).unwrap();
    assert_eq!((files[0].records, files[0].partial_bytes), (n, 0));
}

/// A store of `opts` whose open file holds one finished frame (rounds 0
/// and 1, ended a second later): the store, its engine, the open file and
/// the frame's length.
fn one_frame(dir: &Path, opts: &StoreOptions) -> (ShardStore, Engine, PathBuf, usize) {
    let (mut store, mut engine, _) = open(dir, opts.clone(), T0);
    run(&mut engine, &mut store, &round(0), T0);
    run(&mut engine, &mut store, &round(1), T0);
    store.tick(T0.plus_secs(2)).unwrap();
    let part = store.cdr_path().to_path_buf();
    let first_frame = std::fs::read(&part).unwrap().len();
    assert!(first_frame > 0);
    (store, engine, part, first_frame)
}

#[test]
fn a_torn_frame_is_cut_and_its_records_are_written_again_from_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let opts = zstd_options();
    let (mut store, mut engine, part, first_frame) = one_frame(dir.path(), &opts);
    run(&mut engine, &mut store, &round(2), T0.plus_secs(2));
    let n = store.next_cdr_sequence() - 1;
    drop(store); // the last frame is written on the way out
    let data = std::fs::read(&part).unwrap();
    assert!(data.len() > first_frame);
    // The machine died while the second frame was written.
    for cut in [
        first_frame + 1,
        (first_frame + data.len()) / 2,
        data.len() - 1,
    ] {
        std::fs::write(&part, &data[..cut]).unwrap();
        let (store, _e, report) = open(dir.path(), opts.clone(), T0.plus_secs(3));
        assert_eq!(report.cdr.truncated_bytes, (cut - first_frame) as u64);
        assert!(report.cdr.rewritten > 0);
        assert_eq!(report.cdr.recompressed, 0);
        assert_eq!(store.next_cdr_sequence(), n + 1);
        drop(store);
        let lines = unzstd(&std::fs::read(&part).unwrap());
        assert_eq!(sequences(&lines), (1..=n).collect::<Vec<_>>());
    }
    // Everything lost: all of it written again.
    std::fs::write(&part, b"").unwrap();
    let (mut store, mut engine, report) = open(dir.path(), opts, T0.plus_secs(4));
    assert_eq!(report.cdr.rewritten, n);
    run(&mut engine, &mut store, &round(3), T0.plus_secs(4));
    store.close_cdr_file(T0.plus_secs(5)).unwrap();
    let cdrs = all_cdrs(dir.path());
    assert_gap_free(&cdrs);
    assert_eq!(cdrs.len() as u64, store.next_cdr_sequence() - 1);
}

#[test]
fn records_the_journal_never_made_durable_are_cut_from_inside_a_frame() {
    let dir = tempfile::tempdir().unwrap();
    let opts = zstd_options();
    let (mut store, mut engine, part, first_frame) = one_frame(dir.path(), &opts);
    let first_frame = first_frame as u64;
    run(&mut engine, &mut store, &round(2), T0.plus_secs(2));
    let durable = store.next_cdr_sequence();
    let journal = journal_path(dir.path());
    let journal_len = std::fs::metadata(&journal).unwrap().len();
    run(&mut engine, &mut store, &round(3), T0.plus_secs(2));
    let beyond = store.next_cdr_sequence() - durable;
    assert!(beyond > 0);
    drop(store);
    // The second frame holds rounds 2 and 3; the journal lost round 3 (an
    // asynchronous commit the crash came before).
    let data = std::fs::read(&part).unwrap();
    let lines = unzstd(&data);
    assert_eq!(sequences(&lines).len() as u64, durable - 1 + beyond);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&journal)
        .unwrap();
    f.set_len(journal_len).unwrap();
    drop(f);
    let (mut store, mut engine, report) = open(dir.path(), opts.clone(), T0.plus_secs(3));
    assert_eq!(store.next_cdr_sequence(), durable);
    assert_eq!(report.cdr.truncated_bytes, data.len() as u64 - first_frame);
    assert_eq!(report.cdr.rewritten, 0);
    assert!(report.cdr.recompressed > 0);
    let kept = std::fs::read(&part).unwrap();
    // The first frame is kept byte for byte; the rest is a new frame.
    assert_eq!(kept[..first_frame as usize], data[..first_frame as usize]);
    let kept_lines = unzstd(&kept);
    assert_eq!(sequences(&kept_lines), (1..durable).collect::<Vec<_>>());
    assert_eq!(kept_lines[..], lines[..kept_lines.len()]);
    // The lost numbers are given again, gap-free.
    run(&mut engine, &mut store, &round(4), T0.plus_secs(3));
    store.close_cdr_file(T0.plus_secs(4)).unwrap();
    let cdrs = all_cdrs(dir.path());
    assert_gap_free(&cdrs);
    assert_eq!(cdrs.len() as u64, store.next_cdr_sequence() - 1);
    check_closed(&files(dir.path(), false), 1);
}

#[test]
fn a_changed_compression_closes_the_open_file_of_the_other_kind() {
    let dir = tempfile::tempdir().unwrap();
    let plain = options();
    let (mut store, mut engine, _) = open(dir.path(), plain.clone(), T0);
    run(&mut engine, &mut store, &round(0), T0);
    drop(store);
    // Plain to compressed: the .jsonl.part is closed as it is.
    let (mut store, mut engine, report) = open(dir.path(), zstd_options(), T0);
    assert_eq!(report.cdr.closed.len(), 1);
    assert!(report.cdr.closed[0].to_string_lossy().ends_with(".jsonl"));
    assert!(store
        .cdr_path()
        .to_string_lossy()
        .ends_with(".jsonl.zst.part"));
    run(&mut engine, &mut store, &round(1), T0);
    let durable = store.next_cdr_sequence();
    let journal = journal_path(dir.path());
    let journal_len = std::fs::metadata(&journal).unwrap().len();
    run(&mut engine, &mut store, &round(2), T0);
    drop(store);
    // Compressed to plain, with records the journal lost: the compressed
    // open file is cut to the journal and closed as `.jsonl.zst`.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&journal)
        .unwrap();
    f.set_len(journal_len).unwrap();
    drop(f);
    let (mut store, mut engine, report) = open(dir.path(), plain, T0);
    assert_eq!(store.next_cdr_sequence(), durable);
    assert_eq!(report.cdr.closed.len(), 1);
    assert!(report.cdr.closed[0]
        .to_string_lossy()
        .ends_with(".jsonl.zst"));
    assert!(report.cdr.recompressed > 0);
    run(&mut engine, &mut store, &round(3), T0);
    store.close_cdr_file(T0).unwrap();
    let cdrs = all_cdrs(dir.path());
    assert_gap_free(&cdrs);
    assert_eq!(cdrs.len() as u64, store.next_cdr_sequence() - 1);
    let names: Vec<String> = files(dir.path(), false).into_keys().collect();
    assert_eq!(names.len(), 3);
    assert!(names[0].ends_with(".jsonl") && names[1].ends_with(".jsonl.zst"));
    assert!(names[2].ends_with(".jsonl"));
}

#[test]
fn the_cdr_tool_reads_compressed_files() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        cdr_max_bytes: 1 << 10,
        ..zstd_options()
    };
    let (mut store, mut engine, _) = open(dir.path(), opts, T0);
    for r in 0..8 {
        run(
            &mut engine,
            &mut store,
            &round(r),
            T0.plus_secs(2 * r as u64),
        );
    }
    let n = store.next_cdr_sequence() - 1;
    let on_disk = {
        let files = cdr_tool::list(dir.path()).unwrap();
        assert!(files.len() >= 2);
        let ranges: Vec<_> = files.iter().filter(|f| f.records > 0).collect();
        for w in ranges.windows(2) {
            assert_eq!(w[0].last.unwrap() + 1, w[1].first.unwrap());
        }
        files.iter().map(|f| f.records).sum::<u64>()
    };
    assert!(on_disk <= n);
    store.tick(T0.plus_secs(20)).unwrap();
    let mut json = Vec::new();
    assert_eq!(
        cdr_tool::print(dir.path(), Format::Json, &mut json).unwrap(),
        cdr_tool::Printed {
            records: n,
            damaged: vec![]
        }
    );
    assert_eq!(sequences(&json), (1..=n).collect::<Vec<_>>());
    let mut csv = Vec::new();
    assert_eq!(cdr_tool::to_csv(dir.path(), &mut csv).unwrap().records, n);
    let mut t = Vec::new();
    assert_eq!(
        cdr_tool::tail(dir.path(), 3, Format::Json, &mut t).unwrap(),
        3
    );
    assert_eq!(sequences(&t), [n - 2, n - 1, n]);

    // follow: every record once, across frames, rotations and a frame
    // half written.
    let mut f = Follower::new(dir.path(), 0);
    let mut got = Vec::new();
    assert_eq!(f.poll(|_| Ok(())).unwrap(), 0);
    for r in 8..16 {
        run(
            &mut engine,
            &mut store,
            &round(r),
            T0.plus_secs(2 * r as u64),
        );
        if r % 3 == 0 {
            f.poll(|c| {
                got.push(c.sequence);
                Ok(())
            })
            .unwrap();
        }
    }
    store.tick(T0.plus_secs(40)).unwrap();
    let part = store.cdr_path().to_path_buf();
    let mut half = std::fs::OpenOptions::new()
        .append(true)
        .open(&part)
        .unwrap();
    std::io::Write::write_all(&mut half, &[0x28, 0xb5, 0x2f, 0xfd, 0x24]).unwrap();
    f.poll(|c| {
        got.push(c.sequence);
        Ok(())
    })
    .unwrap();
    let m = store.next_cdr_sequence() - 1;
    assert_eq!(got, (n + 1..=m).collect::<Vec<_>>());
    let files = cdr_tool::list(dir.path()).unwrap();
    assert_eq!(files.last().unwrap().partial_bytes, 5);
}

#[test]
fn compressed_csv_files_hold_exactly_the_lines_of_plain_csv_files() {
    let plain = tempfile::tempdir().unwrap();
    let packed = tempfile::tempdir().unwrap();
    let csv = StoreOptions {
        cdr_format: CdrFormat::Csv,
        ..options()
    };
    for (dir, opts) in [
        (plain.path(), csv.clone()),
        (
            packed.path(),
            StoreOptions {
                cdr_compression: CdrCompression::Zstd { level: 1 },
                ..csv.clone()
            },
        ),
    ] {
        let (mut store, mut engine, _) = open(dir, opts.clone(), T0);
        for r in 0..6 {
            run(&mut engine, &mut store, &round(r), T0.plus_secs(r as u64));
        }
        drop(store);
        // A restart in between.
        let (mut store, mut engine, _) = open(dir, opts, T0.plus_secs(10));
        run(&mut engine, &mut store, &round(6), T0.plus_secs(10));
        store.close_cdr_file(T0.plus_secs(10)).unwrap();
    }
    let a = files(plain.path(), false);
    let b = files(packed.path(), false);
    assert_eq!(a.len(), 1);
    assert_eq!(b.len(), 1);
    let (pa, da) = a.iter().next().unwrap();
    let (pb, db) = b.iter().next().unwrap();
    assert!(pb.ends_with(".csv.zst"), "{pb}");
    assert_eq!(format!("{pa}.zst"), *pb);
    assert_eq!(unzstd(db), *da);
}

#[test]
fn a_rotation_interrupted_after_the_next_compressed_file_was_created_is_finished_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), zstd_options(), T0);
    run(&mut engine, &mut store, &round(0), T0);
    let next = store.next_cdr_sequence();
    drop(store);
    // The crash came after the next file was created, before the rename
    // (the order rotation follows, so an open file always exists).
    let name = gyro_store::names::part_name_of(
        0,
        next,
        CdrFormat::JsonLines,
        CdrCompression::Zstd { level: 1 },
    );
    let shard_dir = dir.path().join("cdr").join("shard-0");
    std::fs::write(shard_dir.join(name), b"").unwrap();
    let (mut store, mut engine, report) = open(dir.path(), zstd_options(), T0);
    assert_eq!(report.cdr.closed.len(), 1);
    run(&mut engine, &mut store, &round(1), T0);
    store.close_cdr_file(T0.plus_secs(1)).unwrap();
    let cdrs = all_cdrs(dir.path());
    assert_gap_free(&cdrs);
    assert_eq!(cdrs.len() as u64, store.next_cdr_sequence() - 1);
    assert_eq!(
        check_closed(&files(dir.path(), false), 1),
        store.next_cdr_sequence()
    );
}
