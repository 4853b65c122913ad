//! Recovery of every kind of state: balances, reservations, bundles, open
//! sessions, CDR sequence numbers; torn journal frames and CDR lines;
//! snapshot plus journal replay.

mod common;

use common::*;
use gyro_charging::*;
use gyro_store::*;
use std::io::Write;

fn engine_state(e: &Engine) -> Snapshot {
    e.snapshot()
}

#[test]
fn balances_reservations_bundles_and_sessions_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, report) = open(dir.path(), options(), T0);
    assert_eq!(report.snapshot_generation, None);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    for r in 0..5 {
        let stats = run(&mut engine, &mut store, &round(r), T0.plus_secs(r as u64));
        assert_eq!(stats.syncs, 1, "one fdatasync per group commit");
        assert!(stats.effects > 0 && stats.cdrs > 0);
    }
    admin(&mut engine, &mut store, T0.plus_secs(9));
    let before = engine_state(&engine);
    // Every kind of state is exercised.
    let a1 = engine.account(AccountId(1)).unwrap();
    assert!(a1.bundles[0].consumed > 0 && a1.bundles[0].reserved > 0);
    assert!(engine.accounts().any(|a| a.reserved > 0));
    assert!(engine.accounts().any(|a| a.topped_up > 0));
    assert!(engine
        .accounts()
        .any(|a| a.status == AccountStatus::Blocked));
    assert!(engine.session_count() >= 5);
    drop(store);

    let (store, engine2, report) = open(dir.path(), options(), T0.plus_secs(10));
    assert_eq!(report.snapshot_generation, Some(1));
    assert!(report.journal_effects > 0);
    assert_eq!(report.torn_journal_bytes, 0);
    assert_eq!(engine_state(&engine2), before);
    assert_eq!(store.next_cdr_sequence(), before.next_cdr_sequence);

    // The plain API gives the same: snapshot plus effects plus answers.
    drop(store);
    let (_store, rec) = ShardStore::open(dir.path(), 0, options(), T0).unwrap();
    let cfg = config();
    let mut e3 = Engine::restore(
        cfg.catalog().unwrap(),
        cfg.engine.clone(),
        rec.snapshot.clone().unwrap(),
    );
    for e in &rec.effects().unwrap() {
        e3.apply(e).unwrap();
    }
    rec.replay_answers(|first, _, records| e3.replay_answers(first, records, T0))
        .unwrap();
    assert_eq!(engine_state(&e3), before);
    assert_eq!(rec.next_cdr_sequence, before.next_cdr_sequence);
}

#[test]
fn journal_alone_rebuilds_from_the_configuration_before_any_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    for r in 0..3 {
        run(&mut engine, &mut store, &round(r), T0);
    }
    let before = engine.snapshot();
    drop(store);
    let (store, engine2, report) = open(dir.path(), options(), T0);
    assert_eq!(report.snapshot_generation, None);
    assert_eq!(engine2.snapshot(), before);
    assert_eq!(store.next_cdr_sequence(), before.next_cdr_sequence);
}

#[test]
fn snapshot_then_journal_replay_and_old_generations_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    run(&mut engine, &mut store, &round(0), T0);
    run(&mut engine, &mut store, &round(1), T0);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    assert_eq!(store.records_since_snapshot(), 0);
    run(&mut engine, &mut store, &round(2), T0);
    let before = engine.snapshot();
    drop(store);
    let ledger = ledger_dir(dir.path(), 0);
    let mut names: Vec<String> = std::fs::read_dir(&ledger)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    // Journal 1 is covered by the snapshot but kept for the answers it
    // holds, which are still remembered (duplicate detection).
    assert_eq!(
        names,
        [
            "journal-0000000000000001.log",
            "journal-0000000000000002.log",
            "snapshot-0000000000000002.snap"
        ]
    );
    let (_s, engine2, report) = open(dir.path(), options(), T0);
    assert_eq!(report.snapshot_generation, Some(2));
    assert_eq!(report.journal_frames, 1);
    assert_eq!(engine2.snapshot(), before);
}

#[test]
fn a_snapshot_written_in_the_background_that_never_finished_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    run(&mut engine, &mut store, &round(0), T0);
    let writer = store.prepare_snapshot(T0).unwrap();
    let snap = engine.snapshot();
    // Commits go on in the new journal while the snapshot is written...
    run(&mut engine, &mut store, &round(1), T0);
    // ...and the process dies before the snapshot is written.
    drop(writer);
    let before = engine.snapshot();
    drop(store);
    let (mut store, mut engine2, report) = open(dir.path(), options(), T0);
    assert_eq!(report.snapshot_generation, Some(1));
    assert_eq!(report.journal_files, 2);
    assert_eq!(engine2.snapshot(), before);
    // Written on another thread, it then replaces both.
    let w = store.prepare_snapshot(T0).unwrap();
    let snap2 = engine2.snapshot();
    std::thread::spawn(move || w.write(&snap2).unwrap())
        .join()
        .unwrap();
    run(&mut engine2, &mut store, &round(2), T0);
    let before = engine2.snapshot();
    drop(store);
    let (_s, engine3, report) = open(dir.path(), options(), T0);
    assert_eq!(report.snapshot_generation, Some(3));
    assert_eq!(report.journal_files, 1);
    assert_eq!(engine3.snapshot(), before);
    let _ = snap;
}

#[test]
fn a_torn_journal_frame_is_cut_and_the_state_is_that_of_the_last_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    run(&mut engine, &mut store, &round(0), T0);
    run(&mut engine, &mut store, &round(1), T0);
    let before = engine.snapshot();
    let journal = store.journal_path().to_path_buf();
    drop(store);
    // A crash in the middle of the next frame: its head and part of it.
    let len = std::fs::metadata(&journal).unwrap().len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .unwrap();
    f.write_all(&[200, 3, 0, 0, 1, 2, 3, 4, b'{', b'"'])
        .unwrap();
    drop(f);
    let (mut store, mut engine2, report) = open(dir.path(), options(), T0);
    assert_eq!(report.torn_journal_bytes, 10);
    assert_eq!(std::fs::metadata(&journal).unwrap().len(), len);
    assert_eq!(engine2.snapshot(), before);
    // And it goes on from there.
    run(&mut engine2, &mut store, &round(2), T0);
    let after = engine2.snapshot();
    drop(store);
    let (_s, engine3, _) = open(dir.path(), options(), T0);
    assert_eq!(engine3.snapshot(), after);
    assert_gap_free(&all_cdrs(dir.path()));
}

#[test]
fn a_torn_frame_that_is_whole_but_fails_its_checksum_is_cut_too() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    run(&mut engine, &mut store, &round(0), T0);
    let before = engine.snapshot();
    // Closed, the journal holds only its frames (no zero bytes ahead).
    let journal = store.journal_path().to_path_buf();
    drop(store);
    let len0 = std::fs::metadata(&journal).unwrap().len();
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    run(&mut engine, &mut store, &round(1), T0);
    let journal = store.journal_path().to_path_buf();
    drop(store);
    let mut data = std::fs::read(&journal).unwrap();
    let last = data.len() - 3;
    data[last] ^= 0xff;
    std::fs::write(&journal, &data).unwrap();
    let (_s, engine2, report) = open(dir.path(), options(), T0);
    assert_eq!(report.torn_journal_bytes, data.len() as u64 - len0);
    assert_eq!(engine2.snapshot().ledger, before.ledger);
    // The CDRs of the lost commit were cut from the CDR file and their
    // numbers will be given again.
    assert_eq!(
        engine2.snapshot().next_cdr_sequence,
        before.next_cdr_sequence
    );
    assert_gap_free(&all_cdrs(dir.path()));
    assert_eq!(
        all_cdrs(dir.path()).len() as u64,
        before.next_cdr_sequence - 1
    );
}

#[test]
fn damage_before_the_last_frame_is_an_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    run(&mut engine, &mut store, &round(0), T0);
    run(&mut engine, &mut store, &round(1), T0);
    let journal = store.journal_path().to_path_buf();
    drop(store);
    let mut data = std::fs::read(&journal).unwrap();
    data[40] ^= 0xff;
    std::fs::write(&journal, &data).unwrap();
    let err = ShardStore::open(dir.path(), 0, options(), T0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert_eq!(err.path(), Some(journal.as_path()));
    assert_eq!(std::fs::read(&journal).unwrap(), data);
}

#[test]
fn a_torn_cdr_line_is_cut_and_journaled_records_are_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    run(&mut engine, &mut store, &round(0), T0);
    run(&mut engine, &mut store, &round(1), T0);
    let part = store.cdr_path().to_path_buf();
    let n = store.next_cdr_sequence() - 1;
    drop(store);
    // The last CDR line was half written when the machine died.
    let data = std::fs::read(&part).unwrap();
    std::fs::write(&part, &data[..data.len() - 25]).unwrap();
    let (store, _e, report) = open(dir.path(), options(), T0);
    assert_eq!(
        report.cdr.truncated_bytes,
        (data.len() - 25) as u64 - {
            let d = &data[..data.len() - 25];
            d.iter().rposition(|&b| b == b'\n').unwrap() as u64 + 1
        }
    );
    assert_eq!(report.cdr.rewritten, 1);
    assert_eq!(std::fs::read(&part).unwrap(), data);
    assert_eq!(store.next_cdr_sequence(), n + 1);
    drop(store);

    // All lines lost (never flushed by the kernel): all written again.
    std::fs::write(&part, b"").unwrap();
    let (_s, _e, report) = open(dir.path(), options(), T0);
    assert_eq!(report.cdr.rewritten, n);
    assert_eq!(std::fs::read(&part).unwrap(), data);
    let cdrs = all_cdrs(dir.path());
    assert_gap_free(&cdrs);
    assert_eq!(cdrs.len() as u64, n);
}

#[test]
fn cdr_sequence_numbers_continue_across_restarts_without_gaps_or_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        cdr_max_bytes: 4096,
        snapshot_every_records: 150,
        ..options()
    };
    let mut snapshots = 0;
    for restart in 0..6u32 {
        let (mut store, mut engine, _) = open(dir.path(), opts.clone(), T0);
        for r in 0..3 {
            run(&mut engine, &mut store, &round(restart * 3 + r), T0);
            if store.should_snapshot() {
                store.snapshot(&engine.snapshot(), T0).unwrap();
                snapshots += 1;
            }
        }
        if restart % 2 == 0 {
            store.close_cdr_file(T0).unwrap();
        }
    }
    assert!(snapshots >= 2);
    let cdrs = all_cdrs(dir.path());
    assert!(cdrs.len() > 100);
    assert_gap_free(&cdrs);
}

#[test]
fn sessions_restored_after_a_restart_expire_and_release_their_reservations() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    run(&mut engine, &mut store, &round(0), T0);
    assert!(engine.accounts().any(|a| a.reserved > 0));
    drop(store);
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    assert!(engine.session_count() > 0);
    // Nobody comes back for these sessions: after Tcc they are closed.
    let later = T0.plus_secs(engine.options().supervision_secs + 1);
    let mut out = Output::default();
    let closed = engine.tick(later, &mut out);
    assert!(closed > 0);
    assert_eq!(engine.session_count(), 0);
    assert!(engine.accounts().all(|a| a.reserved == 0));
    assert!(engine
        .accounts()
        .all(|a| a.bundles.iter().all(|b| b.reserved == 0)));
    store.append_output(&out).unwrap();
    store.commit(later).unwrap();
    let before = engine.snapshot();
    drop(store);
    let (_s, engine2, _) = open(dir.path(), options(), later);
    assert_eq!(engine2.snapshot(), before);
    assert_gap_free(&all_cdrs(dir.path()));
}

#[test]
fn asynchronous_mode_syncs_at_the_interval() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        durability: Durability::Async {
            interval: std::time::Duration::from_millis(100),
        },
        ..options()
    };
    let (mut store, mut engine, _) = open(dir.path(), opts.clone(), T0);
    let s = run(&mut engine, &mut store, &round(0), T0);
    assert_eq!(s.syncs, 0);
    assert!(!store.sync_if_due(Timestamp(T0.0 + 50)).unwrap());
    assert!(store.sync_if_due(Timestamp(T0.0 + 100)).unwrap());
    assert!(!store.sync_if_due(Timestamp(T0.0 + 300)).unwrap());
    let before = engine.snapshot();
    drop(store);
    let (_s, engine2, _) = open(dir.path(), opts, T0);
    assert_eq!(engine2.snapshot(), before);
}

#[test]
fn split_commit_syncs_on_another_thread() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    let mut out = Output::default();
    let mut answer = CcAnswer::default();
    for r in &round(0) {
        engine.handle(r, T0, &mut answer, &mut out);
        store.append_output(&out).unwrap();
        out.clear();
    }
    let h = store.begin_commit(T0).unwrap().expect("a sync to run");
    assert!(matches!(
        store.begin_commit(T0),
        Err(gyro_store::Error::Busy(_))
    ));
    // Requests handled meanwhile join the next batch.
    for r in &round(1) {
        engine.handle(r, T0, &mut answer, &mut out);
        store.append_output(&out).unwrap();
        out.clear();
    }
    let r = std::thread::spawn(move || h.sync()).join().unwrap();
    let s = store.finish_commit(r, T0).unwrap();
    assert!(s.cdrs > 0 && s.syncs == 1);
    store.commit(T0).unwrap();
    let before = engine.snapshot();
    drop(store);
    let (_s, engine2, _) = open(dir.path(), options(), T0);
    assert_eq!(engine2.snapshot(), before);
    assert_gap_free(&all_cdrs(dir.path()));
}

#[test]
fn a_cdr_out_of_sequence_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, _e, _) = open(dir.path(), options(), T0);
    let cdr = Cdr {
        sequence: 7,
        ..Cdr::default()
    };
    let err = store.append(&[], &[cdr]).unwrap_err();
    assert!(matches!(
        err,
        gyro_store::Error::Sequence {
            expected: 1,
            found: 7
        }
    ));
    assert!(!store.has_pending());
}

#[test]
fn zero_bytes_after_the_frames_of_a_journal_are_no_damage_in_any_generation() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut engine, _) = open(dir.path(), options(), T0);
    run(&mut engine, &mut store, &round(0), T0);
    let first = store.journal_path().to_path_buf();
    store.snapshot(&engine.snapshot(), T0).unwrap();
    run(&mut engine, &mut store, &round(1), T0);
    let last = store.journal_path().to_path_buf();
    assert_ne!(first, last, "the snapshot started a new journal");
    let before = engine.snapshot();
    drop(store);
    // Zero bytes after the last frame, in a closed journal and in the
    // last one: journals of earlier versions kept them written ahead, and
    // a crash can leave blocks allocated but never written.
    for p in [&first, &last] {
        let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
        f.write_all(&vec![0u8; 70_000]).unwrap();
    }
    let (_s, engine2, report) = open(dir.path(), options(), T0);
    assert_eq!(report.torn_journal_bytes, 0);
    assert_eq!(engine2.snapshot(), before);
    assert_gap_free(&all_cdrs(dir.path()));
}
