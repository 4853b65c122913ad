//! Opening a shard's ledger: the latest snapshot plus the journal after it
//! (or the configured accounts on the very first start).

use gyro_charging::{ChargingConfig, Engine, Timestamp};
use gyro_store::{RecoveryReport, ShardStore};

use crate::error::{Error, Result};
use crate::storage::Storage;

/// An engine and, unless storage is off, the store that makes it durable.
pub(crate) struct Ledger {
    pub engine: Engine,
    pub store: Option<ShardStore>,
}

/// Opens (recovering) the ledger of shard `index` of `count`.
pub(crate) fn open_ledger(
    charging: &ChargingConfig,
    storage: &Storage,
    index: usize,
    count: usize,
    now: Timestamp,
) -> Result<(Ledger, Option<RecoveryReport>)> {
    let config = |e: gyro_charging::Error| Error::Config(e.to_string());
    let fresh = || charging.build_shard(index, count).map_err(config);
    let Some(dir) = &storage.data_dir else {
        return Ok((
            Ledger {
                engine: fresh()?,
                store: None,
            },
            None,
        ));
    };
    let catalog = charging.catalog().map_err(config)?;
    let options = charging.engine.clone();
    let mut build_error = None;
    let store_err = |e: gyro_store::Error| Error::Config(e.to_string());
    let (mut store, engine, report) = ShardStore::open_engine(
        dir,
        index,
        storage.options.clone(),
        now,
        |snapshot| match snapshot {
            Some(s) => Engine::restore(catalog, options, s),
            None => fresh().unwrap_or_else(|e| {
                build_error = Some(e);
                Engine::new(catalog, options)
            }),
        },
    )
    .map_err(store_err)?;
    if let Some(e) = build_error {
        return Err(e);
    }
    if report.snapshot_generation.is_none() {
        // The configured accounts become the first durable state.
        store.snapshot(&engine.snapshot(), now).map_err(store_err)?;
    }
    Ok((
        Ledger {
            engine,
            store: Some(store),
        },
        Some(report),
    ))
}
