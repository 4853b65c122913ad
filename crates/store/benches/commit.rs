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
        ..Mscc::default()
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
            engine.handle_fresh(&request(i, kind), now, &mut CcAnswer::default(), &mut out);
        }
    }
    for i in 100..116 {
        engine.handle_fresh(
            &request(i, RequestType::Event),
            now,
            &mut CcAnswer::default(),
            &mut out,
        );
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

    // Encoding alone, before: JSON lines of effects and CDRs (the first
    // journal format).
    let mut buf = Vec::with_capacity(64 << 10);
    g.bench_function("encode-json-before", |b| {
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

    // Encoding alone, now: binary records (what `append` does on the loop).
    g.bench_function("encode-binary", |b| {
        b.iter(|| {
            buf.clear();
            for e in &effects {
                gyro_store::record::encode_effect(&mut buf, e);
            }
            for c in &cdrs {
                gyro_store::record::encode_cdr(&mut buf, c);
            }
            buf.len()
        })
    });
    typical_update_bytes();

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

/// Bytes of one typical CCR-Update (one rating group): its effects, its
/// usage CDR and an answer record, in the binary journal and as the JSON
/// lines of the first format.
fn typical_update_bytes() {
    let mut engine = config().build_shard(0, 1).unwrap();
    let now = Timestamp::from_secs(1_772_323_200);
    let mut out = Output::default();
    let mut init = request(1, RequestType::Initial);
    init.mscc.truncate(1);
    engine.handle_fresh(&init, now, &mut CcAnswer::default(), &mut out);
    out.clear();
    let mut upd = request(1, RequestType::Update);
    upd.mscc.truncate(1);
    engine.handle_fresh(&upd, now, &mut CcAnswer::default(), &mut out);
    let (mut json, mut bin) = (Vec::new(), Vec::new());
    let mut kinds = Vec::new();
    for e in &out.effects {
        serde_json::to_writer(&mut json, e).unwrap();
        json.push(b'\n');
        let j = serde_json::to_value(e).unwrap();
        kinds.push(j["effect"].as_str().unwrap_or("?").to_owned());
        gyro_store::record::encode_effect(&mut bin, e);
    }
    let effects_bin = bin.len();
    for c in out.cdrs.iter() {
        c.write_json_line(&mut json).unwrap();
        gyro_store::record::encode_cdr(&mut bin, c);
    }
    let mut lines = Vec::new();
    for c in out.cdrs.iter() {
        c.write_json_line(&mut lines).unwrap();
    }
    eprintln!(
        "typical CCR-Update ({}; {} CDR): journal records {} bytes binary ({} effects + {} CDR) + {} bytes answer record, vs {} bytes of JSON effects and CDR; CDR file line {} bytes",
        kinds.join(", "),
        out.cdrs.len(),
        bin.len(),
        effects_bin,
        bin.len() - effects_bin,
        out.answers.as_bytes().len(),
        json.len(),
        lines.len()
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
