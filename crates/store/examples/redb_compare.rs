//! The same group commits through redb, an embedded B-tree database, for
//! comparison with the store's own journal: every batch is one write
//! transaction that inserts the batch's frame under its sequence number
//! and commits durably (redb's default, an fsync per commit). Then the
//! time to read everything back, as a restart would.
//!
//! ```text
//! cargo run --release -p gyro-store --example redb_compare -- [batches]
//! ```

use gyro_charging::Timestamp;
use gyro_store::{Durability, ShardStore, StoreOptions};
use redb::{Database, ReadableTable, TableDefinition};
use std::time::Instant;

const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let batches: u64 = std::env::args().nth(1).map_or(Ok(2000), |s| s.parse())?;
    // A batch the size of 64 requests' effects and CDRs (see the commit
    // benchmark): about 20 KiB.
    let effect = br#"{"effect":"charged","account":1017,"session":4711,"key":{"rating_group":10,"service_id":null},"from_reserved":20,"from_balance":0}"#;
    let mut frame = Vec::new();
    while frame.len() < 20_000 {
        frame.extend_from_slice(effect);
        frame.push(b'\n');
    }
    let effects: Vec<gyro_charging::Effect> = frame
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(serde_json::from_slice)
        .collect::<Result<_, _>>()?;
    let dir = tempfile::Builder::new().prefix("gyro-redb-").tempdir()?;

    // redb.
    let db = Database::create(dir.path().join("log.redb"))?;
    let t = Instant::now();
    for i in 0..batches {
        let tx = db.begin_write()?;
        {
            let mut table = tx.open_table(LOG)?;
            table.insert(i, frame.as_slice())?;
        }
        tx.commit()?;
    }
    let redb_commit = t.elapsed();
    drop(db);
    let t = Instant::now();
    let db = Database::open(dir.path().join("log.redb"))?;
    let tx = db.begin_read()?;
    let table = tx.open_table(LOG)?;
    let mut bytes = 0usize;
    for row in table.iter()? {
        let (_, v) = row?;
        bytes += v.value().len();
    }
    let redb_read = t.elapsed();
    let redb_size = std::fs::metadata(dir.path().join("log.redb"))?.len();

    // The journal.
    let now = Timestamp::from_secs(1_772_323_200);
    let opts = StoreOptions {
        durability: Durability::Sync,
        snapshot_every_records: u64::MAX,
        ..StoreOptions::default()
    };
    let (mut store, _) = ShardStore::open(&dir.path().join("gyro"), 0, opts.clone(), now)?;
    let t = Instant::now();
    for _ in 0..batches {
        store.append(&effects, &[])?;
        store.commit(now)?;
    }
    let journal_commit = t.elapsed();
    let journal_size = std::fs::metadata(store.journal_path())?.len();
    drop(store);
    let t = Instant::now();
    let (_store, rec) = ShardStore::open(&dir.path().join("gyro"), 0, opts, now)?;
    let journal_read = t.elapsed();

    let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / batches as f64;
    println!(
        "{batches} durable commits of {} bytes ({} effects) each",
        frame.len(),
        effects.len()
    );
    println!(
        "redb:    {:7.1} us/commit, file {:6.1} MiB, read back {} MiB in {:.2?} (bytes only)",
        per(redb_commit),
        redb_size as f64 / 1048576.0,
        bytes / 1048576,
        redb_read
    );
    println!(
        "journal: {:7.1} us/commit (encoding included), file {:6.1} MiB, reopened and decoded {} effects in {:.2?}",
        per(journal_commit),
        journal_size as f64 / 1048576.0,
        rec.effects()?.len(),
        journal_read
    );
    Ok(())
}
