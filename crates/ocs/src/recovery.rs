//! Opening a shard's ledger: the latest snapshot, the journal's effects
//! after it and the answers every retained journal remembers (or the
//! configured accounts on the very first start); reading one without
//! writing anything (tools); and building later snapshots off the event
//! loop from the journal.

use gyro_charging::answer_log::{self, RecordKey};
use gyro_charging::{ChargingConfig, Engine, Snapshot, Timestamp};
use gyro_diameter::app::session_key;
use gyro_store::{CompactionDone, CompactionJob, RecoveryReport, ShardStore, SnapshotSource};

use crate::error::{Error, Result};
use crate::storage::Storage;

/// An engine and, unless storage is off, the store that makes it durable.
pub(crate) struct Ledger {
    pub engine: Engine,
    pub store: Option<ShardStore>,
    /// Sessions that ended before the restart but whose answers are still
    /// remembered (their [`session_key`]s), for the runtime's directory.
    pub lingering: Vec<u64>,
}

fn config(e: impl std::fmt::Display) -> Error {
    Error::Config(e.to_string())
}

/// Opens (recovering) the ledger of shard `index` of `count`.
pub(crate) fn open_ledger(
    charging: &ChargingConfig,
    storage: &Storage,
    index: usize,
    count: usize,
    now: Timestamp,
) -> Result<(Ledger, Option<RecoveryReport>)> {
    let fresh = || charging.build_shard(index, count).map_err(config);
    let Some(dir) = &storage.data_dir else {
        return Ok((
            Ledger {
                engine: fresh()?,
                store: None,
                lingering: Vec::new(),
            },
            None,
        ));
    };
    let catalog = charging.catalog().map_err(config)?;
    let options = charging.engine.clone();
    let ttl_ms = options.dedup_ttl_secs.saturating_mul(1000);
    let (mut store, mut recovered) =
        ShardStore::open(dir, index, storage.options.clone(), now).map_err(config)?;
    let mut engine = match recovered.snapshot.take() {
        Some(s) => Engine::restore(catalog.clone(), options.clone(), s),
        None => {
            let mut s = fresh()?.into_snapshot();
            s.next_cdr_sequence = recovered.next_cdr_sequence;
            Engine::restore(catalog.clone(), options.clone(), s)
        }
    };
    recovered
        .replay_effects(|e| engine.apply(&e))
        .map_err(config)?;
    let mut lingering = Vec::new();
    recovered
        .replay_answers(|first, _count, records| {
            for r in answer_log::records(records) {
                let key = RecordKey::parse(r?)?;
                if key.at.as_millis().saturating_add(ttl_ms) > now.as_millis() {
                    lingering.push(session_key(key.session_id.as_bytes()));
                }
            }
            engine.replay_answers(first, records, now)
        })
        .map_err(config)?;
    engine.expire_answers(now);
    lingering.sort_unstable();
    lingering.dedup();
    store.set_answer_horizon(engine.answer_horizon(now));
    let report = recovered.report;
    if report.snapshot_generation.is_none() {
        // The configured accounts become the first durable state.
        engine
            .with_snapshot(|s| store.snapshot(s, now))
            .map_err(config)?;
    }
    if storage.options.snapshot_source == SnapshotSource::Memory {
        // Snapshots from a copy of the ledger kept current from memory, so
        // that none reads the journal back.
        let copy = Engine::restore(catalog, options, engine.snapshot());
        store
            .start_compactor(copy, |e, effect| e.apply(effect), Engine::snapshot)
            .map_err(config)?;
    }
    Ok((
        Ledger {
            engine,
            store: Some(store),
            lingering,
        },
        Some(report),
    ))
}

/// How often [`read_engine`] starts over when a running server's snapshot
/// removed a file it was reading.
const READ_ATTEMPTS: usize = 20;

/// Rebuilds the engine of shard `index` of `count` from `data_dir` without
/// writing anything there (see [`ShardStore::read_only`]): the snapshot
/// plus the journal's effects, a torn last frame left out in memory, the
/// configured accounts where the shard has no snapshot yet. Beside a
/// running server it reads again from the start when the server's next
/// snapshot removes a file under it.
pub(crate) fn read_engine(
    charging: &ChargingConfig,
    data_dir: &std::path::Path,
    index: usize,
    count: usize,
) -> Result<(Engine, RecoveryReport)> {
    let mut attempt = 1;
    loop {
        match read_engine_once(charging, data_dir, index, count) {
            Ok(r) => return Ok(r),
            Err(Failure::Store(e)) if attempt < READ_ATTEMPTS && is_gone(&e) => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(Failure::Store(e)) => return Err(config(e)),
            Err(Failure::Other(e)) => return Err(e),
        }
    }
}

/// Why one attempt of [`read_engine`] failed.
enum Failure {
    Store(gyro_store::Error),
    Other(Error),
}

fn is_gone(e: &gyro_store::Error) -> bool {
    matches!(e, gyro_store::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

fn read_engine_once(
    charging: &ChargingConfig,
    data_dir: &std::path::Path,
    index: usize,
    count: usize,
) -> std::result::Result<(Engine, RecoveryReport), Failure> {
    let mut recovered = ShardStore::read_only(data_dir, index).map_err(Failure::Store)?;
    let catalog = charging.catalog().map_err(config).map_err(Failure::Other)?;
    let options = charging.engine.clone();
    let snapshot = match recovered.snapshot.take() {
        Some(s) => s,
        None => {
            let fresh = charging.build_shard(index, count);
            let mut s = fresh
                .map_err(config)
                .map_err(Failure::Other)?
                .into_snapshot();
            s.next_cdr_sequence = recovered.next_cdr_sequence;
            s
        }
    };
    let mut engine = Engine::restore(catalog, options, snapshot);
    recovered
        .replay_effects(|e| engine.apply(&e))
        .map_err(Failure::Store)?;
    Ok((engine, recovered.report))
}

/// Builds the snapshot a [`CompactionJob`] asks for, off the event loop:
/// a second engine restored from the previous snapshot replays the closed
/// journals. `next_answer_seq` is the live engine's when the job started
/// (at least every answer the closed journals hold).
pub(crate) fn compact(
    job: CompactionJob,
    charging: &ChargingConfig,
    index: usize,
    count: usize,
    next_answer_seq: u64,
) -> gyro_store::Result<CompactionDone> {
    let unusable = |e: gyro_charging::Error| gyro_store::Error::Encode {
        what: "snapshot (charging configuration)",
        reason: e.to_string(),
    };
    let catalog = charging.catalog().map_err(unusable)?;
    // Only without a previous snapshot (it was removed by hand): start
    // from the configured accounts, as the very first start did.
    let mut initial = match job.has_previous() {
        true => None,
        false => Some(charging.build_shard(index, count).map_err(unusable)?),
    };
    let options = charging.engine.clone();
    job.run(
        |snapshot: Option<Snapshot>| match (snapshot, initial.take()) {
            (Some(s), _) => Engine::restore(catalog, options, s),
            (None, Some(e)) => e,
            (None, None) => Engine::new(catalog, options),
        },
        |engine, effect| engine.apply(effect),
        |engine| {
            let mut s = engine.into_snapshot();
            s.next_answer_seq = s.next_answer_seq.max(next_answer_seq);
            s
        },
    )
}
