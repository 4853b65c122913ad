//! The credit-control application: the charging engine, one instance per
//! shard, behind the runtime's [`AppFactory`] / [`ShardApp`] interface, with
//! its ledger and CDRs made durable by the shard's store.
//!
//! * Requests are routed by the account of their Subscription-Id (through
//!   the read-only subscriber directory shared by all workers); a CCR-Update
//!   or -Terminate without one follows its session (see the runtime).
//! * Every request's ledger effects and CDRs are appended to the shard's
//!   store; once per event-loop turn the runtime asks for a group commit
//!   ([`ShardApp::flush`]): one journal write, one fdatasync on the sync
//!   thread, then the turn's answers leave. With `durability = "async"` the
//!   answers leave at once and the store syncs within its interval.
//! * When the store cannot make a batch durable (disk full, unwritable
//!   directory, failed fsync), the batch's answers become 3004
//!   DIAMETER_TOO_BUSY, the shard drops its in-memory state (which holds
//!   effects that never reached the disk) and answers 3004 until it has
//!   reloaded its state from disk, retried every few seconds: an answer of
//!   3004 always means "nothing happened".
//! * At start each shard recovers from its data directory (the latest
//!   snapshot plus the journal after it). Accounts and balances from the
//!   charging configuration seed a shard only the first time; afterwards
//!   the data directory is the source of truth.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use gyro_charging::gy::{self, LocalIdentity};
use gyro_charging::{
    CcAnswer, CcRequest, ChargingConfig, Engine, Output, SubscriberDirectory, SubscriptionType,
    Timestamp,
};
use gyro_diameter::codes::{avp, cmd, result};
use gyro_diameter::{Encoder, Message};
use gyro_store::{Durability, RecoveryReport, ShardStore, StoreOptions};
use tracing::{error, info, warn};

use crate::app::{AppFactory, Flush, ShardApp};
use crate::config::StorageSection;
use crate::error::Error;

/// The charging configuration gyro runs with when none is given: demo
/// tariffs for data (rating groups 10 and 20 under 32251@3gpp.org) and SMS
/// (32274@3gpp.org), and 1,000 accounts for 46700000000..=46700000999.
pub const DEMO_CHARGING: &str = include_str!("../../../config/example-charging.toml");

/// How long a failed shard waits between attempts to reload from disk.
const REOPEN_EVERY_MS: u64 = 5_000;

/// Counters of one shard, for reports (`gyro demo`) and measurements.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ShardTotals {
    /// CDRs produced.
    pub cdrs: AtomicU64,
    /// Money debited minus refunded, minor units.
    pub amount: AtomicI64,
    /// Group commits made durable.
    pub commits: AtomicU64,
    /// fsync/fdatasync calls.
    pub syncs: AtomicU64,
    /// Effects and CDRs made durable.
    pub records: AtomicU64,
    /// Commits that failed (their answers became 3004).
    pub failed_commits: AtomicU64,
}

/// Where and how shards keep their data.
#[derive(Debug, Clone)]
pub struct Storage {
    /// The data directory; `None` keeps everything in memory.
    pub data_dir: Option<PathBuf>,
    /// Store settings.
    pub options: StoreOptions,
}

impl Storage {
    /// Storage as the configuration's `[storage]` section says, under
    /// `data_dir` (`durability = "none"` writes nothing).
    pub fn from_config(section: &StorageSection, data_dir: &Path) -> Storage {
        let durability = match section.durability.as_str() {
            "async" => Durability::Async {
                interval: Duration::from_millis(section.async_interval_ms),
            },
            _ => Durability::Sync,
        };
        Storage {
            data_dir: (section.durability != "none").then(|| data_dir.to_path_buf()),
            options: StoreOptions {
                durability,
                snapshot_every_records: section.snapshot_every_records,
                cdr_max_bytes: section.cdr_max_bytes,
                cdr_max_age: Duration::from_secs(section.cdr_max_age_secs),
                ..StoreOptions::default()
            },
        }
    }

    /// Nothing written anywhere.
    pub fn in_memory() -> Storage {
        Storage {
            data_dir: None,
            options: StoreOptions::default(),
        }
    }
}

/// An engine and, unless storage is off, the store that makes it durable.
struct Ledger {
    engine: Engine,
    store: Option<ShardStore>,
}

/// Builds credit-control shards and routes requests to them.
pub struct CreditControl {
    charging: Arc<ChargingConfig>,
    directory: SubscriberDirectory,
    identity: LocalIdentity,
    storage: Storage,
    opened: Mutex<Vec<Option<Ledger>>>,
    reports: Vec<Option<RecoveryReport>>,
    totals: Arc<[ShardTotals]>,
}

/// Opens (recovering) the ledger of one shard.
fn open_ledger(
    charging: &ChargingConfig,
    storage: &Storage,
    index: usize,
    count: usize,
    now: Timestamp,
) -> Result<(Ledger, Option<RecoveryReport>), String> {
    let fresh = || {
        charging
            .build_shard(index, count)
            .map_err(|e| e.to_string())
    };
    let Some(dir) = &storage.data_dir else {
        return Ok((
            Ledger {
                engine: fresh()?,
                store: None,
            },
            None,
        ));
    };
    let catalog = charging.catalog().map_err(|e| e.to_string())?;
    let options = charging.engine.clone();
    let mut build_error = None;
    let (mut store, recovered) =
        ShardStore::open(dir, index, storage.options.clone(), now).map_err(|e| e.to_string())?;
    let mut engine = match recovered.snapshot.clone() {
        Some(s) => Engine::restore(catalog, options, s),
        None => match fresh() {
            Ok(e) => {
                let mut s = e.snapshot();
                s.next_cdr_sequence = recovered.next_cdr_sequence;
                Engine::restore(catalog, options, s)
            }
            Err(e) => {
                build_error = Some(e);
                Engine::new(catalog, options)
            }
        },
    };
    recovered
        .replay_effects(|e| engine.apply(&e))
        .map_err(|e| e.to_string())?;
    engine.expire_answers(now);
    let report = recovered.report;
    if let Some(e) = build_error {
        return Err(e);
    }
    if report.snapshot_generation.is_none() {
        // The configured accounts become the first durable state.
        store
            .snapshot(&engine.snapshot(), now)
            .map_err(|e| e.to_string())?;
    }
    Ok((
        Ledger {
            engine,
            store: Some(store),
        },
        Some(report),
    ))
}

fn unix_now() -> Timestamp {
    Timestamp(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
    )
}

impl CreditControl {
    /// A credit-control application for `shards` shards answering as
    /// `origin_host`/`origin_realm`. Opens (and recovers) every shard's
    /// ledger now, in parallel, so that a broken data directory stops the
    /// start with a message naming it.
    pub fn new(
        charging: ChargingConfig,
        origin_host: &str,
        origin_realm: &str,
        storage: Storage,
        shards: usize,
    ) -> Result<Self, Error> {
        let shards = shards.max(1);
        let directory = charging
            .directory()
            .map_err(|e| Error::Config(format!("charging: {e}")))?;
        charging
            .catalog()
            .map_err(|e| Error::Config(format!("charging: {e}")))?;
        if let Some(dir) = &storage.data_dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::Config(format!("cannot create {}: {e}", dir.display())))?;
        }
        let now = unix_now();
        let opened: Vec<Result<(Ledger, Option<RecoveryReport>), String>> =
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..shards)
                    .map(|i| {
                        let (charging, storage) = (&charging, &storage);
                        s.spawn(move || open_ledger(charging, storage, i, shards, now))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err("recovery panicked".into())))
                    .collect()
            });
        let mut ledgers = Vec::with_capacity(shards);
        let mut reports = Vec::with_capacity(shards);
        for (i, r) in opened.into_iter().enumerate() {
            let (ledger, report) =
                r.map_err(|e| Error::Config(format!("opening the ledger of shard {i}: {e}")))?;
            ledgers.push(Some(ledger));
            reports.push(report);
        }
        Ok(CreditControl {
            charging: Arc::new(charging),
            directory,
            identity: LocalIdentity {
                origin_host: origin_host.to_string(),
                origin_realm: origin_realm.to_string(),
            },
            storage,
            opened: Mutex::new(ledgers),
            reports,
            totals: (0..shards).map(|_| ShardTotals::default()).collect(),
        })
    }

    /// Per-shard totals, shared with the running shards.
    pub fn totals(&self) -> Arc<[ShardTotals]> {
        self.totals.clone()
    }

    /// What recovery found in each shard's data (`None` without storage).
    pub fn recovery_reports(&self) -> &[Option<RecoveryReport>] {
        &self.reports
    }

    /// Where CDR files are written, if anywhere.
    pub fn cdr_dir(&self) -> Option<PathBuf> {
        self.storage.data_dir.as_ref().map(|d| d.join("cdr"))
    }
}

/// One shard: an engine, its store and reusable buffers.
pub struct CreditShard {
    index: usize,
    count: usize,
    ledger: Option<Ledger>,
    charging: Arc<ChargingConfig>,
    storage: Storage,
    request: CcRequest,
    answer: CcAnswer,
    output: Output,
    identity: LocalIdentity,
    totals: Arc<[ShardTotals]>,
    last_reopen: u64,
    snapshotting: Option<std::thread::JoinHandle<()>>,
}

impl AppFactory for CreditControl {
    type Shard = CreditShard;

    fn shard(&self, index: usize, count: usize) -> CreditShard {
        let ledger = self
            .opened
            .lock()
            .ok()
            .and_then(|mut v| v.get_mut(index).and_then(Option::take));
        if ledger.is_none() {
            error!(shard = index, "no ledger for this shard; it answers 3004");
        }
        CreditShard {
            index,
            count,
            ledger,
            charging: self.charging.clone(),
            storage: self.storage.clone(),
            request: CcRequest::default(),
            answer: CcAnswer::default(),
            output: Output::default(),
            identity: self.identity.clone(),
            totals: self.totals.clone(),
            last_reopen: 0,
            snapshotting: None,
        }
    }

    fn route(&self, request: &Message<'_>, count: usize) -> Option<usize> {
        for a in request.avps().flatten() {
            if a.code() != avp::SUBSCRIPTION_ID.code || a.vendor_id() != 0 {
                continue;
            }
            let kind = a
                .child(avp::SUBSCRIPTION_ID_TYPE)
                .and_then(|t| t.u32().ok())
                .and_then(SubscriptionType::from_code);
            let data = a
                .child(avp::SUBSCRIPTION_ID_DATA)
                .and_then(|d| d.utf8().ok());
            if let (Some(kind), Some(data)) = (kind, data) {
                if let Some(account) = self.directory.lookup(kind, data) {
                    return Some(account.shard(count));
                }
            }
        }
        None
    }
}

impl CreditShard {
    fn totals(&self) -> &ShardTotals {
        &self.totals[self.index.min(self.totals.len() - 1)]
    }

    /// Journals what the engine just did (and counts it).
    fn record_output(&mut self) -> bool {
        let Some(ledger) = &mut self.ledger else {
            return false;
        };
        let totals = &self.totals[self.index.min(self.totals.len() - 1)];
        for cdr in self.output.cdrs.iter() {
            totals.cdrs.fetch_add(1, Relaxed);
            totals.amount.fetch_add(cdr.amount, Relaxed);
        }
        let r = match &mut ledger.store {
            Some(store) => store.append_output(&self.output),
            None => Ok(()),
        };
        self.output.clear();
        match r {
            Ok(()) => true,
            Err(e) => {
                self.fail(&e.to_string());
                false
            }
        }
    }

    /// Drops the in-memory state after a durability failure; it is reloaded
    /// from disk by [`ShardApp::tick`].
    fn fail(&mut self, why: &str) {
        if self.ledger.take().is_some() {
            self.totals().failed_commits.fetch_add(1, Relaxed);
            error!(
                shard = self.index,
                error = why,
                "cannot make charging durable: answering 3004 until the ledger reloads from disk"
            );
        }
    }

    fn try_reopen(&mut self, now: u64) {
        if now < self.last_reopen + REOPEN_EVERY_MS {
            return;
        }
        self.last_reopen = now;
        match open_ledger(
            &self.charging,
            &self.storage,
            self.index,
            self.count,
            Timestamp(now),
        ) {
            Ok((ledger, _)) => {
                info!(
                    shard = self.index,
                    "ledger reloaded from disk; serving again"
                );
                self.ledger = Some(ledger);
            }
            Err(e) => warn!(shard = self.index, error = %e, "ledger still unavailable"),
        }
    }

    /// Answers a request the engine cannot take with `code`, echoing what a
    /// CCA must echo and naming the offending AVP.
    fn reject(&self, req: &Message<'_>, code: u32, avp_code: u32, out: &mut BytesMut) {
        let protocol_error = (3000..4000).contains(&code);
        let mut e = Encoder::answer(out, req, protocol_error);
        e.u32(avp::RESULT_CODE, code)
            .str(avp::ORIGIN_HOST, &self.identity.origin_host)
            .str(avp::ORIGIN_REALM, &self.identity.origin_realm);
        if req.command_code() == cmd::CREDIT_CONTROL {
            for id in [
                avp::AUTH_APPLICATION_ID,
                avp::CC_REQUEST_TYPE,
                avp::CC_REQUEST_NUMBER,
            ] {
                if let Some(a) = req.find(id) {
                    e.raw_avp(&a);
                }
            }
        }
        if avp_code != 0 {
            if let Some(a) = req.avps().flatten().find(|a| a.code() == avp_code) {
                let g = e.begin_group(avp::FAILED_AVP);
                e.raw_avp(&a);
                e.end_group(g);
            }
        }
        if e.finish().is_err() {
            warn!("error answer too large");
        }
    }

    fn maybe_snapshot(&mut self, now: u64) {
        if let Some(h) = &self.snapshotting {
            if !h.is_finished() {
                return;
            }
            self.snapshotting = None;
        }
        let Some(ledger) = &mut self.ledger else {
            return;
        };
        let Some(store) = &mut ledger.store else {
            return;
        };
        if !store.should_snapshot() {
            return;
        }
        match store.prepare_snapshot(Timestamp(now)) {
            Ok(writer) => {
                let snapshot = ledger.engine.snapshot();
                let shard = self.index;
                let spawned = std::thread::Builder::new()
                    .name(format!("gyro-snapshot-{shard}"))
                    .spawn(move || match writer.write(&snapshot) {
                        Ok(bytes) => info!(shard, bytes, "ledger snapshot written"),
                        Err(e) => warn!(shard, error = %e, "ledger snapshot failed; the journal keeps everything"),
                    });
                match spawned {
                    Ok(h) => self.snapshotting = Some(h),
                    Err(e) => warn!(shard, error = %e, "cannot start the snapshot thread"),
                }
            }
            Err(e) => warn!(shard = self.index, error = %e, "cannot prepare a snapshot"),
        }
    }
}

impl ShardApp for CreditShard {
    fn handle(&mut self, req: &Message<'_>, now_ms: u64, out: &mut BytesMut) {
        if req.command_code() != cmd::CREDIT_CONTROL {
            // RAR, ASR and STR are sent by a credit-control server, not to it.
            self.reject(req, result::COMMAND_UNSUPPORTED, 0, out);
            return;
        }
        if let Err(e) = gy::decode_ccr(req, &mut self.request) {
            let (code, avp_code) = match e {
                gyro_charging::Error::InvalidCcr {
                    result_code,
                    avp_code,
                } => (result_code, avp_code),
                _ => (result::UNABLE_TO_COMPLY, 0),
            };
            self.reject(req, code, avp_code, out);
            return;
        }
        let Some(ledger) = &mut self.ledger else {
            self.reject(req, result::TOO_BUSY, 0, out);
            return;
        };
        self.output.clear();
        ledger.engine.handle(
            &self.request,
            Timestamp(now_ms),
            &mut self.answer,
            &mut self.output,
        );
        if !self.record_output() {
            self.reject(req, result::TOO_BUSY, 0, out);
            return;
        }
        if gy::encode_cca(out, req, &self.answer, &self.identity).is_err() {
            self.reject(req, result::UNABLE_TO_COMPLY, 0, out);
        }
    }

    fn tick(&mut self, now_ms: u64) {
        let Some(ledger) = &mut self.ledger else {
            self.try_reopen(now_ms);
            return;
        };
        self.output.clear();
        ledger.engine.tick(Timestamp(now_ms), &mut self.output);
        if !self.record_output() {
            return;
        }
        if let Some(store) = self.ledger.as_mut().and_then(|l| l.store.as_mut()) {
            match store.tick(Timestamp(now_ms)) {
                Ok(stats) => {
                    self.totals()
                        .syncs
                        .fetch_add(u64::from(stats.syncs), Relaxed);
                }
                Err(e) => {
                    self.fail(&e.to_string());
                    return;
                }
            }
        }
        self.maybe_snapshot(now_ms);
    }

    fn flush(&mut self) -> Flush {
        let Some(ledger) = &mut self.ledger else {
            return Flush::Failed;
        };
        let Some(store) = &mut ledger.store else {
            return Flush::Done;
        };
        match store.begin_commit(unix_now()) {
            Ok(Some(handle)) => Flush::Sync(Box::new(move || {
                handle.sync().map_err(std::io::Error::other)
            })),
            Ok(None) => {
                // Asynchronous durability, or nothing to write: the batch
                // was written (if anything) and is released now.
                let r = store.finish_commit(Ok(()), unix_now());
                match r {
                    Ok(stats) => {
                        if stats.effects + stats.cdrs > 0 {
                            let t = self.totals();
                            t.commits.fetch_add(1, Relaxed);
                            t.syncs.fetch_add(u64::from(stats.syncs), Relaxed);
                            t.records.fetch_add(stats.effects + stats.cdrs, Relaxed);
                        }
                        Flush::Done
                    }
                    Err(e) => {
                        self.fail(&e.to_string());
                        Flush::Failed
                    }
                }
            }
            Err(e) => {
                self.fail(&e.to_string());
                Flush::Failed
            }
        }
    }

    fn synced(&mut self, result: &std::io::Result<()>) {
        let Some(store) = self.ledger.as_mut().and_then(|l| l.store.as_mut()) else {
            return;
        };
        let r = match result {
            Ok(()) => Ok(()),
            Err(e) => Err(gyro_store::Error::Io {
                op: "sync",
                path: store.journal_path().to_path_buf(),
                source: std::io::Error::new(e.kind(), e.to_string()),
            }),
        };
        match store.finish_commit(r, unix_now()) {
            Ok(stats) => {
                let t = self.totals();
                t.commits.fetch_add(1, Relaxed);
                t.syncs.fetch_add(u64::from(stats.syncs), Relaxed);
                t.records.fetch_add(stats.effects + stats.cdrs, Relaxed);
            }
            Err(e) => self.fail(&e.to_string()),
        }
    }
}

impl Drop for CreditShard {
    fn drop(&mut self) {
        if let Some(h) = self.snapshotting.take() {
            let _ = h.join();
        }
        if let Some(store) = self.ledger.as_mut().and_then(|l| l.store.as_mut()) {
            if let Err(e) = store.close_cdr_file(unix_now()) {
                warn!(shard = self.index, error = %e, "cannot close the CDR file");
            }
        }
    }
}

/// The demo charging configuration, parsed.
pub fn demo_charging() -> ChargingConfig {
    // The embedded file is tested to parse (see the tests below).
    ChargingConfig::from_toml_str(DEMO_CHARGING).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_demo_configuration_parses() {
        let c = ChargingConfig::from_toml_str(DEMO_CHARGING).unwrap();
        let dir = c.directory().unwrap();
        assert!(dir.lookup(SubscriptionType::E164, "46700000000").is_some());
        assert!(dir.lookup(SubscriptionType::E164, "46700000999").is_some());
        assert!(dir.lookup(SubscriptionType::E164, "46700001000").is_none());
    }
}
