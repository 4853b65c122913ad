//! Helpers shared by the store tests: an engine from the example
//! configuration and a workload that touches every kind of state.
#![allow(dead_code)]

use gyro_charging::*;
use gyro_store::*;
use std::path::Path;
use std::time::Duration;

pub const DATA: &str = "32251@3gpp.org";
pub const SMS: &str = "32274@3gpp.org";
/// 2026-03-01T00:00:00Z: inside the example bundle's validity.
pub const T0: Timestamp = Timestamp::from_secs(1_772_323_200);

pub fn config() -> ChargingConfig {
    let text = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/example-charging.toml"
    ));
    ChargingConfig::from_toml_str(text).expect("example configuration")
}

pub fn options() -> StoreOptions {
    StoreOptions::default()
}

/// The default options with a snapshot due after every record, so that
/// each commit that follows one closes the journal.
pub fn snapshot_every_record() -> StoreOptions {
    StoreOptions {
        snapshot_every_records: 1,
        ..options()
    }
}

/// Opens the store of shard 0 and rebuilds its engine (from the
/// configuration when there is no snapshot).
pub fn open(
    dir: &Path,
    opts: StoreOptions,
    now: Timestamp,
) -> (ShardStore, Engine, RecoveryReport) {
    try_open(dir, opts, now).expect("open")
}

/// Opens the store of shard 0 and rebuilds its engine the way the
/// credit-control application does: the snapshot (or the configuration),
/// then every journaled effect after it.
pub fn try_open(
    dir: &Path,
    opts: StoreOptions,
    now: Timestamp,
) -> gyro_store::Result<(ShardStore, Engine, RecoveryReport)> {
    let cfg = config();
    let (store, rec) = ShardStore::open(dir, 0, opts, now)?;
    let mut engine = match rec.snapshot.clone() {
        Some(s) => Engine::restore(cfg.catalog().unwrap(), cfg.engine.clone(), s),
        None => {
            let e = cfg.build_shard(0, 1).unwrap();
            let mut s = e.snapshot();
            s.next_cdr_sequence = rec.next_cdr_sequence;
            Engine::restore(cfg.catalog().unwrap(), cfg.engine.clone(), s)
        }
    };
    rec.replay_effects(|e| engine.apply(&e))?;
    rec.replay_answers(|first, _, records| engine.replay_answers(first, records, now))?;
    engine.expire_answers(now);
    let mut store = store;
    store.set_answer_horizon(engine.answer_horizon(now));
    Ok((store, engine, rec.report))
}

/// Handles one request the way the credit-control application does: a
/// repeat of an answered request gets its journaled answer back.
pub fn handle(
    engine: &mut Engine,
    store: &ShardStore,
    req: &CcRequest,
    now: Timestamp,
    out: &mut Output,
) -> CcAnswer {
    let mut answer = CcAnswer::default();
    engine.handle_with(req, now, &mut answer, out, |seq| {
        store.read_answer(seq).expect("read answer")
    });
    answer
}

pub fn octets(n: u64) -> ServiceUnits {
    ServiceUnits {
        total_octets: Some(n),
        ..ServiceUnits::default()
    }
}

pub fn mscc(rg: u32, want: bool, used: Option<u64>) -> Mscc {
    Mscc {
        rating_group: Some(rg),
        service_id: None,
        requested: want.then(ServiceUnits::default),
        used: used.map(octets),
        reporting_reason: None,
        used_after: None,
    }
}

pub fn req(
    session: &str,
    kind: RequestType,
    number: u32,
    msisdn: &str,
    ctx: &str,
    mscc: Vec<Mscc>,
) -> CcRequest {
    CcRequest {
        session_id: session.into(),
        origin_host: "pgw.example".into(),
        end_to_end: number ^ (session.len() as u32) << 16,
        retransmit: false,
        request_type: kind,
        request_number: number,
        service_context: ctx.into(),
        subscription_ids: if msisdn.is_empty() {
            vec![]
        } else {
            vec![SubscriptionId::e164(msisdn)]
        },
        multiple_services: (!mscc.is_empty()).then_some(true),
        requested_action: None,
        service_id: None,
        requested: None,
        used: None,
        mscc,
        termination_cause: None,
        ..CcRequest::default()
    }
}

pub fn sms(session: &str, msisdn: &str, action: RequestedAction) -> CcRequest {
    let mut r = req(session, RequestType::Event, 0, msisdn, SMS, vec![]);
    r.requested_action = Some(action);
    r.requested = Some(ServiceUnits {
        service_specific: Some(1),
        ..ServiceUnits::default()
    });
    r
}

/// The requests of round `round`: sessions opened, updated (bundle and
/// money), some left open with reservations, some terminated, SMS debits
/// and refunds.
pub fn round(round: u32) -> Vec<CcRequest> {
    let mut v = Vec::new();
    for k in 0..4u32 {
        let msisdn = format!("467000000{:02}", (round * 4 + k) % 100);
        let s = format!("pgw;{round};{k}");
        v.push(req(
            &s,
            RequestType::Initial,
            0,
            &msisdn,
            DATA,
            vec![mscc(10, true, None), mscc(20, true, None)],
        ));
        v.push(req(
            &s,
            RequestType::Update,
            1,
            "",
            DATA,
            vec![
                mscc(10, true, Some(2_000_000)),
                mscc(20, true, Some(500_000)),
            ],
        ));
        if k % 2 == 0 {
            v.push(req(
                &s,
                RequestType::Termination,
                2,
                "",
                DATA,
                vec![mscc(10, false, Some(1_000)), mscc(20, false, Some(0))],
            ));
        }
        v.push(sms(
            &format!("sms;{round};{k}"),
            &msisdn,
            RequestedAction::DirectDebiting,
        ));
    }
    // Account 1 has a data bundle: use it and leave the session open.
    let s = format!("pgw;{round};bundle");
    v.push(req(
        &s,
        RequestType::Initial,
        0,
        "46701000001",
        DATA,
        vec![mscc(10, true, None)],
    ));
    v.push(req(
        &s,
        RequestType::Update,
        1,
        "",
        DATA,
        vec![mscc(10, true, Some(3_000_000))],
    ));
    v.push(sms(
        &format!("refund;{round}"),
        "46700000001",
        RequestedAction::RefundAccount,
    ));
    v
}

/// Runs requests through the engine, appending their effects and CDRs to
/// the store, and commits once per call (one group commit).
pub fn run(
    engine: &mut Engine,
    store: &mut ShardStore,
    reqs: &[CcRequest],
    now: Timestamp,
) -> CommitStats {
    let mut out = Output::default();
    let mut answer = CcAnswer::default();
    for r in reqs {
        engine.handle(r, now, &mut answer, &mut out);
        store.append_output(&out).expect("append");
        out.clear();
    }
    store.commit(now).expect("commit")
}

/// Builds the due snapshot on another thread, as the application does
/// (the replayed engine's answer counter raised to the live engine's;
/// a compactor's snapshot needs no replay), once it can start: the CDR
/// writer made the closed journals' CDRs durable and a compactor, if
/// there is one, reached their boundary.
pub fn compact(store: &mut ShardStore, next_answer_seq: u64) -> CompactionDone {
    let started = std::time::Instant::now();
    let job = loop {
        if let Some(job) = store.begin_compaction() {
            break job;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no compaction started"
        );
        std::thread::sleep(Duration::from_millis(5));
        store.tick(T0).unwrap();
    };
    let cfg = config();
    let done = std::thread::spawn(move || {
        job.run(
            |snap| match snap {
                Some(s) => Engine::restore(cfg.catalog().unwrap(), cfg.engine.clone(), s),
                None => cfg.build_shard(0, 1).unwrap(),
            },
            |engine, e| engine.apply(e),
            |engine| {
                let mut s = engine.into_snapshot();
                s.next_answer_seq = s.next_answer_seq.max(next_answer_seq);
                s
            },
        )
    })
    .join()
    .unwrap();
    store.finish_compaction(&done);
    done.unwrap()
}

/// Account operations that are not requests: top-up and status change.
pub fn admin(engine: &mut Engine, store: &mut ShardStore, now: Timestamp) {
    let mut out = Output::default();
    engine.top_up(AccountId(1003), 12_345, &mut out).unwrap();
    engine
        .set_status(AccountId(1004), AccountStatus::Blocked, &mut out)
        .unwrap();
    store.append_output(&out).unwrap();
    store.commit(now).unwrap();
}

/// Every record of every CDR file under `data_dir`, in file order.
pub fn all_cdrs(data_dir: &Path) -> Vec<Cdr> {
    let mut v = Vec::new();
    for f in gyro_store::cdr_tool::list(data_dir).unwrap() {
        gyro_store::cdr_tool::read_file(&f.path, |c| {
            v.push(c);
            Ok(())
        })
        .unwrap();
    }
    v
}

/// Asserts CDR sequence numbers are 1..=n, each once, in order.
pub fn assert_gap_free(cdrs: &[Cdr]) {
    for (i, c) in cdrs.iter().enumerate() {
        assert_eq!(c.sequence, i as u64 + 1, "record {i} of {}", cdrs.len());
    }
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
