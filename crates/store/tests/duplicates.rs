//! Duplicate detection across a crash: a retransmission of a request whose
//! answer (and effects) were made durable gets the same answer after a
//! restart and is not charged again, whether the engine is rebuilt from the
//! journal or from a snapshot. After the answer cache's lifetime a repeat
//! is processed as a new request.

mod common;

use common::*;
use gyro_charging::*;
use gyro_store::*;
use std::path::Path;

/// Runs `reqs` at `now` and commits them as one batch; returns the answers.
fn answer_all(
    engine: &mut Engine,
    store: &mut ShardStore,
    reqs: &[CcRequest],
    now: Timestamp,
) -> Vec<CcAnswer> {
    let mut out = Output::default();
    let answers = reqs
        .iter()
        .map(|r| {
            let a = handle(engine, store, r, now, &mut out);
            store.append_output(&out).expect("append");
            out.clear();
            a
        })
        .collect();
    store.commit(now).expect("commit");
    answers
}

/// Retransmits every request (T flag set) after a restart and checks that
/// each gets its original answer and that nothing is charged or written.
fn retransmit_all(
    dir: &Path,
    reqs: &[CcRequest],
    answers: &[CcAnswer],
    before: &Snapshot,
    cdrs_before: usize,
    now: Timestamp,
) {
    let (mut store, mut engine, report) = open(dir, options(), now);
    assert_eq!(report.torn_journal_bytes, 0);
    assert_eq!(
        engine.snapshot(),
        *before,
        "restart rebuilds the same state"
    );
    assert_eq!(engine.remembered_answers(), reqs.len());
    let mut out = Output::default();
    for (r, first) in reqs.iter().zip(answers) {
        let mut again = r.clone();
        again.retransmit = true;
        let a = handle(&mut engine, &store, &again, now, &mut out);
        assert!(
            a.duplicate,
            "{} #{} not recognised",
            r.session_id, r.request_number
        );
        assert_eq!(
            CcAnswer {
                duplicate: false,
                ..a
            },
            *first
        );
        assert!(out.effects.is_empty() && out.cdrs.is_empty() && out.answers.is_empty());
        store.append_output(&out).expect("append");
    }
    let stats = store.commit(now).expect("commit");
    assert_eq!((stats.effects, stats.cdrs), (0, 0), "nothing journaled");
    assert_eq!(stats.answers, 0, "no answer journaled again");
    assert_eq!(engine.snapshot().ledger, before.ledger, "nothing charged");
    drop(store);
    assert_eq!(all_cdrs(dir).len(), cdrs_before, "no CDR written");
}

/// The requests of one round and their answers, journaled; the state and
/// the CDR count after them.
fn setup(dir: &Path) -> (Vec<CcRequest>, Vec<CcAnswer>, Snapshot, usize) {
    let (mut store, mut engine, _) = open(dir, options(), T0);
    store.snapshot(&engine.snapshot(), T0).unwrap();
    let reqs = round(0);
    let answers = answer_all(&mut engine, &mut store, &reqs, T0);
    // The round charges money: a repeat charged again would show.
    assert!(engine.accounts().any(|a| a.debited > 0));
    let before = engine.snapshot();
    assert_eq!(engine.remembered_answers(), reqs.len());
    drop(store);
    let cdrs = all_cdrs(dir).len();
    assert!(cdrs > 0);
    (reqs, answers, before, cdrs)
}

#[test]
fn a_retransmission_after_a_crash_is_answered_from_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let (reqs, answers, before, cdrs) = setup(dir.path());
    // Simulated crash: everything in memory is gone; only the journal
    // (and the first snapshot, taken before the requests) remains.
    retransmit_all(dir.path(), &reqs, &answers, &before, cdrs, T0.plus_secs(30));
    // A second restart remembers them still (nothing was forgotten by the
    // first one).
    retransmit_all(dir.path(), &reqs, &answers, &before, cdrs, T0.plus_secs(60));
}

#[test]
fn a_retransmission_after_a_snapshot_and_a_crash_is_answered_from_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (reqs, answers, before, cdrs) = setup(dir.path());
    {
        let (mut store, engine, _) = open(dir.path(), options(), T0.plus_secs(1));
        store.snapshot(&engine.snapshot(), T0.plus_secs(1)).unwrap();
    }
    let (_, _, report) = open(dir.path(), options(), T0.plus_secs(2));
    assert_eq!(report.journal_effects, 0, "the snapshot holds everything");
    retransmit_all(dir.path(), &reqs, &answers, &before, cdrs, T0.plus_secs(30));
}

#[test]
fn after_the_cache_lifetime_a_repeat_is_a_new_request() {
    let dir = tempfile::tempdir().unwrap();
    let (reqs, answers, _, cdrs) = setup(dir.path());
    let ttl = config().engine.dedup_ttl_secs;
    let later = T0.plus_secs(ttl + 1);
    let (mut store, mut engine, report) = open(dir.path(), options(), later);
    assert!(report.journal_effects > 0);
    // Replayed, and forgotten at the time of the restart.
    assert_eq!(engine.remembered_answers(), 0);
    let mut out = Output::default();
    // A Terminate repeated too late: the session is closed, so 5002 and
    // no charge.
    let (i, t) = reqs
        .iter()
        .enumerate()
        .find(|(_, r)| r.request_type == RequestType::Termination)
        .unwrap();
    assert_eq!(answers[i].result_code, result_code::SUCCESS);
    let mut again = t.clone();
    again.retransmit = true;
    out.clear();
    let a = handle(&mut engine, &store, &again, later, &mut out);
    assert!(!a.duplicate);
    assert_eq!(a.result_code, result_code::UNKNOWN_SESSION_ID);
    assert!(out.cdrs.is_empty());
    store.append_output(&out).unwrap();
    store.commit(later).unwrap();
    drop(store);
    assert_eq!(all_cdrs(dir.path()).len(), cdrs);
}
