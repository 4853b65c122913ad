//! The client: connection, function loading, steps, pipelines per shard.

use super::keys::{parse_rating_key, reservation_field, Keys, SLOTS};
use super::{
    AccountState, Answer, Books, BundleState, Claim, Creation, Debit, Deletion, ExpiryReport,
    FirstInterval, LedgerStats, NewAccount, Outcome, PlannedStep, Pricing, RedisOptions,
    ReservationState, Reserve, SessionRecord, Step, StreamCdr, LIBRARY, LIBRARY_VERSION,
};
use crate::error::{Error, Result};
use gyro_charging::{AccountId, Cdr, Rounding, SubscriptionId, Timestamp};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, ResponsePolicy, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{Cmd, RedisError, RetryMethod, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

/// Largest magnitude of money and units the Lua functions compute exactly.
const MAX_EXACT: i64 = 1 << 53;

/// A connection to the cluster's ledger, shared by the tasks of one gyro
/// node (it is cheap to share by reference; every call takes `&self`).
pub struct RedisLedger {
    conn: ClusterConnection,
    keys: Keys,
    opts: RedisOptions,
    shards: RwLock<ShardMap>,
    stats: Counters,
}

/// What the ledger has sent so far (see [`LedgerStats`]).
#[derive(Default)]
struct Counters {
    steps: AtomicU64,
    pipelines: AtomicU64,
    alone: AtomicU64,
    redirected: AtomicU64,
    failed: AtomicU64,
    batch_micros: AtomicU64,
    batch_micros_max: AtomicU64,
}

impl std::fmt::Debug for RedisLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLedger")
            .field("nodes", &self.opts.nodes)
            .field("namespace", &self.keys.namespace())
            .field("node_id", &self.opts.node_id)
            .finish_non_exhaustive()
    }
}

/// Which master serves each slot, as last read with `CLUSTER SLOTS`.
#[derive(Default)]
struct ShardMap {
    /// `host:port` of each master.
    masters: Vec<String>,
    /// Index into `masters` per slot; `usize::MAX` where unknown.
    owner: Vec<usize>,
}

fn unavailable(op: &'static str, e: &RedisError) -> Error {
    Error::Unavailable {
        op,
        reason: e.to_string(),
    }
}

/// A Redis error as the store's: what a retry may cure (I/O, timeouts,
/// redirections, a cluster or master down, loading) is
/// [`Error::Unavailable`], the rest [`Error::Redis`].
fn classify(op: &'static str, e: &RedisError) -> Error {
    if e.is_io_error() || e.is_timeout() || !matches!(e.retry_method(), RetryMethod::NoRetry) {
        unavailable(op, e)
    } else {
        Error::Redis {
            op,
            reason: e.to_string(),
        }
    }
}

fn function_missing(e: &RedisError) -> bool {
    e.to_string().contains("Function not found")
}

fn encode_err(what: &'static str, reason: impl Into<String>) -> Error {
    Error::Encode {
        what,
        reason: reason.into(),
    }
}

fn exact(what: &'static str, v: i64) -> Result<()> {
    if (-MAX_EXACT..=MAX_EXACT).contains(&v) {
        Ok(())
    } else {
        Err(encode_err(what, format!("{v} is beyond +/- 2^53")))
    }
}

fn exact_u(what: &'static str, v: u64) -> Result<()> {
    if v <= MAX_EXACT as u64 {
        Ok(())
    } else {
        Err(encode_err(what, format!("{v} is beyond 2^53")))
    }
}

fn non_negative(what: &'static str, v: i64) -> Result<()> {
    exact(what, v)?;
    if v < 0 {
        return Err(encode_err(what, format!("{v} is negative")));
    }
    Ok(())
}

/// Bundle ids as the functions take them: `1,2,3`.
fn bundle_list(ids: &[u32]) -> String {
    let mut s = String::with_capacity(ids.len() * 3);
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&id.to_string());
    }
    s
}

/// A tariff as the functions take it: `increment price per rounding
/// first_interval`.
fn pricing(p: &Pricing) -> Result<String> {
    non_negative("price", p.price)?;
    exact_u("increment", p.increment)?;
    exact_u("per", p.per)?;
    exact_u("first interval", p.first_interval)?;
    let rounding = match p.rounding {
        Rounding::Up => 0,
        Rounding::Down => 1,
        Rounding::Nearest => 2,
    };
    Ok(format!(
        "{} {} {} {rounding} {}",
        p.increment.max(1),
        p.price,
        p.per.max(1),
        p.first_interval
    ))
}

/// A step to run, and how a tariff's first interval applies to it.
trait Planned: Sync {
    fn step(&self) -> &Step;
    fn first_interval(&self) -> Option<&FirstInterval>;
}

impl Planned for Step {
    fn step(&self) -> &Step {
        self
    }
    fn first_interval(&self) -> Option<&FirstInterval> {
        None
    }
}

impl Planned for PlannedStep {
    fn step(&self) -> &Step {
        &self.step
    }
    fn first_interval(&self) -> Option<&FirstInterval> {
        self.first_interval.as_ref()
    }
}

/// The arguments of `gyro_reserve` after the common ones (see
/// `ledger.lua`): `field money units min_money owner expires_at [bundles
/// tariff]`.
fn reserve_args(c: &mut Cmd, s: &Reserve, node: &str) -> Result<()> {
    non_negative("money", s.money)?;
    non_negative("min money", s.min_money)?;
    exact_u("units", s.units)?;
    exact_u("expiry", s.expires.as_millis())?;
    c.arg(reservation_field(&s.session, s.key))
        .arg(s.money)
        .arg(s.units)
        .arg(s.min_money)
        .arg(node)
        .arg(s.expires.as_millis());
    if let Some(b) = &s.bundles {
        c.arg(bundle_list(&b.bundles)).arg(pricing(&b.pricing)?);
    }
    Ok(())
}

/// The arguments of `gyro_debit` after the common ones (see
/// `ledger.lua`): `field amount release node cdr_json whole [used bundles
/// tariff]`.
fn debit_args(c: &mut Cmd, s: &Debit, node: &str) -> Result<()> {
    non_negative("amount", s.amount)?;
    let field = s
        .reservation
        .as_ref()
        .map(|(session, key)| reservation_field(session, *key))
        .unwrap_or_default();
    c.arg(field)
        .arg(s.amount)
        .arg(if s.release { "1" } else { "0" })
        .arg(node)
        .arg(cdr_json(&s.cdr)?)
        .arg(if s.whole { "1" } else { "0" });
    if let Some((used, b)) = &s.bundles {
        exact_u("used units", *used)?;
        c.arg(*used)
            .arg(bundle_list(&b.bundles))
            .arg(pricing(&b.pricing)?);
    }
    Ok(())
}

fn cdr_json(cdr: &Cdr) -> Result<String> {
    serde_json::to_string(cdr).map_err(|e| encode_err("CDR", e.to_string()))
}

fn url(node: &str, tls: bool) -> String {
    if node.contains("://") {
        node.to_string()
    } else if tls {
        format!("rediss://{node}")
    } else {
        format!("redis://{node}")
    }
}

pub(super) fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

pub(super) fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// A function's answer `[replayed, code, ...]` as an [`Answer`].
fn answer(step: &Step, v: &Value) -> Result<Answer> {
    let bad = || Error::Redis {
        op: step.function(),
        reason: format!("unexpected answer {v:?}"),
    };
    if let Step::Session(_) = step {
        return match v {
            Value::Okay => Ok(Answer {
                replayed: false,
                code: gyro_charging::result_code::SUCCESS,
                outcome: Outcome::SessionKept,
            }),
            Value::SimpleString(s) if s == "OK" => Ok(Answer {
                replayed: false,
                code: gyro_charging::result_code::SUCCESS,
                outcome: Outcome::SessionKept,
            }),
            _ => Err(bad()),
        };
    }
    let Value::Array(items) = v else {
        return Err(bad());
    };
    let n: Vec<i64> = items
        .iter()
        .map(int)
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    // A remembered answer of library version 4 lacks the last figure of
    // a Reserve and a Debit (its bundle units: 0).
    let need = match step {
        Step::Reserve(_) if n.len() == 6 => 6,
        Step::Reserve(_) => 7,
        Step::Release(_) => 6,
        Step::Debit(_) if n.len() == 9 => 9,
        // Version 10 adds the reservation's granted units on success.
        Step::Debit(_) if n.len() == 11 => 11,
        Step::Debit(_) => 10,
        Step::Refund(_) | Step::Expire(_) => 5,
        Step::TopUp(_) if n.len() == 4 => 4,
        Step::TopUp(_) => 5,
        Step::End(_) => 4,
        Step::Check(_) => 5,
        Step::Session(_) => return Err(bad()),
    };
    if n.len() != need {
        return Err(bad());
    }
    let u = |i: usize| n.get(i).and_then(|&v| u64::try_from(v).ok()).unwrap_or(0);
    let outcome = match step {
        Step::Reserve(_) => Outcome::Reserved {
            money: n[2],
            units: u(3),
            bundle_units: u(6),
            balance: n[4],
            reserved: n[5],
        },
        Step::Debit(_) => Outcome::Debited {
            charged: n[2],
            from_reserved: n[3],
            from_balance: n[4],
            unbilled: n[5],
            balance_after: n[6],
            sequence: u(7),
            released: n[8],
            bundle_units: u(9),
            granted: n.get(10).map(|&g| g.max(0) as u64),
        },
        Step::Release(_) => Outcome::Released {
            found: n[2] != 0,
            money: n[3],
            balance: n[4],
            reserved: n[5],
        },
        Step::Refund(_) => Outcome::Refunded {
            amount: n[2],
            balance_after: n[3],
            sequence: u(4),
        },
        Step::TopUp(_) => Outcome::ToppedUp {
            balance: n[2],
            topped_up: n[3],
            amount: n.get(4).copied(),
        },
        Step::Expire(_) => Outcome::Expired {
            reservations: u(2),
            money: n[3],
            sequence: u(4),
        },
        Step::End(_) => Outcome::Ended {
            reservations: u(2),
            money: n[3],
        },
        Step::Check(_) => Outcome::Checked {
            enough: n[2] == 1,
            money: n[3],
            bundle_units: u(4),
        },
        Step::Session(_) => return Err(bad()),
    };
    Ok(Answer {
        replayed: n[0] != 0,
        code: u32::try_from(n[1]).map_err(|_| bad())?,
        outcome,
    })
}

/// The pipeline answer of a batch sent to one master.
enum Sent {
    /// One value per step (plus the `WAIT` count when asked).
    Values(Vec<Value>),
    /// The pipeline as a whole failed.
    Failed(Error),
}

impl RedisLedger {
    /// Connects to the cluster through `opts.nodes`, loads the ledger
    /// functions into every master and reads which master serves which
    /// slot. An unreachable cluster is [`Error::Unavailable`].
    pub async fn connect(opts: RedisOptions) -> Result<RedisLedger> {
        let keys = Keys::new(&opts.namespace).ok_or_else(|| {
            encode_err(
                "namespace",
                format!("{:?}: must be non-empty and without braces", opts.namespace),
            )
        })?;
        if opts.replicas_ack > 1 {
            return Err(encode_err("replicas_ack", "must be 0 or 1"));
        }
        if opts.nodes.is_empty() {
            return Err(encode_err("nodes", "at least one seed node is needed"));
        }
        let mut b = ClusterClientBuilder::new(opts.nodes.iter().map(|n| url(n, opts.tls)))
            .connection_timeout(opts.connect_timeout)
            .response_timeout(opts.response_timeout)
            .retries(3);
        if let Some(u) = &opts.username {
            b = b.username(u);
        }
        if let Some(p) = &opts.password {
            b = b.password(p);
        }
        let tls = opts.tls || opts.nodes.iter().any(|n| n.starts_with("rediss://"));
        if tls {
            // The redis client builds its rustls configuration from the
            // process-wide crypto provider: make sure there is one (ring,
            // as for gyro's other TLS), instead of its panic when none was
            // chosen. Another provider installed first is kept.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        if opts.tls || opts.tls_ca.is_some() || opts.tls_cert.is_some() {
            let read = |p: &std::path::PathBuf| {
                std::fs::read(p).map_err(|source| Error::Io {
                    op: "read",
                    path: p.clone(),
                    source,
                })
            };
            let client_tls = match (&opts.tls_cert, &opts.tls_key) {
                (Some(c), Some(k)) => Some(redis::ClientTlsConfig {
                    client_cert: read(c)?,
                    client_key: read(k)?,
                }),
                (None, None) => None,
                _ => return Err(encode_err("tls", "tls_cert and tls_key go together")),
            };
            let root_cert = opts.tls_ca.as_ref().map(read).transpose()?;
            b = b.certs(redis::TlsCertificates {
                client_tls,
                root_cert,
            });
        }
        let client = b.build().map_err(|e| classify("connect", &e))?;
        let conn = client
            .get_async_connection()
            .await
            .map_err(|e| classify("connect", &e))?;
        let ledger = RedisLedger {
            conn,
            keys,
            opts,
            shards: RwLock::new(ShardMap::default()),
            stats: Counters::default(),
        };
        ledger.load_functions().await?;
        ledger.refresh_shards().await?;
        Ok(ledger)
    }

    /// The key names in use.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The options it was connected with.
    pub fn options(&self) -> &RedisOptions {
        &self.opts
    }

    /// Loads (or replaces) the `gyro` function library on every master and
    /// checks its version.
    pub async fn load_functions(&self) -> Result<()> {
        let mut conn = self.conn.clone();
        let mut load = redis::cmd("FUNCTION");
        load.arg("LOAD").arg("REPLACE").arg(LIBRARY);
        conn.route_command(
            load,
            RoutingInfo::MultiNode((
                MultipleNodeRoutingInfo::AllMasters,
                Some(ResponsePolicy::AllSucceeded),
            )),
        )
        .await
        .map_err(|e| classify("FUNCTION LOAD", &e))?;
        let mut version = redis::cmd("FCALL_RO");
        version.arg("gyro_version").arg(0);
        let v = conn
            .route_command(
                version,
                RoutingInfo::MultiNode((
                    MultipleNodeRoutingInfo::AllMasters,
                    Some(ResponsePolicy::AllSucceeded),
                )),
            )
            .await
            .map_err(|e| classify("gyro_version", &e))?;
        match int(&v) {
            Some(LIBRARY_VERSION) => Ok(()),
            _ => Err(Error::Redis {
                op: "gyro_version",
                reason: format!("library version {v:?}, expected {LIBRARY_VERSION}"),
            }),
        }
    }

    /// Reads which master serves which slot (`CLUSTER SLOTS`).
    pub async fn refresh_shards(&self) -> Result<()> {
        let mut conn = self.conn.clone();
        let mut c = redis::cmd("CLUSTER");
        c.arg("SLOTS");
        let v = conn
            .route_command(c, RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random))
            .await
            .map_err(|e| classify("CLUSTER SLOTS", &e))?;
        let mut map = ShardMap {
            masters: Vec::new(),
            owner: vec![usize::MAX; usize::from(SLOTS)],
        };
        let Value::Array(ranges) = v else {
            return Err(Error::Redis {
                op: "CLUSTER SLOTS",
                reason: "not an array".into(),
            });
        };
        for range in &ranges {
            let Value::Array(r) = range else { continue };
            let (Some(start), Some(end), Some(Value::Array(node))) =
                (r.first().and_then(int), r.get(1).and_then(int), r.get(2))
            else {
                continue;
            };
            let (Some(host), Some(port)) = (node.first().and_then(text), node.get(1).and_then(int))
            else {
                continue;
            };
            let addr = format!("{host}:{port}");
            let idx = match map.masters.iter().position(|m| *m == addr) {
                Some(i) => i,
                None => {
                    map.masters.push(addr);
                    map.masters.len() - 1
                }
            };
            for s in start.max(0)..=end.min(i64::from(SLOTS) - 1) {
                map.owner[s as usize] = idx;
            }
        }
        if let Ok(mut shards) = self.shards.write() {
            *shards = map;
        }
        Ok(())
    }

    /// What this client has sent so far.
    pub fn stats(&self) -> LedgerStats {
        LedgerStats {
            steps: self.stats.steps.load(Ordering::Relaxed),
            pipelines: self.stats.pipelines.load(Ordering::Relaxed),
            alone: self.stats.alone.load(Ordering::Relaxed),
            redirected: self.stats.redirected.load(Ordering::Relaxed),
            failed: self.stats.failed.load(Ordering::Relaxed),
            batch_micros: self.stats.batch_micros.load(Ordering::Relaxed),
            batch_micros_max: self.stats.batch_micros_max.load(Ordering::Relaxed),
        }
    }

    /// Each master with the slots it serves, from the current shard map
    /// (`op` names the caller in the error of a poisoned map).
    fn slots_by_master(&self, op: &'static str) -> Result<Vec<(String, Vec<u16>)>> {
        let shards = self.shards.read().map_err(|_| Error::Redis {
            op,
            reason: "shard map poisoned".into(),
        })?;
        Ok(shards
            .masters
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let slots = (0..SLOTS)
                    .filter(|&s| shards.owner.get(usize::from(s)) == Some(&i))
                    .collect();
                (m.clone(), slots)
            })
            .collect())
    }

    /// The slots whose CDR stream holds entries: one pipeline of `XLEN`
    /// per master, over the slots it serves.
    pub(super) async fn nonempty_streams(&self) -> Result<Vec<u16>> {
        let by_master = self.slots_by_master("XLEN")?;
        let reads = by_master.iter().map(|(master, slots)| {
            let mut pipe = redis::pipe();
            for &slot in slots {
                pipe.cmd("XLEN").arg(self.keys.cdr_stream(slot));
            }
            let (host, port) = master.rsplit_once(':').unwrap_or((master, "0"));
            let route = SingleNodeRoutingInfo::ByAddress {
                host: host.to_string(),
                port: port.parse().unwrap_or(0),
            };
            let mut conn = self.conn.clone();
            let count = slots.len();
            async move { conn.route_pipeline(pipe, 0, count, route).await }
        });
        let mut out = Vec::new();
        for ((_, slots), read) in by_master
            .iter()
            .zip(futures_util::future::join_all(reads).await)
        {
            let values = read.map_err(|e| classify("XLEN", &e))?;
            for (&slot, v) in slots.iter().zip(&values) {
                if int(v).is_some_and(|n| n > 0) {
                    out.push(slot);
                }
            }
        }
        Ok(out)
    }

    /// The books of every account in the namespace, over the whole
    /// cluster: each master is scanned (`SCAN ... TYPE hash`) for account
    /// hashes, which are read with their reservations in one pipeline per
    /// page. A live snapshot: accounts change while it reads, but each
    /// account is read atomically with its reservations (one slot, one
    /// pipeline, in order).
    pub async fn books(&self) -> Result<Books> {
        self.refresh_shards().await?;
        let mut books = Books::default();
        for route in self.master_routes() {
            let mut cursor = "0".to_string();
            loop {
                let ids;
                (cursor, ids) = self.scan_accounts(&route, &cursor).await?;
                if !ids.is_empty() {
                    let mut pipe = redis::pipe();
                    for &id in &ids {
                        pipe.cmd("HGETALL").arg(self.keys.account(id));
                        pipe.cmd("HVALS").arg(self.keys.reservations(id));
                    }
                    let mut conn = self.conn.clone();
                    let values = conn
                        .route_pipeline(pipe, 0, ids.len() * 2, route.clone())
                        .await
                        .map_err(|e| classify("HGETALL", &e))?;
                    for (id, pair) in ids.iter().zip(values.chunks(2)) {
                        let Some(state) = account_state(*id, &pair[0]) else {
                            continue;
                        };
                        let mut held: i64 = 0;
                        let mut holds: HashMap<u32, u64> = HashMap::new();
                        if let Some(Value::Array(vals)) = pair.get(1) {
                            for v in vals.iter().filter_map(text) {
                                let Some(r) = parse_reservation(&v) else {
                                    continue;
                                };
                                held += r.money;
                                for (id, units) in r.holds {
                                    *holds.entry(id).or_default() += units;
                                }
                            }
                        }
                        books.add(state, held, &holds);
                    }
                }
                if cursor == "0" {
                    break;
                }
            }
        }
        Ok(books)
    }

    /// The ids of every account in the namespace, in id order: each
    /// master is scanned (`SCAN ... TYPE hash`) for account hashes, so a
    /// call costs in proportion to the namespace's keys. A live snapshot:
    /// accounts opened or deleted meanwhile may or may not be listed.
    pub async fn account_ids(&self) -> Result<Vec<AccountId>> {
        self.refresh_shards().await?;
        let mut ids = Vec::new();
        for route in self.master_routes() {
            let mut cursor = "0".to_string();
            loop {
                let page;
                (cursor, page) = self.scan_accounts(&route, &cursor).await?;
                ids.extend(page);
                if cursor == "0" {
                    break;
                }
            }
        }
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    /// How to reach each master, as last read.
    fn master_routes(&self) -> Vec<SingleNodeRoutingInfo> {
        self.masters()
            .iter()
            .filter_map(|m| {
                let (host, port) = m.rsplit_once(':')?;
                Some(SingleNodeRoutingInfo::ByAddress {
                    host: host.to_string(),
                    port: port.parse().ok()?,
                })
            })
            .collect()
    }

    /// One page of `SCAN cursor MATCH <ns>:{acct:*} COUNT 1000 TYPE hash`
    /// on the master at `route`: the next cursor ("0" at the end) and the
    /// ids of the account hashes found (a reservations hash, `...:res`,
    /// does not end with its tag and is left out).
    async fn scan_accounts(
        &self,
        route: &SingleNodeRoutingInfo,
        cursor: &str,
    ) -> Result<(String, Vec<AccountId>)> {
        let pattern = format!("{}:{{acct:*}}", self.keys.namespace());
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .arg("TYPE")
            .arg("hash");
        let mut conn = self.conn.clone();
        let v = conn
            .route_command(scan, RoutingInfo::SingleNode(route.clone()))
            .await
            .map_err(|e| classify("SCAN", &e))?;
        let Value::Array(parts) = v else {
            return Err(Error::Redis {
                op: "SCAN",
                reason: format!("unexpected answer {v:?}"),
            });
        };
        let next = parts.first().and_then(text).unwrap_or_else(|| "0".into());
        let ids = match parts.get(1) {
            Some(Value::Array(keys)) => keys
                .iter()
                .filter_map(text)
                .filter(|k| k.ends_with('}'))
                .filter_map(|k| {
                    let id = k.rsplit_once("{acct:")?.1.strip_suffix('}')?;
                    Some(AccountId(id.parse().ok()?))
                })
                .collect(),
            _ => Vec::new(),
        };
        Ok((next, ids))
    }

    /// The masters, `host:port`, as last read.
    pub fn masters(&self) -> Vec<String> {
        self.shards
            .read()
            .map(|s| s.masters.clone())
            .unwrap_or_default()
    }

    /// Creates an account unless one with this id exists; returns whether
    /// it created it. (Creation is idempotent by the account's existence,
    /// so it needs no request key; with `replicas_ack = 1` it returns once
    /// a replica has the account.)
    pub async fn open_account(
        &self,
        account: AccountId,
        balance: i64,
        credit_limit: i64,
        blocked: bool,
    ) -> Result<bool> {
        self.open_account_with_bundles(account, balance, credit_limit, blocked, &[])
            .await
    }

    /// [`RedisLedger::open_account`] with bundles: `(id, units)`, each
    /// full (an account that exists keeps the bundles it has).
    pub async fn open_account_with_bundles(
        &self,
        account: AccountId,
        balance: i64,
        credit_limit: i64,
        blocked: bool,
        bundles: &[(u32, u64)],
    ) -> Result<bool> {
        exact("balance", balance)?;
        non_negative("credit limit", credit_limit)?;
        let mut list = String::new();
        for &(id, units) in bundles {
            exact_u("bundle units", units)?;
            if !list.is_empty() {
                list.push(',');
            }
            list.push_str(&format!("{id}:{units}"));
        }
        let mut c = redis::cmd("FCALL");
        c.arg("gyro_open")
            .arg(2)
            .arg(self.keys.account(account))
            .arg(self.keys.tombstone(account))
            .arg(balance)
            .arg(credit_limit)
            .arg(if blocked { "1" } else { "0" })
            .arg(list);
        let slot = self.keys.account_slot(account);
        let v = self.call(c, slot, "gyro_open").await?;
        let created = match &v {
            Value::Array(a) if !a.is_empty() => int(&a[0]) == Some(1),
            _ => {
                return Err(Error::Redis {
                    op: "gyro_open",
                    reason: format!("unexpected answer {v:?}"),
                })
            }
        };
        self.wait_replica(slot).await?;
        Ok(created)
    }

    /// Changes an account's status (`blocked`) and/or credit limit (at
    /// least 0); `None` leaves that one as it is. Returns whether the
    /// account exists (with `replicas_ack = 1`, once a replica has the
    /// change). Setting a value is idempotent: no request key.
    pub async fn update_account(
        &self,
        account: AccountId,
        blocked: Option<bool>,
        credit_limit: Option<i64>,
    ) -> Result<bool> {
        if let Some(l) = credit_limit {
            non_negative("credit limit", l)?;
        }
        let mut c = redis::cmd("FCALL");
        c.arg("gyro_update")
            .arg(1)
            .arg(self.keys.account(account))
            .arg(match blocked {
                Some(true) => "1",
                Some(false) => "0",
                None => "",
            })
            .arg(credit_limit.map(|l| l.to_string()).unwrap_or_default());
        let slot = self.keys.account_slot(account);
        let v = self.call(c, slot, "gyro_update").await?;
        let found = match &v {
            Value::Array(a) if a.len() == 1 => int(&a[0]) == Some(1),
            _ => {
                return Err(Error::Redis {
                    op: "gyro_update",
                    reason: format!("unexpected answer {v:?}"),
                })
            }
        };
        self.wait_replica(slot).await?;
        Ok(found)
    }

    /// Deletes an account that holds no reservation (its bundles with
    /// it) and leaves its tombstone, so that no node creates it again
    /// from its configuration ([`RedisLedger::open_account`] then creates
    /// nothing). Deleting an account that is not there changes nothing
    /// ([`Deletion::NoAccount`]).
    pub async fn delete_account(&self, account: AccountId, now: Timestamp) -> Result<Deletion> {
        exact_u("now", now.as_millis())?;
        let mut c = redis::cmd("FCALL");
        c.arg("gyro_delete")
            .arg(3)
            .arg(self.keys.account(account))
            .arg(self.keys.reservations(account))
            .arg(self.keys.tombstone(account))
            .arg(now.as_millis());
        let slot = self.keys.account_slot(account);
        let v = self.call(c, slot, "gyro_delete").await?;
        let d = match &v {
            Value::Array(a) if a.len() == 1 => match int(&a[0]) {
                Some(1) => Some(Deletion::Deleted),
                Some(0) => Some(Deletion::NoAccount),
                Some(-1) => Some(Deletion::InUse),
                _ => None,
            },
            _ => None,
        };
        let d = d.ok_or_else(|| Error::Redis {
            op: "gyro_delete",
            reason: format!("unexpected answer {v:?}"),
        })?;
        self.wait_replica(slot).await?;
        Ok(d)
    }

    /// An `FCALL` whose answer is an array of integers.
    async fn fcall_ints(&self, c: Cmd, slot: u16, op: &'static str) -> Result<Vec<i64>> {
        let v = self.call(c, slot, op).await?;
        match &v {
            Value::Array(a) if !a.is_empty() => {
                let n: Option<Vec<i64>> = a.iter().map(int).collect();
                n.ok_or_else(|| Error::Redis {
                    op,
                    reason: format!("unexpected answer {v:?}"),
                })
            }
            _ => Err(Error::Redis {
                op,
                reason: format!("unexpected answer {v:?}"),
            }),
        }
    }

    /// Raises the account id counter to at least `floor`; with `take`,
    /// takes the next id and returns it (else the counter).
    async fn account_counter(&self, floor: u64, take: bool) -> Result<u64> {
        exact_u("account id", floor)?;
        let key = self.keys.account_counter();
        let slot = super::keys::slot(key.as_bytes());
        let mut c = redis::cmd("FCALL");
        c.arg("gyro_account_id")
            .arg(1)
            .arg(key)
            .arg(floor)
            .arg(if take { "1" } else { "0" });
        let n = self.fcall_ints(c, slot, "gyro_account_id").await?;
        self.wait_replica(slot).await?;
        u64::try_from(n[0]).map_err(|_| Error::Redis {
            op: "gyro_account_id",
            reason: format!("account id {}", n[0]),
        })
    }

    /// Claims `id` for `account` (`replace`: over a stale claim of that
    /// account); `None` when the claim is `account`'s now, else the
    /// holder and when it claimed it.
    async fn claim(
        &self,
        id: &SubscriptionId,
        value: &str,
        account: AccountId,
        replace: Option<AccountId>,
    ) -> Result<Option<(AccountId, u64)>> {
        let key = self.keys.subscriber(id.kind, &id.data);
        let slot = super::keys::slot(key.as_bytes());
        let mut c = redis::cmd("FCALL");
        c.arg("gyro_claim")
            .arg(1)
            .arg(key)
            .arg(value)
            .arg(account.0)
            .arg(replace.map(|a| a.0.to_string()).unwrap_or_default());
        let n = self.fcall_ints(c, slot, "gyro_claim").await?;
        if n.len() < 3 {
            return Err(Error::Redis {
                op: "gyro_claim",
                reason: format!("unexpected answer {n:?}"),
            });
        }
        self.wait_replica(slot).await?;
        Ok((n[0] != 1).then(|| (AccountId(n[1].max(0) as u64), n[2].max(0) as u64)))
    }

    /// Frees the claims of `ids` that `account` holds (a deleted account's
    /// identities, or those of a creation given up); returns how many it
    /// freed.
    pub async fn free_subscribers(
        &self,
        account: AccountId,
        ids: &[SubscriptionId],
    ) -> Result<u64> {
        let mut freed = 0;
        for id in ids {
            let key = self.keys.subscriber(id.kind, &id.data);
            let slot = super::keys::slot(key.as_bytes());
            let mut c = redis::cmd("FCALL");
            c.arg("gyro_unclaim").arg(1).arg(key).arg(account.0);
            let n = self.fcall_ints(c, slot, "gyro_unclaim").await?;
            self.wait_replica(slot).await?;
            freed += u64::from(n[0] == 1);
        }
        Ok(freed)
    }

    /// Gives up the claims of a creation that did not go ahead (best
    /// effort: a claim left behind is stale once its grace has passed,
    /// and taken over by the next creation of that identity).
    async fn release(&self, account: AccountId, ids: &[SubscriptionId]) {
        let _ = self.free_subscribers(account, ids).await;
    }

    /// The claim of one subscriber identity (see [`RedisLedger::claims`]).
    pub async fn subscriber(&self, id: &SubscriptionId) -> Result<Option<Claim>> {
        self.claims(&[id])
            .await
            .pop()
            .unwrap_or_else(|| Err(encode_err("subscriber", "no answer")))
    }

    /// Creates an account of the operator API with its identities, so that
    /// every node finds it ([`RedisLedger::claims`]). In order:
    ///
    /// 1. its id: the one asked for (refused when an account has it or
    ///    had it), the cluster's counter raised above it; else the next
    ///    id of the counter, kept above `new.id_floor` (the configuration's
    ///    highest id);
    /// 2. each identity claimed (`gyro_claim`, set-if-absent) with the id
    ///    and the account's definition; a claim held by another account
    ///    refuses the creation ([`Creation::SubscriberTaken`], the claims
    ///    taken so far freed), unless it is stale: older than `grace` and
    ///    naming an account that does not exist (its creator died before
    ///    step 3). A stale claim's account is buried first (`gyro_bury`:
    ///    its tombstone, so that a creator that was only slow can never
    ///    create it late), then the claim is taken over;
    /// 3. the account (`gyro_create`, with its figures, bundles and
    ///    definition): refused when it exists or was buried meanwhile
    ///    (the claims are then freed).
    ///
    /// A node dying after step 2 leaves claims naming an account that does
    /// not exist: a lookup finds them, but every step on that account
    /// answers 5030 (no account), and the next creation of those
    /// identities takes them over once `grace` has passed. No claim ever
    /// names an account created for another identity, and no account is
    /// created after its claims were taken over.
    pub async fn create_account(
        &self,
        new: &NewAccount,
        grace: std::time::Duration,
        now: Timestamp,
    ) -> Result<Creation> {
        non_negative("balance", new.balance)?;
        non_negative("credit limit", new.credit_limit)?;
        exact_u("now", now.as_millis())?;
        let subs = &new.definition.subscribers;
        if subs.is_empty() {
            return Err(encode_err("account", "no subscriber identity"));
        }
        let mut bundles = String::new();
        for b in &new.definition.bundles {
            exact_u("bundle units", b.remaining)?;
            if !bundles.is_empty() {
                bundles.push(',');
            }
            bundles.push_str(&format!("{}:{}", b.id, b.remaining));
        }
        let definition = serde_json::to_string(&new.definition)
            .map_err(|e| encode_err("account definition", e.to_string()))?;
        let id = match new.id {
            Some(id) => {
                self.account_counter(new.id_floor.max(id.0), false).await?;
                let mut c = redis::cmd("EXISTS");
                c.arg(self.keys.account(id)).arg(self.keys.tombstone(id));
                let taken = self.call(c, self.keys.account_slot(id), "EXISTS").await?;
                if int(&taken).unwrap_or(0) > 0 {
                    return Ok(Creation::AccountTaken(id));
                }
                id
            }
            None => AccountId(self.account_counter(new.id_floor, true).await?),
        };
        let value = claim_value(id, now, &definition);
        let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        for (n, sub) in subs.iter().enumerate() {
            let claimed = &subs[..n];
            let held = match self.claim(sub, &value, id, None).await {
                Ok(None) => continue,
                Ok(Some(held)) => held,
                Err(e) => {
                    self.release(id, claimed).await;
                    return Err(e);
                }
            };
            let (holder, at) = held;
            if now.as_millis().saturating_sub(at) >= grace_ms {
                let taken_over = async {
                    if !self.bury(holder, now).await? {
                        return Ok(false);
                    }
                    Ok(self.claim(sub, &value, id, Some(holder)).await?.is_none())
                };
                match taken_over.await {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(e) => {
                        self.release(id, claimed).await;
                        return Err(e);
                    }
                }
            }
            self.release(id, claimed).await;
            return Ok(Creation::SubscriberTaken(sub.clone()));
        }
        let mut c = redis::cmd("FCALL");
        c.arg("gyro_create")
            .arg(2)
            .arg(self.keys.account(id))
            .arg(self.keys.tombstone(id))
            .arg(new.balance)
            .arg(new.credit_limit)
            .arg(if new.blocked { "1" } else { "0" })
            .arg(bundles)
            .arg(&definition);
        let slot = self.keys.account_slot(id);
        // An error here leaves the claims: the account may exist.
        let n = self.fcall_ints(c, slot, "gyro_create").await?;
        self.wait_replica(slot).await?;
        if n[0] == 1 {
            return Ok(Creation::Created(id));
        }
        self.release(id, subs).await;
        Ok(match new.id {
            Some(id) => Creation::AccountTaken(id),
            None => Creation::SubscriberTaken(subs[0].clone()),
        })
    }

    /// Makes sure `account`, which does not exist, never will (its
    /// tombstone); `false` when it exists.
    async fn bury(&self, account: AccountId, now: Timestamp) -> Result<bool> {
        let mut c = redis::cmd("FCALL");
        c.arg("gyro_bury")
            .arg(2)
            .arg(self.keys.account(account))
            .arg(self.keys.tombstone(account))
            .arg(now.as_millis());
        let slot = self.keys.account_slot(account);
        let n = self.fcall_ints(c, slot, "gyro_bury").await?;
        self.wait_replica(slot).await?;
        Ok(n[0] == 1)
    }

    /// Sends one command to the master of `slot` (following redirections),
    /// loading the functions again once if the master lacks them (a new or
    /// restarted master).
    pub(super) async fn call(&self, c: Cmd, slot: u16, op: &'static str) -> Result<Value> {
        let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
            slot,
            SlotAddr::Master,
        )));
        let mut conn = self.conn.clone();
        // A server's error may come back as an error or as an error value.
        let send = |conn: &mut ClusterConnection, c: Cmd| {
            let route = route.clone();
            let mut conn = conn.clone();
            async move {
                match conn.route_command(c, route).await {
                    Ok(Value::ServerError(se)) => Err(RedisError::from(se)),
                    other => other,
                }
            }
        };
        match send(&mut conn, c.clone()).await {
            Ok(v) => Ok(v),
            Err(e) if function_missing(&e) => {
                self.load_functions().await?;
                send(&mut conn, c).await.map_err(|e| classify(op, &e))
            }
            Err(e) => Err(classify(op, &e)),
        }
    }

    /// The `FCALL` of a step, checked for values the functions cannot
    /// take.
    fn command(&self, step: &Step, first: Option<&FirstInterval>, now: Timestamp) -> Result<Cmd> {
        if step.request().is_empty() {
            return Err(encode_err("request key", "empty"));
        }
        if let Step::Session(s) = step {
            let json = serde_json::to_string(&s.record)
                .map_err(|e| encode_err("session record", e.to_string()))?;
            let ttl = u64::try_from(s.ttl.as_millis()).unwrap_or(u64::MAX).max(1);
            let mut c = redis::cmd("SET");
            c.arg(self.keys.session(&s.session))
                .arg(json)
                .arg("PX")
                .arg(ttl);
            return Ok(c);
        }
        let account = step.account();
        let mut c = redis::cmd("FCALL");
        c.arg(step.function()).arg(6);
        for k in self.keys.step_keys(account, step.request()) {
            c.arg(k);
        }
        let ttl = u64::try_from(self.opts.answer_ttl.as_millis())
            .unwrap_or(u64::MAX)
            .clamp(1, MAX_EXACT as u64);
        exact_u("now", now.as_millis())?;
        c.arg(step.function())
            .arg(ttl)
            .arg(account.0)
            .arg(now.as_millis());
        let node = &self.opts.node_id;
        match (step, first) {
            (Step::Reserve(s), None) => {
                reserve_args(&mut c, s, node)?;
            }
            (Step::Reserve(s), Some(FirstInterval::Opening)) => {
                reserve_args(&mut c, s, node)?;
                if s.bundles.is_none() {
                    c.arg("").arg("");
                }
                c.arg("1");
            }
            (Step::Debit(s), None) => {
                debit_args(&mut c, s, node)?;
            }
            (
                Step::Debit(s),
                Some(&FirstInterval::Usage {
                    opening_amount,
                    first_interval,
                    unmarked_opening,
                }),
            ) => {
                if s.reservation.is_none() {
                    return Err(encode_err(
                        "first interval",
                        "a usage debit needs a reservation",
                    ));
                }
                non_negative("opening amount", opening_amount)?;
                exact_u("first interval", first_interval)?;
                debit_args(&mut c, s, node)?;
                if s.bundles.is_none() {
                    c.arg("").arg("").arg("");
                }
                c.arg(opening_amount)
                    .arg(first_interval)
                    .arg(if unmarked_opening { "1" } else { "0" });
            }
            (_, Some(_)) => {
                return Err(encode_err(
                    "first interval",
                    "only for a reserve (opening) or a debit (usage)",
                ));
            }
            (Step::Release(s), None) => {
                c.arg(reservation_field(&s.session, s.key));
            }
            (Step::Refund(s), None) => {
                non_negative("amount", s.amount)?;
                c.arg(s.amount).arg(node).arg(cdr_json(&s.cdr)?);
            }
            (Step::TopUp(s), None) => {
                non_negative("amount", s.amount)?;
                if s.amount == 0 {
                    return Err(encode_err("amount", "a top-up must be positive"));
                }
                c.arg(s.amount);
            }
            (Step::Expire(s), None) => {
                c.arg(&s.session)
                    .arg(s.owner.as_deref().unwrap_or(""))
                    .arg(node)
                    .arg(cdr_json(&s.cdr)?);
            }
            (Step::End(s), None) => {
                c.arg(&s.session);
            }
            (Step::Check(s), None) => {
                non_negative("money", s.money)?;
                exact_u("units", s.units)?;
                c.arg(s.money).arg(s.units);
                match &s.bundles {
                    Some(b) => {
                        c.arg(bundle_list(&b.bundles)).arg(pricing(&b.pricing)?);
                    }
                    None if s.cdr.is_some() => {
                        c.arg("").arg("");
                    }
                    None => {}
                }
                if let Some(cdr) = &s.cdr {
                    c.arg(node).arg(cdr_json(cdr)?);
                }
            }
            (Step::Session(_), None) => {}
        }
        Ok(c)
    }

    /// The slot a step runs in: its account's, or its session's for a
    /// session record.
    fn slot_of(&self, step: &Step) -> u16 {
        match step {
            Step::Session(s) => super::keys::slot(self.keys.session(&s.session).as_bytes()),
            s => self.keys.account_slot(s.account()),
        }
    }

    /// The records of `sessions` ([`SessionRecord`]; none where the
    /// cluster holds none, or where it holds something unreadable), read
    /// with one pipeline of `GET`s per master, concurrently: one round
    /// trip for all of them. A key whose answer is a redirection is read
    /// again on its own. An error is per session.
    pub async fn sessions(&self, sessions: &[&str]) -> Vec<Result<Option<SessionRecord>>> {
        let keys: Vec<String> = sessions.iter().map(|s| self.keys.session(s)).collect();
        self.get_many(&keys, "GET session")
            .await
            .into_iter()
            .map(|r| r.map(|v| v.and_then(|v| serde_json::from_str(&v).ok())))
            .collect()
    }

    /// The claims of subscriber identities (accounts created through the
    /// operator API; none where the identity is not claimed), read like
    /// [`RedisLedger::sessions`]: one pipeline of `GET`s per master, one
    /// round trip for all of them. A claim whose account does not exist
    /// (its creator died before creating it, or it was deleted since) is
    /// returned as it is: the caller's steps find no account (5030).
    pub async fn claims(&self, ids: &[&SubscriptionId]) -> Vec<Result<Option<Claim>>> {
        let keys: Vec<String> = ids
            .iter()
            .map(|id| self.keys.subscriber(id.kind, &id.data))
            .collect();
        self.get_many(&keys, "GET subscriber")
            .await
            .into_iter()
            .map(|r| r.map(|v| v.as_deref().and_then(parse_claim)))
            .collect()
    }

    /// `GET` of every key of `keys` (string values), one pipeline per
    /// master, concurrently; a key answered with a redirection is read
    /// again on its own. An error is per key.
    async fn get_many(&self, keys: &[String], op: &'static str) -> Vec<Result<Option<String>>> {
        let slots: Vec<u16> = keys
            .iter()
            .map(|k| super::keys::slot(k.as_bytes()))
            .collect();
        let mut by_master: HashMap<usize, Vec<usize>> = HashMap::new();
        {
            let shards = self.shards.read().ok();
            for (i, &slot) in slots.iter().enumerate() {
                let master = shards
                    .as_ref()
                    .and_then(|s| s.owner.get(usize::from(slot)).copied())
                    .unwrap_or(usize::MAX);
                by_master.entry(master).or_default().push(i);
            }
        }
        let groups: Vec<Vec<usize>> = by_master.into_values().collect();
        let reads = groups.iter().map(|members| {
            let mut pipe = redis::pipe();
            for &i in members {
                pipe.cmd("GET").arg(&keys[i]);
            }
            let slot = slots[members[0]];
            let count = members.len();
            let mut conn = self.conn.clone();
            async move {
                let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
                conn.route_pipeline(pipe, 0, count, route).await
            }
        });
        let mut out: Vec<Option<Result<Option<String>>>> = (0..keys.len()).map(|_| None).collect();
        let mut again = Vec::new();
        for (members, read) in groups
            .iter()
            .zip(futures_util::future::join_all(reads).await)
        {
            match read {
                Ok(values) if values.len() == members.len() => {
                    for (&i, v) in members.iter().zip(&values) {
                        out[i] = Some(match v {
                            Value::Nil => Ok(None),
                            Value::ServerError(_) => {
                                again.push(i);
                                continue;
                            }
                            v => Ok(text(v)),
                        });
                    }
                }
                Ok(_) => again.extend(members.iter().copied()),
                Err(e) => {
                    let e = classify(op, &e);
                    for &i in members {
                        out[i] = Some(Err(e.clone_shallow()));
                    }
                }
            }
        }
        if !again.is_empty() {
            let _ = self.refresh_shards().await;
        }
        for i in again {
            let mut c = redis::cmd("GET");
            c.arg(&keys[i]);
            out[i] = Some(self.call(c, slots[i], op).await.map(|v| {
                if matches!(v, Value::Nil) {
                    None
                } else {
                    text(&v)
                }
            }));
        }
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(encode_err("value", "no answer"))))
            .collect()
    }

    /// Runs one step on its own (a round trip, plus `WAIT` with
    /// `replicas_ack = 1`).
    pub async fn step(&self, step: &Step, now: Timestamp) -> Result<Answer> {
        let c = self.command(step, None, now)?;
        self.step_alone(step, c).await
    }

    async fn step_alone(&self, step: &Step, c: Cmd) -> Result<Answer> {
        self.stats.alone.fetch_add(1, Ordering::Relaxed);
        let slot = self.slot_of(step);
        let v = self.call(c, slot, step.function()).await?;
        let a = answer(step, &v)?;
        self.wait_replica(slot).await?;
        Ok(a)
    }

    /// With `replicas_ack = 1`: `WAIT 1` on the master of `slot`.
    async fn wait_replica(&self, slot: u16) -> Result<()> {
        if self.opts.replicas_ack == 0 {
            return Ok(());
        }
        let mut w = redis::cmd("WAIT");
        w.arg(1).arg(self.wait_ms());
        let acked = self.call(w, slot, "WAIT").await?;
        if int(&acked).unwrap_or(0) < 1 {
            return Err(Error::NotReplicated {
                node: self.master_of(slot),
                timeout_ms: self.wait_ms(),
            });
        }
        Ok(())
    }

    fn wait_ms(&self) -> u64 {
        u64::try_from(self.opts.wait_timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    fn master_of(&self, slot: u16) -> String {
        self.shards
            .read()
            .ok()
            .and_then(|s| {
                let i = *s.owner.get(usize::from(slot))?;
                s.masters.get(i).cloned()
            })
            .unwrap_or_else(|| format!("slot {slot}"))
    }

    /// Group commit: runs the steps of one event-loop turn as one pipeline
    /// per master, concurrently, and returns one result per step, in
    /// order, once every pipeline has answered (with `replicas_ack = 1`,
    /// once a replica of each master confirmed its pipeline). A step whose
    /// pipeline answer is a redirection or a missing function is sent
    /// again on its own (its request key makes that safe). An error is per
    /// step: [`Error::Unavailable`] and [`Error::NotReplicated`] mean
    /// "answer 3004; the step may have run, retry it with the same key".
    pub async fn run(&self, steps: &[Step], now: Timestamp) -> Vec<Result<Answer>> {
        self.run_any(steps, now).await
    }

    /// [`RedisLedger::run`] for the steps of sessions' requests, each
    /// with how a tariff's first interval applies to it
    /// ([`FirstInterval`]).
    pub async fn run_planned(&self, steps: &[PlannedStep], now: Timestamp) -> Vec<Result<Answer>> {
        self.run_any(steps, now).await
    }

    async fn run_any<P: Planned>(&self, steps: &[P], now: Timestamp) -> Vec<Result<Answer>> {
        let mut results: Vec<Option<Result<Answer>>> = (0..steps.len()).map(|_| None).collect();
        let mut commands: Vec<Option<Cmd>> = Vec::with_capacity(steps.len());
        // Steps by master (index into the shard map; usize::MAX unknown).
        let mut by_master: HashMap<usize, Vec<usize>> = HashMap::new();
        {
            let shards = self.shards.read().ok();
            for (i, planned) in steps.iter().enumerate() {
                let step = planned.step();
                match self.command(step, planned.first_interval(), now) {
                    Ok(c) => {
                        let slot = self.slot_of(step);
                        let master = shards
                            .as_ref()
                            .and_then(|s| s.owner.get(usize::from(slot)).copied())
                            .unwrap_or(usize::MAX);
                        by_master.entry(master).or_default().push(i);
                        commands.push(Some(c));
                    }
                    Err(e) => {
                        results[i] = Some(Err(e));
                        commands.push(None);
                    }
                }
            }
        }
        let groups: Vec<Vec<usize>> = by_master.into_values().collect();
        self.stats
            .steps
            .fetch_add(steps.len() as u64, Ordering::Relaxed);
        self.stats
            .pipelines
            .fetch_add(groups.len() as u64, Ordering::Relaxed);
        let wait = self.opts.replicas_ack > 0;
        let sends = groups.iter().map(|members| {
            let mut pipe = redis::pipe();
            for &i in members {
                if let Some(c) = &commands[i] {
                    pipe.add_command(c.clone());
                }
            }
            if wait {
                pipe.cmd("WAIT").arg(1).arg(self.wait_ms());
            }
            let slot = self.slot_of(steps[members[0]].step());
            let count = members.len() + usize::from(wait);
            let mut conn = self.conn.clone();
            async move {
                let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
                match conn.route_pipeline(pipe, 0, count, route).await {
                    Ok(values) => Sent::Values(values),
                    Err(e) => Sent::Failed(classify("pipeline", &e)),
                }
            }
        });
        let began = std::time::Instant::now();
        let sent = futures_util::future::join_all(sends).await;
        let micros = u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.stats.batch_micros.fetch_add(micros, Ordering::Relaxed);
        self.stats
            .batch_micros_max
            .fetch_max(micros, Ordering::Relaxed);
        let mut again = Vec::new();
        let mut stale_map = false;
        for (members, sent) in groups.iter().zip(sent) {
            let values = match sent {
                Sent::Values(v) if v.len() == members.len() + usize::from(wait) => v,
                Sent::Values(v) => {
                    for &i in members {
                        results[i] = Some(Err(Error::Redis {
                            op: "pipeline",
                            reason: format!("{} answers to {} commands", v.len(), members.len()),
                        }));
                    }
                    continue;
                }
                Sent::Failed(e) => {
                    stale_map = true;
                    for &i in members {
                        results[i] = Some(Err(e.clone_shallow()));
                    }
                    continue;
                }
            };
            let replicated = !wait || values.last().and_then(int).unwrap_or(0) >= 1;
            for (&i, v) in members.iter().zip(&values) {
                let step = steps[i].step();
                results[i] = Some(match v {
                    Value::ServerError(se) => {
                        let e = RedisError::from(se.clone());
                        if e.is_cluster_error()
                            || function_missing(&e)
                            || !matches!(e.retry_method(), RetryMethod::NoRetry)
                        {
                            stale_map |= e.is_cluster_error();
                            self.stats.redirected.fetch_add(1, Ordering::Relaxed);
                            again.push(i);
                            continue;
                        }
                        Err(classify(step.function(), &e))
                    }
                    v if !replicated => {
                        let _ = v;
                        Err(Error::NotReplicated {
                            node: self.master_of(self.slot_of(step)),
                            timeout_ms: self.wait_ms(),
                        })
                    }
                    v => answer(step, v),
                });
            }
        }
        if stale_map {
            let _ = self.refresh_shards().await;
        }
        for i in again {
            results[i] = Some(match commands[i].take() {
                Some(c) => self.step_alone(steps[i].step(), c).await,
                None => Err(encode_err("step", "no command")),
            });
        }
        let results: Vec<Result<Answer>> = results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(encode_err("step", "no answer"))))
            .collect();
        let failed = results.iter().filter(|r| r.is_err()).count();
        self.stats
            .failed
            .fetch_add(failed as u64, Ordering::Relaxed);
        results
    }

    /// An account as the cluster holds it; `None` if there is none.
    pub async fn account(&self, account: AccountId) -> Result<Option<AccountState>> {
        let mut c = redis::cmd("HGETALL");
        c.arg(self.keys.account(account));
        let v = self
            .call(c, self.keys.account_slot(account), "HGETALL")
            .await?;
        Ok(account_state(account, &v))
    }

    /// The open reservations of an account.
    pub async fn reservations(&self, account: AccountId) -> Result<Vec<ReservationState>> {
        let mut c = redis::cmd("HGETALL");
        c.arg(self.keys.reservations(account));
        let v = self
            .call(c, self.keys.account_slot(account), "HGETALL")
            .await?;
        let mut out = Vec::new();
        for (field, value) in pairs(&v) {
            let Some((session, key)) = field.rsplit_once('|') else {
                continue;
            };
            let Some(key) = parse_rating_key(key) else {
                continue;
            };
            let Some(r) = parse_reservation(value.as_str()) else {
                continue;
            };
            out.push(ReservationState {
                session: session.to_string(),
                key,
                money: r.money,
                units: r.units,
                expires: Timestamp(r.expires),
                since: Timestamp(r.since),
                owner: r.owner.to_string(),
                bundle_holds: r.holds,
                opening: r.opening,
            });
        }
        Ok(out)
    }

    /// Every CDR in the stream of `slot`, oldest first.
    pub async fn cdrs(&self, slot: u16) -> Result<Vec<StreamCdr>> {
        self.read_stream(slot, None, None).await
    }

    /// The CDRs of the stream of `slot` after entry `after` (from the
    /// start when none), at most `count`.
    pub(super) async fn read_stream(
        &self,
        slot: u16,
        after: Option<&str>,
        count: Option<usize>,
    ) -> Result<Vec<StreamCdr>> {
        let mut c = redis::cmd("XRANGE");
        c.arg(self.keys.cdr_stream(slot));
        match after {
            Some(id) => c.arg(format!("({id}")),
            None => c.arg("-"),
        };
        c.arg("+");
        if let Some(n) = count {
            c.arg("COUNT").arg(n.max(1));
        }
        let v = self.call(c, slot, "XRANGE").await?;
        let Value::Array(entries) = v else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(entries.len());
        for e in &entries {
            let Value::Array(e) = e else { continue };
            let (Some(id), Some(fields)) = (e.first().and_then(text), e.get(1)) else {
                continue;
            };
            let fields = pairs(fields);
            let get = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v);
            let num = |name: &str| get(name).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
            let mut cdr: Cdr = match get("cdr").map(|j| serde_json::from_str(j)) {
                Some(Ok(c)) => c,
                _ => {
                    return Err(Error::Redis {
                        op: "XRANGE",
                        reason: format!("stream entry {id} holds no CDR"),
                    })
                }
            };
            cdr.sequence = u64::try_from(num("seq")).unwrap_or(0);
            cdr.node_id = get("node").cloned().unwrap_or_default();
            cdr.account = AccountId(u64::try_from(num("account")).unwrap_or(0));
            cdr.amount = num("amount");
            cdr.unbilled = num("unbilled");
            cdr.balance_after = num("balance_after");
            if get("bundle_units").is_some() {
                cdr.bundle_units = u64::try_from(num("bundle_units")).unwrap_or(0);
            }
            if get("rated_units").is_some() {
                cdr.rated_units = u64::try_from(num("rated_units")).unwrap_or(0);
            }
            if get("result_code").is_some() {
                cdr.result_code = u32::try_from(num("result_code")).unwrap_or(0);
            }
            out.push(StreamCdr { slot, id, cdr });
        }
        Ok(out)
    }

    /// The CDRs of one account (from its slot's stream).
    pub async fn account_cdrs(&self, account: AccountId) -> Result<Vec<StreamCdr>> {
        let slot = self.keys.account_slot(account);
        let mut all = self.cdrs(slot).await?;
        all.retain(|c| c.cdr.account == account);
        Ok(all)
    }

    /// Releases the reservations of every session in the namespace whose
    /// deadline has passed by `now` (only those `owner` made, when given:
    /// a dead node's), each with a session-end CDR (closing cause
    /// supervision-expired): the due sessions of each master's slots are
    /// read in one pipeline per master (at most `limit_per_slot` per slot;
    /// the rest are found by the next call), then expired as one batch.
    /// Another node doing the same at the same time is harmless: the
    /// first to expire a session releases it, the other finds nothing.
    pub async fn expire_due(
        &self,
        now: Timestamp,
        owner: Option<&str>,
        limit_per_slot: usize,
    ) -> Result<ExpiryReport> {
        let by_master = self.slots_by_master("expire")?;
        let reads = by_master.iter().map(|(master, slots)| {
            let mut pipe = redis::pipe();
            for &slot in slots {
                pipe.cmd("ZRANGE")
                    .arg(self.keys.expiry(slot))
                    .arg("-inf")
                    .arg(now.as_millis())
                    .arg("BYSCORE")
                    .arg("LIMIT")
                    .arg(0)
                    .arg(limit_per_slot.max(1));
            }
            let (host, port) = master.rsplit_once(':').unwrap_or((master, "0"));
            let route = SingleNodeRoutingInfo::ByAddress {
                host: host.to_string(),
                port: port.parse().unwrap_or(0),
            };
            let mut conn = self.conn.clone();
            let count = slots.len();
            async move { conn.route_pipeline(pipe, 0, count, route).await }
        });
        let mut report = ExpiryReport::default();
        let mut steps = Vec::new();
        for read in futures_util::future::join_all(reads).await {
            let values = match read {
                Ok(v) => v,
                Err(e) => {
                    report.errors.push(classify("expire scan", &e));
                    continue;
                }
            };
            for v in values {
                let Value::Array(members) = v else {
                    // A slot that moved meanwhile: the next call finds it.
                    report.slots_skipped += 1;
                    continue;
                };
                for m in members.iter().filter_map(text) {
                    let Some((account, session)) = m.split_once('|') else {
                        continue;
                    };
                    let Ok(account) = account.parse::<u64>() else {
                        continue;
                    };
                    let cdr = Cdr {
                        record_type: gyro_charging::RecordType::SessionEnd,
                        closing_cause: Some(gyro_charging::ClosingCause::SupervisionExpired),
                        session_id: session.to_string(),
                        result_code: gyro_charging::result_code::SUCCESS,
                        started: now,
                        ended: now,
                        ..Cdr::default()
                    };
                    steps.push(Step::Expire(super::Expire {
                        account: AccountId(account),
                        request: format!("expire;{session};{}", now.as_millis()),
                        session: session.to_string(),
                        owner: owner.map(String::from),
                        cdr,
                    }));
                }
            }
        }
        report.due = steps.len() as u64;
        for answer in self.run(&steps, now).await {
            match answer {
                Ok(Answer {
                    outcome:
                        Outcome::Expired {
                            reservations,
                            money,
                            ..
                        },
                    ..
                }) => {
                    if reservations > 0 {
                        report.sessions += 1;
                    }
                    report.reservations += reservations;
                    report.money += money;
                }
                Ok(_) => {}
                Err(e) => report.errors.push(e),
            }
        }
        Ok(report)
    }

    /// Sessions of the accounts in `slot` with a reservation whose expiry
    /// is at or before `now`, as `(account, session)`, at most `limit`.
    pub async fn due_sessions(
        &self,
        slot: u16,
        now: Timestamp,
        limit: usize,
    ) -> Result<Vec<(AccountId, String)>> {
        let mut c = redis::cmd("ZRANGE");
        c.arg(self.keys.expiry(slot))
            .arg("-inf")
            .arg(now.as_millis())
            .arg("BYSCORE")
            .arg("LIMIT")
            .arg(0)
            .arg(limit);
        let v = self.call(c, slot, "ZRANGE").await?;
        let Value::Array(members) = v else {
            return Ok(Vec::new());
        };
        Ok(members
            .iter()
            .filter_map(text)
            .filter_map(|m| {
                let (a, s) = m.split_once('|')?;
                Some((AccountId(a.parse().ok()?), s.to_string()))
            })
            .collect())
    }
}

/// An account hash's fields as an [`AccountState`] (none when the hash is
/// empty: no such account).
fn account_state(account: AccountId, v: &Value) -> Option<AccountState> {
    let fields = pairs(v);
    if fields.is_empty() {
        return None;
    }
    let get = |name: &str| -> i64 {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0)
    };
    Some(AccountState {
        account,
        balance: get("balance"),
        credit_limit: get("credit_limit"),
        blocked: get("blocked") == 1,
        reserved: get("reserved"),
        debited: get("debited"),
        initial: get("initial"),
        topped_up: get("topped_up"),
        bundles: {
            let mut b: Vec<BundleState> = fields
                .iter()
                .filter_map(|(k, v)| {
                    let id = k.strip_prefix("b:")?.parse().ok()?;
                    let mut n = v.split(' ').map(|x| x.parse::<u64>().ok());
                    Some(BundleState {
                        id,
                        initial: n.next()??,
                        remaining: n.next()??,
                        reserved: n.next()??,
                        consumed: n.next()??,
                    })
                })
                .collect();
            b.sort_by_key(|b| b.id);
            b
        },
        definition: fields
            .iter()
            .find(|(k, _)| k == "def")
            .and_then(|(_, v)| serde_json::from_str(v).ok()),
    })
}

/// A claim's value: `"<account id> <claimed at ms> <definition JSON>"`.
fn claim_value(account: AccountId, at: Timestamp, definition: &str) -> String {
    format!("{} {} {definition}", account.0, at.as_millis())
}

/// A claim's value, parsed.
fn parse_claim(v: &str) -> Option<Claim> {
    let mut parts = v.splitn(3, ' ');
    let account = AccountId(parts.next()?.parse().ok()?);
    let at = Timestamp(parts.next()?.parse().ok()?);
    let definition = parts.next().and_then(|j| serde_json::from_str(j).ok());
    Some(Claim {
        account,
        at,
        definition,
    })
}

/// A reservation's value, parsed.
struct ParsedReservation<'a> {
    money: i64,
    units: u64,
    expires: u64,
    since: u64,
    holds: Vec<(u32, u64)>,
    opening: Option<bool>,
    owner: &'a str,
}

/// `"money units expires since b<holds> o<opening> owner"` (as library
/// versions 5 to 8 wrote it, without the opening mark; as version 4
/// wrote it, without the holds either). Owners have no spaces.
fn parse_reservation(value: &str) -> Option<ParsedReservation<'_>> {
    let mut parts = value.splitn(5, ' ');
    let money = parts.next()?.parse::<i64>().ok()?;
    let mut num = || parts.next().and_then(|p| p.parse::<u64>().ok());
    let (units, expires, since) = (num()?, num()?, num()?);
    let rest = parts.next().unwrap_or("");
    let (holds, rest) = match rest.split_once(' ') {
        Some((h, rest))
            if h.starts_with('b')
                && h[1..]
                    .bytes()
                    .all(|c| c.is_ascii_digit() || c == b':' || c == b',') =>
        {
            (parse_holds(&h[1..]), rest)
        }
        _ => (Vec::new(), rest),
    };
    let (opening, owner) = match rest.split_once(' ') {
        Some(("o1", owner)) => (Some(true), owner),
        Some(("o0", owner)) => (Some(false), owner),
        _ => (None, rest),
    };
    Some(ParsedReservation {
        money,
        units,
        expires,
        since,
        holds,
        opening,
        owner,
    })
}

/// `"<id>:<units>,<id>:<units>"`.
fn parse_holds(s: &str) -> Vec<(u32, u64)> {
    s.split(',')
        .filter_map(|h| {
            let (id, units) = h.split_once(':')?;
            Some((id.parse().ok()?, units.parse().ok()?))
        })
        .collect()
}

/// A flat `[k1, v1, k2, v2, ...]` (or RESP3 map) answer as string pairs.
fn pairs(v: &Value) -> Vec<(String, String)> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|kv| Some((text(kv.first()?)?, text(kv.get(1)?)?)))
            .collect(),
        Value::Map(items) => items
            .iter()
            .filter_map(|(k, v)| Some((text(k)?, text(v)?)))
            .collect(),
        _ => Vec::new(),
    }
}

impl Error {
    /// A copy of a Redis error (for the steps sharing one failed
    /// pipeline); other errors become their message.
    fn clone_shallow(&self) -> Error {
        match self {
            Error::Unavailable { op, reason } => Error::Unavailable {
                op,
                reason: reason.clone(),
            },
            Error::Redis { op, reason } => Error::Redis {
                op,
                reason: reason.clone(),
            },
            Error::NotReplicated { node, timeout_ms } => Error::NotReplicated {
                node: node.clone(),
                timeout_ms: *timeout_ms,
            },
            other => Error::Redis {
                op: "pipeline",
                reason: other.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_send<T: Send>(_: &T) {}
    fn is_send_sync<T: Send + Sync>() {}

    /// Compiled, never run: the ledger is shared between tasks and its
    /// calls may be awaited on any runtime thread.
    #[allow(dead_code)]
    fn calls_are_send(ledger: &RedisLedger) {
        is_send(&ledger.run(&[], Timestamp(0)));
        is_send(&ledger.books());
        is_send(&ledger.open_account(AccountId(1), 0, 0, false));
    }

    #[test]
    fn reservations_of_every_library_version_are_read() {
        let r = parse_reservation("60 10 99 5 b1:3 o1 node-a").unwrap();
        assert_eq!(
            (r.money, r.units, r.expires, r.since, r.opening, r.owner),
            (60, 10, 99, 5, Some(true), "node-a")
        );
        assert_eq!(r.holds, vec![(1, 3)]);
        let r = parse_reservation("60 10 99 5 b o0 node-a").unwrap();
        assert_eq!((r.opening, r.owner), (Some(false), "node-a"));
        // Versions 5 to 8: no opening mark; version 4: no holds either.
        let r = parse_reservation("60 10 99 5 b1:3 node-a").unwrap();
        assert_eq!(
            (r.opening, r.owner, r.holds),
            (None, "node-a", vec![(1, 3)])
        );
        let r = parse_reservation("60 10 99 5 node-a").unwrap();
        assert_eq!((r.opening, r.owner, r.holds), (None, "node-a", vec![]));
    }

    #[test]
    fn the_ledger_can_be_shared_between_threads() {
        is_send_sync::<RedisLedger>();
    }

    #[test]
    fn answers_that_are_not_the_functions_are_errors() {
        let step = Step::TopUp(super::super::TopUp {
            account: AccountId(1),
            request: "r".into(),
            amount: 1,
        });
        for v in [
            Value::Nil,
            Value::Array(vec![Value::Int(0), Value::Int(2001)]),
            Value::Array(vec![Value::Int(0); 6]),
            Value::Array(vec![
                Value::Int(0),
                Value::Int(-1),
                Value::Int(0),
                Value::Int(0),
            ]),
        ] {
            assert!(answer(&step, &v).is_err(), "{v:?}");
        }
        let ok = Value::Array(vec![
            Value::Int(1),
            Value::Int(2001),
            Value::Int(7),
            Value::Int(9),
            Value::Int(3),
        ]);
        assert_eq!(
            answer(&step, &ok).unwrap(),
            Answer {
                replayed: true,
                code: 2001,
                outcome: Outcome::ToppedUp {
                    balance: 7,
                    topped_up: 9,
                    amount: Some(3),
                }
            }
        );
        // Remembered by library version 5: no amount.
        let v5 = Value::Array(vec![
            Value::Int(1),
            Value::Int(2001),
            Value::Int(7),
            Value::Int(9),
        ]);
        assert!(matches!(
            answer(&step, &v5).unwrap().outcome,
            Outcome::ToppedUp { amount: None, .. }
        ));
    }
}
