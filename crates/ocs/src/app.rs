//! [`CreditControl`]: builds the shards and tells the runtime where each
//! request goes.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use gyro_charging::{AccountId, ChargingConfig, SubscriberDirectory, SubscriptionType};
use gyro_diameter::app::{Application, Route, SessionStep};
use gyro_diameter::codes::{avp, cmd};
use gyro_diameter::Message;
use gyro_store::{DataDirLock, RecoveryReport};
use tracing::{error, warn};

use crate::clock::unix_now;
use crate::error::{Error, Result};
use crate::gy::{subscription_extension, LocalIdentity};
use crate::recovery::{open_ledger, Ledger};
use crate::shard::CreditShard;
use crate::storage::{ShardTotals, Storage};
use crate::subscribers::Subscribers;

/// CC-Request-Type values (RFC 8506 section 8.3).
const INITIAL_REQUEST: u32 = 1;
const UPDATE_REQUEST: u32 = 2;
const TERMINATION_REQUEST: u32 = 3;
/// Subscription-Id-Extension (RFC 8506 section 8.58).
const SUBSCRIPTION_ID_EXTENSION: u32 = 659;

/// The credit-control application: one engine per shard, its ledger made
/// durable by the shard's store.
pub struct CreditControl {
    charging: Arc<ChargingConfig>,
    subscribers: Arc<Subscribers>,
    identity: LocalIdentity,
    storage: Storage,
    opened: Mutex<Vec<Option<Ledger>>>,
    reports: Vec<Option<RecoveryReport>>,
    totals: Arc<[ShardTotals]>,
    /// The data directory held for this process alone.
    _lock: Option<DataDirLock>,
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
    ) -> Result<Self> {
        let shards = shards.max(1);
        let configured = charging
            .accounts()
            .map_err(|e| Error::Config(format!("charging: {e}")))?;
        charging
            .directory()
            .map_err(|e| Error::Config(format!("charging: {e}")))?;
        charging
            .catalog()
            .map_err(|e| Error::Config(format!("charging: {e}")))?;
        // One owner per data directory, taken before anything is opened.
        let lock = match &storage.data_dir {
            Some(dir) => Some(DataDirLock::acquire(dir).map_err(|e| Error::Config(e.to_string()))?),
            None => None,
        };
        let now = unix_now();
        let opened: Vec<Result<(Ledger, Option<RecoveryReport>)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..shards)
                .map(|i| {
                    let (charging, storage) = (&charging, &storage);
                    s.spawn(move || open_ledger(charging, storage, i, shards, now))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::Config("recovery panicked".into())))
                })
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
        let subscribers = routing(&ledgers, &configured, shards);

        Ok(CreditControl {
            charging: Arc::new(charging),
            subscribers: Arc::new(subscribers),
            identity: LocalIdentity {
                origin_host: origin_host.to_string(),
                origin_realm: origin_realm.to_string(),
            },
            storage,
            opened: Mutex::new(ledgers),
            reports,
            totals: (0..shards).map(|_| ShardTotals::default()).collect(),
            _lock: lock,
        })
    }

    /// The subscriber directory that routes requests and account
    /// operations, shared with the operator API.
    pub fn subscribers(&self) -> Arc<Subscribers> {
        self.subscribers.clone()
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

impl Application for CreditControl {
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
        CreditShard::new(
            index,
            count,
            ledger,
            self.charging.clone(),
            self.storage.clone(),
            self.identity.clone(),
            self.totals.clone(),
        )
    }

    /// One walk over the top-level AVPs: the account of the first known
    /// Subscription-Id names the shard; CC-Request-Type says what the
    /// request does to its session. A CCR-Update or -Terminate without a
    /// (known) Subscription-Id follows its session. The walk stops once
    /// both are known; with a single shard, once CC-Request-Type is.
    fn route(&self, request: &Message<'_>, count: usize) -> Route {
        let mut route = Route {
            shard: None,
            session: SessionStep::None,
        };
        if request.command_code() != cmd::CREDIT_CONTROL {
            return route;
        }
        // With a single shard every account is on it: only the session
        // step is needed.
        let mut need_account = count > 1;
        let mut need_type = true;
        for a in request.avps().flatten() {
            if a.vendor_id() != 0 {
                continue;
            }
            let code = a.code();
            if code == avp::CC_REQUEST_TYPE.code {
                route.session = match a.u32() {
                    Ok(INITIAL_REQUEST) => SessionStep::Open,
                    Ok(UPDATE_REQUEST) => SessionStep::Continue,
                    Ok(TERMINATION_REQUEST) => SessionStep::End,
                    _ => SessionStep::None,
                };
                // Validation lets one CC-Request-Type through, at most.
                need_type = false;
            } else if need_account
                && (code == avp::SUBSCRIPTION_ID.code || code == SUBSCRIPTION_ID_EXTENSION)
            {
                let identity = if code == SUBSCRIPTION_ID_EXTENSION {
                    subscription_extension(&a)
                } else {
                    let kind = a
                        .child(avp::SUBSCRIPTION_ID_TYPE)
                        .and_then(|t| t.u32().ok())
                        .and_then(SubscriptionType::from_code);
                    let data = a
                        .child(avp::SUBSCRIPTION_ID_DATA)
                        .and_then(|d| d.utf8().ok());
                    kind.zip(data)
                };
                if let Some((kind, data)) = identity {
                    if let Some(account) = self.subscribers.lookup(kind, data) {
                        route.shard = Some(account.shard(count));
                        need_account = false;
                    }
                }
            }
            if !need_type && !need_account {
                break;
            }
        }
        route
    }

    fn session_linger_ms(&self) -> u64 {
        self.charging.engine.dedup_ttl_secs.saturating_mul(1000)
    }
}

/// The routing directory: every identity of every recovered account
/// (the data directory, not the charging file, is the source of truth);
/// new accounts get ids past every id known. Logs the accounts the
/// charging file names that the data directory lacks: they exist only in
/// a data directory seeded from a file that named them.
fn routing(
    ledgers: &[Option<Ledger>],
    configured: &[(gyro_charging::Account, Vec<gyro_charging::SubscriptionId>)],
    shards: usize,
) -> Subscribers {
    let mut fixed = SubscriberDirectory::new();
    let mut max_id = 0;
    for engine in ledgers.iter().flatten().map(|l| &l.engine) {
        for (kind, data, account) in engine.directory().iter() {
            // The engine's copy of each identity is shared, not copied.
            if let Err(e) = fixed.insert_shared(kind, data, account) {
                warn!(error = %e, "two shards map one subscriber; routing by the first");
            }
        }
        max_id = engine.accounts().map(|a| a.id.0).fold(max_id, u64::max);
    }
    let missing: Vec<AccountId> = configured
        .iter()
        .map(|(a, _)| a.id)
        .filter(|id| {
            ledgers
                .get(id.shard(shards))
                .and_then(Option::as_ref)
                .is_some_and(|l| l.engine.account(*id).is_none())
        })
        .collect();
    if !missing.is_empty() {
        let some: Vec<String> = missing.iter().take(5).map(|a| a.to_string()).collect();
        warn!(
            count = missing.len(),
            first = %some.join(", "),
            "the charging file names accounts the data directory lacks; they are NOT served \
             (the charging file only seeds a new data directory): create them through the \
             admin API (POST /v1/accounts or `gyro account create`)"
        );
    }
    max_id = configured
        .iter()
        .map(|(a, _)| a.id.0)
        .fold(max_id, u64::max);
    Subscribers::new(fixed, max_id + 1)
}
