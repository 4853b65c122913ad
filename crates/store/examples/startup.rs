//! Start-up time: how long a shard takes to open its store and rebuild its
//! engine with many accounts and a long journal.
//!
//! ```text
//! cargo run --release -p gyro-store --example startup -- [accounts] [journal effects] [dir]
//! ```
//!
//! Defaults: 1,000,000 accounts, 10,000,000 journaled effects, a fresh
//! temporary directory (removed at the end). It builds the accounts from
//! the example configuration (one account range), takes a snapshot, runs
//! CCR-Initial/Update/Terminate sessions over all accounts until the
//! journal holds the number of effects asked for (group commits of 64
//! requests), then measures:
//!
//! 1. a restart that restores the snapshot and replays the whole journal,
//! 2. a snapshot of the state reached (what `should_snapshot` triggers),
//! 3. a restart from that snapshot alone.

use gyro_charging::*;
use gyro_store::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const DATA: &str = "32251@3gpp.org";

fn mscc(rg: u32, want: bool, used: Option<u64>) -> Mscc {
    Mscc {
        rating_group: Some(rg),
        service_id: None,
        requested: want.then(ServiceUnits::default),
        used: used.map(|n| ServiceUnits {
            total_octets: Some(n),
            ..ServiceUnits::default()
        }),
        reporting_reason: None,
        used_after: None,
    }
}

fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

fn dir_size(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() {
                        dir_size(&p)
                    } else {
                        e.metadata().map_or(0, |m| m.len())
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let accounts: u64 = args.get(1).map_or(Ok(1_000_000), |s| s.parse())?;
    let target: u64 = args.get(2).map_or(Ok(10_000_000), |s| s.parse())?;
    let tmp;
    let data: PathBuf = match args.get(3) {
        Some(d) => d.into(),
        None => {
            tmp = tempfile::Builder::new().prefix("gyro-startup-").tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let text = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/example-charging.toml"
    ));
    let mut cfg = ChargingConfig::from_toml_str(text)?;
    cfg.accounts.clear();
    cfg.account_ranges.truncate(1);
    cfg.account_ranges[0].count = accounts;
    cfg.account_ranges[0].e164_first = Some("46000000000".into());
    cfg.account_ranges[0].imsi_first = None;
    let opts = StoreOptions {
        durability: Durability::Async {
            interval: Duration::from_secs(1),
        },
        snapshot_every_records: u64::MAX,
        snapshot_every_bytes: u64::MAX,
        cdr_max_bytes: 256 << 20,
        ..StoreOptions::default()
    };
    let now = Timestamp::from_secs(1_772_323_200);

    let t = Instant::now();
    let mut engine = cfg.build_shard(0, 1)?;
    println!(
        "built {accounts} accounts in {:.2?} (peak RSS {} MiB)",
        t.elapsed(),
        peak_rss_mib()
    );
    let (mut store, _) = ShardStore::open(&data, 0, opts.clone(), now)?;
    let t = Instant::now();
    let size = store.snapshot(&engine.snapshot(), now)?;
    println!(
        "initial snapshot: {:.1} MiB in {:.2?}",
        size as f64 / 1048576.0,
        t.elapsed()
    );

    // Sessions over all accounts: I, U, T, in group commits of 64.
    let t = Instant::now();
    let (mut effects, mut cdrs, mut requests) = (0u64, 0u64, 0u64);
    let mut out = Output::default();
    let mut answer = CcAnswer::default();
    let mut reqs = Vec::with_capacity(64);
    let mut j = 0u64;
    while effects < target {
        reqs.clear();
        for _ in 0..21 {
            let msisdn = format!("{}", 46_000_000_000u64 + j % accounts);
            let sid = format!("pgw.example;{j}");
            let base = CcRequest {
                session_id: sid,
                origin_host: "pgw.example".into(),
                service_context: DATA.into(),
                multiple_services: Some(true),
                ..CcRequest::default()
            };
            let mut i = base.clone();
            i.request_type = RequestType::Initial;
            i.end_to_end = (j * 3) as u32;
            i.subscription_ids = vec![SubscriptionId::e164(msisdn)];
            i.mscc = vec![mscc(10, true, None), mscc(20, true, None)];
            let mut u = base.clone();
            u.request_type = RequestType::Update;
            u.request_number = 1;
            u.end_to_end = (j * 3 + 1) as u32;
            u.mscc = vec![
                mscc(10, true, Some(2_000_000)),
                mscc(20, true, Some(500_000)),
            ];
            let mut te = base;
            te.request_type = RequestType::Termination;
            te.request_number = 2;
            te.end_to_end = (j * 3 + 2) as u32;
            te.mscc = vec![mscc(10, false, Some(1_000)), mscc(20, false, Some(0))];
            reqs.extend([i, u, te]);
            j += 1;
        }
        for r in &reqs {
            engine.handle(r, now, &mut answer, &mut out);
            store.append_output(&out)?;
            out.clear();
        }
        let s = store.commit(now)?;
        effects += s.effects;
        cdrs += s.cdrs;
        requests += reqs.len() as u64;
    }
    store.sync_now()?;
    let expected = engine.snapshot();
    drop(store);
    let ledger = ledger_dir(&data, 0);
    println!(
        "journaled {effects} effects and {cdrs} CDRs from {requests} requests in {:.2?}; ledger {:.1} MiB on disk",
        t.elapsed(),
        dir_size(&ledger) as f64 / 1048576.0
    );
    drop(engine);

    let restore = |snap: Option<Snapshot>| match snap {
        Some(s) => Engine::restore(cfg.catalog().unwrap_or_default(), cfg.engine.clone(), s),
        None => cfg
            .build_shard(0, 1)
            .unwrap_or_else(|_| Engine::new(cfg.catalog().unwrap_or_default(), cfg.engine.clone())),
    };
    // What the credit-control application does at start: the snapshot,
    // then every journaled effect after it.
    let open_engine =
        |opts: StoreOptions| -> gyro_store::Result<(ShardStore, Engine, RecoveryReport)> {
            let (store, rec) = ShardStore::open(&data, 0, opts, now)?;
            let mut engine = restore(rec.snapshot.clone());
            rec.replay_effects(|e| engine.apply(&e))?;
            Ok((store, engine, rec.report))
        };

    // 1. Snapshot + full journal.
    let t = Instant::now();
    let (mut store, engine, report) = open_engine(opts.clone())?;
    let replay = t.elapsed();
    println!(
        "RESTART snapshot + journal: {:.2?} ({} accounts, {} journal effects, {} frames, {:.1} MiB journal; peak RSS {} MiB)",
        replay,
        engine.accounts().count(),
        report.journal_effects,
        report.journal_frames,
        report.journal_bytes as f64 / 1048576.0,
        peak_rss_mib()
    );
    assert!(engine.snapshot() == expected, "state differs after replay");

    // 2. Compaction: a snapshot of the state reached.
    let t = Instant::now();
    let size = store.snapshot(&engine.snapshot(), now)?;
    println!(
        "snapshot (compaction): {:.1} MiB in {:.2?}",
        size as f64 / 1048576.0,
        t.elapsed()
    );
    drop(store);
    drop(engine);

    // 3. Snapshot alone.
    let t = Instant::now();
    let (_store, engine, report) = open_engine(opts)?;
    println!(
        "RESTART snapshot only: {:.2?} ({} accounts, {} journal effects)",
        t.elapsed(),
        engine.accounts().count(),
        report.journal_effects
    );
    assert!(
        engine.snapshot() == expected,
        "state differs after snapshot"
    );
    Ok(())
}
