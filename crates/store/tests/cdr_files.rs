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
    for (name, data) in &closed {
        // At least the size limit, and no more than the line that reached
        // it (a commit's lines are split between files).
        let last_line = data[..data.len() - 1]
            .rsplit(|&b| b == b'\n')
            .next()
            .unwrap()
            .len() as u64
            + 1;
        let len = data.len() as u64;
        assert!(len >= opts.cdr_max_bytes, "{name}: {len}");
        assert!(len - last_line < opts.cdr_max_bytes, "{name}: {len}");
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
        cdr_tool::Printed {
            records: n,
            damaged: vec![]
        }
    );
    assert_eq!(json.iter().filter(|&&b| b == b'\n').count() as u64, n);
    let mut csv = Vec::new();
    assert_eq!(cdr_tool::to_csv(dir.path(), &mut csv).unwrap().records, n);
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

/// Options writing CDR files in `format` and `compression`.
fn format_options(format: names::CdrFormat, compression: names::CdrCompression) -> StoreOptions {
    StoreOptions {
        cdr_format: format,
        cdr_compression: compression,
        ..options()
    }
}

/// The same rounds of requests stored with `opts` in `dir`, a file
/// closed after each round (the last one too when `close` says so).
fn write_rounds(dir: &Path, opts: StoreOptions, close: bool) -> u64 {
    let (mut store, mut engine, _) = open(dir, opts, T0);
    for r in 0..4 {
        let t = T0.plus_secs(r as u64);
        run(&mut engine, &mut store, &round(r), t);
        if r < 3 || close {
            store.close_cdr_file(t).unwrap();
        }
    }
    store.next_cdr_sequence() - 1
}

#[test]
fn csv_cdr_files_have_every_column_and_read_back_as_the_json_lines_records() {
    use gyro_charging::cdr::{CSV_COLUMNS, CSV_HEADER};
    use names::{CdrCompression, CdrFormat};
    let json = tempfile::tempdir().unwrap();
    let n = write_rounds(
        json.path(),
        format_options(CdrFormat::JsonLines, CdrCompression::None),
        false,
    );
    let mut want = Vec::new();
    cdr_tool::print(json.path(), Format::Json, &mut want).unwrap();
    let mut want_csv = Vec::new();
    cdr_tool::to_csv(json.path(), &mut want_csv).unwrap();
    for compression in [CdrCompression::None, CdrCompression::Zstd { level: 1 }] {
        let dir = tempfile::tempdir().unwrap();
        let opts = format_options(CdrFormat::Csv, compression);
        assert_eq!(write_rounds(dir.path(), opts, false), n);
        let files = cdr_tool::list(dir.path()).unwrap();
        assert!(files.len() >= 3, "{files:?}");
        assert_eq!(files.iter().map(|f| f.records).sum::<u64>(), n);
        assert!(files.iter().all(|f| f.damage.is_none()), "{files:?}");
        // Every line of every file: exactly the columns of the header.
        for f in &files {
            let name = f.path.to_string_lossy().into_owned();
            assert!(name.contains(".csv"), "{name}");
            let bytes = std::fs::read(&f.path).unwrap();
            let lines = match compression {
                CdrCompression::None => bytes,
                CdrCompression::Zstd { .. } => gyro_store::cdr_zstd::scan(&bytes).content,
            };
            let mut r = csv::ReaderBuilder::new()
                .has_headers(false)
                .flexible(true)
                .from_reader(&lines[..]);
            let mut count = 0;
            for rec in r.byte_records() {
                assert_eq!(rec.unwrap().len(), CSV_COLUMNS, "{name}");
                count += 1;
            }
            assert_eq!(count, f.records, "{name}");
        }
        // The same records as JSON Lines files give, printed either way.
        let mut got = Vec::new();
        let printed = cdr_tool::print(dir.path(), Format::Json, &mut got).unwrap();
        assert_eq!(printed.records, n);
        assert!(printed.damaged.is_empty());
        assert_eq!(
            String::from_utf8(got).unwrap(),
            String::from_utf8(want.clone()).unwrap()
        );
        let mut csv = Vec::new();
        cdr_tool::to_csv(dir.path(), &mut csv).unwrap();
        assert_eq!(csv, want_csv);
        // `gyro cdr csv` is the header then the file's own lines.
        let mut own = CSV_HEADER.as_bytes().to_vec();
        for f in &files {
            let bytes = std::fs::read(&f.path).unwrap();
            own.extend(match compression {
                CdrCompression::None => bytes,
                CdrCompression::Zstd { .. } => gyro_store::cdr_zstd::scan(&bytes).content,
            });
        }
        assert_eq!(
            String::from_utf8(own).unwrap(),
            String::from_utf8(csv).unwrap()
        );
        // tail and follow read them too.
        let mut t = Vec::new();
        assert_eq!(
            cdr_tool::tail(dir.path(), 3, Format::Json, &mut t).unwrap(),
            3
        );
        let mut seen = Vec::new();
        Follower::new(dir.path(), usize::MAX)
            .poll(|c| {
                seen.push(c.sequence);
                Ok(())
            })
            .unwrap();
        assert_eq!(seen, (1..=n).collect::<Vec<_>>());
    }
}

#[test]
fn a_csv_line_being_written_is_left_for_later_even_with_a_newline_inside_a_field() {
    let dir = tempfile::tempdir().unwrap();
    let opts = format_options(names::CdrFormat::Csv, names::CdrCompression::None);
    let n = write_rounds(dir.path(), opts, false);
    let part = cdr_tool::list(dir.path()).unwrap().pop().unwrap();
    assert!(part.open && part.last == Some(n), "{part:?}");
    let mut c = gyro_charging::Cdr {
        sequence: n + 1,
        session_id: "a \"quoted\",\nsession".into(),
        ..Default::default()
    };
    let mut line = String::new();
    c.write_csv(&mut line);
    let cut = line.find('\n').unwrap() + 1;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&part.path)
        .unwrap();
    std::io::Write::write_all(&mut f, &line.as_bytes()[..cut]).unwrap();
    let mut follower = Follower::new(dir.path(), 0);
    assert_eq!(follower.poll(|_| Ok(())).unwrap(), 0);
    let listed = cdr_tool::list(dir.path()).unwrap().pop().unwrap();
    assert_eq!((listed.last, listed.partial_bytes), (Some(n), cut as u64));
    assert_eq!(listed.damage, None);
    std::io::Write::write_all(&mut f, &line.as_bytes()[cut..]).unwrap();
    let mut got = Vec::new();
    follower
        .poll(|c| {
            got.push(c.clone());
            Ok(())
        })
        .unwrap();
    c.interface = gyro_charging::Interface::Gy;
    assert_eq!(got, vec![c]);
}

/// The closed files of shard 0 under `dir`, in sequence order.
fn closed_paths(dir: &Path) -> Vec<PathBuf> {
    cdr_tool::list(dir)
        .unwrap()
        .into_iter()
        .filter(|f| !f.open)
        .map(|f| f.path)
        .collect()
}

#[test]
fn closed_files_that_do_not_hold_what_their_names_say_are_reported() {
    use names::{CdrCompression, CdrFormat};
    for (format, compression) in [
        (CdrFormat::JsonLines, CdrCompression::None),
        (CdrFormat::JsonLines, CdrCompression::Zstd { level: 1 }),
        (CdrFormat::Csv, CdrCompression::None),
        (CdrFormat::Csv, CdrCompression::Zstd { level: 1 }),
    ] {
        let what = format!("{format:?} {compression:?}");
        let dir = tempfile::tempdir().unwrap();
        let n = write_rounds(dir.path(), format_options(format, compression), true);
        let closed = closed_paths(dir.path());
        assert!(closed.len() >= 3, "{what}");
        let name = |p: &Path| match CdrName::parse(p.file_name().unwrap().to_str().unwrap()) {
            Some(CdrName::Final { first, last, .. }) => (first, last),
            other => panic!("{other:?}"),
        };
        // Truncated: the first file cut in the middle.
        let cut = &closed[0];
        let bytes = std::fs::read(cut).unwrap();
        std::fs::write(cut, &bytes[..bytes.len() / 2]).unwrap();
        let mut out = Vec::new();
        let printed = cdr_tool::print(dir.path(), Format::Json, &mut out).unwrap();
        assert_eq!(printed.damaged.len(), 1, "{what}");
        let d = &printed.damaged[0];
        assert_eq!(&d.path, cut);
        assert_eq!(d.expected, name(cut), "{what}");
        assert!(d.partial_bytes > 0, "{what}: {d:?}");
        assert!(d.records < d.expected.1 - d.expected.0 + 1, "{what}: {d:?}");
        let text = d.to_string();
        assert!(text.contains(&cut.display().to_string()), "{text}");
        assert!(
            text.contains(&format!("records {} to {}", d.expected.0, d.expected.1)),
            "{text}"
        );
        // Its whole records, and every other file's, are printed still.
        assert_eq!(
            printed.records,
            n - (d.expected.1 - d.expected.0 + 1) + d.records
        );
        let lines = out.iter().filter(|&&b| b == b'\n').count() as u64;
        assert_eq!(lines, printed.records, "{what}");
        let mut csv = Vec::new();
        assert_eq!(
            cdr_tool::to_csv(dir.path(), &mut csv)
                .unwrap()
                .damaged
                .len(),
            1
        );
        // The one file alone.
        let alone = cdr_tool::print(cut, Format::Json, &mut Vec::new()).unwrap();
        assert_eq!(alone.damaged, printed.damaged);
        let files = cdr_tool::list(dir.path()).unwrap();
        let listed: Vec<_> = files.iter().filter_map(|f| f.damage.clone()).collect();
        assert_eq!(listed, printed.damaged);
        let mut table = Vec::new();
        cdr_tool::write_list(&files, &mut table).unwrap();
        let table = String::from_utf8(table).unwrap();
        assert_eq!(table.matches("DAMAGED").count(), 1, "{table}");

        // A record missing in the middle of another (plain files: a line
        // taken out; the file still ends with a whole line).
        if !compression.is_zstd() {
            let gap = &closed[1];
            let text = std::fs::read_to_string(gap).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let kept: String = lines
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != 2)
                .map(|(_, l)| format!("{l}\n"))
                .collect();
            std::fs::write(gap, kept).unwrap();
            let printed = cdr_tool::print(dir.path(), Format::Json, &mut Vec::new()).unwrap();
            assert_eq!(printed.damaged.len(), 2, "{what}");
            let d = &printed.damaged[1];
            let (first, last) = name(gap);
            assert_eq!(d.out_of_sequence, Some((first + 2, first + 3)), "{what}");
            assert_eq!(d.found, Some((first, last)));
            assert_eq!(d.partial_bytes, 0);
            assert!(d.to_string().contains("follows where"), "{d}");
        }
    }
}

#[test]
fn the_open_file_may_end_in_a_partial_line() {
    let dir = tempfile::tempdir().unwrap();
    let n = write_rounds(dir.path(), options(), false);
    let part = part_files(dir.path()).pop().unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&part)
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"sequence\":").unwrap();
    let mut out = Vec::new();
    let printed = cdr_tool::print(dir.path(), Format::Json, &mut out).unwrap();
    assert_eq!(
        printed,
        cdr_tool::Printed {
            records: n,
            damaged: vec![]
        }
    );
    let files = cdr_tool::list(dir.path()).unwrap();
    assert!(files.iter().all(|f| f.damage.is_none()));
    assert_eq!(files.last().unwrap().partial_bytes, 12);
}
