//! Credit control with the balances in a Redis Cluster shared by several
//! gyro nodes ([`RedisCreditControl`], [`RedisShard`]).
//!
//! A CCR's path: decode it into the reused [`CcRequest`] (as the embedded
//! shard does, [`gy::decode_ccr`]), rate it locally with the charging
//! configuration's plans (the catalog's pure rating functions: the price
//! of the used units, the money for the units to grant), turn it into
//! money steps of the Redis ledger ([`gyro_store::redis::Step`]), append a
//! provisional answer (3004, "nothing happened") and remember what the
//! request needs. Once per event-loop turn the runtime asks for the
//! batch ([`Shard::flush`]): the turn's steps go to the cluster as one
//! pipeline per master ([`RedisLedger::run`]) on the worker's sync
//! thread ([`Flush::Settle`]); once the cluster has answered, the shard
//! encodes each request's CCA from the answers and the runtime sends it
//! in place of the provisional one ([`Shard::settle`]).
//!
//! The steps of a request (request keys `<Session-Id>;<CC-Request-Number>;<n>`,
//! so a retransmission, T flag or not, at this node or another, is
//! answered from what Redis remembers and charged once):
//!
//! * CCR-Initial: per service (MSCC, or the command level for a single
//!   service) a Reserve of the money the grant costs (all of it, or what
//!   the account can pay down to one increment's worth, units scaled
//!   down, with a Final-Unit-Indication); then the session's record.
//!   When the account has bundles that cover the service now (the
//!   configuration's unit, rating groups, service ids and validity), the
//!   Reserve names them: they hold units first and only the rest is
//!   bought with money, priced in the same atomic step (the engine's
//!   order and rounding). A usage Debit names them too: the
//!   reservation's holds pay first, free bundle units pay usage past the
//!   grant, money the rest.
//! * CCR-Update: per service a Debit of the used units' price from the
//!   service's reservation, releasing what is left of it (a report
//!   without usage: a Release), then a Reserve of the new grant; then the
//!   session's record, renewed (deadline, owner).
//! * CCR-Terminate: per service a Debit of the used units, releasing the
//!   rest; then an EndSession releasing every reservation the session
//!   still holds (the services it did not report too), and the record
//!   marked ended.
//! * A price change (a time-of-day or day-of-week switch of the plan)
//!   before a grant expires is applied as the engine applies it: the
//!   grant holds the dearer price and carries Tariff-Time-Change (units
//!   other than seconds); a usage report that crosses it (units reported
//!   with Tariff-Change-Usage UNIT_AFTER_TARIFF_CHANGE, or seconds past
//!   the switch) is two Debits, each part at its own rate with its own
//!   CDR (`tariff_change` before/after), the second releasing the rest.
//!   A tariff's first charging interval is applied as the engine applies
//!   it: to the grants of the CCR-Initial, and to the usage first
//!   reported against a reservation the CCR-Initial made (whichever
//!   request reports it; not to a reservation a later request made, nor
//!   to usage reported without a reservation). The ledger records which
//!   reservations the CCR-Initial made and prices such usage by it
//!   ([`FirstInterval`]).
//! * CCR-Event: DIRECT_DEBITING is a Debit with no reservation, all or
//!   nothing (4012 when the account cannot pay, 4010 when blocked), free
//!   bundle units first;
//!   REFUND_ACCOUNT a Refund; CHECK_BALANCE a Check, which reads the
//!   account in the batch (blocked: 4010; else whether it could pay for
//!   the units now, free bundle units first: Check-Balance-Result) and
//!   charges nothing; PRICE_ENQUIRY a Check too (priced locally; the
//!   Check says whether the account is blocked: 4010). Both write the
//!   event CDR the embedded store writes (amount 0, the answer's
//!   Result-Code) in the same step, once per request key.
//!
//! Any node and any worker can take any request (the state is in Redis),
//! so requests are not routed: each goes to the shard of the connection's
//! own worker.
//!
//! # Accounts created through the operator API
//!
//! The charging configuration's accounts are found in its directory, by
//! every node alike. An account created through the operator API
//! ([`RedisAccounts::create`]) is kept in the cluster with a claim per
//! identity naming it and its definition (plan name, bundles; see
//! `gyro_store::redis`, "Accounts created through the operator API"). A
//! CCR-Initial or -Event whose Subscription-Ids are not in the
//! configuration is held back from planning, like a session the node does
//! not know; the batch job reads the claims of all such identities of the
//! turn in the same round trip as the unknown sessions, and plans them
//! with the account found, its plan resolved by name in this node's
//! catalog and its bundles from its definition. The answer is kept
//! node-wide: an account found is served from memory from then on (until
//! a step says it does not exist, 5030: deleted through another node, or
//! a claim whose creation never finished; a CCR-Initial or -Event that
//! meets such a 5030 is looked up again and run once more in the same
//! batch job, so a subscriber deleted and given a new account through
//! another node is charged to the new one at once), "not found" for a second
//! ([`NOT_FOUND_MEMORY_MS`]), so that an account created through another
//! node is found at most a second later; an identity claimed by no
//! account is answered 5030 DIAMETER_USER_UNKNOWN, as with the embedded
//! store. A CCR-Update or -Terminate of such an account's session at a
//! node that does not know the session reads the session's record, then
//! (when it does not know the account either) the claim of its
//! subscriber: one more round trip.
//!
//! # Sessions
//!
//! A CCR-Update or -Terminate is charged to its session's account (as
//! with the embedded store, whatever Subscription-Id it carries). The
//! node that served a session's last request remembers it in memory (the
//! account, the subscriber for CDRs, whether it ended) and reads nothing.
//! Every other node finds it in the cluster: each request of a session
//! writes the session's record (a [`SessionRecord`] under
//! `<ns>:{sess:<Session-Id>}`, kept until the Tcc deadline, a minute once
//! ended) in the same batch as its money steps, at no extra round trip.
//! A request for a session the node does not know (or has not heard of
//! for Tcc) is held back from planning; the batch job reads the records
//! of all such sessions of the turn in one round trip
//! ([`RedisLedger::sessions`]), plans their steps and runs them with the
//! rest. A session neither the node nor the cluster knows (never opened,
//! ended, silent past Tcc) is answered 5002 DIAMETER_UNKNOWN_SESSION_ID
//! and charges nothing; a retransmission of the CCR-Terminate that ended
//! it is answered as the first (from the remembered answers).
//!
//! A step Redis could not run or confirm (unreachable, timed out, not
//! replicated with `replicas_ack = 1`) makes its request's answer 3004
//! DIAMETER_TOO_BUSY: the client retries, and the request key makes the
//! retry safe.
//!
//! # Not yet
//!
//! * Bundles live in the cluster with their account (created at start
//!   with the account when the cluster lacks it, never changed from the
//!   configuration afterwards); which services a bundle covers and when
//!   it is valid come from this node's charging configuration, so every
//!   node must run the same one.
//! * A usage report is priced at the rate in force at the session's
//!   previous request (when the engine uses its reservation's start: the
//!   same unless a request left the service's reservation alone); a
//!   node that did not serve that request takes it from the session's
//!   record (its deadline less Tcc, so every node must run the same Tcc).
//! * Across a price change, a partial grant (the account cannot pay all
//!   the units asked) and the units bundles leave to money are priced by
//!   the ledger with one tariff, the dearer for the units asked (the
//!   engine takes the dearer price for each number of units); and when a
//!   usage report split in two parts is paid partly by bundles, the
//!   second part may take fewer free bundle units than the engine's for
//!   usage past the grant (the reservation's granted units are not
//!   reduced by the first part).
//! * A session record is written beside its reservation, not atomically
//!   with it: when the record's write fails the CCR is answered 3004, and
//!   a gateway that does not retry leaves a reservation no other node can
//!   find from the Session-Id (it goes at the Tcc deadline). A CCR-Initial
//!   refused (4010, 4012) still writes its record, so a CCR-Update after
//!   it is charged rather than answered 5002; and a node that still
//!   remembers a session as open charges a late CCR-Update for it even
//!   if another node has since ended it (the money rules hold either way;
//!   the new reservation goes at the Tcc deadline).
//! * The operator API lists, creates, shows, tops up, changes (status,
//!   credit limit) and deletes accounts ([`RedisAccounts`]; a list scans
//!   the namespace's keys) but does not change their plan, nor list or
//!   abort sessions (it answers 501). A top-up sends no Re-Auth-Request
//!   and a change none either (nor an Abort-Session-Request when it
//!   blocks: the sessions are denied at their next request).
//! * A CCR-Initial or -Event for a subscriber in neither the
//!   configuration nor the cluster costs a lookup in the cluster (at most
//!   one per identity per second per node, [`NOT_FOUND_MEMORY_MS`]): a
//!   peer sending many made-up Subscription-Ids makes the node read the
//!   cluster for each (the embedded store answers them from memory).
//! * Ids of created accounts come from a counter kept above the
//!   configuration's highest id when each account is created: an account
//!   added to the configuration later with an id the counter has given
//!   meanwhile is not opened (the cluster has an account of that id), and
//!   its subscribers would charge the created account. Give configured
//!   accounts ids below those of created ones.
//! * The subscriber of a deleted account of the charging configuration
//!   cannot be given an account through the API (409: the identity is
//!   in every node's configuration, and the tombstone keeps its account
//!   from being created again). `/metrics` shows the Redis families
//!   (`gyro_redis_*`) but not the per-request families of the embedded
//!   runtime.

use gyro_telemetry::Histogram;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use gyro_charging::rating::Catalog;
use gyro_charging::tariff::affordable;
use gyro_charging::{
    result_code as rc, AccountId, Bundle, CcAnswer, CcRequest, Cdr, ChargingConfig,
    CheckBalanceResult, CostInformation, FailedAvp, FinalUnitAction, MsccAnswer, RatingError,
    RatingKey, RecordType, RequestType, RequestedAction, ServiceUnits, SubscriberDirectory,
    SubscriptionId, SubscriptionType, Tariff, TariffChangeUsage, Timestamp, UnitKind, ZeroRated,
};
use gyro_diameter::app::{Application, Flush, Route, SessionStep, Shard};
use gyro_diameter::codes::{avp, cmd, result};
use gyro_diameter::connection::ShedKind;
use gyro_diameter::{Encoder, Message};
use gyro_store::redis::{
    request_key, AccountDefinition, Answer, BundleUse, CheckBalance, Debit, EndSession,
    FirstInterval, Outcome, PlannedStep, Pricing, PutSession, RedisLedger, RedisOptions, Refund,
    Release, Reserve, SessionRecord, Step,
};
use gyro_store::ErrorKind;
use tracing::{info, warn};

use crate::clock::unix_now;
use crate::error::{Error, Result};
use crate::gy::{self, LocalIdentity};
use crate::storage::ShardTotals;
use crate::telemetry;

/// How `gyro serve` uses the Redis ledger, beyond how it reaches it.
#[derive(Clone, Debug)]
pub struct RedisServing {
    /// Tcc: how long after a grant another node may release a session's
    /// reservations when nothing more is heard of it (the deadline each
    /// Reserve carries).
    pub tcc: Duration,
    /// The longest a node remembers in memory which account a session
    /// charges, from its last request (it forgets an open session after
    /// Tcc without a request anyway, and asks the cluster again).
    pub session_memory: Duration,
    /// How long the cluster keeps the record of a session ended by a
    /// CCR-Terminate, so that a retransmission of that request, at any
    /// node, is answered as the first (from the remembered answers)
    /// rather than with 5002.
    pub ended_memory: Duration,
}

impl Default for RedisServing {
    fn default() -> Self {
        RedisServing {
            tcc: Duration::from_secs(1200),
            session_memory: Duration::from_secs(3600),
            ended_memory: Duration::from_secs(60),
        }
    }
}

/// Steps-per-batch buckets of [`RedisTelemetry::batch_steps`] (the last
/// is `+Inf`).
pub const BATCH_STEPS_BOUNDS: [u64; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, u64::MAX];

/// What the Redis ledger of a node has done, for `/metrics`.
#[derive(Debug)]
pub struct RedisTelemetry {
    /// Wall time of each batch's pipelines (one per master, concurrently),
    /// nanoseconds.
    pub round_trip: Histogram<14>,
    /// Steps per batch.
    pub batch_steps: Histogram<11>,
    /// Steps that failed because the cluster was unreachable or timed out.
    pub errors_unavailable: AtomicU64,
    /// Steps not confirmed by a replica in time (`replicas_ack = 1`).
    pub errors_not_replicated: AtomicU64,
    /// Steps the cluster refused (a script error, an unexpected answer).
    pub errors_refused: AtomicU64,
    /// Steps answered from a remembered answer (retransmissions).
    pub replayed: AtomicU64,
    /// Sessions whose reservations this node's expiry released.
    pub expired_sessions: AtomicU64,
    /// CDRs this node exported to files.
    pub exported_cdrs: AtomicU64,
    /// Background rounds (expiry, export) that failed.
    pub background_errors: AtomicU64,
    /// Sessions this node did not know and looked up in the cluster (a
    /// CCR-Update or -Terminate after a failover to this node).
    pub session_lookups: AtomicU64,
    /// Requests answered 5002 DIAMETER_UNKNOWN_SESSION_ID (a session
    /// neither this node nor the cluster knows).
    pub unknown_sessions: AtomicU64,
    /// Subscription-Ids this node looked up in the cluster's subscriber
    /// directory (accounts created through the operator API).
    pub subscriber_lookups: AtomicU64,
    /// Whether the last batch had steps that failed (logged when that
    /// starts and when it stops, not at every batch).
    failing: std::sync::atomic::AtomicBool,
    ledger: Arc<RedisLedger>,
}

impl RedisTelemetry {
    fn new(ledger: Arc<RedisLedger>) -> Self {
        RedisTelemetry {
            round_trip: Histogram::new(&telemetry::LATENCY_BOUNDS_NS),
            batch_steps: Histogram::new(&BATCH_STEPS_BOUNDS),
            errors_unavailable: AtomicU64::new(0),
            errors_not_replicated: AtomicU64::new(0),
            errors_refused: AtomicU64::new(0),
            replayed: AtomicU64::new(0),
            expired_sessions: AtomicU64::new(0),
            exported_cdrs: AtomicU64::new(0),
            background_errors: AtomicU64::new(0),
            session_lookups: AtomicU64::new(0),
            unknown_sessions: AtomicU64::new(0),
            subscriber_lookups: AtomicU64::new(0),
            failing: std::sync::atomic::AtomicBool::new(false),
            ledger,
        }
    }

    /// The client's counters (steps, pipelines, redirections).
    pub fn ledger_stats(&self) -> gyro_store::redis::LedgerStats {
        self.ledger.stats()
    }

    fn count_error(&self, e: &gyro_store::Error) {
        match e {
            gyro_store::Error::NotReplicated { .. } => &self.errors_not_replicated,
            e if e.kind() == ErrorKind::Unavailable => &self.errors_unavailable,
            _ => &self.errors_refused,
        }
        .fetch_add(1, Relaxed);
    }
}

/// What every shard of a node shares: the cluster connection, the rating
/// catalog and the subscriber directory.
struct Ctx {
    ledger: Arc<RedisLedger>,
    rt: tokio::runtime::Handle,
    catalog: Catalog,
    directory: SubscriberDirectory,
    /// Plan index per account whose plan is not the default one.
    plans: HashMap<AccountId, u16>,
    /// The bundles of each account that has any, as the charging
    /// configuration defines them (which services they cover, when they
    /// are valid; their counts are in the cluster). Accounts of one
    /// range share one list.
    bundles: HashMap<AccountId, Arc<[Bundle]>>,
    default_plan: Option<u16>,
    /// The highest account id of the charging configuration (the ids of
    /// accounts created through the operator API are above it).
    id_floor: u64,
    /// What this node found in the cluster's subscriber directory (the
    /// accounts created through the operator API), by identity
    /// (`kind:data`, an E.164 number without '+'): a found account is
    /// kept until a step says it does not exist (5030); "not found" only
    /// for [`NOT_FOUND_MEMORY_MS`], so that an account created through
    /// another node is found quickly.
    found: Mutex<HashMap<String, FoundSubscriber>>,
    identity: LocalIdentity,
    serving: RedisServing,
    /// What this node remembers of the sessions it served, by
    /// Session-Id.
    sessions: Mutex<HashMap<String, SessionEntry>>,
    telemetry: Arc<RedisTelemetry>,
    totals: Arc<[ShardTotals]>,
}

/// How long a node remembers that the cluster's subscriber directory
/// does not hold an identity (requests for it meanwhile are answered
/// 5030 without asking the cluster again).
pub const NOT_FOUND_MEMORY_MS: u64 = 1000;

/// How long a claim of an identity whose account does not exist counts
/// as a creation in progress (see `gyro_store::redis`, "Accounts created
/// through the operator API"): longer than a creation takes.
const CLAIM_GRACE: Duration = Duration::from_secs(10);

/// An account created through the operator API, as a node rates it: its
/// plan (resolved by name in this node's catalog) and its bundles.
#[derive(Debug)]
struct Created {
    account: AccountId,
    /// Index of its plan in the catalog (none: a plan this node's
    /// configuration lacks; its requests are not rated).
    plan: Option<u16>,
    bundles: Arc<[Bundle]>,
}

impl Created {
    fn of(ctx: &Ctx, account: AccountId, def: Option<&AccountDefinition>) -> Arc<Created> {
        let plan = def.and_then(|d| d.plan.as_deref());
        Arc::new(Created {
            account,
            plan: ctx.catalog.plan_index(plan),
            bundles: def
                .map(|d| Arc::from(d.bundles.as_slice()))
                .unwrap_or_else(|| Arc::from(Vec::new())),
        })
    }
}

/// A node's memory of one identity in the cluster's subscriber directory.
struct FoundSubscriber {
    /// The account (none: not in the directory).
    created: Option<Arc<Created>>,
    /// When it was read (Unix ms).
    at: u64,
}

/// The key of an identity in [`Ctx::found`].
fn found_key(id: &SubscriptionId) -> String {
    let data = match id.kind {
        SubscriptionType::E164 => id.data.strip_prefix('+').unwrap_or(&id.data),
        _ => &id.data,
    };
    format!("{}:{data}", id.kind.name())
}

impl Ctx {
    /// What this node remembers of `ids` in the cluster's directory: the
    /// first found (index, account); `Err(true)` when every one is known
    /// not to be there, `Err(false)` when some must be asked.
    fn remembered(
        &self,
        ids: &[SubscriptionId],
        now_ms: u64,
    ) -> std::result::Result<(usize, Arc<Created>), bool> {
        let Ok(found) = self.found.lock() else {
            return Err(false);
        };
        let mut all_absent = !ids.is_empty();
        for (i, id) in ids.iter().enumerate() {
            match found.get(&found_key(id)) {
                Some(FoundSubscriber {
                    created: Some(c), ..
                }) => return Ok((i, c.clone())),
                Some(f) if now_ms.saturating_sub(f.at) < NOT_FOUND_MEMORY_MS => {}
                _ => all_absent = false,
            }
        }
        Err(all_absent)
    }

    /// Remembers what the cluster's directory says of `id`.
    fn remember(&self, id: &SubscriptionId, created: Option<Arc<Created>>, now_ms: u64) {
        if let Ok(mut found) = self.found.lock() {
            found.insert(
                found_key(id),
                FoundSubscriber {
                    created,
                    at: now_ms,
                },
            );
        }
    }

    /// Forgets the identities that name `account` (it does not exist: a
    /// step answered 5030, or it was deleted).
    fn forget(&self, account: AccountId) {
        if let Ok(mut found) = self.found.lock() {
            found.retain(|_, f| f.created.as_ref().is_none_or(|c| c.account != account));
        }
    }

    /// The highest configured id.
    fn id_floor(&self) -> u64 {
        self.id_floor
    }
}

/// What a node remembers of a session it served (the cluster keeps the
/// same in the session's record, for the other nodes).
struct SessionEntry {
    /// Its account's profile when it was created through the operator
    /// API (none: an account of the charging configuration).
    created: Option<Arc<Created>>,
    account: AccountId,
    /// When it was last heard of (Unix ms).
    heard: u64,
    /// Its subscriber (`kind:data`, for CDRs).
    subscriber: Arc<str>,
    /// The CC-Request-Number of the CCR-Terminate that ended it.
    ended: Option<u32>,
}

/// The credit-control application on the Redis Cluster ledger.
pub struct RedisCreditControl {
    ctx: Arc<Ctx>,
    runtime: Arc<tokio::runtime::Runtime>,
}

impl RedisCreditControl {
    /// Connects to the cluster (loading the ledger functions), opens every
    /// account of the charging configuration that the cluster lacks
    /// (an account that exists keeps its balance: the cluster, not the
    /// file, is the source of truth), and returns the application for
    /// `shards` shards answering as `origin_host`/`origin_realm`.
    pub fn connect(
        charging: ChargingConfig,
        origin_host: &str,
        origin_realm: &str,
        options: RedisOptions,
        serving: RedisServing,
        shards: usize,
    ) -> Result<Self> {
        let config = |e: &dyn std::fmt::Display| Error::Config(format!("charging: {e}"));
        let accounts = charging.accounts().map_err(|e| config(&e))?;
        let directory = charging.directory().map_err(|e| config(&e))?;
        let catalog = charging.catalog().map_err(|e| config(&e))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("gyro-redis")
            .enable_all()
            .build()
            .map_err(|e| Error::Config(format!("starting the Redis client runtime: {e}")))?;
        let ledger = runtime
            .block_on(RedisLedger::connect(options))
            .map_err(|e| Error::Config(format!("connecting to the Redis Cluster: {e}")))?;
        let ledger = Arc::new(ledger);
        let mut plans = HashMap::new();
        let mut bundles: HashMap<AccountId, Arc<[Bundle]>> = HashMap::new();
        let mut last: Option<Arc<[Bundle]>> = None;
        let default_plan = catalog.plan_index(None);
        for (a, _) in &accounts {
            if !a.bundles.is_empty() {
                let shared = match &last {
                    Some(l) if **l == *a.bundles => l.clone(),
                    _ => Arc::from(a.bundles.as_slice()),
                };
                last = Some(shared.clone());
                bundles.insert(a.id, shared);
            }
            let p = catalog.plan_index(a.plan.as_deref());
            if p != default_plan {
                if let Some(p) = p {
                    plans.insert(a.id, p);
                }
            }
        }
        let id_floor = accounts.iter().map(|(a, _)| a.id.0).max().unwrap_or(0);
        let started = Instant::now();
        let opened = runtime.block_on(open_accounts(&ledger, &accounts))?;
        info!(
            accounts = accounts.len(),
            created = opened,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "accounts of the charging configuration opened in the Redis Cluster \
             (existing ones kept as they are)"
        );
        let telemetry = Arc::new(RedisTelemetry::new(ledger.clone()));
        let ctx = Ctx {
            ledger,
            rt: runtime.handle().clone(),
            catalog,
            directory,
            plans,
            bundles,
            default_plan,
            id_floor,
            found: Mutex::new(HashMap::new()),
            identity: LocalIdentity {
                origin_host: origin_host.to_string(),
                origin_realm: origin_realm.to_string(),
            },
            serving,
            sessions: Mutex::new(HashMap::new()),
            telemetry,
            totals: (0..shards.max(1)).map(|_| ShardTotals::default()).collect(),
        };
        Ok(RedisCreditControl {
            ctx: Arc::new(ctx),
            runtime: Arc::new(runtime),
        })
    }

    /// The ledger client, shared with background work (expiry, export).
    pub fn ledger(&self) -> Arc<RedisLedger> {
        self.ctx.ledger.clone()
    }

    /// The runtime the ledger client runs on (one thread).
    pub fn runtime(&self) -> Arc<tokio::runtime::Runtime> {
        self.runtime.clone()
    }

    /// The counters for `/metrics`.
    pub fn telemetry(&self) -> Arc<RedisTelemetry> {
        self.ctx.telemetry.clone()
    }

    /// Per-shard answer counters.
    pub fn totals(&self) -> Arc<[ShardTotals]> {
        self.ctx.totals.clone()
    }

    /// What the operator API reads and tops up accounts through.
    pub fn accounts(&self) -> Arc<RedisAccounts> {
        Arc::new(RedisAccounts {
            ctx: self.ctx.clone(),
        })
    }
}

/// The operator API's way to the accounts on the Redis Cluster ledger:
/// subscribers are found in the charging configuration's directory, the
/// figures are read from the cluster, and a top-up is a `gyro_topup`
/// step. Each call runs on the ledger client's runtime, so it may be
/// awaited from any tokio runtime.
pub struct RedisAccounts {
    ctx: Arc<Ctx>,
}

/// An account as [`RedisAccounts`] shows it.
#[derive(Clone, Debug)]
pub struct RedisAccountView {
    /// The cluster's figures.
    pub state: gyro_store::redis::AccountState,
    /// Its identities in the charging configuration.
    pub subscribers: Vec<gyro_charging::SubscriptionId>,
    /// Its price plan's name.
    pub plan: String,
    /// The currency of its money, when it is not the configuration's
    /// (an account created with another).
    pub currency: Option<gyro_charging::Currency>,
    /// Sessions holding a reservation on it.
    pub open_sessions: usize,
    /// Its bundles: as the charging configuration defines them (what
    /// they cover, when they are valid), with the cluster's counts (only
    /// those the cluster holds).
    pub bundles: Vec<Bundle>,
    /// For a top-up: the idempotency key was used before; nothing was
    /// added this time.
    pub replayed: bool,
}

/// The prefix of a top-up's request key: an operator's idempotency key
/// never meets a CCR's request key (`<Session-Id>;<n>;<step>`).
const TOP_UP_PREFIX: &str = "top-up:";

impl RedisAccounts {
    /// The account of an MSISDN or IMSI (digits), as the charging
    /// configuration maps it.
    pub fn lookup_digits(&self, subscriber: &str) -> Option<AccountId> {
        let d = &self.ctx.directory;
        d.lookup(SubscriptionType::E164, subscriber)
            .or_else(|| d.lookup(SubscriptionType::Imsi, subscriber))
    }

    /// The account of an MSISDN or IMSI (digits): in the charging
    /// configuration, else in the cluster's subscriber directory (an
    /// account created through the operator API, at any node; one round
    /// trip for both readings of the digits).
    pub async fn find(
        &self,
        subscriber: &str,
    ) -> std::result::Result<Option<AccountId>, RedisAccountsError> {
        if let Some(a) = self.lookup_digits(subscriber) {
            return Ok(Some(a));
        }
        let ledger = self.ctx.ledger.clone();
        let ids = [
            SubscriptionId::e164(subscriber),
            SubscriptionId::new(SubscriptionType::Imsi, subscriber),
        ];
        let read = self.ctx.rt.spawn(async move {
            let found = ledger.claims(&[&ids[0], &ids[1]]).await;
            let mut out = None;
            for r in found {
                if let Some(c) = r? {
                    out = out.or(Some(c.account));
                }
            }
            Ok::<_, gyro_store::Error>(out)
        });
        read.await
            .map_err(|e| stopped(&e))?
            .map_err(RedisAccountsError::Ledger)
    }

    /// Creates an account for the operator API (`new.id` none: the next
    /// id of the cluster's counter), found from then on by every node
    /// sharing the namespace: the same checks and refusals as the
    /// embedded store's (an identity of the charging configuration or of
    /// another created account, or an id that is taken: 409; bundles or
    /// a plan that are not valid: 422), then
    /// [`RedisLedger::create_account`].
    pub async fn create(
        &self,
        new: gyro_charging::NewAccount,
    ) -> std::result::Result<RedisAccountView, RedisAccountsError> {
        use gyro_charging::Error as E;
        let invalid = |e: E| RedisAccountsError::Invalid(e.to_string());
        if let Some(taken) = new
            .subscribers
            .iter()
            .find(|s| self.ctx.directory.lookup(s.kind, &s.data).is_some())
        {
            return Err(RedisAccountsError::Conflict(format!(
                "subscriber {taken} already has an account"
            )));
        }
        if new.subscribers.is_empty() {
            return Err(invalid(E::InvalidAccount("no subscriber identity".into())));
        }
        if new.credit_limit < 0 {
            return Err(invalid(E::InvalidAmount(new.credit_limit)));
        }
        if new.balance < 0 {
            return Err(invalid(E::InvalidAmount(new.balance)));
        }
        if new.subscribers.iter().any(|s| s.data.is_empty()) {
            return Err(invalid(E::InvalidAccount(
                "empty subscriber identity".into(),
            )));
        }
        for (i, b) in new.bundles.iter().enumerate() {
            let fresh = b.reserved == 0 && b.consumed == 0 && b.remaining == b.initial;
            if !fresh || b.valid_until <= b.valid_from {
                return Err(invalid(E::InvalidAccount(format!(
                    "bundle {}: needs units and valid_until after valid_from",
                    b.id
                ))));
            }
            if new.bundles[..i].iter().any(|o| o.id == b.id) {
                return Err(invalid(E::InvalidAccount(format!(
                    "bundle id {} given twice",
                    b.id
                ))));
            }
        }
        self.ctx
            .catalog
            .check_plan(new.plan.as_deref(), new.currency)
            .map_err(|e| match e {
                E::Config(m) => invalid(E::InvalidPlan(m)),
                e => invalid(e),
            })?;
        let definition = AccountDefinition {
            subscribers: new.subscribers.clone(),
            plan: new.plan.clone(),
            currency: new.currency,
            bundles: new.bundles.clone(),
        };
        let asked = gyro_store::redis::NewAccount {
            id: (new.id.0 != 0).then_some(new.id),
            id_floor: self.ctx.id_floor(),
            balance: new.balance,
            credit_limit: new.credit_limit,
            blocked: new.status == gyro_charging::AccountStatus::Blocked,
            definition,
        };
        let ledger = self.ctx.ledger.clone();
        let run = self.ctx.rt.spawn(async move {
            use gyro_store::redis::Creation;
            let account = match ledger
                .create_account(&asked, CLAIM_GRACE, unix_now())
                .await?
            {
                Creation::Created(a) => a,
                Creation::SubscriberTaken(s) => {
                    return Err(RedisAccountsError::Conflict(format!(
                        "subscriber {s} already has an account"
                    )))
                }
                Creation::AccountTaken(a) => {
                    return Err(RedisAccountsError::Conflict(
                        E::DuplicateAccount(a).to_string(),
                    ))
                }
            };
            let state = ledger.account(account).await?;
            Ok::<_, RedisAccountsError>((account, state))
        });
        let (account, state) = run.await.map_err(|e| stopped(&e))??;
        let state = state.ok_or_else(|| {
            RedisAccountsError::Ledger(gyro_store::Error::Unavailable {
                op: "create account",
                reason: format!("account {} not found right after its creation", account.0),
            })
        })?;
        let view = self.view(state, &[], false);
        // This node finds it at once (any other node at its first
        // request for it).
        let created = Created::of(&self.ctx, account, view.state.definition.as_ref());
        for id in &view.subscribers {
            self.ctx
                .remember(id, Some(created.clone()), unix_now().as_millis());
        }
        Ok(view)
    }

    /// An account with its figures as the cluster holds them; `None` when
    /// the cluster has no such account.
    pub async fn show(
        &self,
        account: AccountId,
    ) -> std::result::Result<Option<RedisAccountView>, RedisAccountsError> {
        let ledger = self.ctx.ledger.clone();
        let read = self.ctx.rt.spawn(async move {
            let state = ledger.account(account).await?;
            let reservations = match &state {
                Some(_) => ledger.reservations(account).await?,
                None => Vec::new(),
            };
            Ok::<_, gyro_store::Error>((state, reservations))
        });
        let (state, reservations) = read
            .await
            .map_err(|e| stopped(&e))?
            .map_err(RedisAccountsError::Ledger)?;
        Ok(state.map(|state| self.view(state, &reservations, false)))
    }

    /// Adds `amount` (positive) to the account once per idempotency
    /// `key`: the same key and amount again answers what the first top-up
    /// answered (for as long as the ledger remembers answers); the same
    /// key with another amount is [`RedisAccountsError::Conflict`] and
    /// changes nothing (as on the embedded store). `None` when the
    /// cluster has no such account.
    pub async fn top_up(
        &self,
        account: AccountId,
        key: &str,
        amount: i64,
    ) -> std::result::Result<Option<RedisAccountView>, RedisAccountsError> {
        let ledger = self.ctx.ledger.clone();
        let step = Step::TopUp(gyro_store::redis::TopUp {
            account,
            request: format!("{TOP_UP_PREFIX}{key}"),
            amount,
        });
        let key = key.to_string();
        let run = self.ctx.rt.spawn(async move {
            let answer = ledger.step(&step, unix_now()).await?;
            if answer.code != rc::SUCCESS {
                return Ok(None);
            }
            if let Outcome::ToppedUp {
                amount: Some(first),
                ..
            } = answer.outcome
            {
                if answer.replayed && first != amount {
                    let e = gyro_charging::Error::IdempotencyConflict { key, amount: first };
                    return Err(RedisAccountsError::Conflict(e.to_string()));
                }
            }
            let state = ledger.account(account).await?;
            let reservations = ledger.reservations(account).await?;
            Ok::<_, RedisAccountsError>(state.map(|s| (s, reservations, answer.replayed)))
        });
        let read = run.await.map_err(|e| stopped(&e))??;
        Ok(read.map(|(state, reservations, replayed)| self.view(state, &reservations, replayed)))
    }

    /// Up to `limit` accounts of the cluster with an id above `after`, in
    /// id order, with their figures (each read on its own: a live view).
    /// Every call scans the namespace's account keys.
    pub async fn list(
        &self,
        after: Option<AccountId>,
        limit: usize,
    ) -> std::result::Result<Vec<RedisAccountView>, RedisAccountsError> {
        let ledger = self.ctx.ledger.clone();
        let run = self.ctx.rt.spawn(async move {
            let ids = ledger.account_ids().await?;
            let mut out = Vec::new();
            for id in ids.into_iter().filter(|&id| after.is_none_or(|a| id > a)) {
                if out.len() >= limit {
                    break;
                }
                if let Some(state) = ledger.account(id).await? {
                    out.push((state, ledger.reservations(id).await?));
                }
            }
            Ok::<_, gyro_store::Error>(out)
        });
        let read = run
            .await
            .map_err(|e| stopped(&e))?
            .map_err(RedisAccountsError::Ledger)?;
        Ok(read
            .into_iter()
            .map(|(state, reservations)| self.view(state, &reservations, false))
            .collect())
    }

    /// Changes the account's status (`blocked`) and/or credit limit (at
    /// least 0), at once for every node (each reads them from the cluster
    /// at its next request); the account as it is afterwards, `None` when
    /// the cluster has no such account. Sends no Re-Auth- or
    /// Abort-Session-Request.
    pub async fn update(
        &self,
        account: AccountId,
        blocked: Option<bool>,
        credit_limit: Option<i64>,
    ) -> std::result::Result<Option<RedisAccountView>, RedisAccountsError> {
        let ledger = self.ctx.ledger.clone();
        let run = self.ctx.rt.spawn(async move {
            if !ledger
                .update_account(account, blocked, credit_limit)
                .await?
            {
                return Ok(None);
            }
            let state = ledger.account(account).await?;
            let reservations = ledger.reservations(account).await?;
            Ok::<_, gyro_store::Error>(state.map(|s| (s, reservations)))
        });
        let read = run
            .await
            .map_err(|e| stopped(&e))?
            .map_err(RedisAccountsError::Ledger)?;
        Ok(read.map(|(state, reservations)| self.view(state, &reservations, false)))
    }

    /// Deletes the account when it holds no reservation (else
    /// [`RedisAccountsError::Conflict`], as on the embedded store); its
    /// tombstone keeps any node from creating it again from the charging
    /// configuration. `false` when the cluster has no such account.
    pub async fn delete(
        &self,
        account: AccountId,
    ) -> std::result::Result<bool, RedisAccountsError> {
        use gyro_store::redis::Deletion;
        let ledger = self.ctx.ledger.clone();
        let run = self.ctx.rt.spawn(async move {
            // A created account's identities are freed once it is gone,
            // so that they can be given an account again.
            let identities = ledger
                .account(account)
                .await?
                .and_then(|s| s.definition)
                .map(|d| d.subscribers)
                .unwrap_or_default();
            let d = ledger.delete_account(account, unix_now()).await?;
            if d == Deletion::Deleted && !identities.is_empty() {
                ledger.free_subscribers(account, &identities).await?;
            }
            Ok::<_, gyro_store::Error>(d)
        });
        let d = run
            .await
            .map_err(|e| stopped(&e))?
            .map_err(RedisAccountsError::Ledger)?;
        if d != Deletion::InUse {
            self.ctx.forget(account);
        }
        match d {
            Deletion::Deleted => Ok(true),
            Deletion::NoAccount => Ok(false),
            Deletion::InUse => Err(RedisAccountsError::Conflict(
                gyro_charging::Error::AccountInUse(account).to_string(),
            )),
        }
    }

    fn view(
        &self,
        state: gyro_store::redis::AccountState,
        reservations: &[gyro_store::redis::ReservationState],
        replayed: bool,
    ) -> RedisAccountView {
        let mut sessions: Vec<&str> = reservations.iter().map(|r| r.session.as_str()).collect();
        sessions.sort_unstable();
        sessions.dedup();
        let with_counts = |defs: &[Bundle]| -> Vec<Bundle> {
            defs.iter()
                .filter_map(|d| {
                    let c = state.bundles.iter().find(|b| b.id == d.id)?;
                    let mut b = d.clone();
                    (b.initial, b.remaining, b.reserved, b.consumed) =
                        (c.initial, c.remaining, c.reserved, c.consumed);
                    Some(b)
                })
                .collect()
        };
        if let Some(def) = &state.definition {
            return RedisAccountView {
                bundles: with_counts(&def.bundles),
                subscribers: def.subscribers.clone(),
                plan: def
                    .plan
                    .clone()
                    .unwrap_or_else(|| gyro_charging::DEFAULT_PLAN.to_string()),
                currency: def.currency,
                open_sessions: sessions.len(),
                replayed,
                state,
            };
        }
        let plan = self
            .ctx
            .plans
            .get(&state.account)
            .copied()
            .or(self.ctx.default_plan)
            .and_then(|i| self.ctx.catalog.plan(i))
            .map_or_else(
                || gyro_charging::DEFAULT_PLAN.to_string(),
                |p| p.name.to_string(),
            );
        let bundles = self
            .ctx
            .bundles
            .get(&state.account)
            .map(|defs| with_counts(defs))
            .unwrap_or_default();
        RedisAccountView {
            bundles,
            subscribers: self.ctx.directory.identities_of(state.account),
            plan,
            currency: None,
            open_sessions: sessions.len(),
            replayed,
            state,
        }
    }
}

/// The ledger's runtime dropped a task: the server is stopping.
fn stopped(e: &tokio::task::JoinError) -> RedisAccountsError {
    RedisAccountsError::Ledger(gyro_store::Error::Unavailable {
        op: "operator API",
        reason: format!("the Redis client stopped: {e}"),
    })
}

/// Why [`RedisAccounts`] could not answer.
#[derive(Debug, thiserror::Error)]
pub enum RedisAccountsError {
    /// The ledger failed (see [`RedisAccountsError::is_unavailable`]).
    #[error(transparent)]
    Ledger(gyro_store::Error),
    /// The request conflicts with what the cluster holds (an idempotency
    /// key used with another amount, an account with open sessions to
    /// delete); the text says how, in the embedded store's words.
    #[error("{0}")]
    Conflict(String),
    /// The request is not valid (an account to create with bundles or a
    /// plan that are not); the text says why, in the embedded store's
    /// words.
    #[error("{0}")]
    Invalid(String),
}

impl From<gyro_store::Error> for RedisAccountsError {
    fn from(e: gyro_store::Error) -> Self {
        RedisAccountsError::Ledger(e)
    }
}

impl RedisAccountsError {
    /// Redis could not be reached or did not confirm (not replicated):
    /// the operation may or may not have run; retrying it is safe.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, RedisAccountsError::Ledger(e) if e.kind() == ErrorKind::Unavailable)
    }
}

/// Opens every configured account (concurrently, a few hundred at a
/// time); returns how many were created.
async fn open_accounts(
    ledger: &Arc<RedisLedger>,
    accounts: &[(gyro_charging::Account, Vec<gyro_charging::SubscriptionId>)],
) -> Result<u64> {
    let mut created = 0;
    for chunk in accounts.chunks(256) {
        let mut set = tokio::task::JoinSet::new();
        for (a, _) in chunk {
            let (ledger, id, balance, limit) = (ledger.clone(), a.id, a.balance, a.credit_limit);
            let blocked = a.status == gyro_charging::AccountStatus::Blocked;
            let bundles: Vec<(u32, u64)> = a.bundles.iter().map(|b| (b.id, b.remaining)).collect();
            set.spawn(async move {
                ledger
                    .open_account_with_bundles(id, balance, limit, blocked, &bundles)
                    .await
            });
        }
        while let Some(r) = set.join_next().await {
            match r {
                Ok(Ok(true)) => created += 1,
                Ok(Ok(false)) => {}
                Ok(Err(e)) => {
                    return Err(Error::Config(format!(
                        "opening accounts in the Redis Cluster: {e}"
                    )))
                }
                Err(e) => return Err(Error::Config(format!("opening accounts: {e}"))),
            }
        }
    }
    Ok(created)
}

impl Application for RedisCreditControl {
    type Shard = RedisShard;

    fn shard(&self, index: usize, _count: usize) -> RedisShard {
        RedisShard {
            ctx: self.ctx.clone(),
            index,
            planner: Planner {
                ctx: self.ctx.clone(),
                request: CcRequest::default(),
                subscriber: String::new(),
                created: None,
                since: None,
                steps: Vec::new(),
            },
            pending: Vec::new(),
            batch: Arc::new(Mutex::new(None)),
            settled: Vec::new(),
            settled_bytes: BytesMut::new(),
            last_prune: 0,
        }
    }

    /// Every node and worker can serve every session (its state is in
    /// Redis): the connection's own worker takes the request.
    fn route(&self, _request: &Message<'_>, _count: usize) -> Route {
        Route {
            shard: None,
            session: SessionStep::None,
        }
    }
}

/// What one service of a request waits for from its steps.
#[derive(Clone, Debug)]
enum Part {
    /// A Reserve: the grant of service `mscc` (`None`: command level) of
    /// `want` units for `money`, at `rate` (plan and rate in the catalog).
    Grant {
        mscc: Option<usize>,
        step: usize,
        want: u64,
        money: i64,
        rate: (u16, u16),
        /// The price change within the grant: when, and the rate after
        /// it (the grant was priced at the dearer of the two).
        change: Option<(Timestamp, u16)>,
        /// Whether the first interval priced it (the session's first
        /// grant).
        first: bool,
    },
    /// A Debit or Release of reported usage: only its success matters.
    Usage { step: usize },
    /// The first Debit of a report that may be of REDIRECT or
    /// RESTRICT_ACCESS final units (a CCR-Update's usage of a tariff with
    /// such a final-unit action and a Validity-Time): when it used up the
    /// reservation it was made against (`used`, the units reported, at
    /// least the units the reservation granted), the answer for service
    /// `mscc` (`None`: command level) carries `validity` (RFC 8506
    /// sections 5.6.2 and 5.6.3, the engine's rule); a grant that follows
    /// replaces it, a refusal other than 4012 drops it.
    FinalUnits {
        step: usize,
        mscc: Option<usize>,
        used: u64,
        validity: u32,
    },
    /// A direct debit (event): its code is the answer's.
    Event {
        mscc: Option<usize>,
        step: usize,
        units: u64,
        unit: UnitKind,
    },
    /// A refund (event).
    Refund { step: usize },
    /// A balance check (event): its code and Check-Balance-Result are
    /// the answer's; for a price enquiry (`enquiry`) its code only (the
    /// answer's Cost-Information goes when the account is blocked).
    Check {
        mscc: Option<usize>,
        step: usize,
        enquiry: bool,
    },
}

/// A request waiting for its steps.
struct Pending {
    /// The request, copied (its answer is encoded after the batch).
    request: Vec<u8>,
    /// The answer, complete but for what the steps decide.
    answer: CcAnswer,
    parts: Vec<Part>,
    /// Its steps in the batch.
    steps: std::ops::Range<usize>,
    kind: usize,
    /// Its session is not known to this node: the batch job looks it up
    /// in the cluster, then plans its steps (Session-Id here).
    look_up: Option<String>,
    /// It cannot be answered (its session could not be looked up): it
    /// stays 3004.
    failed: bool,
    /// Its Subscription-Ids are not in the charging configuration nor
    /// known to this node: the batch job looks them up in the cluster's
    /// subscriber directory, then plans its steps.
    find: Vec<SubscriptionId>,
    /// Its account was created through the operator API: when a step
    /// says it does not exist (5030), this node forgets it.
    created: Option<AccountId>,
    /// Its account is one this node remembered from the cluster's
    /// directory (not read for this request): when a step says it does
    /// not exist, the request is looked up again and planned anew.
    cached: bool,
}

/// How a request's account is found.
enum Known {
    /// This account (the planner's subscriber is filled in).
    Account(AccountId),
    /// No account for its Subscription-Id: 5030.
    UnknownUser,
    /// A session this node knows has ended: 5002.
    UnknownSession,
    /// A session this node does not know: ask the cluster.
    LookUp,
    /// Subscription-Ids neither the configuration nor this node's memory
    /// of the cluster's directory holds: ask the cluster.
    Find,
}

/// A turn's requests and the answers of their steps, handed from the
/// batch job back to the shard.
type Batch = (Vec<Pending>, Vec<gyro_store::Result<Answer>>);

/// One shard of the Redis-backed application: the requests of the turn
/// and their steps.
pub struct RedisShard {
    ctx: Arc<Ctx>,
    index: usize,
    /// The decoded request and the turn's steps.
    planner: Planner,
    pending: Vec<Pending>,
    /// The batch being run (its requests and, once its job has run, the
    /// answers of their steps).
    batch: Arc<Mutex<Option<Batch>>>,
    /// Final answers of the last batch: (hop-by-hop, end-to-end, range in
    /// `settled_bytes`, kind, result code).
    settled: Vec<(u32, u32, std::ops::Range<usize>, usize, u32)>,
    settled_bytes: BytesMut,
    last_prune: u64,
}

impl RedisShard {
    fn totals(&self) -> &ShardTotals {
        &self.ctx.totals[self.index.min(self.ctx.totals.len() - 1)]
    }

    /// An error answer to `req` (Failed-AVP: the request's AVP with code
    /// `avp_code`, when not 0).
    fn reject(&self, req: &Message<'_>, code: u32, avp_code: u32, out: &mut BytesMut) {
        crate::shard::reject(&self.ctx.identity, req, code, avp_code, out);
    }

    /// The account a request charges: a CCR-Initial's or -Event's, its
    /// Subscription-Id's; a CCR-Update's or -Terminate's, its session's
    /// (as this node remembers it; a session it does not know, or not
    /// heard of for Tcc, is looked up in the cluster).
    fn known(&mut self, now_ms: u64) -> Known {
        let pl = &mut self.planner;
        let req = &pl.request;
        pl.subscriber.clear();
        pl.created = None;
        pl.since = None;
        let initial = matches!(req.request_type, RequestType::Event | RequestType::Initial);
        let resolved = if initial {
            match self.ctx.directory.resolve(&req.subscription_ids) {
                Some(found) => Some(found),
                None if req.subscription_ids.is_empty() => return Known::UnknownUser,
                None => match self.ctx.remembered(&req.subscription_ids, now_ms) {
                    Ok((i, c)) => {
                        let a = c.account;
                        pl.created = Some(c);
                        Some((i, a))
                    }
                    Err(true) => return Known::UnknownUser,
                    Err(false) => return Known::Find,
                },
            }
        } else {
            None
        };
        let Ok(mut sessions) = self.ctx.sessions.lock() else {
            return Known::LookUp;
        };
        match req.request_type {
            RequestType::Event | RequestType::Initial => {
                let Some((i, a)) = resolved else {
                    return Known::UnknownUser;
                };
                let id = &req.subscription_ids[i];
                pl.subscriber.push_str(id.kind.name());
                pl.subscriber.push(':');
                pl.subscriber.push_str(&id.data);
                if req.request_type == RequestType::Initial {
                    sessions.insert(
                        req.session_id.clone(),
                        SessionEntry {
                            created: pl.created.clone(),
                            account: a,
                            heard: now_ms,
                            subscriber: Arc::from(pl.subscriber.as_str()),
                            ended: None,
                        },
                    );
                }
                Known::Account(a)
            }
            RequestType::Update | RequestType::Termination => {
                let terminate = req.request_type == RequestType::Termination;
                let tcc = self.ctx.serving.tcc.as_millis() as u64;
                match sessions.get_mut(&req.session_id) {
                    Some(e) if e.ended.is_some() => {
                        // A retransmission of the CCR-Terminate that ended
                        // it is answered as the first; anything else is
                        // too late.
                        if terminate && e.ended == Some(req.request_number) {
                            pl.subscriber.push_str(&e.subscriber);
                            pl.created = e.created.clone();
                            Known::Account(e.account)
                        } else {
                            Known::UnknownSession
                        }
                    }
                    Some(e) if e.heard.saturating_add(tcc) >= now_ms => {
                        pl.since = Some(Timestamp(e.heard));
                        e.heard = now_ms;
                        if terminate {
                            e.ended = Some(req.request_number);
                        }
                        pl.subscriber.push_str(&e.subscriber);
                        pl.created = e.created.clone();
                        Known::Account(e.account)
                    }
                    _ => Known::LookUp,
                }
            }
        }
    }
}

/// Looks up, in one round trip, what the requests of a batch need from
/// the cluster before they can be planned, and plans them (appending to
/// `planner`'s steps):
///
/// * the sessions its shard did not know: a session the cluster holds is
///   served as if this node had opened it (and this node remembers it
///   from now on); one it does not hold is answered 5002
///   DIAMETER_UNKNOWN_SESSION_ID, charging nothing;
/// * the Subscription-Ids that are not in the charging configuration
///   (the subscriber directory of the accounts created through the
///   operator API): a claimed identity's account is charged (and
///   remembered node-wide); none claimed is answered 5030
///   DIAMETER_USER_UNKNOWN, as for an unknown subscriber.
///
/// Both go in one round trip (one pipeline of `GET`s per master). A
/// session of a created account this node does not know the plan of
/// costs one more, for the claim of its subscriber.
fn look_up(ctx: &Ctx, planner: &mut Planner, batch: &mut [Pending], now: Timestamp) {
    let waiting: Vec<usize> = (0..batch.len())
        .filter(|&i| batch[i].look_up.is_some())
        .collect();
    let finding: Vec<usize> = (0..batch.len())
        .filter(|&i| !batch[i].find.is_empty())
        .collect();
    let ids: Vec<String> = waiting
        .iter()
        .filter_map(|&i| batch[i].look_up.clone())
        .collect();
    let subs: Vec<SubscriptionId> = finding
        .iter()
        .flat_map(|&i| batch[i].find.iter().cloned())
        .collect();
    ctx.telemetry
        .session_lookups
        .fetch_add(ids.len() as u64, Relaxed);
    ctx.telemetry
        .subscriber_lookups
        .fetch_add(subs.len() as u64, Relaxed);
    // Bounded, as the batch is (see `Flush::Settle` below): a master
    // that died answers nothing until the cluster fails over.
    let bound = ctx.ledger.options().response_timeout;
    let late = |op: &'static str| gyro_store::Error::Unavailable {
        op,
        reason: format!("no answer within {bound:?}"),
    };
    let (records, claims) = {
        let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let sub_refs: Vec<&SubscriptionId> = subs.iter().collect();
        let read = async {
            let sessions = async {
                if id_refs.is_empty() {
                    Vec::new()
                } else {
                    ctx.ledger.sessions(&id_refs).await
                }
            };
            let claims = async {
                if sub_refs.is_empty() {
                    Vec::new()
                } else {
                    ctx.ledger.claims(&sub_refs).await
                }
            };
            tokio::time::timeout(bound, async { tokio::join!(sessions, claims) }).await
        };
        match ctx.rt.block_on(read) {
            Ok(r) => r,
            Err(_) => (
                ids.iter().map(|_| Err(late("GET session"))).collect(),
                subs.iter().map(|_| Err(late("GET subscriber"))).collect(),
            ),
        }
    };
    let now_ms = now.as_millis();

    // Subscribers.
    let mut claims = claims.into_iter();
    for &i in &finding {
        let asked = std::mem::take(&mut batch[i].find);
        let mut hit: Option<(usize, Arc<Created>)> = None;
        let mut failed = false;
        for (j, id) in asked.iter().enumerate() {
            match claims.next() {
                Some(Ok(Some(c))) => {
                    let created = Created::of(ctx, c.account, c.definition.as_ref());
                    ctx.remember(id, Some(created.clone()), now_ms);
                    hit = hit.or(Some((j, created)));
                }
                Some(Ok(None)) => ctx.remember(id, None, now_ms),
                Some(Err(e)) => {
                    ctx.telemetry.count_error(&e);
                    failed = true;
                }
                None => failed = true,
            }
        }
        let p = &mut batch[i];
        let Some((j, created)) = hit else {
            if failed {
                p.failed = true;
            } else {
                p.answer.result_code = rc::USER_UNKNOWN;
                p.answer.failed_avp = Some(FailedAvp::SubscriptionId);
            }
            continue;
        };
        if !planner.decode(p) {
            continue;
        }
        let id = &asked[j];
        planner.subscriber.clear();
        planner.subscriber.push_str(id.kind.name());
        planner.subscriber.push(':');
        planner.subscriber.push_str(&id.data);
        let req = &planner.request;
        if req.request_type == RequestType::Initial {
            if let Ok(mut sessions) = ctx.sessions.lock() {
                sessions.insert(
                    req.session_id.clone(),
                    SessionEntry {
                        created: Some(created.clone()),
                        account: created.account,
                        heard: now_ms,
                        subscriber: Arc::from(planner.subscriber.as_str()),
                        ended: None,
                    },
                );
            }
        }
        p.created = Some(created.account);
        planner.since = None;
        planner.created = Some(created.clone());
        p.steps = planner.steps.len()..planner.steps.len();
        planner.plan(created.account, now, p);
        p.steps.end = planner.steps.len();
    }

    // Sessions: which account, and (a created account's) its profile.
    let mut found: Vec<(usize, SessionRecord, Option<Arc<Created>>)> = Vec::new();
    let mut need: Vec<(usize, SubscriptionId)> = Vec::new();
    for (&i, record) in waiting.iter().zip(records) {
        let p = &mut batch[i];
        p.look_up = None;
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                ctx.telemetry.count_error(&e);
                p.failed = true;
                continue;
            }
        };
        if !planner.decode(p) {
            continue;
        }
        let req = &planner.request;
        let terminate = req.request_type == RequestType::Termination;
        match record {
            Some(r) if r.ended.is_none() || (terminate && r.ended == Some(req.request_number)) => {
                let id = SubscriptionId::parse(&r.subscriber).ok();
                let configured = id
                    .as_ref()
                    .and_then(|id| ctx.directory.lookup(id.kind, &id.data))
                    == Some(r.account);
                let created = match (&id, configured) {
                    (_, true) | (None, _) => None,
                    (Some(id), false) => match ctx.remembered(std::slice::from_ref(id), now_ms) {
                        Ok((_, c)) if c.account == r.account => Some(c),
                        _ => {
                            need.push((found.len(), id.clone()));
                            None
                        }
                    },
                };
                found.push((i, r, created));
            }
            _ => {
                ctx.telemetry.unknown_sessions.fetch_add(1, Relaxed);
                p.answer.result_code = rc::UNKNOWN_SESSION_ID;
            }
        }
    }
    if !need.is_empty() {
        let refs: Vec<&SubscriptionId> = need.iter().map(|(_, id)| id).collect();
        let read = async { tokio::time::timeout(bound, ctx.ledger.claims(&refs)).await };
        let claims = ctx
            .rt
            .block_on(read)
            .unwrap_or_else(|_| refs.iter().map(|_| Err(late("GET subscriber"))).collect());
        for ((n, id), claim) in need.iter().zip(claims) {
            let (i, r, created) = &mut found[*n];
            match claim {
                Ok(c) => {
                    let c = c.filter(|c| c.account == r.account);
                    let profile = Created::of(
                        ctx,
                        r.account,
                        c.as_ref().and_then(|c| c.definition.as_ref()),
                    );
                    if c.is_some() {
                        ctx.remember(id, Some(profile.clone()), now_ms);
                    }
                    *created = Some(profile);
                }
                Err(e) => {
                    ctx.telemetry.count_error(&e);
                    batch[*i].failed = true;
                }
            }
        }
    }
    for (i, r, created) in found {
        let p = &mut batch[i];
        if p.failed || !planner.decode(p) {
            continue;
        }
        let req = &planner.request;
        let terminate = req.request_type == RequestType::Termination;
        planner.subscriber.clear();
        planner.subscriber.push_str(&r.subscriber);
        // The record was written with the deadline of its request: Tcc
        // after it (every node runs the same Tcc).
        planner.since = Some(Timestamp(
            r.deadline
                .as_millis()
                .saturating_sub(ctx.serving.tcc.as_millis() as u64),
        ));
        if let Ok(mut sessions) = ctx.sessions.lock() {
            sessions.insert(
                req.session_id.clone(),
                SessionEntry {
                    created: created.clone(),
                    account: r.account,
                    heard: now_ms,
                    subscriber: Arc::from(r.subscriber.as_str()),
                    ended: terminate.then_some(req.request_number),
                },
            );
        }
        p.created = created.as_ref().map(|c| c.account);
        planner.created = created;
        p.steps = planner.steps.len()..planner.steps.len();
        planner.plan(r.account, now, p);
        p.steps.end = planner.steps.len();
    }
}

/// Turns decoded requests into steps: the shard's for the requests of
/// its turn, and the batch job's for those whose session it had to look
/// up first.
struct Planner {
    ctx: Arc<Ctx>,
    request: CcRequest,
    /// The request's subscriber (`kind:data`), for its CDRs.
    subscriber: String,
    /// The profile of the request's account when it was created through
    /// the operator API (none: an account of the charging configuration).
    created: Option<Arc<Created>>,
    /// When the request's session was last heard of before it (Unix ms;
    /// none for a CCR-Initial or -Event): when its reservations were
    /// made, the start of the usage it reports.
    since: Option<Timestamp>,
    steps: Vec<PlannedStep>,
}

impl Planner {
    /// Adds a step the first interval does not concern.
    fn push(&mut self, step: Step) {
        self.steps.push(step.into());
    }

    /// Decodes a held-back request again (`false`, and the request marked
    /// failed, when it does not decode).
    fn decode(&mut self, p: &mut Pending) -> bool {
        let decoded = Message::parse(&p.request)
            .map_err(|_| ())
            .and_then(|m| gy::decode_ccr(&m, &mut self.request).map_err(|_| ()));
        if decoded.is_err() {
            p.failed = true;
        }
        decoded.is_ok()
    }

    /// Rates `key` for `account` now: the plan and rate (indices into
    /// the catalog) and the tariff.
    fn rate<'c>(
        ctx: &'c Ctx,
        created: Option<&Created>,
        request: &CcRequest,
        account: AccountId,
        key: RatingKey,
        now: Timestamp,
    ) -> RateResult<'c> {
        let plan = match created {
            Some(c) => c.plan,
            None => ctx.plans.get(&account).copied().or(ctx.default_plan),
        };
        let Some((pi, p)) = plan.and_then(|i| Some((i, ctx.catalog.plan(i)?))) else {
            return Err(RatingError::NoTariff);
        };
        let loc = ctx
            .catalog
            .locate(&request.called_party, &request.visited_plmn);
        let choice = p.rate_at(&request.service_context, key, loc, now)?;
        let t = p.rate(choice.rate).ok_or(RatingError::NoTariff)?;
        Ok(((pi, choice.rate), p, t, choice.change))
    }

    /// The bundle definitions of `account`: a created account's own, else
    /// the charging configuration's (empty when it has none).
    fn bundle_defs<'a>(
        ctx: &'a Ctx,
        created: Option<&'a Created>,
        account: AccountId,
    ) -> &'a [Bundle] {
        match created {
            Some(c) => &c.bundles,
            None => ctx.bundles.get(&account).map_or(&[], |b| &b[..]),
        }
    }

    /// The bundles of `defs` (an account's, [`Self::bundle_defs`]) that
    /// may pay for `key` in `t`'s unit now, in the account's order, with
    /// `t`'s prices (`first`: its first interval applies, as to an
    /// event); none when the tariff is free or the account has no bundles
    /// (`all`: also when none of them applies now, so that a usage report
    /// still draws on the bundle units its reservation holds).
    fn bundle_use(
        defs: &[Bundle],
        key: RatingKey,
        t: &Tariff,
        now: Timestamp,
        first: bool,
        all: bool,
    ) -> Option<BundleUse> {
        if t.is_free() || defs.is_empty() {
            return None;
        }
        let bundles: Vec<u32> = defs
            .iter()
            .filter(|b| b.applies(key, t.unit, now))
            .map(|b| b.id)
            .collect();
        if bundles.is_empty() && !all {
            return None;
        }
        Some(BundleUse {
            bundles,
            pricing: Pricing::of(t, first),
        })
    }

    /// The CDR of a usage or event of `key`.
    fn cdr(
        &self,
        key: RatingKey,
        plan: &str,
        t: &Tariff,
        used: &ServiceUnits,
        now: Timestamp,
    ) -> Cdr {
        let r = &self.request;
        Cdr {
            record_type: if r.request_type == RequestType::Event {
                RecordType::Event
            } else {
                RecordType::Usage
            },
            session_id: r.session_id.clone(),
            subscriber: self.subscriber.clone(),
            service_context: r.service_context.clone(),
            interface: r.interface,
            rating_group: key.rating_group,
            service_id: key.service_id,
            request_number: r.request_number,
            requested_action: r.requested_action,
            unit: Some(t.unit),
            time: used.time.map_or(0, u64::from),
            input_octets: used.input_octets.unwrap_or(0),
            output_octets: used.output_octets.unwrap_or(0),
            total_octets: used
                .total_octets
                .unwrap_or(used.input_octets.unwrap_or(0) + used.output_octets.unwrap_or(0)),
            service_units: used.service_specific.unwrap_or(0),
            rated_units: used.amount(t.unit).unwrap_or(0),
            result_code: rc::SUCCESS,
            started: now,
            ended: now,
            termination_cause: r.termination_cause,
            plan: plan.to_string(),
            rate: t.name.clone(),
            ..Cdr::default()
        }
    }

    /// Turns the decoded request into steps (appended to the batch) and
    /// the parts of its answer that wait for them; fills in what needs no
    /// step.
    fn plan(&mut self, account: AccountId, now: Timestamp, p: &mut Pending) {
        let req_type = self.request.request_type;
        if req_type == RequestType::Event {
            return self.plan_event(account, now, p);
        }
        let created = self.created.clone();
        let use_mscc =
            self.request.multiple_services == Some(true) || !self.request.mscc.is_empty();
        let services: Vec<Service> = if use_mscc {
            self.request
                .mscc
                .iter()
                .enumerate()
                .map(|(i, m)| (Some(i), m.key(), m.used, m.requested, m.reporting_reason))
                .collect()
        } else {
            let requested = match req_type {
                // Single-service CCR-Initial: quota is implied.
                RequestType::Initial => Some(self.request.requested.unwrap_or_default()),
                _ => self.request.requested,
            };
            vec![(
                None,
                RatingKey {
                    rating_group: None,
                    service_id: self.request.service_id,
                },
                self.request.used,
                requested,
                None,
            )]
        };
        let ctx = self.ctx.clone();
        let defs = Self::bundle_defs(&ctx, created.as_deref(), account);
        let tcc_ms = ctx.serving.tcc.as_millis() as u64;
        let session = self.request.session_id.clone();
        let number = self.request.request_number;
        for (mscc, key, used, requested, reason) in services {
            let mut ma = MsccAnswer {
                rating_group: key.rating_group,
                service_id: key.service_id,
                result_code: rc::SUCCESS,
                ..MsccAnswer::default()
            };
            match Self::rate(&ctx, created.as_deref(), &self.request, account, key, now) {
                Err(e) => {
                    ma.result_code = rc::RATING_FAILED;
                    if p.answer.failed_avp.is_none() && req_type != RequestType::Termination {
                        p.answer.failed_avp = Some(failed_for(key, e));
                    }
                }
                Ok((rate, plan, t, change)) => {
                    ma.unit = Some(t.unit);
                    if let Some(u) = used {
                        // A report that may be of REDIRECT or
                        // RESTRICT_ACCESS final units: whether it is
                        // depends on the reservation (settle_one).
                        let final_units = t
                            .validity_time
                            .filter(|_| {
                                req_type == RequestType::Update
                                    && t.final_unit.action != FinalUnitAction::Terminate
                                    && t.zero_rated != Some(ZeroRated::NotApplicable)
                            })
                            .map(|v| (mscc.map(|_| p.answer.mscc.len()), v));
                        self.plan_usage(
                            account,
                            now,
                            p,
                            mscc,
                            key,
                            &u,
                            reason,
                            (rate, change),
                            final_units,
                        );
                    } else if requested.is_some() && req_type != RequestType::Initial {
                        let n = self.steps.len() as u32;
                        self.push(Step::Release(Release {
                            account,
                            request: request_key(&session, number, n - p.steps.start as u32),
                            session: session.clone(),
                            key,
                        }));
                        p.parts.push(Part::Usage {
                            step: self.steps.len() - 1,
                        });
                    }
                    if t.zero_rated == Some(ZeroRated::NotApplicable) {
                        ma.result_code = rc::CREDIT_CONTROL_NOT_APPLICABLE;
                    } else if let (Some(rq), true) =
                        (requested, req_type != RequestType::Termination)
                    {
                        let want = rq
                            .amount(t.unit)
                            .filter(|&n| n > 0)
                            .unwrap_or(t.default_quota);
                        // A price change before the grant expires: the
                        // grant is paid at the dearer price (the engine's
                        // rule), and tells the client when it changes.
                        let after = Self::change_within(plan, t, change, want, now);
                        let free = t.is_free() && after.is_none_or(|(_, a)| a.is_free());
                        // The session's first grant: its first interval
                        // applies (the engine's rule).
                        let first = req_type == RequestType::Initial
                            && (t.first_interval > 0
                                || after.is_some_and(|(_, a)| a.first_interval > 0));
                        let cost = |u: u64| grant_cost(t, after.map(|(_, a)| a), u, first);
                        let money = if free { 0 } else { cost(want) };
                        let min_money = if free {
                            0
                        } else {
                            cost(t.increment.min(want).max(1))
                        };
                        // The ledger prices a partial grant (and what
                        // bundles leave to money) with one tariff: the
                        // dearer for the units asked.
                        let dear = match after {
                            Some((_, a)) if a.cost_of(want, first) > t.cost_of(want, first) => a,
                            _ => t,
                        };
                        let n = self.steps.len() as u32;
                        let reserve = Reserve {
                            account,
                            request: request_key(&session, number, n - p.steps.start as u32),
                            session: session.clone(),
                            key,
                            money,
                            units: want,
                            min_money,
                            expires: Timestamp(now.as_millis().saturating_add(tcc_ms)),
                            // Always with the tariff: a partial grant is
                            // priced as the engine prices it (whole
                            // increments, and only their price reserved).
                            bundles: Self::bundle_use(defs, key, t, now, false, false)
                                .map(|mut b| {
                                    b.pricing = Pricing::of(dear, first);
                                    b
                                })
                                .or_else(|| {
                                    (!free).then(|| BundleUse {
                                        bundles: Vec::new(),
                                        pricing: Pricing::of(dear, first),
                                    })
                                }),
                        };
                        // The CCR-Initial's reservations are the opening
                        // ones: the first usage reported against each
                        // pays the first interval (`plan_usage`).
                        self.steps.push(PlannedStep {
                            step: Step::Reserve(reserve),
                            first_interval: (req_type == RequestType::Initial)
                                .then_some(FirstInterval::Opening),
                        });
                        p.parts.push(Part::Grant {
                            mscc: mscc.map(|_| p.answer.mscc.len()),
                            step: self.steps.len() - 1,
                            want,
                            money,
                            rate,
                            change: after.map(|(at, _)| at).zip(change.map(|c| c.1)),
                            first,
                        });
                    }
                }
            }
            // A CCR-Terminate's answer carries no MSCC (the session is
            // over, whatever its services' usage came to).
            if req_type == RequestType::Termination {
                continue;
            }
            if mscc.is_some() {
                p.answer.mscc.push(ma);
            } else {
                p.answer.result_code = ma.result_code;
            }
        }
        // The session's record, for the other nodes: written at the
        // CCR-Initial, renewed (deadline and owner) by every CCR-Update,
        // marked ended by the CCR-Terminate, which also releases what the
        // session still holds (services it did not report).
        let mut ended = None;
        let mut ttl = ctx.serving.tcc;
        if req_type == RequestType::Termination {
            let n = self.steps.len() as u32;
            self.push(Step::End(EndSession {
                account,
                request: request_key(&session, number, n - p.steps.start as u32),
                session: session.clone(),
            }));
            p.parts.push(Part::Usage {
                step: self.steps.len() - 1,
            });
            ended = Some(number);
            ttl = ctx.serving.ended_memory;
        }
        self.push(Step::Session(PutSession {
            session,
            record: SessionRecord {
                account,
                subscriber: self.subscriber.clone(),
                service_context: self.request.service_context.clone(),
                owner: ctx.ledger.options().node_id.clone(),
                deadline: Timestamp(now.as_millis().saturating_add(tcc_ms)),
                ended,
            },
            ttl,
        }));
    }

    /// The price change within a grant of `want` units of `t` made now
    /// (as the engine finds it): when, and the tariff after it; none when
    /// the price does not change before the grant expires (its
    /// Validity-Time; for seconds without one, the seconds granted).
    fn change_within<'c>(
        plan: &'c gyro_charging::Plan,
        t: &Tariff,
        change: Option<(Timestamp, u16)>,
        want: u64,
        now: Timestamp,
    ) -> Option<(Timestamp, &'c Tariff)> {
        let horizon = match (t.validity_time, t.unit) {
            (Some(v), _) => now.plus_secs(u64::from(v)),
            (None, UnitKind::Seconds) => now.plus_secs(want),
            (None, _) => Timestamp(u64::MAX),
        };
        change
            .filter(|&(at, _)| at < horizon)
            .and_then(|(at, r)| plan.rate(r).map(|a| (at, a)))
    }

    /// The Debits of the usage `used` reported for `key` (`mscc`: its
    /// MSCC's index in the request), priced as the engine prices it: at
    /// the rate in force when the usage began (the session's previous
    /// request, when its reservation was made), in two parts when the
    /// price changed since and the client reported units after the change
    /// (Tariff-Change-Usage UNIT_AFTER_TARIFF_CHANGE) or, for seconds,
    /// seconds have passed since it. Each part writes its usage CDR; the
    /// last releases what is left of the reservation. `now_rating`: the
    /// plan and rate in force now, and their next price change.
    /// `final_units`: where the answer's Validity-Time goes and what it is
    /// when the report uses up the reservation ([`Part::FinalUnits`]).
    #[allow(clippy::too_many_arguments)]
    fn plan_usage(
        &mut self,
        account: AccountId,
        now: Timestamp,
        p: &mut Pending,
        mscc: Option<usize>,
        key: RatingKey,
        used: &ServiceUnits,
        reason: Option<u32>,
        now_rating: ((u16, u16), Option<(Timestamp, u16)>),
        final_units: Option<(Option<usize>, u32)>,
    ) {
        let ctx = self.ctx.clone();
        let created = self.created.clone();
        let defs = Self::bundle_defs(&ctx, created.as_deref(), account);
        let ((plan_i, now_rate), now_change) = now_rating;
        let start = self.since.filter(|&s| s < now).unwrap_or(now);
        let (rate_i, change) = if start == now {
            (now_rate, now_change)
        } else {
            match Self::rate(&ctx, created.as_deref(), &self.request, account, key, start) {
                Ok(((pi, ri), _, _, change)) if pi == plan_i => (ri, change),
                _ => (now_rate, now_change),
            }
        };
        let Some(plan) = ctx.catalog.plan(plan_i) else {
            return;
        };
        let unit = plan.rate(now_rate).map_or(UnitKind::Octets, |t| t.unit);
        let total = used.amount(unit).unwrap_or(0);
        let after_report = match mscc {
            Some(i) => self.request.mscc.get(i).and_then(|m| m.used_after),
            None => self.request.used_after,
        };
        // (units, rate, side of the change, started, ended)
        let mut pieces = vec![(total, rate_i, None, start, now)];
        if let Some((at, next)) = change {
            let after_units = match (after_report, unit) {
                (Some(a), _) => a.amount(unit).unwrap_or(0).min(total),
                (None, UnitKind::Seconds) if at <= now => ((now.0 - at.0) / 1000).min(total),
                (None, _) => 0,
            };
            if after_report.is_some() || after_units > 0 {
                let switch = at.min(now);
                pieces = vec![
                    (
                        total - after_units,
                        rate_i,
                        Some(TariffChangeUsage::Before),
                        start,
                        switch,
                    ),
                    (
                        after_units,
                        next,
                        Some(TariffChangeUsage::After),
                        switch,
                        now,
                    ),
                ];
            }
        }
        // The counters after the change: as reported, or (seconds gyro
        // split) the seconds past it.
        let after = (pieces.len() == 2)
            .then(|| after_report.unwrap_or_else(|| ServiceUnits::of(unit, pieces[1].0)));
        let session = self.request.session_id.clone();
        let number = self.request.request_number;
        let last = pieces.len() - 1;
        for (n, (units, rate, side, started, ended)) in pieces.into_iter().enumerate() {
            let Some(t) = plan.rate(rate) else {
                continue;
            };
            let shown = match (side, &after) {
                (Some(TariffChangeUsage::Before), Some(a)) => used.minus(a),
                (Some(TariffChangeUsage::After), Some(a)) => *a,
                _ => *used,
            };
            let mut cdr = self.cdr(key, &plan.name, t, &shown, now);
            // The units rated: rounded up to the increment (the ledger
            // writes what it rated, with the first interval when the
            // reservation pays it).
            cdr.rated_units = t.rated_units(units, false);
            cdr.started = started;
            cdr.ended = ended;
            cdr.tariff_change = side;
            cdr.reporting_reason = reason;
            let i = self.steps.len() as u32;
            let debit = Debit {
                account,
                request: request_key(&session, number, i - p.steps.start as u32),
                reservation: Some((session.clone(), key)),
                amount: t.cost_of(units, false),
                release: n == last,
                whole: false,
                cdr,
                // Always the units used (the ledger rounds them, then
                // bundles pay, then money), with the bundles that may
                // pay; none for a free tariff.
                bundles: Self::bundle_use(defs, key, t, now, false, true)
                    .or_else(|| {
                        (!t.is_free()).then(|| BundleUse {
                            bundles: Vec::new(),
                            pricing: Pricing::of(t, false),
                        })
                    })
                    .map(|b| (units, b)),
            };
            // The engine's rule: the reservation the CCR-Initial made pays
            // the first interval when its usage is first reported (the
            // first part's), whichever request reports it; the ledger
            // knows which request made the reservation, and picks the
            // price. A reservation an earlier library version wrote does
            // not say: it counts as the opening one when the report is
            // the session's request number 1 (the rule then).
            self.steps.push(PlannedStep {
                step: Step::Debit(debit),
                first_interval: (n == 0 && t.first_interval > 0 && !t.is_free()).then(|| {
                    FirstInterval::Usage {
                        opening_amount: t.cost_of(units, true),
                        first_interval: t.first_interval,
                        unmarked_opening: number == 1,
                    }
                }),
            });
            // The first Debit's answer says what the reservation granted
            // (the later one sees it debited).
            let step = self.steps.len() - 1;
            p.parts.push(match final_units {
                Some((mscc, validity)) if n == 0 => Part::FinalUnits {
                    step,
                    mscc,
                    used: total,
                    validity,
                },
                _ => Part::Usage { step },
            });
        }
    }

    /// A CCR-Event.
    fn plan_event(&mut self, account: AccountId, now: Timestamp, p: &mut Pending) {
        let Some(action) = self.request.requested_action else {
            p.answer.result_code = rc::MISSING_AVP;
            p.answer.failed_avp = Some(FailedAvp::RequestedAction);
            return;
        };
        let (key, units_avp, in_mscc) = match self.request.mscc.first() {
            Some(m) => (m.key(), m.requested.or(m.used), true),
            None => (
                RatingKey {
                    rating_group: None,
                    service_id: self.request.service_id,
                },
                self.request.requested.or(self.request.used),
                false,
            ),
        };
        let ctx = self.ctx.clone();
        let created = self.created.clone();
        let defs = Self::bundle_defs(&ctx, created.as_deref(), account);
        let (plan, t) = match Self::rate(&ctx, created.as_deref(), &self.request, account, key, now)
        {
            Ok((_, p, t, _)) => ((&*p.name, p.currency), t),
            Err(e) => {
                p.answer.result_code = rc::RATING_FAILED;
                p.answer.failed_avp = Some(failed_for(key, e));
                return;
            }
        };
        let units = units_avp
            .and_then(|u| u.amount(t.unit))
            .filter(|&n| n > 0)
            .unwrap_or(t.default_quota);
        let cost = t.cost(units);
        let cost_info = CostInformation {
            value_digits: cost,
            exponent: -i32::from(plan.1.exponent),
            currency_code: plan.1.code,
        };
        let session = self.request.session_id.clone();
        let number = self.request.request_number;
        let used = units_avp.unwrap_or_else(|| ServiceUnits::of(t.unit, units));
        let mscc = in_mscc.then(|| {
            p.answer.mscc.push(MsccAnswer {
                rating_group: key.rating_group,
                service_id: key.service_id,
                result_code: rc::SUCCESS,
                unit: Some(t.unit),
                ..MsccAnswer::default()
            });
            0
        });
        let not_applicable = t.zero_rated == Some(ZeroRated::NotApplicable);
        // The free bundle units an event may use, all or nothing.
        let event_bundles = || Self::bundle_use(defs, key, t, now, true, false);
        match action {
            RequestedAction::DirectDebiting if not_applicable => {
                set_code(&mut p.answer, mscc, rc::CREDIT_CONTROL_NOT_APPLICABLE)
            }
            RequestedAction::RefundAccount if not_applicable => {
                set_code(&mut p.answer, mscc, rc::CREDIT_CONTROL_NOT_APPLICABLE)
            }
            RequestedAction::DirectDebiting => {
                let mut cdr = self.cdr(key, plan.0, t, &used, now);
                cdr.rated_units = t.rated_units(units, true);
                self.push(Step::Debit(Debit {
                    account,
                    request: request_key(&session, number, 0),
                    reservation: None,
                    amount: cost,
                    release: false,
                    whole: true,
                    cdr,
                    bundles: event_bundles().map(|b| (units, b)),
                }));
                p.answer.cost = Some(cost_info);
                p.parts.push(Part::Event {
                    mscc,
                    step: self.steps.len() - 1,
                    units,
                    unit: t.unit,
                });
            }
            RequestedAction::RefundAccount => {
                let mut cdr = self.cdr(key, plan.0, t, &used, now);
                cdr.rated_units = t.rated_units(units, true);
                self.push(Step::Refund(Refund {
                    account,
                    request: request_key(&session, number, 0),
                    amount: cost,
                    cdr,
                }));
                p.answer.cost = Some(cost_info);
                p.parts.push(Part::Refund {
                    step: self.steps.len() - 1,
                });
            }
            RequestedAction::PriceEnquiry | RequestedAction::CheckBalance => {
                // Read in the batch: is the account blocked, could it pay
                // for the units now (free bundle units first)? Nothing is
                // charged; the step writes the event CDR (amount 0, the
                // step's Result-Code), as the embedded store does.
                let enquiry = action == RequestedAction::PriceEnquiry;
                if enquiry {
                    p.answer.cost = Some(cost_info);
                }
                let shown = units_avp.unwrap_or_default();
                let mut cdr = self.cdr(key, plan.0, t, &shown, now);
                cdr.rated_units = 0;
                self.push(Step::Check(CheckBalance {
                    account,
                    request: request_key(&session, number, 0),
                    money: cost,
                    units,
                    bundles: if enquiry { None } else { event_bundles() },
                    cdr: Some(cdr),
                }));
                p.parts.push(Part::Check {
                    mscc,
                    step: self.steps.len() - 1,
                    enquiry,
                });
            }
        }
    }
}

impl RedisShard {
    /// The answer of a request whose steps have answered (`None`: a step
    /// failed; the request is answered 3004).
    fn settle_one(p: &mut Pending, results: &[gyro_store::Result<Answer>], ctx: &Ctx) -> bool {
        let telemetry = &ctx.telemetry;
        for r in &results[p.steps.clone()] {
            match r {
                Err(e) => {
                    telemetry.count_error(e);
                    return false;
                }
                Ok(a) if a.replayed => {
                    telemetry.replayed.fetch_add(1, Relaxed);
                }
                Ok(_) => {}
            }
        }
        let mut unknown = false;
        let mut blocked = false;
        for part in &p.parts {
            match part {
                Part::Grant {
                    mscc,
                    step,
                    want,
                    money,
                    rate,
                    change,
                    first,
                } => {
                    let Some(Ok(a)) = results.get(*step) else {
                        return false;
                    };
                    let Some(plan) = ctx.catalog.plan(rate.0) else {
                        return false;
                    };
                    let Some(t) = plan.rate(rate.1) else {
                        return false;
                    };
                    let after = change.and_then(|(_, r)| plan.rate(r));
                    let (code, units) = match a.outcome {
                        // Bundles gave units: the ledger bought the rest
                        // as the engine does (all, or whole increments).
                        Outcome::Reserved {
                            units,
                            bundle_units,
                            ..
                        } if bundle_units > 0 => (
                            a.code,
                            // Holds are whole increments: at most the
                            // units asked are granted.
                            bundle_units.saturating_add(units).min(*want),
                        ),
                        // A partial grant: what the money reserved pays
                        // for in whole increments, as the engine grants
                        // (the ledger reserved just their price).
                        Outcome::Reserved { money: got, .. } if got < *money => (
                            a.code,
                            affordable(t.increment, got, *want, |u| {
                                grant_cost(t, after, u, *first)
                            }),
                        ),
                        Outcome::Reserved { units, .. } => (a.code, units),
                        _ => (a.code, 0),
                    };
                    unknown |= code == rc::USER_UNKNOWN;
                    blocked |= code == rc::END_USER_SERVICE_DENIED;
                    let code = if code == rc::SUCCESS && units == 0 && *want > 0 {
                        rc::CREDIT_LIMIT_REACHED
                    } else {
                        code
                    };
                    let mut g = MsccAnswer {
                        result_code: code,
                        ..MsccAnswer::default()
                    };
                    if code == rc::SUCCESS {
                        let mut gsu = ServiceUnits::of(t.unit, units);
                        if t.unit != UnitKind::Seconds {
                            gsu.tariff_time_change = change.map(|c| c.0);
                        }
                        g.granted = Some(gsu);
                        g.validity_time = t.validity_time;
                        g.volume_quota_threshold = t.volume_quota_threshold;
                        g.time_quota_threshold = t.time_quota_threshold;
                        g.quota_holding_time = t.quota_holding_time;
                        if units < *want {
                            g.final_unit = Some(t.final_unit.clone());
                        }
                    }
                    // Nothing left (4012) after a report of final units:
                    // the Validity-Time that gave it stays.
                    let keep = code == rc::CREDIT_LIMIT_REACHED;
                    match mscc.and_then(|i| p.answer.mscc.get_mut(i)) {
                        Some(m) => {
                            m.result_code = g.result_code;
                            m.granted = g.granted;
                            if !keep {
                                m.validity_time = g.validity_time;
                            }
                            m.volume_quota_threshold = g.volume_quota_threshold;
                            m.time_quota_threshold = g.time_quota_threshold;
                            m.quota_holding_time = g.quota_holding_time;
                            m.final_unit = g.final_unit;
                        }
                        None => {
                            p.answer.result_code = g.result_code;
                            p.answer.granted = g.granted;
                            if !keep {
                                p.answer.validity_time = g.validity_time;
                            }
                            p.answer.final_unit = g.final_unit;
                        }
                    }
                }
                Part::Check {
                    mscc,
                    step,
                    enquiry,
                } => {
                    let Some(Ok(a)) = results.get(*step) else {
                        return false;
                    };
                    unknown |= a.code == rc::USER_UNKNOWN;
                    set_code(&mut p.answer, *mscc, a.code);
                    if *enquiry {
                        if a.code != rc::SUCCESS {
                            p.answer.cost = None;
                        }
                    } else if let (rc::SUCCESS, Outcome::Checked { enough, .. }) =
                        (a.code, &a.outcome)
                    {
                        p.answer.check_balance = Some(if *enough {
                            CheckBalanceResult::EnoughCredit
                        } else {
                            CheckBalanceResult::NoCredit
                        });
                    }
                }
                Part::Usage { step } | Part::Refund { step } => {
                    if let Some(Ok(a)) = results.get(*step) {
                        unknown |= a.code == rc::USER_UNKNOWN;
                    }
                }
                Part::FinalUnits {
                    step,
                    mscc,
                    used,
                    validity,
                } => {
                    let Some(Ok(a)) = results.get(*step) else {
                        continue;
                    };
                    unknown |= a.code == rc::USER_UNKNOWN;
                    // A Debit answer remembered by library version 9
                    // or earlier (a retransmission of a request answered
                    // then) does not say what the reservation granted:
                    // not final units.
                    if let (
                        rc::SUCCESS,
                        Outcome::Debited {
                            granted: Some(g), ..
                        },
                    ) = (a.code, &a.outcome)
                    {
                        if *g > 0 && used >= g {
                            match mscc.and_then(|i| p.answer.mscc.get_mut(i)) {
                                Some(m) => m.validity_time = Some(*validity),
                                None => p.answer.validity_time = Some(*validity),
                            }
                        }
                    }
                }
                Part::Event {
                    mscc,
                    step,
                    units,
                    unit,
                } => {
                    let Some(Ok(a)) = results.get(*step) else {
                        return false;
                    };
                    set_code(&mut p.answer, *mscc, a.code);
                    if let (Outcome::Debited { charged, .. }, Some(cost)) =
                        (&a.outcome, p.answer.cost.as_mut())
                    {
                        // What money paid (bundles may have paid the rest).
                        cost.value_digits = *charged;
                    }
                    if a.code == rc::SUCCESS {
                        let g = Some(ServiceUnits::of(*unit, *units));
                        match mscc.and_then(|i| p.answer.mscc.get_mut(i)) {
                            Some(m) => m.granted = g,
                            None => p.answer.granted = g,
                        }
                    } else {
                        p.answer.cost = None;
                    }
                }
            }
        }
        if unknown {
            if let Some(account) = p.created {
                // A claim whose account does not exist (deleted, or its
                // creation never finished): ask the cluster again next
                // time.
                ctx.forget(account);
            }
            p.answer.result_code = rc::USER_UNKNOWN;
            p.answer.validity_time = None;
            p.answer.mscc.clear();
            p.answer.failed_avp = Some(FailedAvp::SubscriptionId);
        } else if blocked && p.answer.request_type == RequestType::Initial {
            p.answer.result_code = rc::END_USER_SERVICE_DENIED;
            p.answer.mscc.clear();
        } else if !p.answer.mscc.is_empty()
            && p.answer.request_type == RequestType::Initial
            && !p.answer.mscc.iter().any(|m| m.result_code == rc::SUCCESS)
        {
            // The engine's rule: a CCR-Initial none of whose services
            // succeeded fails with the first one's code; a CCR-Update
            // whose services all failed (4012 each, say) is answered 2001
            // and its session stays open.
            p.answer.result_code = p.answer.mscc[0].result_code;
        }
        true
    }

    /// Forgets sessions this node would not serve from memory any more:
    /// open ones not heard of for Tcc (they are looked up again), ended
    /// ones after the ended memory, any after the session memory.
    fn prune(&mut self, now_ms: u64) {
        if now_ms.saturating_sub(self.last_prune) < 10_000 || self.index != 0 {
            return;
        }
        self.last_prune = now_ms;
        let serving = &self.ctx.serving;
        let ms = |d: Duration| d.as_millis() as u64;
        let most = ms(serving.session_memory);
        let (open, ended) = (
            ms(serving.tcc).min(most),
            ms(serving.ended_memory).min(most),
        );
        if let Ok(mut s) = self.ctx.sessions.lock() {
            s.retain(|_, e| {
                let keep = if e.ended.is_some() { ended } else { open };
                now_ms.saturating_sub(e.heard) <= keep
            });
        }
        // Identities found not to be in the cluster's directory are asked
        // again after a second anyway: forget them (requests for unknown
        // subscribers must not grow the memory).
        if let Ok(mut f) = self.ctx.found.lock() {
            f.retain(|_, e| {
                e.created.is_some() || now_ms.saturating_sub(e.at) < NOT_FOUND_MEMORY_MS
            });
        }
    }
}

/// Runs steps as one group commit, bounded: the client's own timeouts
/// and retries may add up to more than a gateway waits while a master is
/// dead; past the bound every step is answered 3004 (it may have run; a
/// retry is answered from what Redis remembers).
fn run_bounded(
    ctx: &Ctx,
    steps: &[PlannedStep],
    now: Timestamp,
) -> Vec<gyro_store::Result<Answer>> {
    let o = ctx.ledger.options();
    let bound = o.response_timeout * 2 + o.wait_timeout;
    ctx.rt
        .block_on(async { tokio::time::timeout(bound, ctx.ledger.run_planned(steps, now)).await })
        .unwrap_or_else(|_| {
            steps
                .iter()
                .map(|_| {
                    Err(gyro_store::Error::Unavailable {
                        op: "pipeline",
                        reason: format!("no answer within {bound:?}"),
                    })
                })
                .collect()
        })
}

/// The CCR-Initials and -Events of a batch charged to an account this
/// node remembered from the cluster's subscriber directory whose steps
/// found no such account (5030: deleted through another node since, its
/// subscriber perhaps given a new account): the account is forgotten,
/// their Subscription-Ids looked up again, and their new steps run (one
/// more round trip each, only then). What the first steps did on the
/// missing account is nothing (each answered 5030).
fn redo_vanished(
    ctx: &Arc<Ctx>,
    batch: &mut [Pending],
    steps: Vec<PlannedStep>,
    mut results: Vec<gyro_store::Result<Answer>>,
    now: Timestamp,
) -> (Vec<PlannedStep>, Vec<gyro_store::Result<Answer>>) {
    let vanished = |p: &Pending| {
        p.cached
            && results.get(p.steps.clone()).is_some_and(|r| {
                r.iter()
                    .any(|r| matches!(r, Ok(a) if a.code == rc::USER_UNKNOWN))
            })
    };
    let redo: Vec<usize> = (0..batch.len()).filter(|&i| vanished(&batch[i])).collect();
    if redo.is_empty() {
        return (steps, results);
    }
    let start = steps.len();
    let mut planner = Planner {
        ctx: ctx.clone(),
        request: CcRequest::default(),
        subscriber: String::new(),
        created: None,
        since: None,
        steps,
    };
    for &i in &redo {
        let p = &mut batch[i];
        if let Some(a) = p.created.take() {
            ctx.forget(a);
        }
        p.cached = false;
        p.parts.clear();
        p.steps = 0..0;
        if !planner.decode(p) {
            continue;
        }
        let req = &planner.request;
        p.answer = CcAnswer::default();
        p.answer.reset(req.request_type, req.request_number);
        p.find = req.subscription_ids.clone();
    }
    look_up(ctx, &mut planner, batch, now);
    results.extend(run_bounded(ctx, &planner.steps[start..], now));
    (planner.steps, results)
}

/// One service of a session request: its MSCC (none: the command level),
/// rating key, used and requested units, Reporting-Reason.
type Service = (
    Option<usize>,
    RatingKey,
    Option<ServiceUnits>,
    Option<ServiceUnits>,
    Option<u32>,
);

/// A rating: the plan and rate (indices into the catalog), the plan, the
/// tariff, and when the price changes next (and to which rate).
type RateResult<'a> = std::result::Result<
    (
        (u16, u16),
        &'a gyro_charging::Plan,
        &'a Tariff,
        Option<(Timestamp, u16)>,
    ),
    RatingError,
>;

/// The money a grant of `units` of `t` holds: at the dearer of `t` and
/// `after` when the price changes within the grant (the engine's rule).
/// `first`: the first interval applies.
fn grant_cost(t: &Tariff, after: Option<&Tariff>, units: u64, first: bool) -> i64 {
    let now = t.cost_of(units, first);
    after.map_or(now, |a| now.max(a.cost_of(units, first)))
}

/// The Failed-AVP for a rating error of `key` (as the engine names it).
fn failed_for(key: RatingKey, err: RatingError) -> FailedAvp {
    match (err, key.service_id, key.rating_group) {
        (RatingError::UnknownContext, _, _) => FailedAvp::ServiceContextId,
        (_, Some(s), _) => FailedAvp::ServiceIdentifier(s),
        (_, None, Some(rg)) => FailedAvp::RatingGroup(rg),
        (_, None, None) => FailedAvp::ServiceContextId,
    }
}

/// Sets the Result-Code of an event's answer (and of its MSCC).
fn set_code(answer: &mut CcAnswer, mscc: Option<usize>, code: u32) {
    answer.result_code = code;
    if let Some(m) = mscc.and_then(|i| answer.mscc.get_mut(i)) {
        m.result_code = code;
    }
}

impl Shard for RedisShard {
    fn handle(&mut self, req: &Message<'_>, now_ms: u64, out: &mut BytesMut) {
        if req.command_code() != cmd::CREDIT_CONTROL {
            self.reject(req, result::COMMAND_UNSUPPORTED, 0, out);
            self.totals()
                .telemetry
                .answered(telemetry::OTHER_COMMAND, result::COMMAND_UNSUPPORTED);
            return;
        }
        if let Err(e) = gy::decode_ccr(req, &mut self.planner.request) {
            let (code, avp_code) = e.answer_codes();
            self.reject(req, code, avp_code, out);
            let kind = telemetry::kind_of_message(req);
            self.totals().telemetry.answered(kind, code);
            return;
        }
        let kind = telemetry::kind_of(self.planner.request.request_type);
        let now = Timestamp(now_ms);
        let mut answer = CcAnswer::default();
        answer.reset(
            self.planner.request.request_type,
            self.planner.request.request_number,
        );
        let at = self.planner.steps.len();
        let mut p = Pending {
            request: Vec::new(),
            answer,
            parts: Vec::new(),
            steps: at..at,
            kind,
            look_up: None,
            failed: false,
            find: Vec::new(),
            created: None,
            cached: false,
        };
        match self.known(now_ms) {
            Known::UnknownUser => {
                p.answer.result_code = rc::USER_UNKNOWN;
                p.answer.failed_avp = Some(FailedAvp::SubscriptionId);
            }
            Known::UnknownSession => {
                self.ctx.telemetry.unknown_sessions.fetch_add(1, Relaxed);
                p.answer.result_code = rc::UNKNOWN_SESSION_ID;
            }
            Known::LookUp => p.look_up = Some(self.planner.request.session_id.clone()),
            Known::Find => p.find = self.planner.request.subscription_ids.clone(),
            Known::Account(account) => {
                p.created = self.planner.created.as_ref().map(|c| c.account);
                p.cached = p.created.is_some()
                    && matches!(
                        self.planner.request.request_type,
                        RequestType::Initial | RequestType::Event
                    );
                self.planner.plan(account, now, &mut p)
            }
        }
        p.steps.end = self.planner.steps.len();
        if p.steps.is_empty() && p.look_up.is_none() && p.find.is_empty() {
            let code = p.answer.result_code;
            if gy::encode_cca(out, req, &p.answer, &self.ctx.identity).is_err() {
                self.reject(req, result::UNABLE_TO_COMPLY, 0, out);
            }
            self.totals().telemetry.answered(kind, code);
            return;
        }
        // Provisional: "nothing happened", replaced once the steps answer.
        self.reject(req, result::TOO_BUSY, 0, out);
        p.request = req.as_bytes().to_vec();
        self.pending.push(p);
    }

    fn shed(&mut self, kind: ShedKind, count: u64) {
        let kind = telemetry::kind_of_shed(kind);
        self.totals()
            .telemetry
            .answered_n(kind, result::TOO_BUSY, count);
    }

    fn too_busy(&mut self, answer: &Message<'_>, out: &mut BytesMut) {
        let kind = telemetry::kind_of_message(answer);
        self.totals().telemetry.answered(kind, result::TOO_BUSY);
        let mut e = Encoder::answer(out, answer, true);
        e.u32(avp::RESULT_CODE, result::TOO_BUSY)
            .str(avp::ORIGIN_HOST, &self.ctx.identity.origin_host)
            .str(avp::ORIGIN_REALM, &self.ctx.identity.origin_realm)
            .str(
                avp::ERROR_MESSAGE,
                "too busy (overloaded, or the ledger cannot be reached); try again or elsewhere",
            );
        crate::shard::echo_ids(&mut e, answer);
        if e.finish().is_err() {
            warn!("3004 answer too large");
        }
    }

    fn tick(&mut self, now_ms: u64, _ended: &mut Vec<u64>) {
        self.prune(now_ms);
    }

    fn flush(&mut self) -> Flush {
        self.settled.clear();
        self.settled_bytes.clear();
        if self.pending.is_empty() {
            return Flush::Done;
        }
        let mut batch = std::mem::take(&mut self.pending);
        let steps = std::mem::take(&mut self.planner.steps);
        let (ctx, slot) = (self.ctx.clone(), self.batch.clone());
        let now = unix_now();
        Flush::Settle(Box::new(move || {
            let started = Instant::now();
            let steps = if batch
                .iter()
                .any(|p| p.look_up.is_some() || !p.find.is_empty())
            {
                // Sessions or subscribers this node does not know: one
                // more round trip for all of them, then their steps join
                // the batch.
                let mut planner = Planner {
                    ctx: ctx.clone(),
                    request: CcRequest::default(),
                    subscriber: String::new(),
                    created: None,
                    since: None,
                    steps,
                };
                look_up(&ctx, &mut planner, &mut batch, now);
                planner.steps
            } else {
                steps
            };
            let results = run_bounded(&ctx, &steps, now);
            // Requests charged to an account this node remembered from
            // the cluster's directory that no longer exists (deleted
            // through another node, its subscriber perhaps given a new
            // account): looked up again and run once more.
            let (steps, results) = redo_vanished(&ctx, &mut batch, steps, results, now);
            let t = &ctx.telemetry;
            t.round_trip.record(started.elapsed().as_nanos() as u64);
            t.batch_steps.record(steps.len() as u64);
            let unreachable = results
                .iter()
                .any(|r| matches!(r, Err(e) if e.kind() == ErrorKind::Unavailable));
            if unreachable {
                // A master may have moved: read the slot map again (the
                // client reconnects by itself).
                let _ = ctx.rt.block_on(async {
                    tokio::time::timeout(Duration::from_secs(1), ctx.ledger.refresh_shards()).await
                });
            }
            let failed = results.iter().filter(|r| r.is_err()).count();
            if failed > 0 {
                if !t.failing.swap(true, Relaxed) {
                    if let Some(Err(e)) = results.iter().find(|r| r.is_err()) {
                        warn!(
                            error = %e,
                            failed,
                            steps = steps.len(),
                            "Redis ledger steps failed: their requests are answered 3004 \
                             DIAMETER_TOO_BUSY until the cluster answers again"
                        );
                    }
                }
            } else if t.failing.swap(false, Relaxed) {
                info!("Redis ledger answers again");
            }
            match slot.lock() {
                Ok(mut s) => *s = Some((batch, results)),
                Err(_) => return Err(std::io::Error::other("results slot poisoned")),
            }
            Ok(())
        }))
    }

    fn synced(&mut self, result: &std::io::Result<()>) {
        let batch = self.batch.lock().ok().and_then(|mut s| s.take());
        let (Ok(()), Some((in_flight, results))) = (result, batch) else {
            return;
        };
        for mut p in in_flight {
            if p.failed || !Self::settle_one(&mut p, &results, &self.ctx) {
                continue;
            }
            let Ok(req) = Message::parse(&p.request) else {
                continue;
            };
            let start = self.settled_bytes.len();
            if gy::encode_cca(&mut self.settled_bytes, &req, &p.answer, &self.ctx.identity).is_err()
            {
                self.settled_bytes.truncate(start);
                continue;
            }
            let h = req.header();
            self.settled.push((
                h.hop_by_hop,
                h.end_to_end,
                start..self.settled_bytes.len(),
                p.kind,
                p.answer.result_code,
            ));
        }
    }

    fn settle(&mut self, answer: &Message<'_>, out: &mut BytesMut) {
        let h = answer.header();
        let sid = answer.find(avp::SESSION_ID).map(|a| a.data());
        let found = self.settled.iter().position(|(hbh, e2e, range, _, _)| {
            *hbh == h.hop_by_hop
                && *e2e == h.end_to_end
                && Message::parse(&self.settled_bytes[range.clone()])
                    .ok()
                    .and_then(|m| m.find(avp::SESSION_ID).map(|a| a.data()))
                    == sid
        });
        match found {
            Some(i) => {
                let (_, _, range, kind, code) = self.settled.swap_remove(i);
                out.extend_from_slice(&self.settled_bytes[range]);
                self.totals().telemetry.answered(kind, code);
            }
            None => {
                // Not settled (a step failed): it stays "nothing happened".
                if answer
                    .find(avp::RESULT_CODE)
                    .and_then(|a| a.u32().ok())
                    .is_some_and(|c| c == result::TOO_BUSY)
                {
                    let kind = telemetry::kind_of_message(answer);
                    self.totals().telemetry.answered(kind, result::TOO_BUSY);
                }
                out.extend_from_slice(answer.as_bytes());
            }
        }
    }
}
