//! The Redis Cluster ledger: several gyro nodes sharing balances.
//!
//! # Why a module of the store crate
//!
//! This is the second ledger backend behind the store seam the design
//! names (`store/`: "the embedded journal / snapshots / CDR files, and the
//! Redis Cluster backend behind one trait"): like the embedded journal it
//! knows accounts, money steps and CDRs, not the engine, and it shares the
//! store's one error type ([`crate::Error`], whose
//! [`crate::ErrorKind::Unavailable`] tells the caller to answer 3004).
//! Unlike the rest of the crate it is asynchronous (tokio), because it
//! talks to a network service: the event loop hands it a batch and awaits
//! the answers instead of handing a job to a sync thread.
//!
//! # Money rules
//!
//! The engine's: for every account, `initial + topped_up = balance +
//! reserved + debited` after every step; the balance goes below zero only
//! down to `-credit_limit`; usage beyond what the account can pay is
//! recorded as `unbilled`, never charged; every unit of money debited or
//! refunded is in exactly one CDR's `amount`.
//!
//! Every step that changes money is one Redis Function call (the library
//! `gyro` in `ledger.lua`, embedded here and loaded with `FUNCTION LOAD
//! REPLACE` on every master), so it is atomic on the master of the
//! account's slot, and it is idempotent by its request key: the function
//! stores its answer under the request key (for
//! [`RedisOptions::answer_ttl`]) in the same atomic step, and a call with a
//! key it remembers changes nothing and returns the same answer, marked
//! [`Answer::replayed`]. A retry after a timeout, a lost connection or a
//! failover never charges twice. A debit, a refund and an expiry append
//! their CDR to the slot's stream in the same step, so a change of money
//! and its CDR are committed (and replicated) together or not at all.
//!
//! # Keys
//!
//! All keys of one account, and the per-slot keys its steps touch, hash to
//! one slot (`<ns>` is [`RedisOptions::namespace`]; `<tag>` is a short tag
//! that hashes to the account's slot, see [`keys::slot_tag`]):
//!
//! ```text
//! <ns>:{acct:<id>}              hash    balance credit_limit blocked reserved
//!                                       debited initial topped_up, and per bundle
//!                                       b:<id> -> "initial remaining reserved consumed"
//! <ns>:{acct:<id>}:res          hash    <session-id>|<rg>:<sid> ->
//!                                       "money units expires_at since b<holds> o<opening> owner"
//!                                       (holds: "<bundle id>:<units>,..."; opening: 1 when
//!                                       the session's opening request made it, else 0)
//! <ns>:{acct:<id>}:req:<rk>     string  remembered answer of request rk (PX ttl)
//! <ns>:{<tag>}:exp              zset    "<id>|<session-id>" by the session's deadline
//!                                       (Tcc: the expiry of its latest reservation)
//! <ns>:{<tag>}:cdr              stream  CDRs of the slot: seq node account amount
//!                                       unbilled balance_after at cdr(JSON)
//! <ns>:{<tag>}:seq              string  last CDR sequence number of the slot
//! <ns>:{<tag>}:exporter         string  the node exporting the slot's stream (lease, PX)
//! <ns>:{<tag>}:exported         string  "<seq> <entry id>": exported and fsynced up to
//! <ns>:{sess:<session-id>}      string  the session's record (JSON of [`SessionRecord`]),
//!                                       PX its Tcc deadline (a minute once ended)
//! <ns>:{acct:<id>}:deleted      string  tombstone of a deleted (or buried) account
//! <ns>:{sub:<kind>:<data>}      string  claim of a subscriber identity by an account
//!                                       created through the operator API:
//!                                       "<id> <claimed at ms> <definition JSON>"
//! <ns>:{ids}:account            string  last id given to such an account
//! ```
//!
//! An account created through the operator API also keeps its
//! [`AccountDefinition`] (identities, plan name, bundle definitions) as
//! JSON in the field `def` of its hash.
//!
//! The session record is the one key not in an account's slot: it is
//! found from the Session-Id alone, by any node, so that a CCR-Update or
//! -Terminate of a session another node opened (a gateway failing over)
//! can be charged to its account. It is written with a plain `SET ... PX`
//! ([`Step::Session`]) in the same batch as the money steps, not inside
//! them (a function touches one slot only), and read with one pipeline of
//! `GET`s per master for all the sessions of a batch
//! ([`RedisLedger::sessions`]).
//!
//! A CDR in the stream is the engine's [`gyro_charging::Cdr`] as JSON
//! (field `cdr`) with the fields the ledger decides beside it: `seq`
//! (gap-free per slot stream), `account`, `amount`, `unbilled`,
//! `balance_after`, `node`. [`RedisLedger::cdrs`] reads them back as
//! [`Cdr`]s with those fields filled in.
//!
//! # Functions
//!
//! | function       | step                                                       |
//! |----------------|------------------------------------------------------------|
//! | `gyro_open`    | create an account (with its bundles) unless it exists      |
//! | `gyro_reserve` | bundles' remaining units, then balance -> reservation (all, what the account can pay, or 4012); a new reservation records whether the session's opening request made it |
//! | `gyro_debit`   | charge from the reservation's bundle holds, free bundle units past the grant, the reservation's money, then the balance (with a tariff's first interval when the reservation is the opening one); optionally release the rest; CDR |
//! | `gyro_release` | reservation -> balance and bundles                         |
//! | `gyro_refund`  | debited -> balance; CDR with a negative amount             |
//! | `gyro_topup`   | money added to balance and topped_up                       |
//! | `gyro_update`  | an account's status and/or credit limit set                |
//! | `gyro_delete`  | an account without reservations deleted; its tombstone left |
//! | `gyro_expire`  | release a session's reservations once its deadline has passed (optionally only a given owner node's); session-end CDR |
//! | `gyro_end`     | release every reservation a session still holds on the account (CCR-Terminate); no CDR |
//! | `gyro_check`   | could the account pay for some units now (CHECK_BALANCE; reads only, or writes the event CDR of a CHECK_BALANCE or PRICE_ENQUIRY) |
//! | `gyro_account_id` | raise the id counter above a floor; take the next id   |
//! | `gyro_claim`   | claim a subscriber identity for an account (set-if-absent, or over a stale claim of a named account) |
//! | `gyro_unclaim` | free an identity if the account holds it                   |
//! | `gyro_bury`    | tombstone an account that does not exist (a stale claim's) |
//! | `gyro_create`  | create an account of the operator API with its definition, unless it exists or was deleted/buried |
//! | `gyro_export_lease` | take or renew the lease of a slot's CDR stream; its cursor and pinned range |
//! | `gyro_export_pin` | pin the range of the file about to be written (or learn the one pinned) |
//! | `gyro_export_ack` | move the cursor past a fsynced file and trim the stream |
//! | `gyro_version` | the library's version (read-only)                          |
//!
//! [`RedisLedger::expire_due`] finds the sessions past their deadline in
//! every slot's index and expires them (a dead node's, or any silent
//! session's), each with a session-end CDR.
//!
//! [`RedisLedger::books`] checks the money rule for every account of a
//! namespace over the whole cluster (and that each account's reservations
//! add up to its `reserved`), and the bundle rule for every bundle
//! (`initial = remaining + reserved + consumed`, its `reserved` the sum of
//! the holds of the account's reservations), naming what does not add up.
//!
//! # Bundles
//!
//! An account's bundles (units used before money) are counted in its
//! hash, so that a step changes bundles, money and the CDR atomically.
//! Which bundles may pay for a service (their unit, rating groups and
//! service ids, validity) is decided by the caller from the charging
//! configuration, which names them in the account's order
//! ([`BundleUse`]); the functions keep the counts and, when bundles pay
//! part of a grant or a usage, price the rest with the tariff the caller
//! passes ([`Pricing`]), as the engine does. The engine's order is kept:
//! a grant holds bundle units first, in whole increments of the tariff,
//! and buys the rest with money; a usage report is rounded up to the
//! increment (and the first interval) first, then paid by the
//! reservation's holds, then (past the grant) by free bundle units, then
//! with money for the units left, priced without rounding them again; a
//! release gives the holds back. Since library version 11 a usage Debit
//! is always given the units used (with the tariff), and the CDR the
//! ledger writes says the units it rated them at (`rated_units`); a
//! record written before says what its caller wrote. Reservations,
//! bundles and remembered answers are stored as before: holds an earlier
//! version took (not whole increments) are paid from the same way.
//!
//! # A tariff's first interval
//!
//! The engine's rule: the reservation a session's opening request (its
//! CCR-Initial) made for a rating key pays the tariff's first interval
//! ("60/1": the first minute charged whole) when its usage is first
//! reported, whichever request reports it; a reservation a later request
//! made does not (`gyro_charging::Reservation::opening`). The ledger
//! records it with the reservation (a Reserve planned with
//! [`FirstInterval::Opening`] marks it, any other does not), and a usage
//! Debit planned with [`FirstInterval::Usage`] is priced by it: the
//! caller passes both prices and the reservation chooses
//! ([`RedisLedger::run_planned`]). A reservation written before library
//! version 9 carries no mark; the caller says what it counts as (the rule
//! of those versions: the report is the session's request number 1).
//!
//! # Final units used
//!
//! A usage Debit against a reservation answers the units it granted
//! before the debit (`Outcome::Debited::granted`: its bundle holds and
//! the units its money pays for), so that the caller can tell a report
//! that used its grant up: under a REDIRECT or RESTRICT_ACCESS final-unit
//! action its answer carries the Validity-Time (RFC 8506 sections 5.6.2
//! and 5.6.3), as with the engine. Every reservation a library version
//! wrote records its units, so one written before version 10 reads the
//! same (one written before bundles, without holds, as its money's
//! units); an answer remembered by an earlier version does not say
//! (`None`), and its report counts as not using the grant up.
//!
//! # Accounts created through the operator API
//!
//! The accounts of the charging configuration are found by each node in
//! its own configuration. An account created at run time
//! ([`RedisLedger::create_account`]) is found by every node in the
//! cluster instead: each of its identities is a key of its own, a claim
//! `<ns>:{sub:<kind>:<data>}` naming the account id, when it was claimed
//! and the account's definition (what a node needs to rate it: plan name,
//! bundle definitions), read by any node in one round trip for all the
//! identities of a batch ([`RedisLedger::claims`]). Ids come from the
//! counter `<ns>:{ids}:account`, kept above the configuration's highest
//! id and above any id an operator asked for.
//!
//! A creation is three steps in different slots, so not one atomic step:
//! the id; the claims (each set-if-absent: of two creations of one
//! identity, one gets the claim, the other is refused); the account hash
//! (`gyro_create`, idempotent, refused for an id with a tombstone). A node
//! dying between its claims and its account leaves claims naming an
//! account that does not exist. Such a claim is found by lookups, but
//! every step on its account answers 5030 (no account), as for an
//! unknown subscriber; it never names another account. It is stale once
//! older than the creation's grace (the operator API uses 10 s): the next
//! creation of that identity buries the named account (`gyro_bury`: its
//! tombstone, so that a creator that was only slow cannot create it
//! afterwards) and takes the claim over. Within the grace the identity
//! counts as taken (it may still be being created). Deleting a created
//! account (`gyro_delete`, then `gyro_unclaim` of each identity) frees
//! its identities; a node dying between the two leaves claims naming a
//! deleted account, stale in the same way.
//!
//! # Group commit and `replicas_ack`
//!
//! [`RedisLedger::run`] takes the steps of one event-loop turn, sends them
//! as one pipeline per master (shard) and returns when every pipeline has
//! answered; the caller then releases the answers. A step whose pipeline
//! answer is a redirection (a slot moved, a failover) is sent again on its
//! own, which the request key makes safe.
//!
//! [`RedisOptions::replicas_ack`] says when an answer may be released:
//!
//! * `0`: when the master has run the step. Redis replicates
//!   asynchronously, so if the master dies before its replica received
//!   the step, the promoted replica does not have it: the step is lost
//!   whole (balance change, CDR and remembered answer together, so the
//!   books still add up), but it was acknowledged: the subscriber keeps
//!   the money of a debit he was told about, its CDR never exists, and a
//!   retry of that request is charged anew. The window is the replication
//!   lag (usually well under a millisecond) of the steps in flight when
//!   the master dies.
//! * `1`: each pipeline ends with `WAIT 1 <wait_timeout>`, and the answers
//!   are released only when at least one replica of that master has every
//!   step of the pipeline. When a master dies, its replica (with one
//!   replica per master, the only candidate for promotion) has every
//!   acknowledged step, so a failover loses nothing acknowledged. When no
//!   replica confirms within the timeout, the steps of that pipeline get
//!   [`crate::Error::NotReplicated`]: they did run on the master, so the
//!   caller answers 3004 and a retry returns the remembered answer. Still
//!   not covered: a master and its replica lost together (each keeps what
//!   its append-only file had synced, up to a second behind), and, with
//!   several replicas per master, the promotion of a replica other than
//!   the one that acknowledged (Redis's `WAIT` is not a consensus
//!   protocol). `WAIT` acknowledges receipt in the replica's memory, not a
//!   write to its disk.
//!
//! # Limits
//!
//! Lua numbers are doubles: every amount, balance and unit count must lie
//! within +/- 2^53 (about 9 * 10^15 minor units); the client refuses larger
//! values with [`crate::Error::Encode`]. A reservation's units are only
//! recorded (and, with a partial grant, the whole increments the account
//! can pay, priced with the tariff the caller passes); money is what the
//! ledger checks.
//!
//! # Who uses it
//!
//! `gyro serve` with `[storage] backend = "redis-cluster"`
//! (`gyro_ocs::redis_shard`): it rates locally, sends each event-loop
//! turn's steps (and session records) through [`RedisLedger::run`], after
//! one [`RedisLedger::sessions`] round trip when the turn has sessions the
//! node does not know, and encodes the answers from what the functions
//! answered; a background thread calls
//! [`RedisLedger::expire_due`] and [`RedisLedger::export_all`]
//! periodically. `gyro ledger --config FILE` reads [`RedisLedger::books`].
//! The operator API's top-up is a [`Step::TopUp`] whose request key is
//! the HTTP request's idempotency key (prefixed with `top-up:`), and its
//! account view reads [`RedisLedger::account`] and
//! [`RedisLedger::reservations`]; `POST /v1/accounts` is
//! [`RedisLedger::create_account`], and a node finds the accounts it
//! creates with [`RedisLedger::claims`] (in the batch job, for the
//! Subscription-Ids its configuration lacks).
//!
//! # Not yet
//!
//! * Bundles are created with their account (`gyro_open`) and never
//!   changed from outside afterwards: a bundle added to the charging
//!   configuration later does not reach an account the cluster already
//!   holds, and there is no step to add, renew or remove one.
//! * What a bundle covers and when it is valid is not in the cluster:
//!   every node must run the same charging configuration.
//! * A step that prices units for bundles refuses prices whose product
//!   with the units passes 2^53 (the functions compute in doubles); the
//!   request is answered 3004.
//! * CDR files are closed by record count only (not by size or age).
//! * The accounts of the charging configuration are created at start
//!   (unless a tombstone says the account was deleted); others through
//!   the operator API (above). They are listed by
//!   scanning the namespace ([`RedisLedger::account_ids`]). Status
//!   and credit limit are changed with `gyro_update`; an account without
//!   reservations is deleted with `gyro_delete` (for good: its id cannot
//!   be created again in the namespace).
//! * A top-up's idempotency key is remembered for `answer_ttl` (then the
//!   same key tops up again); the embedded store remembers each
//!   account's latest keys instead. A key remembered by library version
//!   5 has no amount: reused with another amount it replays the first
//!   top-up rather than being refused.
//! * A library upgrade is `FUNCTION LOAD REPLACE` by whichever node
//!   connects last; nodes of different versions must not share a cluster
//!   (`gyro_version` is checked at connect only).
//! * A session record and its reservation are written in one batch but
//!   not in one atomic step (different slots): when the record's `SET`
//!   fails and the gateway does not retry, the reservation is only found
//!   by expiry, at its Tcc deadline.

mod client;
pub mod export;
pub mod keys;

pub use client::RedisLedger;
pub use export::{Export, ExportReport, ExportedFile};

use gyro_charging::{AccountId, Cdr, RatingKey, Timestamp};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// The Redis Functions library, as loaded into every master.
pub const LIBRARY: &str = include_str!("ledger.lua");

/// The version `gyro_version` returns for [`LIBRARY`].
pub const LIBRARY_VERSION: i64 = 11;

/// How to reach the cluster and how to use it.
#[derive(Clone, Debug)]
pub struct RedisOptions {
    /// Seed nodes: `host:port`, `redis://host:port` or `rediss://host:port`
    /// (TLS). Any node of the cluster will do; the rest is discovered.
    pub nodes: Vec<String>,
    /// ACL user name (`AUTH <username> <password>`), if any.
    pub username: Option<String>,
    /// Password, if any.
    pub password: Option<String>,
    /// Connect with TLS (also implied by `rediss://` seeds).
    pub tls: bool,
    /// PEM bundle of the CAs that sign the nodes' certificates (default:
    /// the system's roots).
    pub tls_ca: Option<PathBuf>,
    /// PEM client certificate, for nodes that ask for one (with
    /// `tls_key`).
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// 0 or 1: see the module documentation.
    pub replicas_ack: u8,
    /// How long `WAIT` waits for a replica with `replicas_ack = 1`.
    pub wait_timeout: Duration,
    /// Prefix of every key (no `{` or `}`), so that deployments can share a
    /// cluster.
    pub namespace: String,
    /// This node's name: the owner recorded with its reservations and the
    /// `node` of its CDRs.
    pub node_id: String,
    /// How long a step's answer is remembered for duplicate detection.
    pub answer_ttl: Duration,
    /// Time allowed to connect to a node.
    pub connect_timeout: Duration,
    /// Time allowed for an answer (after which the step is
    /// [`crate::Error::Unavailable`]: it may or may not have run).
    pub response_timeout: Duration,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            nodes: vec!["redis://127.0.0.1:6379".into()],
            username: None,
            password: None,
            tls: false,
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            replicas_ack: 0,
            wait_timeout: Duration::from_millis(1000),
            namespace: "gyro".into(),
            node_id: "gyro".into(),
            answer_ttl: Duration::from_secs(3600),
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(2),
        }
    }
}

/// What [`RedisLedger::delete_account`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deletion {
    /// The account is gone; its tombstone stays.
    Deleted,
    /// There was no such account (never created, or deleted before).
    NoAccount,
    /// It holds reservations (open sessions) or reserved money: nothing
    /// changed.
    InUse,
}

/// How a step prices the units bundles leave to money: the tariff's
/// figures, as [`gyro_charging::Tariff::cost_of`] uses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pricing {
    /// Charging increment (at least 1).
    pub increment: u64,
    /// Price in minor units for each `per` units.
    pub price: i64,
    /// Units `price` pays for (at least 1).
    pub per: u64,
    /// Rounding of money.
    pub rounding: gyro_charging::tariff::Rounding,
    /// First charging interval applied to the units (0: none; the
    /// engine's `first` usage).
    pub first_interval: u64,
}

impl Pricing {
    /// The figures of `tariff` (a free tariff prices everything at 0);
    /// with `first`, its first interval applies (an event's price).
    pub fn of(tariff: &gyro_charging::Tariff, first: bool) -> Pricing {
        Pricing {
            increment: tariff.increment.max(1),
            price: if tariff.is_free() { 0 } else { tariff.price },
            per: tariff.per.max(1),
            rounding: tariff.rounding,
            first_interval: if first { tariff.first_interval } else { 0 },
        }
    }

    /// The price of `units`, as the ledger functions compute it (the same
    /// as the tariff's).
    pub fn cost(&self, units: u64) -> i64 {
        let t = gyro_charging::Tariff {
            increment: self.increment,
            price: self.price,
            per: self.per,
            rounding: self.rounding,
            first_interval: self.first_interval,
            ..gyro_charging::Tariff::default()
        };
        t.cost_of(units, self.first_interval > 0)
    }
}

/// The bundles a step may draw on, and how it prices what they leave to
/// money.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleUse {
    /// Ids of the account's bundles that may pay for the service now
    /// (unit, rating group or service id, validity), in the order the
    /// engine draws on them (the account's order).
    pub bundles: Vec<u32>,
    /// The service's tariff.
    pub pricing: Pricing,
}

/// Moves money from an account's balance to a reservation of a session
/// (added to what that reservation already holds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reserve {
    /// The account.
    pub account: AccountId,
    /// Request key (see [`Step::request`]).
    pub request: String,
    /// Diameter Session-Id.
    pub session: String,
    /// Rating key of the reservation.
    pub key: RatingKey,
    /// Money asked for.
    pub money: i64,
    /// Units that money pays for.
    pub units: u64,
    /// The least money worth granting when the account cannot pay `money`
    /// and no tariff is given (then it grants what it can, units scaled
    /// down); `money` or more asks for all or nothing.
    pub min_money: i64,
    /// When the session's reservations may be released by another node if
    /// nothing more is heard of it (the Tcc deadline): the session's
    /// deadline from now on, for all its reservations on this account.
    pub expires: Timestamp,
    /// Bundles to hold units of first, and the service's tariff (none:
    /// money only, `money` for `units`). When bundles give anything, the
    /// units they cannot give are priced with the bundle use's tariff
    /// (`money` and `min_money` are not used) and bought as the engine
    /// buys them: all, or the most whole increments the account can pay.
    /// With the tariff and no bundle (an empty list), a partial grant is
    /// bought the same way: only the price of the whole increments
    /// granted is reserved, as the engine reserves.
    pub bundles: Option<BundleUse>,
}

/// Charges money: from a session's reservation first, then from the
/// balance; writes its CDR.
#[derive(Clone, Debug, PartialEq)]
pub struct Debit {
    /// The account.
    pub account: AccountId,
    /// Request key.
    pub request: String,
    /// The session and rating key whose reservation pays first; none for
    /// an event (direct debit).
    pub reservation: Option<(String, RatingKey)>,
    /// Money to charge.
    pub amount: i64,
    /// Release what is left of the reservation afterwards.
    pub release: bool,
    /// All or nothing (a direct debit, paid before the service is
    /// rendered): refused with 4010 on a blocked account and 4012 when
    /// the reservation and the balance cannot pay all of `amount`, and
    /// then nothing changes. Otherwise what the account cannot pay is
    /// recorded as unbilled (usage already rendered).
    pub whole: bool,
    /// The engine's CDR; the ledger fills in `sequence`, `node_id`,
    /// `account`, `amount`, `unbilled` and `balance_after` (and
    /// `bundle_units` when bundles paid, `rated_units` when given the
    /// units used).
    pub cdr: Cdr,
    /// The units used and the bundles that may pay for them (none: money
    /// only, the CDR as given). The units are rounded up to the increment
    /// (and the first interval) first, the CDR's `rated_units` set to
    /// them; bundles pay first, as the engine charges usage: the
    /// reservation's bundle holds, then (for units beyond what the
    /// reservation granted) the remaining units of these bundles; when
    /// they pay anything, `amount` is replaced by the price of the units
    /// left (not rounded again).
    pub bundles: Option<(u64, BundleUse)>,
}

/// Gives what is left of a reservation (its money and its bundle holds)
/// back to the balance and the bundles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    /// The account.
    pub account: AccountId,
    /// Request key.
    pub request: String,
    /// Diameter Session-Id.
    pub session: String,
    /// Rating key of the reservation.
    pub key: RatingKey,
}

/// Gives charged money back (REFUND_ACCOUNT); writes its CDR.
#[derive(Clone, Debug, PartialEq)]
pub struct Refund {
    /// The account.
    pub account: AccountId,
    /// Request key.
    pub request: String,
    /// Money to give back.
    pub amount: i64,
    /// The engine's CDR (completed as for [`Debit`]; `amount` is negative).
    pub cdr: Cdr,
}

/// Adds money to an account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopUp {
    /// The account.
    pub account: AccountId,
    /// Request key (the top-up's idempotency key).
    pub request: String,
    /// Money to add, positive.
    pub amount: i64,
}

/// Releases the reservations of a session whose deadline has passed (a
/// session whose node died, or that went silent), with a session-end CDR.
#[derive(Clone, Debug, PartialEq)]
pub struct Expire {
    /// The account.
    pub account: AccountId,
    /// Request key.
    pub request: String,
    /// Diameter Session-Id.
    pub session: String,
    /// Only reservations this node holds (none: any owner).
    pub owner: Option<String>,
    /// The session-end CDR to write when anything was released.
    pub cdr: Cdr,
}

/// Releases every reservation a session still holds on an account (a
/// CCR-Terminate: the services it did not report go too). No CDR: nothing
/// is charged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndSession {
    /// The account.
    pub account: AccountId,
    /// Request key.
    pub request: String,
    /// Diameter Session-Id.
    pub session: String,
}

/// What any node needs to serve a session it did not open: kept under
/// the session's own key ([`keys::Keys::session`]), found from the
/// Session-Id alone.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SessionRecord {
    /// The account the session charges.
    pub account: AccountId,
    /// The subscriber (`kind:data`), for CDRs.
    pub subscriber: String,
    /// Service-Context-Id of the session's CCR-Initial.
    pub service_context: String,
    /// The node that served its latest request.
    pub owner: String,
    /// Its Tcc deadline when written (the record is kept until then).
    pub deadline: Timestamp,
    /// The CC-Request-Number of the CCR-Terminate that ended it (the
    /// record is then kept a short while, so that a retransmission of
    /// that request finds it); none while it is open.
    pub ended: Option<u32>,
}

/// Writes (or renews) a session's record, kept for `ttl` (a plain `SET
/// ... PX` in the session's slot: idempotent, no request key needed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PutSession {
    /// Diameter Session-Id.
    pub session: String,
    /// The record.
    pub record: SessionRecord,
    /// How long the cluster keeps it.
    pub ttl: std::time::Duration,
}

/// A balance check (CHECK_BALANCE): whether the account could pay for
/// `units` now, free bundle units first. Reads only: nothing changes and
/// nothing is remembered.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckBalance {
    /// The account.
    pub account: AccountId,
    /// Request key (names the step in errors; remembered only with a
    /// CDR).
    pub request: String,
    /// What the units cost in money, without bundles.
    pub money: i64,
    /// The units.
    pub units: u64,
    /// The bundles that may pay for them first, and the tariff that
    /// prices the rest.
    pub bundles: Option<BundleUse>,
    /// The event CDR to write (amount 0, the check's Result-Code: a
    /// CHECK_BALANCE or PRICE_ENQUIRY, as the embedded store writes it);
    /// with it the step is remembered by its request key. None: the
    /// step only reads.
    pub cdr: Option<Cdr>,
}

/// One step: a money step, or the write of a session record.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// [`Reserve`].
    Reserve(Reserve),
    /// [`Debit`].
    Debit(Debit),
    /// [`Release`].
    Release(Release),
    /// [`Refund`].
    Refund(Refund),
    /// [`TopUp`].
    TopUp(TopUp),
    /// [`Expire`].
    Expire(Expire),
    /// [`EndSession`].
    End(EndSession),
    /// [`PutSession`] (not a money step; in the session's slot).
    Session(PutSession),
    /// [`CheckBalance`] (reads only).
    Check(CheckBalance),
}

/// How a tariff's first interval ("60/1": the first minute charged
/// whole) applies to a step of a session, by the engine's rule
/// (`gyro_charging::Reservation::opening`): the reservation the session's
/// opening request (its CCR-Initial) made for a rating key pays the first
/// interval when its usage is first reported, whichever request reports
/// it; a reservation a later request made does not, nor does usage
/// reported without a reservation. Which request made a reservation is
/// recorded with it, so the ledger applies the rule ([`PlannedStep`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstInterval {
    /// On a [`Step::Reserve`] of the session's opening request: a
    /// reservation it creates is the opening one. (A plain Reserve's is
    /// not; one that exists keeps what it is, as the engine keeps the
    /// request that created it.)
    Opening,
    /// On a [`Step::Debit`] of usage reported against a reservation (the
    /// first part of a report a price change splits; the first interval
    /// applies to it alone), priced by the Debit as for a reservation that
    /// is not the opening one (its `amount`, and its bundle use's pricing,
    /// without the first interval).
    Usage {
        /// What it charges instead to the opening reservation: the price
        /// of the units with the first interval.
        opening_amount: i64,
        /// The tariff's first interval, applied likewise to the units
        /// bundles leave to money.
        first_interval: u64,
        /// What a reservation written before library version 9 (which
        /// did not record the request that made it) counts as: the
        /// opening one when true. The caller passes the rule of those
        /// versions: the report is the session's CC-Request-Number 1.
        unmarked_opening: bool,
    },
}

/// A step as a session's charging plans it: the step, and how a tariff's
/// first interval applies to it ([`RedisLedger::run_planned`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedStep {
    /// The step.
    pub step: Step,
    /// How the first interval applies: [`FirstInterval::Opening`] only on
    /// a [`Step::Reserve`], [`FirstInterval::Usage`] only on a
    /// [`Step::Debit`] with a reservation (else the step is refused with
    /// [`crate::Error::Encode`]); none: as the step says.
    pub first_interval: Option<FirstInterval>,
}

impl From<Step> for PlannedStep {
    fn from(step: Step) -> Self {
        PlannedStep {
            step,
            first_interval: None,
        }
    }
}

/// The request key of the `step`-th money step of a Diameter request:
/// `<Session-Id>;<CC-Request-Number>;<step>` (a retransmission carries the
/// same Session-Id and CC-Request-Number, so it finds the same keys).
pub fn request_key(session_id: &str, request_number: u32, step: u32) -> String {
    format!("{session_id};{request_number};{step}")
}

impl Step {
    /// The account the step changes.
    pub fn account(&self) -> AccountId {
        match self {
            Step::Reserve(s) => s.account,
            Step::Debit(s) => s.account,
            Step::Release(s) => s.account,
            Step::Refund(s) => s.account,
            Step::TopUp(s) => s.account,
            Step::Expire(s) => s.account,
            Step::End(s) => s.account,
            Step::Session(s) => s.record.account,
            Step::Check(s) => s.account,
        }
    }

    /// The request key: names one step of one request, e.g.
    /// `<Session-Id>;<CC-Request-Number>;<n>` for the n-th step of a CCR.
    /// The same key sent again (a retry) is answered from memory; a key
    /// is never reused for another step (that is an error).
    pub fn request(&self) -> &str {
        match self {
            Step::Reserve(s) => &s.request,
            Step::Debit(s) => &s.request,
            Step::Release(s) => &s.request,
            Step::Refund(s) => &s.request,
            Step::TopUp(s) => &s.request,
            Step::Expire(s) => &s.request,
            Step::End(s) => &s.request,
            Step::Session(s) => &s.session,
            Step::Check(s) => &s.request,
        }
    }

    /// The Redis Function that runs it (`SET` for a session record).
    pub fn function(&self) -> &'static str {
        match self {
            Step::Reserve(_) => "gyro_reserve",
            Step::Debit(_) => "gyro_debit",
            Step::Release(_) => "gyro_release",
            Step::Refund(_) => "gyro_refund",
            Step::TopUp(_) => "gyro_topup",
            Step::Expire(_) => "gyro_expire",
            Step::End(_) => "gyro_end",
            Step::Session(_) => "SET",
            Step::Check(_) => "gyro_check",
        }
    }
}

/// What a step did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The answer is the remembered one of an earlier call with the same
    /// request key; nothing changed this time.
    pub replayed: bool,
    /// Diameter result code: 2001, 4010 (blocked: nothing reserved), 4012
    /// (nothing could be reserved), 5030 (no such account).
    pub code: u32,
    /// The step's figures.
    pub outcome: Outcome,
}

/// The figures of an [`Answer`], by step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// [`Step::Reserve`].
    Reserved {
        /// Money moved to the reservation.
        money: i64,
        /// Units it pays for.
        units: u64,
        /// Units bundles hold for the reservation (granted besides
        /// `units`): whole increments of the tariff, so up to the units
        /// asked rounded up to the increment (the grant is at most the
        /// units asked).
        bundle_units: u64,
        /// Balance afterwards.
        balance: i64,
        /// The account's reserved money afterwards.
        reserved: i64,
    },
    /// [`Step::Debit`].
    Debited {
        /// Money charged (`from_reserved + from_balance`).
        charged: i64,
        /// Of which from the reservation.
        from_reserved: i64,
        /// Of which from the balance.
        from_balance: i64,
        /// What the account could not pay (recorded, not charged).
        unbilled: i64,
        /// Balance plus reserved money afterwards.
        balance_after: i64,
        /// The CDR's sequence number in its slot stream.
        sequence: u64,
        /// Money released from the reservation afterwards.
        released: i64,
        /// Units bundles paid for.
        bundle_units: u64,
        /// The units the reservation granted before the debit (its bundle
        /// holds and the units its money pays for; 0 without one); none
        /// in an answer remembered by library version 9 or earlier, or
        /// a refused debit.
        granted: Option<u64>,
    },
    /// [`Step::Release`].
    Released {
        /// The reservation existed.
        found: bool,
        /// Money it gave back.
        money: i64,
        /// Balance afterwards.
        balance: i64,
        /// The account's reserved money afterwards.
        reserved: i64,
    },
    /// [`Step::Refund`].
    Refunded {
        /// Money given back.
        amount: i64,
        /// Balance plus reserved money afterwards.
        balance_after: i64,
        /// The CDR's sequence number.
        sequence: u64,
    },
    /// [`Step::TopUp`].
    ToppedUp {
        /// Balance afterwards.
        balance: i64,
        /// Sum of top-ups afterwards.
        topped_up: i64,
        /// The amount of the top-up this answer is of: for a replayed
        /// answer, the amount the request key was first used with (none
        /// when library version 5 remembered it), which the caller
        /// compares with the one it asked for.
        amount: Option<i64>,
    },
    /// [`Step::Expire`].
    Expired {
        /// Reservations released.
        reservations: u64,
        /// Money they gave back.
        money: i64,
        /// The session-end CDR's sequence number (0: none written).
        sequence: u64,
    },
    /// [`Step::End`].
    Ended {
        /// Reservations released.
        reservations: u64,
        /// Money they gave back.
        money: i64,
    },
    /// [`Step::Session`]: the record is written.
    SessionKept,
    /// [`Step::Check`].
    Checked {
        /// The account can pay for the units (code 2001 only).
        enough: bool,
        /// The money they would cost (after bundles).
        money: i64,
        /// The bundle units that would pay first.
        bundle_units: u64,
    },
}

/// An account as the cluster holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccountState {
    /// The account.
    pub account: AccountId,
    /// Money available.
    pub balance: i64,
    /// How far below zero the balance may go.
    pub credit_limit: i64,
    /// Blocked: reservations are refused (4010).
    pub blocked: bool,
    /// Money held by reservations.
    pub reserved: i64,
    /// Money charged, net of refunds.
    pub debited: i64,
    /// Balance at creation.
    pub initial: i64,
    /// Sum of top-ups.
    pub topped_up: i64,
    /// Its bundles, by id.
    pub bundles: Vec<BundleState>,
    /// For an account created through the operator API: its identities,
    /// plan and bundle definitions (none for an account of the charging
    /// configuration).
    pub definition: Option<AccountDefinition>,
}

/// What the cluster keeps of an account created through the operator API
/// beyond its figures (field `def` of its hash, and in every claim of its
/// identities): what a node needs to find and rate it without a charging
/// configuration that lists it. Fixed at creation.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AccountDefinition {
    /// Its subscriber identities.
    pub subscribers: Vec<gyro_charging::SubscriptionId>,
    /// Its price plan's name (none: the plan named `default`), resolved
    /// by each node in its own charging configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// The currency of its money, when not the configuration's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<gyro_charging::tariff::Currency>,
    /// Its bundles as created (what they cover and when they are valid;
    /// their counts are in the account hash).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bundles: Vec<gyro_charging::Bundle>,
}

/// The claim of a subscriber identity (`<ns>:{sub:<kind>:<data>}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The account it names.
    pub account: AccountId,
    /// When it was claimed.
    pub at: Timestamp,
    /// The account's definition (`None` when it cannot be read).
    pub definition: Option<AccountDefinition>,
}

/// An account to create through the operator API
/// ([`RedisLedger::create_account`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewAccount {
    /// Its id (none: the next of the cluster's counter).
    pub id: Option<AccountId>,
    /// The highest id of the charging configuration: the counter is kept
    /// above it.
    pub id_floor: u64,
    /// Initial balance, minor units (at least 0).
    pub balance: i64,
    /// Credit limit, minor units (at least 0).
    pub credit_limit: i64,
    /// Created blocked.
    pub blocked: bool,
    /// Its identities (at least one), plan and bundles (each full).
    pub definition: AccountDefinition,
}

/// What [`RedisLedger::create_account`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Creation {
    /// The account exists now, with every identity claimed for it.
    Created(AccountId),
    /// An identity has an account (or is being given one): nothing was
    /// created.
    SubscriberTaken(gyro_charging::SubscriptionId),
    /// The id asked for is taken (an account has it, or had it and was
    /// deleted): nothing was created.
    AccountTaken(AccountId),
}

/// A bundle's counts as the cluster holds them (in its account's hash).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BundleState {
    /// Bundle id within its account.
    pub id: u32,
    /// Units it started with.
    pub initial: u64,
    /// Units still free.
    pub remaining: u64,
    /// Units held by reservations.
    pub reserved: u64,
    /// Units consumed.
    pub consumed: u64,
}

impl BundleState {
    /// `initial == remaining + reserved + consumed`.
    pub fn is_conserved(&self) -> bool {
        u128::from(self.initial)
            == u128::from(self.remaining) + u128::from(self.reserved) + u128::from(self.consumed)
    }
}

impl AccountState {
    /// `initial + topped_up == balance + reserved + debited`, and every
    /// bundle's `initial == remaining + reserved + consumed`.
    pub fn is_conserved(&self) -> bool {
        i128::from(self.initial) + i128::from(self.topped_up)
            == i128::from(self.balance) + i128::from(self.reserved) + i128::from(self.debited)
            && self.bundles.iter().all(BundleState::is_conserved)
    }
}

/// The books of a whole namespace ([`RedisLedger::books`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Books {
    /// Accounts read.
    pub accounts: u64,
    /// Sum of initial balances.
    pub initial: i128,
    /// Sum of top-ups.
    pub topped_up: i128,
    /// Sum of balances.
    pub balance: i128,
    /// Sum of reserved money.
    pub reserved: i128,
    /// Sum of money debited.
    pub debited: i128,
    /// Accounts where `initial + topped_up != balance + reserved +
    /// debited`.
    pub unbalanced: Vec<AccountState>,
    /// Accounts whose reservations do not add up to their `reserved`, with
    /// what the reservations hold.
    pub reservations_mismatch: Vec<(AccountState, i64)>,
    /// Bundles read.
    pub bundles: u64,
    /// Sum of the bundles' initial units.
    pub bundle_initial: u128,
    /// Sum of their remaining units.
    pub bundle_remaining: u128,
    /// Sum of their reserved units.
    pub bundle_reserved: u128,
    /// Sum of their consumed units.
    pub bundle_consumed: u128,
    /// Bundles whose reservations' holds do not add up to their
    /// `reserved`: account, bundle (only its id for holds of a bundle the
    /// account lacks), what the holds add up to.
    pub holds_mismatch: Vec<(AccountId, BundleState, u64)>,
}

impl Books {
    /// Every account adds up, and so do its reservations.
    pub fn is_balanced(&self) -> bool {
        self.unbalanced.is_empty()
            && self.reservations_mismatch.is_empty()
            && self.holds_mismatch.is_empty()
    }

    /// Adds an account: `held`, the money its reservations hold;
    /// `holds`, the bundle units they hold, by bundle id.
    fn add(&mut self, s: AccountState, held: i64, holds: &HashMap<u32, u64>) {
        self.accounts += 1;
        for b in &s.bundles {
            self.bundles += 1;
            self.bundle_initial += u128::from(b.initial);
            self.bundle_remaining += u128::from(b.remaining);
            self.bundle_reserved += u128::from(b.reserved);
            self.bundle_consumed += u128::from(b.consumed);
            let h = holds.get(&b.id).copied().unwrap_or(0);
            if h != b.reserved {
                self.holds_mismatch.push((s.account, b.clone(), h));
            }
        }
        for (&id, &h) in holds {
            if h > 0 && !s.bundles.iter().any(|b| b.id == id) {
                let b = BundleState {
                    id,
                    ..BundleState::default()
                };
                self.holds_mismatch.push((s.account, b, h));
            }
        }
        self.initial += i128::from(s.initial);
        self.topped_up += i128::from(s.topped_up);
        self.balance += i128::from(s.balance);
        self.reserved += i128::from(s.reserved);
        self.debited += i128::from(s.debited);
        if held != s.reserved {
            self.reservations_mismatch.push((s.clone(), held));
        }
        if !s.is_conserved() {
            self.unbalanced.push(s);
        }
    }
}

/// What [`RedisLedger::expire_due`] did.
#[derive(Debug, Default)]
pub struct ExpiryReport {
    /// Sessions found past their deadline.
    pub due: u64,
    /// Sessions whose reservations it released.
    pub sessions: u64,
    /// Reservations released.
    pub reservations: u64,
    /// Money they gave back.
    pub money: i64,
    /// Slots whose index could not be read this time (moved meanwhile).
    pub slots_skipped: u64,
    /// Errors (the sessions concerned are found again by the next call).
    pub errors: Vec<crate::Error>,
}

/// A reservation as the cluster holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReservationState {
    /// Diameter Session-Id.
    pub session: String,
    /// Rating key.
    pub key: RatingKey,
    /// Money held.
    pub money: i64,
    /// Units granted.
    pub units: u64,
    /// Expiry (Tcc deadline).
    pub expires: Timestamp,
    /// Time of the first grant.
    pub since: Timestamp,
    /// The node that made it.
    pub owner: String,
    /// Bundle units it holds: (bundle id, units), in the order taken.
    pub bundle_holds: Vec<(u32, u64)>,
    /// Whether the session's opening request made it
    /// ([`FirstInterval::Opening`]): its first reported usage pays the
    /// tariff's first interval. `None` for a reservation written before
    /// library version 9, which did not record it.
    pub opening: Option<bool>,
}

/// Counts of what a [`RedisLedger`] sent, since it connected (for
/// metrics: round trips per step are `(pipelines + alone) / steps`, the
/// mean pipeline size `steps / pipelines`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LedgerStats {
    /// Steps handed to [`RedisLedger::run`].
    pub steps: u64,
    /// Pipelines sent by [`RedisLedger::run`] (one per master per batch).
    pub pipelines: u64,
    /// Steps sent on their own ([`RedisLedger::step`], and batch steps
    /// sent again after a redirection).
    pub alone: u64,
    /// Batch steps redirected (a slot moved, a failover, a missing
    /// function) and sent again on their own.
    pub redirected: u64,
    /// Batch steps answered with an error (each is a 3004 for its caller).
    pub failed: u64,
    /// Time the batches waited for their pipelines, in total (microseconds;
    /// divided by the batches, the round-trip latency of group commit).
    pub batch_micros: u64,
    /// The longest such wait.
    pub batch_micros_max: u64,
}

/// A CDR read from a slot stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamCdr {
    /// The slot whose stream holds it.
    pub slot: u16,
    /// Its stream entry id.
    pub id: String,
    /// The record, with the ledger's fields filled in (`sequence` is the
    /// slot stream's).
    pub cdr: Cdr,
}
