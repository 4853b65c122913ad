//! Group commit of one batch of 64 requests' effects and CDRs: encoding
//! only (`append`), write without sync (`Durability::Async`) and write plus
//! `fdatasync` (`Durability::Sync`). The batch is a realistic mix from the
//! example configuration: CCR-I/U/T with two rating groups and SMS events.
//!
//! `cargo bench -p gyro-store --bench commit` (files go to the system's
//! temporary directory; set TMPDIR to measure another disk).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gyro_charging::*;
use gyro_store::*;
use std::time::Duration;

const DATA: &str = "32251@3gpp.org";
const SMS: &str = "32274@3gpp.org";

fn config() -> ChargingConfig {
    let text = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/example-charging.toml"
    ));
    ChargingConfig::from_toml_str(text).expect("example configuration")
}

fn request(i: u32, kind: RequestType) -> CcRequest {
    let used = |n| ServiceUnits {
        total_octets: Some(n),
        ..ServiceUnits::default()
    };
    let mscc = |rg, want: bool, usage: Option<u64>| Mscc {
        rating_group: Some(rg),
        service_id: None,
        requested: want.then(ServiceUnits::default),
        used: usage.map(used),
        reporting_reason: None,
    };
    let mut r = CcRequest {
        session_id: format!("pgw.example;{i}"),
        origin_host: "pgw.example".into(),
        end_to_end: i * 4 + kind.code(),
        request_type: kind,
        service_context: DATA.into(),
        subscription_ids: vec![SubscriptionId::e164(format!("46700000{:03}", i % 1000))],
        multiple_services: Some(true),
        ..CcRequest::default()
    };
    match kind {
        RequestType::Initial => r.mscc = vec![mscc(10, true, None), mscc(20, true, None)],
        RequestType::Update => {
            r.request_number = 1;
            r.mscc = vec![
                mscc(10, true, Some(3_000_000)),
                mscc(20, true, Some(1_000_000)),
            ];
        }
        RequestType::Termination => {
            r.request_number = 2;
            r.mscc = vec![mscc(10, false, Some(100_000)), mscc(20, false, Some(0))];
        }
        RequestType::Event => {
            r.service_context = SMS.into();
            r.multiple_services = None;
            r.requested_action = Some(RequestedAction::DirectDebiting);
            r.requested = Some(ServiceUnits {
                service_specific: Some(1),
                ..ServiceUnits::default()
            });
        }
    }
    r
}

/// The effects and CDRs of 64 requests: 16 each of I, U, T and SMS.
fn batch() -> (Vec<Effect>, Vec<Cdr>) {
    let mut engine = config().build_shard(0, 1).unwrap();
    let mut out = Output::default();
    let now = Timestamp::from_secs(1_772_323_200);
    for kind in [
        RequestType::Initial,
        RequestType::Update,
        RequestType::Termination,
    ] {
        for i in 0..16 {
            engine.handle_request(&request(i, kind), now, &mut out);
        }
    }
    for i in 100..116 {
        engine.handle_request(&request(i, RequestType::Event), now, &mut out);
    }
    (out.effects, out.cdrs.as_slice().to_vec())
}

fn bench(c: &mut Criterion) {
    let (effects, mut cdrs) = batch();
    let dir = tempfile::tempdir().unwrap();
    let now = Timestamp::from_secs(1_772_323_200);
    let mut g = c.benchmark_group("commit-64-requests");
    g.throughput(Throughput::Elements(64));
    g.measurement_time(Duration::from_secs(4));

    // Encoding alone (what `append` does): JSON lines of effects and CDRs.
    let mut buf = Vec::with_capacity(64 << 10);
    g.bench_function("encode", |b| {
        b.iter(|| {
            buf.clear();
            for e in &effects {
                serde_json::to_writer(&mut buf, e).unwrap();
                buf.push(b'\n');
            }
            for c in &cdrs {
                c.write_json_line(&mut buf).unwrap();
            }
            buf.len()
        })
    });

    for (name, durability) in [
        (
            "write-async",
            Durability::Async {
                interval: Duration::from_secs(3600),
            },
        ),
        ("write-fdatasync", Durability::Sync),
    ] {
        let opts = StoreOptions {
            durability,
            snapshot_every_records: u64::MAX,
            cdr_max_bytes: 256 << 20,
            ..StoreOptions::default()
        };
        let (mut store, _) = ShardStore::open(dir.path(), 0, opts, now).unwrap();
        let mut first = true;
        g.bench_function(name, |b| {
            b.iter(|| {
                    let next = store.next_cdr_sequence();
                    for (i, c) in cdrs.iter_mut().enumerate() {
                        c.sequence = next + i as u64;
                    }
                    store.append(&effects, &cdrs).unwrap();
                    let s = store.commit(now).unwrap();
                    if first {
                        first = false;
                        eprintln!(
                            "{name}: {} effects, {} CDRs, {} journal bytes, {} CDR bytes, {} syncs per batch",
                            s.effects, s.cdrs, s.journal_bytes, s.cdr_bytes, s.syncs
                        );
                    }
            })
        });
        drop(store);
        let _ = std::fs::remove_dir_all(dir.path().join("ledger"));
        let _ = std::fs::remove_dir_all(dir.path().join("cdr"));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
