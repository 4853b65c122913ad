//! Writes the seed corpus of the store's fuzz targets: a journal and a
//! snapshot from a short run of the example configuration (a Gy session,
//! then the same session over Nchf, whose records name their interface).
//!
//! `cargo run -p gyro-store --example fuzz_seeds -- fuzz/corpus`

use gyro_charging::*;
use gyro_store::*;

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let out = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or("fuzz/corpus".into()));
    let text = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/example-charging.toml"
    ));
    let cfg = ChargingConfig::from_toml_str(text)?;
    let mut engine = cfg.build_shard(0, 1)?;
    let dir = tempfile::tempdir()?;
    let now = Timestamp::from_secs(1_772_323_200);
    let (mut store, _) = ShardStore::open(dir.path(), 0, StoreOptions::default(), now)?;
    store.snapshot(&engine.snapshot(), now)?;
    let mut out_buf = Output::default();
    let mut answer = CcAnswer::default();
    let mut gy_journal = Vec::new();
    for (session, interface) in [
        ("pgw.example;1", Interface::Gy),
        ("nchf-1-00ff", Interface::Nchf),
    ] {
        for (i, kind) in [
            RequestType::Initial,
            RequestType::Update,
            RequestType::Termination,
        ]
        .into_iter()
        .enumerate()
        {
            let r = CcRequest {
                session_id: session.into(),
                interface,
                origin_host: "pgw.example".into(),
                request_type: kind,
                request_number: i as u32,
                service_context: "32251@3gpp.org".into(),
                subscription_ids: vec![SubscriptionId::e164("46700000001")],
                multiple_services: Some(true),
                mscc: vec![Mscc {
                    rating_group: Some(10),
                    service_id: None,
                    requested: Some(ServiceUnits::default()),
                    used: (i > 0).then(|| ServiceUnits::of(UnitKind::Octets, 1_000_000)),
                    reporting_reason: None,
                    used_after: None,
                }],
                ..CcRequest::default()
            };
            engine.handle(&r, now, &mut answer, &mut out_buf);
            store.append_output(&out_buf)?;
            out_buf.clear();
            store.commit(now)?;
        }
        if interface == Interface::Gy {
            gy_journal = std::fs::read(store.journal_path())?;
        }
    }
    let journal = gy_journal;
    std::fs::create_dir_all(out.join("journal"))?;
    std::fs::write(out.join("journal/session.bin"), &journal)?;
    std::fs::write(
        out.join("journal/gy-and-nchf-sessions.bin"),
        std::fs::read(store.journal_path())?,
    )?;
    std::fs::write(out.join("journal/magic-only.bin"), journal::MAGIC)?;
    std::fs::write(out.join("journal/torn.bin"), &journal[..journal.len() - 7])?;
    drop(store);
    let snap_dir = ledger_dir(dir.path(), 0);
    std::fs::create_dir_all(out.join("snapshot"))?;
    for e in std::fs::read_dir(&snap_dir)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "snap") {
            std::fs::write(out.join("snapshot/accounts.bin"), std::fs::read(&p)?)?;
        }
    }
    Ok(())
}
