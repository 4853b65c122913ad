//! The durable path off the event loop: commit jobs on another thread,
//! answer records read back, snapshots built from the journal by a
//! compaction job, and CSV CDR files.

mod common;

use common::*;
use gyro_charging::*;
use gyro_store::*;

fn answer_record(seq: u64) -> Vec<u8> {
    let body = format!("answer-{seq}");
    let mut r = (body.len() as u32).to_le_bytes().to_vec();
    r.extend_from_slice(body.as_bytes());
    r
}

fn answers(first: u64, count: u32) -> Vec<u8> {
    (first..first + count as u64)
        .flat_map(answer_record)
        .collect()
}

#[test]
fn answers_are_read_back_from_pending_in_flight_and_disk() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, _engine, _) = open(dir.path(), options(), T0);
    store.append_answers(&answers(1, 3), 1, 3).unwrap();
    assert_eq!(store.read_answer(2).unwrap(), Some(answer_record(2)));
    let job = store.begin_commit(T0).unwrap().expect("a job");
    store.append_answers(&answers(4, 2), 4, 2).unwrap();
    // In flight: still readable from memory.
    assert_eq!(store.read_answer(3).unwrap(), Some(answer_record(3)));
    let r = std::thread::spawn(move || job.run()).join().unwrap();
    let s = store.finish_commit(r, T0).unwrap();
    assert_eq!(s.answers, 3);
    store.commit(T0).unwrap();
    for seq in 1..=5 {
        assert_eq!(store.read_answer(seq).unwrap(), Some(answer_record(seq)));
    }
    assert_eq!(store.read_answer(6).unwrap(), None);
    drop(store);

    // After a restart every retained section is handed back, and records
    // are still read from disk.
    let (store, rec) = ShardStore::open(dir.path(), 0, options(), T0).unwrap();
    let mut seen = Vec::new();
    rec.replay_answers(|first, count, bytes| {
        seen.push((first, count, bytes.to_vec()));
        Ok(())
    })
    .unwrap();
    assert_eq!(seen, vec![(1, 3, answers(1, 3)), (4, 2, answers(4, 2))]);
    assert_eq!(store.read_answer(4).unwrap(), Some(answer_record(4)));
}

#[test]
fn answers_out_of_sequence_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, _engine, _) = open(dir.path(), options(), T0);
    store.append_answers(&answers(1, 2), 1, 2).unwrap();
    assert!(matches!(
        store.append_answers(&answers(5, 1), 5, 1),
        Err(gyro_store::Error::Sequence {
            expected: 3,
            found: 5
        })
    ));
}

#[test]
fn a_snapshot_is_built_off_the_loop_from_the_closed_journals() {
    let dir = tempfile::tempdir().unwrap();
    let opts = snapshot_every_record();
    let (mut store, mut engine, _) = open(dir.path(), opts.clone(), T0);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    run(&mut engine, &mut store, &round(0), T0);
    assert!(store.should_snapshot());
    // Nothing closed yet: the next commit job rotates the journal.
    assert!(store.begin_compaction().is_none());
    assert!(store.has_due_work(T0));
    let s = store.commit(T0).unwrap();
    assert!(s.new_generation.is_some());
    // The loop goes on while the snapshot is built.
    let next_answer_seq = engine.next_answer_seq();
    run(&mut engine, &mut store, &round(1), T0);
    // The closed journal's answers are forgotten (say their time passed):
    // the snapshot replaces it.
    store.set_answer_horizon(next_answer_seq);
    let done = compact(&mut store, next_answer_seq);
    assert!(done.effects > 0);
    assert_eq!(done.removed_journals.len(), 1);
    let before = engine.snapshot();
    drop(store);
    let (_s, e2, report) = open(dir.path(), opts, T0);
    assert_eq!(report.snapshot_generation, Some(done.generation));
    assert_eq!(e2.snapshot(), before);
}

#[test]
fn journals_are_kept_while_their_answers_are_live() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    run(&mut engine, &mut store, &round(0), T0);
    let n = engine.next_answer_seq() - 1;
    assert!(n >= 2);
    store.set_answer_horizon(1);
    store.request_journal_rotation();
    store.commit(T0).unwrap();
    let done = compact(&mut store, engine.next_answer_seq());
    assert!(done.removed_journals.is_empty(), "answers 1..={n} are live");
    let second = store.read_answer(2).unwrap().expect("answer 2");
    drop(store);
    let (mut store, rec) = ShardStore::open(dir.path(), 0, options(), T0).unwrap();
    assert_eq!(rec.report.journal_answers, n);
    assert_eq!(store.read_answer(2).unwrap(), Some(second));
    // Past the horizon, the next compaction deletes it.
    store.set_answer_horizon(n + 1);
    store.request_journal_rotation();
    store.commit(T0).unwrap();
    let done = compact(&mut store, n + 1);
    assert_eq!(done.removed_journals.len(), 2);
    assert_eq!(store.read_answer(1).unwrap(), None);
}

#[test]
fn csv_cdr_files_are_written_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        cdr_format: CdrFormat::Csv,
        ..options()
    };
    let (mut store, mut engine, _) = open(dir.path(), opts.clone(), T0);
    run(&mut engine, &mut store, &round(0), T0);
    let part = store.cdr_path().to_path_buf();
    assert!(part.to_string_lossy().ends_with(".csv.part"), "{part:?}");
    let data = std::fs::read_to_string(&part).unwrap();
    let n = store.next_cdr_sequence() - 1;
    assert_eq!(data.lines().count() as u64, n);
    assert!(data.starts_with("1,"));
    // Lost lines are written again from the journal.
    std::fs::write(&part, data.lines().next().unwrap().to_owned() + "\n").unwrap();
    drop(store);
    let (mut store, _e, report) = open(dir.path(), opts, T0);
    assert_eq!(report.cdr.rewritten, n - 1);
    assert_eq!(std::fs::read_to_string(&part).unwrap(), data);
    let closed = store.close_cdr_file(T0).unwrap().unwrap();
    assert!(closed.to_string_lossy().ends_with(".csv"));
}

/// The closed files of shard 0 under `data_dir`.
fn closed_cdr_files(data_dir: &std::path::Path) -> usize {
    std::fs::read_dir(cdr_dir(data_dir, 0))
        .unwrap()
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .path()
                .to_string_lossy()
                .ends_with(".part")
        })
        .count()
}

/// Handles `reqs` and starts their commit job.
fn begin(engine: &mut Engine, store: &mut ShardStore, reqs: &[CcRequest]) -> CommitJob {
    let mut out = Output::default();
    let mut answer = CcAnswer::default();
    for r in reqs {
        engine.handle(r, T0, &mut answer, &mut out);
        store.append_output(&out).unwrap();
        out.clear();
    }
    store.begin_commit(T0).unwrap().expect("a job")
}

#[test]
fn answers_do_not_wait_for_the_cdr_writer_or_its_rotations() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        cdr_max_bytes: 4 << 10,
        ..options()
    };
    let (mut store, mut engine, _) = open(dir.path(), opts, T0);
    let part = store.cdr_path().to_path_buf();
    // The CDR writer is stuck (as in the fsync of a large CDR file).
    let hold = store.hold_cdr_writer();
    for r in 0..12 {
        let job = begin(&mut engine, &mut store, &round(r));
        let ran = std::thread::spawn(move || job.run()).join().unwrap();
        // The batch is durable: its answers may leave now.
        let s = store.finish_commit(ran, T0).unwrap();
        assert!(s.cdrs > 0 && s.syncs == 1, "{s:?}");
        assert!(s.rotated.is_none());
    }
    // None of those CDRs reached a CDR file yet, although several files'
    // worth are due.
    assert_eq!(std::fs::metadata(&part).unwrap().len(), 0);
    assert_eq!(closed_cdr_files(dir.path()), 0);
    drop(hold);
    // The writer catches up in order: lines, rotations, gap-free files.
    store.close_cdr_file(T0).unwrap();
    assert!(closed_cdr_files(dir.path()) >= 3);
    let cdrs = all_cdrs(dir.path());
    assert_eq!(cdrs.len() as u64, store.next_cdr_sequence() - 1);
    assert_gap_free(&cdrs);
}

#[test]
fn a_closed_journal_is_not_compacted_before_the_cdr_writer_made_its_cdrs_durable() {
    let dir = tempfile::tempdir().unwrap();
    let opts = snapshot_every_record();
    let (mut store, mut engine, _) = open(dir.path(), opts, T0);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    let hold = store.hold_cdr_writer();
    run_held(&mut engine, &mut store, 0);
    assert!(store.should_snapshot());
    assert!(store.begin_compaction().is_none());
    // The journal generation changes without the CDR writer...
    let job = store.begin_commit(T0).unwrap().expect("a rotation");
    let ran = std::thread::spawn(move || job.run()).join().unwrap();
    let s = store.finish_commit(ran, T0).unwrap();
    assert!(s.new_generation.is_some());
    // ...but no snapshot may cover it while its CDRs are not durable in a
    // CDR file.
    assert!(store.begin_compaction().is_none());
    drop(hold);
    store.tick(T0).unwrap();
    // Say the closed journal's answers are past their time.
    store.set_answer_horizon(engine.next_answer_seq());
    let done = compact(&mut store, engine.next_answer_seq());
    assert_eq!(done.removed_journals.len(), 1);
    drop(store);
    let (store, _e, report) = open(dir.path(), options(), T0);
    assert_eq!(report.cdr.rewritten, 0);
    let cdrs = all_cdrs(dir.path());
    assert_eq!(cdrs.len() as u64, store.next_cdr_sequence() - 1);
    assert_gap_free(&cdrs);
}

/// One round committed while the CDR writer is held (without waiting for
/// it).
fn run_held(engine: &mut Engine, store: &mut ShardStore, r: u32) {
    let job = begin(engine, store, &round(r));
    let ran = job.run();
    store.finish_commit(ran, T0).unwrap();
}

#[test]
fn a_snapshot_built_from_the_files_carries_the_cdr_and_answer_counters() {
    // Effects do not carry CDR or answer sequence numbers: a snapshot
    // replayed from the closed journals takes them from their frames.
    // Otherwise a restart with no CDR journaled since would number the
    // next CDRs again from the previous snapshot's counter.
    let dir = tempfile::tempdir().unwrap();
    let opts = snapshot_every_record();
    let (mut store, mut engine, _) = open(dir.path(), opts.clone(), T0);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    run(&mut engine, &mut store, &round(0), T0);
    assert!(store.begin_compaction().is_none());
    store.commit(T0).unwrap();
    let next_cdr = store.next_cdr_sequence();
    assert!(next_cdr > 1);
    // Replayed without raising the answer counter.
    let done = compact(&mut store, 0);
    assert!(!done.from_memory);
    drop(store);
    let (store, e2, report) = open(dir.path(), opts, T0);
    assert_eq!(report.snapshot_generation, Some(done.generation));
    assert_eq!(store.next_cdr_sequence(), next_cdr);
    assert_eq!(e2.next_answer_seq(), engine.next_answer_seq());
}
