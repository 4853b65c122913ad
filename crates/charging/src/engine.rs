//! The engine: owns a shard's accounts and sessions, turns requests into
//! answers, effects and CDRs.

use crate::accounts::{Account, AccountStatus, SubscriberDirectory, SubscriptionId};
use crate::answer::{CcAnswer, FailedAvp, MsccAnswer};
use crate::answer_log::{self, AnswerLog, RecordKey};
use crate::cdr::{Cdr, CdrBuffer, ClosingCause, RecordType};
use crate::dedup::AnswerIndex;
use crate::effects::{Effect, Ledger};
use crate::error::{Error, Result};
use crate::request::{CcRequest, RequestType};
use crate::tariff::{Catalog, RatingError, Tariff, ZeroRated};
use crate::types::{result_code as rc, AccountId, RatingKey, ServiceUnits, SessionKey, Timestamp};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;

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
    /// their time to live). Each takes about 40 to 56 bytes
    /// ([`crate::dedup`]); the default, 2^25, covers 300 s at 100,000
    /// answers per second per shard (about 1.5 GiB at that load; the index
    /// grows with the load, not to its bound).
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

/// The charging engine of one shard. See the crate documentation.
#[derive(Clone, Debug)]
pub struct Engine {
    catalog: Catalog,
    directory: SubscriberDirectory,
    ledger: Ledger,
    dedup: AnswerIndex,
    next_answer_seq: u64,
    timers: BinaryHeap<Reverse<(Timestamp, SessionKey)>>,
    options: EngineOptions,
    next_cdr_sequence: u64,
    scratch: SubscriptionId,
}

impl Engine {
    /// An engine with no accounts.
    pub fn new(catalog: Catalog, options: EngineOptions) -> Self {
        Engine {
            catalog,
            directory: SubscriberDirectory::new(),
            ledger: Ledger::default(),
            dedup: AnswerIndex::new(options.dedup_ttl_secs, options.dedup_capacity),
            next_answer_seq: 1,
            timers: BinaryHeap::new(),
            options,
            next_cdr_sequence: 1,
            scratch: SubscriptionId::default(),
        }
    }

    /// Rebuilds an engine from a snapshot (then replay the effects
    /// journaled after it with [`Engine::apply`]).
    pub fn restore(catalog: Catalog, options: EngineOptions, snapshot: Snapshot) -> Self {
        let mut e = Engine::new(catalog, options);
        e.ledger = snapshot.ledger;
        e.ledger.rebuild_index();
        e.directory = snapshot.directory;
        e.next_cdr_sequence = snapshot.next_cdr_sequence.max(1);
        for s in e.ledger.sessions.values() {
            e.timers.push(Reverse((s.supervision_until, s.key)));
        }
        e.next_answer_seq = snapshot.next_answer_seq.max(1);
        e
    }

    /// The state to persist.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            ledger: self.ledger.clone(),
            directory: self.directory.clone(),
            next_cdr_sequence: self.next_cdr_sequence,
            next_answer_seq: self.next_answer_seq,
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

    /// Number of answers held for duplicate detection.
    pub fn remembered_answers(&self) -> usize {
        self.dedup.len()
    }

    /// Applies a journaled effect (replay). The engine applies the effects
    /// it emits itself; call this only to rebuild state.
    pub fn apply(&mut self, effect: &Effect) -> Result<()> {
        self.ledger.apply(effect)?;
        if let Effect::SessionOpened {
            session,
            supervision_until,
            ..
        } = effect
        {
            self.timers.push(Reverse((*supervision_until, *session)));
        }
        Ok(())
    }

    /// Forgets remembered answers past their time to live at `now`, and
    /// nothing else: no session is closed and no effect is produced.
    pub fn expire_answers(&mut self, now: Timestamp) {
        self.dedup.expire(now);
    }

    /// Rebuilds the duplicate index from a journaled section of answer
    /// records (`records`, as [`AnswerLog::as_bytes`] held them, the first
    /// numbered `first_seq`), dropping those past their time to live at
    /// `now`. Hand sections in `seq` order; records below the newest one
    /// already indexed are ignored. Also moves the answer numbering past
    /// the section.
    pub fn replay_answers(&mut self, first_seq: u64, records: &[u8], now: Timestamp) -> Result<()> {
        let ttl = self.options.dedup_ttl_secs;
        let mut seq = first_seq;
        for rec in answer_log::records(records) {
            let key = RecordKey::parse(rec?)?;
            if key.at.plus_secs(ttl) > now {
                self.dedup.insert_parts(
                    seq,
                    key.session_id,
                    key.request_number,
                    key.origin_host,
                    key.end_to_end,
                    key.at,
                );
            }
            seq += 1;
            self.next_answer_seq = self.next_answer_seq.max(seq);
        }
        self.dedup.expire(now);
        Ok(())
    }

    /// The smallest answer sequence number still live at `now`: journaled
    /// answer records below it are no longer needed for duplicate
    /// detection.
    pub fn answer_horizon(&self, now: Timestamp) -> u64 {
        let h = self.dedup.horizon(now);
        if h >= self.dedup.head() {
            self.next_answer_seq
        } else {
            h
        }
    }

    /// The sequence number the next answer record gets.
    pub fn next_answer_seq(&self) -> u64 {
        self.next_answer_seq
    }

    /// Heap bytes held by the duplicate index.
    pub fn dedup_memory_bytes(&self) -> usize {
        self.dedup.memory_bytes()
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
            return Err(Error::InvalidAmount(amount));
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

    /// The earliest time [`Engine::tick`] may have work (a session's
    /// supervision deadline). It may be early, never late.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Closes every session whose supervision time (Tcc) has passed:
    /// releases its reservations and writes a session-end CDR with cause
    /// [`ClosingCause::SupervisionExpired`]. Also forgets expired answers.
    /// Returns the number of sessions closed.
    pub fn tick(&mut self, now: Timestamp, out: &mut Output) -> usize {
        self.dedup.expire(now);
        let mut closed = 0;
        while let Some(&Reverse((at, key))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            let Some(s) = self.ledger.sessions.get(&key) else {
                continue;
            };
            if s.supervision_until > now {
                self.timers.push(Reverse((s.supervision_until, key)));
                continue;
            }
            let mut answer = CcAnswer::default();
            let mut cx = self.cx(now, &mut answer, out);
            cx.close_session(key, ClosingCause::SupervisionExpired, rc::SUCCESS, None, 0);
            closed += 1;
        }
        closed
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
        self.dedup.expire(now);
        if let Some(seq) = self.dedup.lookup(req) {
            return Handled::Duplicate(AnswerRef { seq });
        }
        self.handle_fresh(req, now, answer, out);
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
        answer.reset(req.request_type, req.request_number);
        let mut cx = self.cx(now, answer, out);
        match req.request_type {
            RequestType::Initial => cx.initial(req),
            RequestType::Update => cx.update(req),
            RequestType::Termination => cx.terminate(req),
            RequestType::Event => cx.event(req),
        }
        let seq = self.next_answer_seq;
        self.next_answer_seq += 1;
        self.dedup.insert(seq, req, now);
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
            directory: &self.directory,
            ledger: &mut self.ledger,
            timers: &mut self.timers,
            options: &self.options,
            next_cdr: &mut self.next_cdr_sequence,
            scratch: &mut self.scratch,
            answer,
            out,
            now,
        }
    }
}

/// Everything one request needs, borrowed apart so the catalog can be read
/// while the ledger changes.
pub(crate) struct Cx<'a> {
    pub(crate) catalog: &'a Catalog,
    pub(crate) directory: &'a SubscriberDirectory,
    pub(crate) ledger: &'a mut Ledger,
    timers: &'a mut BinaryHeap<Reverse<(Timestamp, SessionKey)>>,
    pub(crate) options: &'a EngineOptions,
    next_cdr: &'a mut u64,
    scratch: &'a mut SubscriptionId,
    pub(crate) answer: &'a mut CcAnswer,
    pub(crate) out: &'a mut Output,
    pub(crate) now: Timestamp,
}

/// Who is charged, for CDRs.
#[derive(Clone, Copy)]
pub(crate) struct Charged<'r> {
    pub(crate) session: Option<SessionKey>,
    pub(crate) account: AccountId,
    pub(crate) session_id: &'r str,
    pub(crate) subscriber: &'r SubscriptionId,
    pub(crate) service_context: &'r str,
    pub(crate) request_number: u32,
}

/// Result of rating one unit request.
pub(crate) struct UnitResult {
    pub(crate) answer: MsccAnswer,
    pub(crate) failed: Option<FailedAvp>,
}

fn failed_for(key: RatingKey, err: RatingError) -> FailedAvp {
    match (err, key.service_id, key.rating_group) {
        (RatingError::UnknownContext, _, _) => FailedAvp::ServiceContextId,
        (_, Some(s), _) => FailedAvp::ServiceIdentifier(s),
        (_, None, Some(rg)) => FailedAvp::RatingGroup(rg),
        (_, None, None) => FailedAvp::ServiceContextId,
    }
}

impl Cx<'_> {
    /// Applies an effect and records it.
    /// Takes up to `want` units from the account's bundles that apply to
    /// `key` and `unit` now, in bundle order, committing `effect(bundle,
    /// units)` for each one drawn on. Returns the units taken.
    pub(crate) fn take_from_bundles(
        &mut self,
        account: AccountId,
        key: RatingKey,
        unit: crate::UnitKind,
        want: u64,
        mut effect: impl FnMut(u32, u64) -> Effect,
    ) -> u64 {
        let mut left = want;
        let n = self
            .ledger
            .accounts
            .get(&account)
            .map_or(0, |a| a.bundles.len());
        for i in 0..n {
            if left == 0 {
                break;
            }
            let Some(b) = self
                .ledger
                .accounts
                .get(&account)
                .and_then(|a| a.bundles.get(i))
            else {
                break;
            };
            if b.remaining == 0 || !b.applies(key, unit, self.now) {
                continue;
            }
            let take = b.remaining.min(left);
            let bundle = b.id;
            self.commit(effect(bundle, take));
            left -= take;
        }
        want - left
    }

    pub(crate) fn commit(&mut self, e: Effect) {
        match self.ledger.apply(&e) {
            Ok(()) => {
                if let Effect::SessionOpened {
                    session,
                    supervision_until,
                    ..
                } = &e
                {
                    self.timers.push(Reverse((*supervision_until, *session)));
                }
                self.out.effects.push(e);
            }
            Err(err) => {
                debug_assert!(false, "engine produced an effect it cannot apply: {err}");
            }
        }
    }

    fn fail(&mut self, code: u32, failed: Option<FailedAvp>) {
        self.answer.result_code = code;
        self.answer.failed_avp = failed;
    }

    /// A fresh CDR slot with the common fields filled.
    pub(crate) fn cdr(&mut self, who: &Charged<'_>, record_type: RecordType) -> &mut Cdr {
        let seq = *self.next_cdr;
        *self.next_cdr += 1;
        let balance = self
            .ledger
            .accounts
            .get(&who.account)
            .map_or(0, |a| a.balance.saturating_add(a.reserved));
        let c = self.out.cdrs.next_slot();
        c.sequence = seq;
        c.node_id.clone_from(&self.options.node_id);
        c.record_type = record_type;
        c.session_id.clear();
        c.session_id.push_str(who.session_id);
        c.account = who.account;
        c.subscriber.clear();
        let _ = write!(c.subscriber, "{}", who.subscriber);
        c.service_context.clear();
        c.service_context.push_str(who.service_context);
        c.rating_group = None;
        c.service_id = None;
        c.request_number = who.request_number;
        c.requested_action = None;
        c.unit = None;
        c.time = 0;
        c.input_octets = 0;
        c.output_octets = 0;
        c.total_octets = 0;
        c.service_units = 0;
        c.rated_units = 0;
        c.bundle_units = 0;
        c.amount = 0;
        c.unbilled = 0;
        c.balance_after = balance;
        c.started = self.now;
        c.ended = self.now;
        c.result_code = rc::SUCCESS;
        c.closing_cause = None;
        c.termination_cause = None;
        c.reporting_reason = None;
        c
    }

    fn supervision_deadline(&self) -> Timestamp {
        self.now.plus_secs(self.options.supervision_secs)
    }

    fn initial(&mut self, req: &CcRequest) {
        if req.requested_action.is_some() && !self.options.lenient {
            return self.fail(rc::AVP_NOT_ALLOWED, Some(FailedAvp::RequestedAction));
        }
        if self.ledger.session_key(&req.session_id).is_some() {
            return self.fail(rc::UNABLE_TO_COMPLY, None);
        }
        let Some((sub_idx, account)) = self.directory.resolve(&req.subscription_ids) else {
            return self.fail(rc::USER_UNKNOWN, Some(FailedAvp::SubscriptionId));
        };
        let Some(acc) = self.ledger.accounts.get(&account) else {
            return self.fail(rc::USER_UNKNOWN, Some(FailedAvp::SubscriptionId));
        };
        if acc.status == AccountStatus::Blocked {
            return self.fail(rc::END_USER_SERVICE_DENIED, None);
        }
        if !self.catalog.knows_context(&req.service_context) {
            return self.fail(rc::RATING_FAILED, Some(FailedAvp::ServiceContextId));
        }
        let msi = req.multiple_services == Some(true);
        if !req.mscc.is_empty() && !msi && !self.options.lenient {
            return self.fail(
                rc::AVP_NOT_ALLOWED,
                Some(FailedAvp::MultipleServicesCreditControl),
            );
        }
        let use_mscc = msi || !req.mscc.is_empty();
        let key = SessionKey(self.ledger.next_session_key);
        let subscriber = &req.subscription_ids[sub_idx];
        self.commit(Effect::SessionOpened {
            session: key,
            session_id: req.session_id.clone(),
            account,
            subscriber: subscriber.clone(),
            service_context: req.service_context.clone(),
            multiple_services: use_mscc,
            at: self.now,
            supervision_until: self.supervision_deadline(),
        });
        let who = Charged {
            session: Some(key),
            account,
            session_id: &req.session_id,
            subscriber,
            service_context: &req.service_context,
            request_number: req.request_number,
        };
        if use_mscc {
            self.msccs(req, &who, true);
            let first_ok = self.answer.mscc.is_empty()
                || self
                    .answer
                    .mscc
                    .iter()
                    .any(|m| m.result_code == rc::SUCCESS);
            if !first_ok {
                self.answer.result_code = self.answer.mscc[0].result_code;
            }
        } else {
            // Single-service CCR-Initial: quota is implied even without RSU.
            let requested = Some(req.requested.unwrap_or_default());
            let k = RatingKey {
                rating_group: None,
                service_id: req.service_id,
            };
            let u = self.unit(&who, k, req.used.as_ref(), requested.as_ref(), None);
            self.single(u);
        }
        if self.answer.result_code != rc::SUCCESS {
            // Idle + INITIAL not processed OK -> Idle: nothing stays open.
            self.release_all(key, account);
            self.commit(Effect::SessionClosed { session: key });
        }
    }

    /// Puts a single-service unit result at command level.
    fn single(&mut self, u: UnitResult) {
        self.answer.result_code = u.answer.result_code;
        self.answer.granted = u.answer.granted;
        self.answer.validity_time = u.answer.validity_time;
        self.answer.final_unit = u.answer.final_unit;
        if u.answer.result_code == rc::RATING_FAILED {
            self.answer.failed_avp = u.failed;
        }
    }

    fn msccs(&mut self, req: &CcRequest, who: &Charged<'_>, grant: bool) {
        let mut failed = None;
        for m in &req.mscc {
            let requested = if grant { m.requested.as_ref() } else { None };
            let u = self.unit(who, m.key(), m.used.as_ref(), requested, m.reporting_reason);
            if failed.is_none() && u.answer.result_code == rc::RATING_FAILED {
                failed = u.failed;
            }
            self.answer.mscc.push(u.answer);
        }
        if self.answer.failed_avp.is_none() {
            self.answer.failed_avp = failed;
        }
    }

    /// Finds the open session of an Update/Terminate; expires it first if
    /// its supervision time has passed.
    fn open_session(&mut self, req: &CcRequest) -> Option<SessionKey> {
        let key = self.ledger.session_key(&req.session_id)?;
        let s = self.ledger.sessions.get(&key)?;
        if s.supervision_until <= self.now {
            self.close_session(key, ClosingCause::SupervisionExpired, rc::SUCCESS, None, 0);
            return None;
        }
        Some(key)
    }

    fn update(&mut self, req: &CcRequest) {
        let Some(key) = self.open_session(req) else {
            return self.fail(rc::UNKNOWN_SESSION_ID, None);
        };
        if req.requested_action.is_some() && !self.options.lenient {
            return self.fail(rc::AVP_NOT_ALLOWED, Some(FailedAvp::RequestedAction));
        }
        let Some(s) = self.ledger.sessions.get(&key) else {
            return self.fail(rc::UNKNOWN_SESSION_ID, None);
        };
        if !req.mscc.is_empty() && !s.multiple_services && !self.options.lenient {
            return self.fail(
                rc::AVP_NOT_ALLOWED,
                Some(FailedAvp::MultipleServicesCreditControl),
            );
        }
        let account = s.account;
        // The subscriber is copied into a reused buffer so the session can
        // change while it is in use.
        let mut subscriber = std::mem::take(self.scratch);
        subscriber.kind = s.subscriber.kind;
        subscriber.data.clear();
        subscriber.data.push_str(&s.subscriber.data);
        let blocked = self
            .ledger
            .accounts
            .get(&account)
            .is_none_or(|a| a.status == AccountStatus::Blocked);
        self.commit(Effect::SessionTouched {
            session: key,
            request_number: req.request_number,
            at: self.now,
            supervision_until: self.supervision_deadline(),
        });
        let who = Charged {
            session: Some(key),
            account,
            session_id: &req.session_id,
            subscriber: &subscriber,
            service_context: &req.service_context,
            request_number: req.request_number,
        };
        if !req.mscc.is_empty() {
            self.msccs(req, &who, !blocked);
        } else {
            let k = RatingKey {
                rating_group: None,
                service_id: req.service_id,
            };
            let requested = if blocked {
                None
            } else {
                req.requested.as_ref()
            };
            let u = self.unit(&who, k, req.used.as_ref(), requested, None);
            self.single(u);
        }
        if blocked {
            self.answer.result_code = rc::END_USER_SERVICE_DENIED;
        }
        *self.scratch = subscriber;
        if self.answer.result_code != rc::SUCCESS {
            // Open + UPDATE not processed OK -> Idle (usage was debited).
            let code = self.answer.result_code;
            self.close_session(key, ClosingCause::Rejected, code, None, req.request_number);
        }
    }

    fn terminate(&mut self, req: &CcRequest) {
        let Some(key) = self.open_session(req) else {
            return self.fail(rc::UNKNOWN_SESSION_ID, None);
        };
        let Some(s) = self.ledger.sessions.get(&key) else {
            return self.fail(rc::UNKNOWN_SESSION_ID, None);
        };
        let account = s.account;
        let mut subscriber = std::mem::take(self.scratch);
        subscriber.kind = s.subscriber.kind;
        subscriber.data.clear();
        subscriber.data.push_str(&s.subscriber.data);
        let who = Charged {
            session: Some(key),
            account,
            session_id: &req.session_id,
            subscriber: &subscriber,
            service_context: &req.service_context,
            request_number: req.request_number,
        };
        for m in &req.mscc {
            if m.used.is_some() {
                self.unit(&who, m.key(), m.used.as_ref(), None, m.reporting_reason);
            }
        }
        if req.used.is_some() {
            let k = RatingKey {
                rating_group: None,
                service_id: req.service_id,
            };
            self.unit(&who, k, req.used.as_ref(), None, None);
        }
        *self.scratch = subscriber;
        self.close_session(
            key,
            ClosingCause::Terminated,
            rc::SUCCESS,
            req.termination_cause,
            req.request_number,
        );
    }

    fn release_all(&mut self, key: SessionKey, account: AccountId) {
        while let Some(k) = self
            .ledger
            .sessions
            .get(&key)
            .and_then(|s| s.reservations.last())
            .map(|r| r.key)
        {
            self.commit(Effect::Released {
                account,
                session: key,
                key: k,
            });
        }
    }

    /// Releases everything a session holds, writes its session-end CDR and
    /// closes it.
    pub(crate) fn close_session(
        &mut self,
        key: SessionKey,
        cause: ClosingCause,
        result_code: u32,
        termination_cause: Option<u32>,
        request_number: u32,
    ) {
        let Some(s) = self.ledger.sessions.get(&key) else {
            return;
        };
        let account = s.account;
        let opened = s.opened_at;
        let number = if cause == ClosingCause::SupervisionExpired {
            s.last_request_number
        } else {
            request_number
        };
        // The session's identifiers are moved out for its last CDR (releasing
        // reads none of them) and the Session-Id put back to close it.
        let Some(s) = self.ledger.sessions.get_mut(&key) else {
            return;
        };
        let session_id = std::mem::take(&mut s.session_id);
        let subscriber = std::mem::take(&mut s.subscriber);
        let ctx = std::mem::take(&mut s.service_context);
        self.release_all(key, account);
        let who = Charged {
            session: Some(key),
            account,
            session_id: &session_id,
            subscriber: &subscriber,
            service_context: &ctx,
            request_number: number,
        };
        let c = self.cdr(&who, RecordType::SessionEnd);
        c.started = opened;
        c.result_code = result_code;
        c.closing_cause = Some(cause);
        c.termination_cause = termination_cause;
        if let Some(s) = self.ledger.sessions.get_mut(&key) {
            s.session_id = session_id;
        }
        self.commit(Effect::SessionClosed { session: key });
    }

    /// Rates, debits and (re)reserves one rating key.
    fn unit(
        &mut self,
        who: &Charged<'_>,
        key: RatingKey,
        used: Option<&ServiceUnits>,
        requested: Option<&ServiceUnits>,
        reporting_reason: Option<u32>,
    ) -> UnitResult {
        let mut ma = MsccAnswer {
            rating_group: key.rating_group,
            service_id: key.service_id,
            result_code: rc::SUCCESS,
            ..MsccAnswer::default()
        };
        let catalog = self.catalog;
        let tariff = match catalog.find(who.service_context, key) {
            Ok(i) => catalog.tariff(i),
            Err(e) => {
                ma.result_code = rc::RATING_FAILED;
                if let Some(u) = used {
                    // Usage of an unrateable service: recorded, not charged.
                    let c = self.cdr(who, RecordType::Usage);
                    fill_usage(c, u);
                    c.rating_group = key.rating_group;
                    c.service_id = key.service_id;
                    c.result_code = rc::RATING_FAILED;
                    c.reporting_reason = reporting_reason;
                }
                self.release(who, key);
                return UnitResult {
                    answer: ma,
                    failed: Some(failed_for(key, e)),
                };
            }
        };
        let Some(t) = tariff else {
            ma.result_code = rc::RATING_FAILED;
            return UnitResult {
                answer: ma,
                failed: Some(FailedAvp::ServiceContextId),
            };
        };
        ma.unit = Some(t.unit);
        if let Some(u) = used {
            self.charge_usage(who, key, t, u, reporting_reason);
        }
        if used.is_some() || requested.is_some() {
            self.release(who, key);
        }
        if t.zero_rated == Some(ZeroRated::NotApplicable) {
            ma.result_code = rc::CREDIT_CONTROL_NOT_APPLICABLE;
            return UnitResult {
                answer: ma,
                failed: None,
            };
        }
        if let (Some(rq), Some(session)) = (requested, who.session) {
            let want = rq
                .amount(t.unit)
                .filter(|&n| n > 0)
                .unwrap_or(t.default_quota);
            let (granted, partial) = self.reserve(who.account, session, key, t, want);
            if granted == 0 {
                ma.result_code = rc::CREDIT_LIMIT_REACHED;
            } else {
                ma.granted = Some(ServiceUnits::of(t.unit, granted));
                ma.validity_time = t.validity_time;
                if partial {
                    ma.final_unit = Some(t.final_unit.clone());
                }
            }
        }
        UnitResult {
            answer: ma,
            failed: None,
        }
    }

    fn release(&mut self, who: &Charged<'_>, key: RatingKey) {
        let Some(session) = who.session else { return };
        let held = self
            .ledger
            .sessions
            .get(&session)
            .is_some_and(|s| s.reservation(key).is_some());
        if held {
            self.commit(Effect::Released {
                account: who.account,
                session,
                key,
            });
        }
    }

    /// Reserves up to `want` units: bundles first, then money. Returns the
    /// units granted and whether that is less than wanted.
    fn reserve(
        &mut self,
        account: AccountId,
        session: SessionKey,
        key: RatingKey,
        t: &Tariff,
        want: u64,
    ) -> (u64, bool) {
        if t.is_free() {
            self.commit(Effect::Reserved {
                account,
                session,
                key,
                unit: t.unit,
                money: 0,
                units: want,
                at: self.now,
            });
            return (want, false);
        }
        let (unit, at) = (t.unit, self.now);
        let from_bundles = self.take_from_bundles(account, key, unit, want, |bundle, take| {
            Effect::BundleReserved {
                account,
                session,
                key,
                unit,
                bundle,
                units: take,
                at,
            }
        });
        let left = want - from_bundles;
        let mut bought = 0;
        if left > 0 {
            let spendable = self
                .ledger
                .accounts
                .get(&account)
                .map_or(0, Account::spendable);
            bought = t.affordable_units(spendable, left);
            if bought > 0 {
                self.commit(Effect::Reserved {
                    account,
                    session,
                    key,
                    unit: t.unit,
                    money: t.cost(bought),
                    units: bought,
                    at: self.now,
                });
            }
        }
        (want - left + bought, bought < left)
    }

    /// Debits reported usage: reserved bundle units, then the money
    /// reservation, then (past the grant) free bundle units and the
    /// balance, never beyond the credit limit. Writes the usage CDR.
    fn charge_usage(
        &mut self,
        who: &Charged<'_>,
        key: RatingKey,
        t: &Tariff,
        used: &ServiceUnits,
        reporting_reason: Option<u32>,
    ) {
        let units = used.amount(t.unit).unwrap_or(0);
        let account = who.account;
        let mut left = units;
        let mut bundle_units = 0u64;
        let (mut res_money, mut res_money_units, since) = (0i64, 0u64, None);
        let mut since = since;
        if !t.is_free() {
            if let Some(session) = who.session {
                // 1. Bundle units held by the reservation.
                let holds = self
                    .ledger
                    .sessions
                    .get(&session)
                    .and_then(|s| s.reservation(key))
                    .map_or(0, |r| r.bundles.len());
                for i in 0..holds {
                    if left == 0 {
                        break;
                    }
                    let Some(h) = self
                        .ledger
                        .sessions
                        .get(&session)
                        .and_then(|s| s.reservation(key))
                        .and_then(|r| r.bundles.get(i).copied())
                    else {
                        break;
                    };
                    let take = h.units.min(left);
                    if take > 0 {
                        self.commit(Effect::BundleCharged {
                            account,
                            session: Some(session),
                            key,
                            bundle: h.bundle,
                            from_reserved: take,
                            from_remaining: 0,
                        });
                        left -= take;
                        bundle_units += take;
                    }
                }
            }
        }
        if let Some(r) = who
            .session
            .and_then(|s| self.ledger.sessions.get(&s))
            .and_then(|s| s.reservation(key))
        {
            res_money = r.money;
            res_money_units = r.money_units;
            since = Some(r.since);
        }
        let within = left.min(res_money_units);
        let mut over = left - within;
        if !t.is_free() && over > 0 {
            // 2. Usage past the grant: unreserved bundle units.
            let session = who.session;
            let taken = self.take_from_bundles(account, key, t.unit, over, |bundle, take| {
                Effect::BundleCharged {
                    account,
                    session,
                    key,
                    bundle,
                    from_reserved: 0,
                    from_remaining: take,
                }
            });
            over -= taken;
            bundle_units += taken;
        }
        // 3. Money, rated once for the whole report.
        let cost = t.cost(within + over);
        let from_reserved = cost.min(res_money);
        let extra = cost - from_reserved;
        let spendable = self
            .ledger
            .accounts
            .get(&account)
            .map_or(0, Account::spendable);
        let from_balance = extra.min(spendable);
        let unbilled = extra - from_balance;
        if from_reserved > 0 || from_balance > 0 {
            self.commit(Effect::Charged {
                account,
                session: who.session,
                key,
                from_reserved,
                from_balance,
            });
        }
        let now = self.now;
        let c = self.cdr(who, RecordType::Usage);
        fill_usage(c, used);
        c.rating_group = key.rating_group;
        c.service_id = key.service_id;
        c.unit = Some(t.unit);
        c.rated_units = units;
        c.bundle_units = bundle_units;
        c.amount = from_reserved + from_balance;
        c.unbilled = unbilled;
        c.started = since.unwrap_or(now);
        c.reporting_reason = reporting_reason;
    }
}

/// Copies usage counters into a CDR.
pub(crate) fn fill_usage(c: &mut Cdr, u: &ServiceUnits) {
    c.time = u.time.map_or(0, u64::from);
    c.input_octets = u.input_octets.unwrap_or(0);
    c.output_octets = u.output_octets.unwrap_or(0);
    c.total_octets = u
        .total_octets
        .unwrap_or_else(|| c.input_octets.saturating_add(c.output_octets));
    c.service_units = u.service_specific.unwrap_or(0);
}
