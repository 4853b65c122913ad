//! The engine: owns a shard's accounts and sessions, turns requests into
//! answers, effects, CDRs and answer records.
//!
//! A CCR-Update, in one straight line:
//!
//! 1. [`Engine::handle`] (here) looks the request up in the duplicate
//!    index ([`crate::dedup`]); a repeat returns [`Handled::Duplicate`].
//! 2. [`Engine::handle_fresh`] (here) resets the answer and builds a
//!    `Cx` (`cx.rs`): the borrowed state one request works on.
//! 3. `Cx::update` (`session.rs`) finds the open session, records the
//!    touch, and for each MSCC calls
//! 4. `Cx::unit` (`quota.rs`): finds the tariff, `charge_usage` rates and
//!    debits the reported usage and writes its CDR, `release` returns
//!    the rest of the old reservation, `reserve` grants new quota.
//!    Every change is an [`Effect`] applied through `Cx::commit`
//!    (`cx.rs`), which is what the journal replays.
//! 5. Back in [`Engine::handle_fresh`], the answer gets the next answer
//!    sequence number, its index entry and its record in
//!    [`Output::answers`].
//!
//! Elsewhere: `events.rs` (CCR-Event), `supervision.rs` (Tcc expiry,
//! [`Engine::tick`]), `recovery.rs` (snapshots, replaying effects and
//! answer records), `admin.rs` (account operations: create, change,
//! delete, top up once per idempotency key).
use crate::accounts::{
    Account, AccountStatus, SharedSubscriptionId, SubscriberDirectory, SubscriptionId,
};
use crate::answer::{CcAnswer, FailedAvp, MsccAnswer};
use crate::answer_log::{self, AnswerLog, RecordKey};
use crate::cdr::{Cdr, CdrBuffer, ClosingCause, RecordType};
use crate::dedup::{AnswerIndex, Keys};
use crate::effects::{Effect, Ledger};
use crate::error::{Error, Result};
use crate::rating::{Choice, ContextHint, Location, RatingError, RatingMemo};
use crate::request::{CcRequest, Interface, RequestType};
use crate::tariff::{Catalog, Tariff, ZeroRated};
use crate::types::{result_code as rc, AccountId, RatingKey, ServiceUnits, SessionKey, Timestamp};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::sync::Arc;

mod admin;
mod cx;
mod events;
mod quota;
mod recovery;
mod session;
mod supervision;

pub use admin::{NewAccount, TopUp, MAX_IDEMPOTENCY_KEY};
pub(crate) use cx::{fill_usage, Charged, Cx, Rated, UnitResult};

/// Engine settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineOptions {
    /// Node id written into every CDR.
    pub node_id: String,
    /// Session supervision time (Tcc), seconds: a session with no request
    /// for this long is closed by [`Engine::tick`].
    pub supervision_secs: u64,
    /// How long answers are remembered for duplicate detection, seconds.
    pub dedup_ttl_secs: u64,
    /// Memory safety bound of the duplicate index: at most this many
    /// answers are remembered (the oldest are forgotten first, even within
    /// their time to live). Each takes 23 to 46 bytes ([`crate::dedup`]);
    /// the default, 2^25, covers 300 s at 100,000 answers per second per
    /// shard (about 1 GiB at that load; the index grows with the load, not
    /// to its bound).
    pub dedup_capacity: usize,
    /// Lenient mode (checklist D.11): accept Requested-Action in session
    /// requests and MSCC without Multiple-Services-Indicator.
    pub lenient: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            node_id: "gyro".into(),
            supervision_secs: 1200,
            dedup_ttl_secs: 300,
            dedup_capacity: 1 << 25,
            lenient: true,
        }
    }
}

/// Where [`Engine::handle`], [`Engine::tick`] and the account operations
/// put what they produce. All three lists are appended to; clear them after
/// journaling (clearing keeps their memory).
#[derive(Clone, Debug, Default)]
pub struct Output {
    /// Ledger effects, in the order they were applied.
    pub effects: Vec<Effect>,
    /// Charging data records.
    pub cdrs: CdrBuffer,
    /// The records of the answers given, numbered with consecutive answer
    /// sequence numbers, for the journal ([`crate::answer_log`]).
    pub answers: AnswerLog,
}

impl Output {
    /// Empties all lists, keeping their memory.
    pub fn clear(&mut self) {
        self.effects.clear();
        self.cdrs.clear();
        self.answers.clear();
    }
}

/// What [`Engine::handle`] did with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handled {
    /// The answer is filled in (a new answer, or a duplicate's answer the
    /// engine had at hand, with `duplicate` set).
    Answered,
    /// The request repeats an answered one; the answer is not filled in.
    /// Fetch the journaled record and call [`Engine::resolve_duplicate`]
    /// (and [`Engine::handle_fresh`] if that fails).
    Duplicate(AnswerRef),
}

/// Names a journaled answer record by its answer sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AnswerRef {
    /// The record's sequence number.
    pub seq: u64,
}

/// What a durable store keeps to rebuild an engine: the ledger, the
/// subscriber directory and the next CDR and answer sequence numbers. The
/// answers themselves live in the journal ([`Engine::replay_answers`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Accounts and open sessions.
    pub ledger: Ledger,
    /// Subscriber identities of this engine's accounts.
    pub directory: SubscriberDirectory,
    /// Sequence number of the next CDR.
    pub next_cdr_sequence: u64,
    /// Sequence number of the next answer record.
    #[serde(default = "first_answer_seq")]
    pub next_answer_seq: u64,
}

fn first_answer_seq() -> u64 {
    1
}

/// The Service-Context-Ids of open sessions, held once each: few contexts
/// serve many sessions, so a CCR-Initial shares the held copy instead of
/// making one. Only contexts the catalog knows are held, and at most
/// [`ContextNames::MAX`] of them (past that, each session gets its own).
#[derive(Clone, Debug, Default)]
pub(crate) struct ContextNames(HashSet<Arc<str>, foldhash::fast::RandomState>);

impl ContextNames {
    /// Most distinct contexts held.
    const MAX: usize = 256;

    /// The held copy of `ctx`, made and held if new.
    pub(crate) fn get(&mut self, ctx: &str) -> Arc<str> {
        if let Some(held) = self.0.get(ctx) {
            return Arc::clone(held);
        }
        let new: Arc<str> = Arc::from(ctx);
        if self.0.len() < Self::MAX {
            self.0.insert(Arc::clone(&new));
        }
        new
    }

    /// The held copy equal to `ctx`; `ctx` itself (and held) if new.
    pub(crate) fn share(&mut self, ctx: &Arc<str>) -> Arc<str> {
        if let Some(held) = self.0.get(&**ctx) {
            return Arc::clone(held);
        }
        if self.0.len() < Self::MAX {
            self.0.insert(Arc::clone(ctx));
        }
        Arc::clone(ctx)
    }
}

/// The charging engine of one shard. See the crate documentation.
#[derive(Clone, Debug)]
pub struct Engine {
    catalog: Catalog,
    rating: RatingMemo,
    directory: SubscriberDirectory,
    ledger: Ledger,
    dedup: AnswerIndex,
    next_answer_seq: u64,
    timers: BinaryHeap<Reverse<(Timestamp, SessionKey)>>,
    options: EngineOptions,
    next_cdr_sequence: u64,
    scratch: SubscriptionId,
    contexts: ContextNames,
}

impl Engine {
    /// An engine with no accounts.
    pub fn new(catalog: Catalog, options: EngineOptions) -> Self {
        Engine {
            catalog,
            rating: RatingMemo::default(),
            directory: SubscriberDirectory::new(),
            ledger: Ledger::default(),
            dedup: AnswerIndex::new(options.dedup_ttl_secs, options.dedup_capacity),
            next_answer_seq: 1,
            timers: BinaryHeap::new(),
            options,
            next_cdr_sequence: 1,
            scratch: SubscriptionId::default(),
            contexts: ContextNames::default(),
        }
    }
    /// Adds an account and maps its subscriber identities to it.
    pub fn add_account(&mut self, account: Account, subscribers: &[SubscriptionId]) -> Result<()> {
        if self.ledger.accounts.contains_key(&account.id) {
            return Err(Error::DuplicateAccount(account.id));
        }
        if account.credit_limit < 0 {
            return Err(Error::InvalidAmount(account.credit_limit));
        }
        for s in subscribers {
            if let Some(a) = self.directory.lookup(s.kind, &s.data) {
                if a != account.id {
                    return Err(Error::DuplicateSubscriber(s.to_string()));
                }
            }
        }
        for s in subscribers {
            self.directory.insert(s, account.id)?;
        }
        self.ledger.accounts.insert(account.id, account);
        Ok(())
    }

    /// The account a subscriber identity belongs to (for routing a
    /// CCR-Initial or CCR-Event to its shard).
    pub fn resolve_subscriber(&self, id: &SubscriptionId) -> Option<AccountId> {
        self.directory.lookup(id.kind, &id.data)
    }

    /// The account of an open session (for a Session-Id directory that
    /// routes CCR-Update and CCR-Terminate).
    pub fn session_account(&self, session_id: &str) -> Option<AccountId> {
        let key = self.ledger.session_key(session_id)?;
        self.ledger.sessions.get(&key).map(|s| s.account)
    }

    /// The interface an open session was opened over.
    pub fn session_interface(&self, session_id: &str) -> Option<Interface> {
        let key = self.ledger.session_key(session_id)?;
        self.ledger.sessions.get(&key).map(|s| s.interface)
    }

    /// An account.
    pub fn account(&self, id: AccountId) -> Option<&Account> {
        self.ledger.accounts.get(&id)
    }

    /// All accounts.
    pub fn accounts(&self) -> impl Iterator<Item = &Account> {
        self.ledger.accounts.values()
    }

    /// The ledger (accounts and sessions).
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The subscriber directory of this engine.
    pub fn directory(&self) -> &SubscriberDirectory {
        &self.directory
    }

    /// The tariff catalog.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The settings.
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// Number of open sessions.
    pub fn session_count(&self) -> usize {
        self.ledger.sessions.len()
    }

    /// Supervision timers held: one per open session, plus those of ended
    /// sessions not yet dropped (a bounded number; see [`Engine::tick`]).
    pub fn supervision_timers(&self) -> usize {
        self.timers.len()
    }

    /// Number of answers held for duplicate detection.
    pub fn remembered_answers(&self) -> usize {
        self.dedup.len()
    }
    /// Adds money to an account. Returns the new balance.
    pub fn top_up(&mut self, account: AccountId, amount: i64, out: &mut Output) -> Result<i64> {
        if amount <= 0 {
            return Err(Error::InvalidAmount(amount));
        }
        let acc = self
            .ledger
            .accounts
            .get(&account)
            .ok_or(Error::UnknownAccount(account))?;
        if acc.balance.checked_add(amount).is_none() || acc.topped_up.checked_add(amount).is_none()
        {
            return Err(Error::WouldOverflow(amount));
        }
        let e = Effect::ToppedUp { account, amount };
        self.apply(&e)?;
        out.effects.push(e);
        Ok(self.ledger.accounts.get(&account).map_or(0, |a| a.balance))
    }

    /// Blocks or unblocks an account.
    pub fn set_status(
        &mut self,
        account: AccountId,
        status: AccountStatus,
        out: &mut Output,
    ) -> Result<()> {
        if !self.ledger.accounts.contains_key(&account) {
            return Err(Error::UnknownAccount(account));
        }
        let e = Effect::StatusChanged { account, status };
        self.apply(&e)?;
        out.effects.push(e);
        Ok(())
    }
    /// Handles one credit-control request. A request that repeats an
    /// answered one ([`crate::dedup`]) changes nothing and returns
    /// [`Handled::Duplicate`] naming the journaled answer record, without
    /// filling `answer`. Any other request is processed
    /// ([`Engine::handle_fresh`]) and returns [`Handled::Answered`].
    pub fn handle(
        &mut self,
        req: &CcRequest,
        now: Timestamp,
        answer: &mut CcAnswer,
        out: &mut Output,
    ) -> Handled {
        // The index's buckets for this request are fetched while expiry
        // runs; the request's keys serve its lookup and its answer.
        let keys = self.dedup.keys(req);
        self.dedup.prefetch(keys);
        self.dedup.expire(now);
        if let Some(seq) = self.dedup.lookup_keys(keys) {
            return Handled::Duplicate(AnswerRef { seq });
        }
        self.answer_fresh(req, keys, now, answer, out);
        Handled::Answered
    }

    /// Processes a request as new, without looking for an earlier answer:
    /// writes the answer into `answer` (reusing its buffers), appends
    /// effects and CDRs to `out`, and the answer's record, numbered with
    /// the next answer sequence number, to `out.answers`.
    pub fn handle_fresh(
        &mut self,
        req: &CcRequest,
        now: Timestamp,
        answer: &mut CcAnswer,
        out: &mut Output,
    ) {
        self.dedup.expire(now);
        let keys = self.dedup.keys(req);
        self.answer_fresh(req, keys, now, answer, out);
    }

    /// [`Engine::handle_fresh`] for a request whose duplicate keys are
    /// known, with the index already expired to `now`.
    fn answer_fresh(
        &mut self,
        req: &CcRequest,
        keys: Keys,
        now: Timestamp,
        answer: &mut CcAnswer,
        out: &mut Output,
    ) {
        answer.reset(req.request_type, req.request_number);
        let mut cx = self.cx(now, answer, out);
        cx.request = Some(req);
        match req.request_type {
            RequestType::Initial => cx.initial(req),
            RequestType::Update => cx.update(req),
            RequestType::Termination => cx.terminate(req),
            RequestType::Event => cx.event(req),
        }
        let seq = self.next_answer_seq;
        self.next_answer_seq += 1;
        self.dedup.insert_keys(seq, keys, now);
        out.answers.push(seq, req, answer, now);
    }

    /// Answers a duplicate from its journaled `record` (the one
    /// [`Handled::Duplicate`] named): checks that the record really answers
    /// a request this one repeats, then fills `answer` from it with
    /// `duplicate` set. Returns false (and leaves `answer` unspecified) for
    /// a record of another request or a corrupt one: then process the
    /// request with [`Engine::handle_fresh`].
    pub fn resolve_duplicate(&self, req: &CcRequest, record: &[u8], answer: &mut CcAnswer) -> bool {
        match answer_log::decode_record(record, answer) {
            Ok(key) if key.matches(req) => {
                answer.duplicate = true;
                true
            }
            _ => false,
        }
    }

    /// [`Engine::handle`], [`Engine::resolve_duplicate`] and
    /// [`Engine::handle_fresh`] in one call, for a caller that can read a
    /// journaled record synchronously: `read_answer(seq)` returns the
    /// record numbered `seq` (records still in `out.answers` are found
    /// there first). Returns whether the answer is a duplicate's.
    pub fn handle_with<R: AsRef<[u8]>>(
        &mut self,
        req: &CcRequest,
        now: Timestamp,
        answer: &mut CcAnswer,
        out: &mut Output,
        read_answer: impl FnOnce(u64) -> Option<R>,
    ) -> bool {
        let Handled::Duplicate(r) = self.handle(req, now, answer, out) else {
            return answer.duplicate;
        };
        let resolved = match out.answers.get(r.seq) {
            Some(rec) => self.resolve_duplicate(req, rec, answer),
            None => read_answer(r.seq)
                .is_some_and(|rec| self.resolve_duplicate(req, rec.as_ref(), answer)),
        };
        if !resolved {
            self.handle_fresh(req, now, answer, out);
        }
        resolved
    }

    fn cx<'a>(
        &'a mut self,
        now: Timestamp,
        answer: &'a mut CcAnswer,
        out: &'a mut Output,
    ) -> Cx<'a> {
        Cx {
            catalog: &self.catalog,
            rating: &mut self.rating,
            request: None,
            rated: Rated::default(),
            directory: &self.directory,
            ledger: &mut self.ledger,
            timers: &mut self.timers,
            options: &self.options,
            next_cdr: &mut self.next_cdr_sequence,
            scratch: &mut self.scratch,
            contexts: &mut self.contexts,
            answer,
            out,
            now,
        }
    }
}
