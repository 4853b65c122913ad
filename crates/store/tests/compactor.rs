//! Snapshots from the compactor thread: a copy of the ledger kept current
//! from the committed batches, so that a compaction writes the snapshot
//! it took at the closed journals' boundary without reading them back;
//! and the files as the fallback where it cannot (journals recovered at
//! start, a compactor that failed).

mod common;

use common::*;
use gyro_charging::*;
use gyro_store::*;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

/// A copy of `engine`, as the application gives the compactor.
fn copy_of(engine: &Engine) -> Engine {
    let cfg = config();
    Engine::restore(
        cfg.catalog().unwrap(),
        cfg.engine.clone(),
        engine.snapshot(),
    )
}

fn start_compactor(store: &mut ShardStore, engine: &Engine) {
    store
        .start_compactor(
            copy_of(engine),
            |e, effect| e.apply(effect),
            Engine::snapshot,
        )
        .expect("start the compactor");
}

/// Runs a round of requests and account operations, then the commit that
/// closes the journal (as a due snapshot asks).
fn round_and_rotate(engine: &mut Engine, store: &mut ShardStore, n: u32) {
    run(engine, store, &round(n), T0);
    admin(engine, store, T0);
    assert!(store.should_snapshot());
    assert!(store.begin_compaction().is_none(), "nothing closed yet");
    let s = store.commit(T0).unwrap();
    assert!(s.new_generation.is_some());
}

/// The closed journals of shard 0.
fn journals(data: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(ledger_dir(data, 0))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("journal-"))
        .collect();
    v.sort();
    v
}

/// Whether a restart recovers `engine`'s state (compared without
/// printing two whole ledgers when they differ).
fn recovers(data: &Path, opts: StoreOptions, engine: &Engine, generation: u64) {
    let (_s, e2, report) = open(data, opts, T0);
    assert_eq!(report.snapshot_generation, Some(generation));
    let (a, b) = (e2.snapshot(), engine.snapshot());
    assert_eq!(a.next_cdr_sequence, b.next_cdr_sequence);
    assert_eq!(a.next_answer_seq, b.next_answer_seq);
    assert!(a == b, "the recovered ledger differs from the live one");
}

#[test]
fn a_snapshot_is_written_from_the_compactor_without_reading_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let opts = snapshot_every_record();
    let (mut store, mut engine, _) = open(dir.path(), opts.clone(), T0);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    start_compactor(&mut store, &engine);
    round_and_rotate(&mut engine, &mut store, 0);
    let next_answer_seq = engine.next_answer_seq();

    // Damage every byte of the closed journal after its header: a
    // snapshot built from it would fail ("damaged frame").
    let closed = journals(dir.path())[0].clone();
    let len = std::fs::metadata(&closed).unwrap().len();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&closed)
        .unwrap();
    f.seek(SeekFrom::Start(8)).unwrap();
    f.write_all(&vec![0x5a; len as usize - 8]).unwrap();
    drop(f);

    // The loop goes on; the closed journal's answers are past their time.
    run(&mut engine, &mut store, &round(1), T0);
    store.set_answer_horizon(next_answer_seq);
    let done = compact(&mut store, next_answer_seq);
    assert!(done.from_memory);
    assert!(
        done.effects > 0,
        "the effects of round 0 and the account operations"
    );
    assert_eq!(done.removed_journals.len(), 1);
    assert!(!closed.exists());

    // A restart from that snapshot and the open journal is the live state.
    drop(store);
    recovers(dir.path(), opts, &engine, done.generation);
}

#[test]
fn the_compactor_and_the_files_build_the_same_snapshot() {
    // The same requests through two stores, one with a compactor: the
    // snapshots they write at the same boundary are equal.
    let mut snaps = Vec::new();
    for with_compactor in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, mut engine, _) = open(dir.path(), snapshot_every_record(), T0);
        store.snapshot(&engine.snapshot(), T0).unwrap();
        if with_compactor {
            start_compactor(&mut store, &engine);
        }
        round_and_rotate(&mut engine, &mut store, 0);
        let next_answer_seq = engine.next_answer_seq();
        let done = compact(&mut store, next_answer_seq);
        assert_eq!(done.from_memory, with_compactor);
        drop(store);
        let (_s, rec) = ShardStore::open(dir.path(), 0, options(), T0).unwrap();
        snaps.push(rec.snapshot.expect("a snapshot"));
    }
    assert!(snaps[0] == snaps[1], "the snapshots differ");
}

#[test]
fn a_compactor_starts_only_before_the_first_append() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    run(&mut engine, &mut store, &round(0), T0);
    assert!(matches!(
        store.start_compactor(
            copy_of(&engine),
            |e, effect| e.apply(effect),
            Engine::snapshot
        ),
        Err(gyro_store::Error::Busy(_))
    ));
}

#[test]
fn journals_closed_before_a_restart_are_compacted_from_the_files_then_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let opts = snapshot_every_record();
    let (mut store, mut engine, _) = open(dir.path(), opts.clone(), T0);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    round_and_rotate(&mut engine, &mut store, 0);
    // Stopped before the closed journal was compacted.
    drop(store);

    let (mut store, mut engine, _) = open(dir.path(), opts.clone(), T0);
    start_compactor(&mut store, &engine);
    let next_answer_seq = engine.next_answer_seq();
    let done = compact(&mut store, next_answer_seq);
    assert!(
        !done.from_memory,
        "the compactor started after that boundary"
    );
    assert!(done.effects > 0);

    round_and_rotate(&mut engine, &mut store, 1);
    let done = compact(&mut store, engine.next_answer_seq());
    assert!(done.from_memory);
    assert!(done.effects > 0);
    drop(store);
    recovers(dir.path(), opts, &engine, done.generation);
}

#[test]
fn a_compactor_that_fails_leaves_snapshots_to_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let opts = snapshot_every_record();
    let (mut store, mut engine, _) = open(dir.path(), opts.clone(), T0);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    store
        .start_compactor(
            copy_of(&engine),
            |_, _| Err(gyro_charging::Error::Replay("refused by the test")),
            Engine::snapshot,
        )
        .unwrap();
    round_and_rotate(&mut engine, &mut store, 0);
    let t = std::time::Instant::now();
    while store.compactor_failure().is_none() {
        assert!(t.elapsed().as_secs() < 10, "the compactor never failed");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(store
        .compactor_failure()
        .unwrap()
        .contains("refused by the test"));
    let done = compact(&mut store, engine.next_answer_seq());
    assert!(!done.from_memory);
    drop(store);
    recovers(dir.path(), opts, &engine, done.generation);
}
