//! The interface a CDR names survives the journal: CDR lines lost in a
//! crash are written again from the journal with it, and a session opened
//! over Nchf is still an Nchf session after a restart (from the journal,
//! and from a snapshot), so the records supervision writes for it say so.

mod common;

use common::*;
use gyro_charging::*;

/// A data session's first two requests over `interface`.
fn opening(session: &str, msisdn: &str, interface: Interface) -> Vec<CcRequest> {
    [
        req(
            session,
            RequestType::Initial,
            0,
            msisdn,
            DATA,
            vec![mscc(10, true, None)],
        ),
        req(
            session,
            RequestType::Update,
            1,
            "",
            DATA,
            vec![mscc(10, true, Some(2_000_000))],
        ),
    ]
    .into_iter()
    .map(|mut r| {
        r.interface = interface;
        r
    })
    .collect()
}

/// Each CDR says the interface its session was opened over.
fn assert_interfaces(cdrs: &[Cdr]) {
    for c in cdrs {
        let want = if c.session_id.starts_with("nchf-") {
            Interface::Nchf
        } else {
            Interface::Gy
        };
        assert_eq!(c.interface, want, "{c:?}");
    }
}

#[test]
fn cdrs_written_again_from_the_journal_and_supervision_records_keep_the_interface() {
    for snapshot in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, mut engine, _) = open(dir.path(), options(), T0);
        let mut reqs = opening("nchf-1001-00ff", "46700000001", Interface::Nchf);
        reqs.extend(opening("pgw.example;1;1", "46700000002", Interface::Gy));
        run(&mut engine, &mut store, &reqs, T0);
        if snapshot {
            store.snapshot(&engine.snapshot(), T0).unwrap();
        }
        let part = store.cdr_path().to_path_buf();
        let written = std::fs::read(&part).unwrap();
        let n = store.next_cdr_sequence() - 1;
        assert_eq!(n, 2, "one usage record per session");
        drop(store);

        // Every line lost in the crash: written again from the journal,
        // byte for byte, interface included. (A snapshot makes the lines
        // before it durable: they are no longer in the journal.)
        if !snapshot {
            std::fs::write(&part, b"").unwrap();
        }
        let (mut store, mut engine, report) = open(dir.path(), options(), T0);
        if !snapshot {
            assert_eq!(report.cdr.rewritten, n);
        }
        assert_eq!(std::fs::read(&part).unwrap(), written);
        let nchf = engine
            .ledger()
            .sessions
            .values()
            .find(|s| s.session_id.starts_with("nchf-"))
            .expect("the Nchf session, restored");
        assert_eq!(nchf.interface, Interface::Nchf, "snapshot {snapshot}");

        // Nobody comes back: supervision closes both sessions, each
        // session-end record naming its interface.
        let later = T0.plus_secs(engine.options().supervision_secs + 1);
        let mut out = Output::default();
        assert_eq!(engine.tick(later, &mut out), 2);
        assert_interfaces(out.cdrs.as_slice());
        store.append_output(&out).unwrap();
        store.commit(later).unwrap();
        drop(store);
        let cdrs = all_cdrs(dir.path());
        assert_eq!(cdrs.len(), 4);
        assert_gap_free(&cdrs);
        assert_interfaces(&cdrs);
        assert_eq!(
            cdrs.iter()
                .filter(|c| c.interface == Interface::Nchf)
                .count(),
            2
        );
    }
}
