//! [`CreditShard`]: one engine and its store, owned by one event loop.
//!
//! A CCR's path through a shard, in one line: decode the AVPs once into a
//! reused [`CcRequest`], let the engine charge it (effects, CDRs and the
//! answer record go to the shard's batch), encode the CCA into the
//! runtime's output buffer. The runtime releases the answer once the
//! batch is durable ([`Shard::flush`]).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use gyro_charging::answer_log::AnswerArchive;
use gyro_charging::{
    CcAnswer, CcRequest, ChargingConfig, ClosingCause, Output, RecordType, RequestType, Timestamp,
};
use gyro_diameter::app::{session_key, Flush, Shard, SyncJob};
use gyro_diameter::codes::{app, avp, cmd, result};
use gyro_diameter::connection::ShedKind;
use gyro_diameter::header::flags;
use gyro_diameter::{Encoder, Message};
use gyro_store::{CommitStats, CompactionDone, Durability};
use tracing::{error, info, warn};

use crate::clock::unix_now;
use crate::gy::{self, LocalIdentity};
use crate::recovery::{self, open_ledger, Ledger};
use crate::storage::{ShardTotals, Storage};
use crate::telemetry;

/// How long a failed shard waits between attempts to reload from disk.
const REOPEN_EVERY_MS: u64 = 5_000;

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
    /// A snapshot being built off the event loop, and how long it took.
    compacting: Option<std::thread::JoinHandle<(gyro_store::Result<CompactionDone>, Duration)>>,
    /// Whether the store's compactor failing was logged.
    compactor_failure_logged: bool,
    /// Without storage: the answer records, for duplicate detection.
    archive: AnswerArchive,
    /// Sessions that a request failed to open or that a failed update
    /// closed, reported at the next tick so the runtime can release them.
    ended: Vec<u64>,
    /// Sessions waiting for credit, re-authorized by a top-up.
    waiting: crate::reauth::Waiting,
}

impl CreditShard {
    pub(crate) fn new(
        index: usize,
        count: usize,
        ledger: Option<Ledger>,
        charging: Arc<ChargingConfig>,
        storage: Storage,
        identity: LocalIdentity,
        totals: Arc<[ShardTotals]>,
    ) -> Self {
        CreditShard {
            index,
            count,
            ledger,
            charging,
            storage,
            request: CcRequest::default(),
            answer: CcAnswer::default(),
            output: Output::default(),
            identity,
            totals,
            last_reopen: 0,
            compacting: None,
            compactor_failure_logged: false,
            archive: AnswerArchive::new(),
            ended: Vec::new(),
            waiting: Default::default(),
        }
    }

    fn totals(&self) -> &ShardTotals {
        &self.totals[self.index.min(self.totals.len() - 1)]
    }

    /// The engine and the output buffer its effects go to, unless the
    /// shard has failed (then [`CreditShard::record_output`] journals them).
    pub(crate) fn engine_and_output(
        &mut self,
    ) -> Option<(&mut gyro_charging::Engine, &mut Output)> {
        let ledger = self.ledger.as_mut()?;
        Some((&mut ledger.engine, &mut self.output))
    }

    /// Who this shard answers as.
    pub(crate) fn identity(&self) -> &LocalIdentity {
        &self.identity
    }

    /// The engine, unless the shard has failed.
    pub(crate) fn engine(&self) -> Option<&gyro_charging::Engine> {
        self.ledger.as_ref().map(|l| &l.engine)
    }

    /// The engine and the sessions waiting for credit.
    pub(crate) fn engine_and_waiting(
        &mut self,
    ) -> Option<(&gyro_charging::Engine, &mut crate::reauth::Waiting)> {
        let ledger = self.ledger.as_ref()?;
        Some((&ledger.engine, &mut self.waiting))
    }

    /// A session closed outside a request: it waits for nothing.
    pub(crate) fn forget_waiting(&mut self, session_id: &str) {
        self.waiting.forget(session_id);
    }

    /// Journals what the engine just did (and counts it).
    pub(crate) fn record_output(&mut self) -> bool {
        let Some(ledger) = &mut self.ledger else {
            return false;
        };
        let totals = &self.totals[self.index.min(self.totals.len() - 1)];
        for cdr in self.output.cdrs.iter() {
            totals.cdrs.fetch_add(1, Relaxed);
            totals.amount.fetch_add(cdr.amount, Relaxed);
        }
        totals.telemetry.effects(&self.output.effects);
        let r = match &mut ledger.store {
            Some(store) => store.append_output(&self.output),
            None => {
                self.archive.append(&self.output.answers);
                Ok(())
            }
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
    /// from disk by [`Shard::tick`].
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
        reject(&self.identity, req, code, avp_code, out);
    }

    /// Builds a snapshot off the event loop when the store says one is
    /// due (the store first closes the journal on its sync thread), and
    /// takes the result of the last one.
    fn compact(&mut self) {
        if self.compacting.as_ref().is_some_and(|h| !h.is_finished()) {
            return;
        }
        let done = self.compacting.take().map(|h| {
            let (done, took) = h.join().unwrap_or((
                Err(gyro_store::Error::Busy("snapshot thread panicked")),
                Duration::ZERO,
            ));
            if done.is_ok() {
                let ns = took.as_nanos() as u64;
                self.totals().telemetry.snapshot.record(ns);
            }
            done
        });
        let Some(ledger) = &mut self.ledger else {
            return;
        };
        let Some(store) = &mut ledger.store else {
            return;
        };
        let shard = self.index;
        if !self.compactor_failure_logged {
            if let Some(why) = store.compactor_failure() {
                warn!(shard, reason = %why, "the ledger copy kept for snapshots stopped; snapshots read the journal back from now on");
                self.compactor_failure_logged = true;
            }
        }
        if let Some(done) = done {
            match &done {
                Ok(d) => info!(
                    shard,
                    generation = d.generation,
                    bytes = d.bytes,
                    effects = d.effects,
                    from_memory = d.from_memory,
                    "ledger snapshot written"
                ),
                Err(e) => {
                    warn!(shard, error = %e, "ledger snapshot failed; the journal keeps everything")
                }
            }
            store.finish_compaction(&done);
        }
        let Some(job) = store.begin_compaction() else {
            return;
        };
        let (charging, count) = (self.charging.clone(), self.count);
        let next_answer_seq = ledger.engine.next_answer_seq();
        let spawned = std::thread::Builder::new()
            .name(format!("gyro-snapshot-{shard}"))
            .spawn(move || {
                background_priority();
                let started = Instant::now();
                let done = recovery::compact(job, &charging, shard, count, next_answer_seq);
                (done, started.elapsed())
            });
        match spawned {
            Ok(h) => self.compacting = Some(h),
            Err(e) => {
                warn!(shard, error = %e, "cannot start the snapshot thread");
                store.finish_compaction(&Err(gyro_store::Error::Busy("no snapshot thread")));
            }
        }
    }

    fn count_commit(&self, stats: &CommitStats) {
        let t = self.totals();
        t.commits.fetch_add(1, Relaxed);
        t.syncs.fetch_add(u64::from(stats.syncs), Relaxed);
        t.records.fetch_add(stats.effects + stats.cdrs, Relaxed);
        t.telemetry
            .records_per_commit
            .record(stats.effects + stats.cdrs);
        if let Some(took) = stats.journal_sync {
            t.telemetry.journal_sync.record(took.as_nanos() as u64);
        }
    }

    /// Open sessions and the money their reservations hold (minor units),
    /// counted now (a walk over the open sessions).
    pub fn holdings(&self) -> (u64, i64) {
        let Some(ledger) = &self.ledger else {
            return (0, 0);
        };
        let sessions = &ledger.engine.ledger().sessions;
        let reserved = sessions.values().map(|s| s.reserved_money()).sum();
        (sessions.len() as u64, reserved)
    }

    /// Answers `req` and says what kind of request it was
    /// ([`telemetry::REQUEST_KINDS`]) and with which Result-Code.
    fn answer(&mut self, req: &Message<'_>, now_ms: u64, out: &mut BytesMut) -> (usize, u32) {
        if req.command_code() != cmd::CREDIT_CONTROL {
            // RAR, ASR and STR are sent by a credit-control server, not to it.
            self.reject(req, result::COMMAND_UNSUPPORTED, 0, out);
            return (telemetry::OTHER_COMMAND, result::COMMAND_UNSUPPORTED);
        }
        if let Err(e) = gy::decode_ccr(req, &mut self.request) {
            let (code, avp_code) = e.answer_codes();
            self.reject(req, code, avp_code, out);
            return (telemetry::kind_of_message(req), code);
        }
        let kind = telemetry::kind_of(self.request.request_type);
        let Some(ledger) = &mut self.ledger else {
            self.reject(req, result::TOO_BUSY, 0, out);
            return (kind, result::TOO_BUSY);
        };
        self.output.clear();
        let (store, archive) = (&ledger.store, &self.archive);
        ledger.engine.handle_with(
            &self.request,
            Timestamp(now_ms),
            &mut self.answer,
            &mut self.output,
            |seq| match store {
                Some(store) => store.read_answer(seq).unwrap_or_else(|e| {
                    warn!(error = %e, seq, "cannot read a remembered answer; answering anew");
                    None
                }),
                None => archive.read(seq).map(<[u8]>::to_vec),
            },
        );
        self.waiting.note(
            &self.request,
            &self.answer,
            ledger.engine.session_account(&self.request.session_id),
        );
        if self.answer.result_code != result::SUCCESS
            && self.request.request_type != RequestType::Event
            && ledger
                .engine
                .ledger()
                .session_key(&self.request.session_id)
                .is_none()
        {
            self.ended
                .push(session_key(self.request.session_id.as_bytes()));
        }
        if !self.record_output() {
            self.reject(req, result::TOO_BUSY, 0, out);
            return (kind, result::TOO_BUSY);
        }
        if gy::encode_cca(out, req, &self.answer, &self.identity).is_err() {
            self.reject(req, result::UNABLE_TO_COMPLY, 0, out);
            return (kind, result::UNABLE_TO_COMPLY);
        }
        (kind, self.answer.result_code)
    }

    /// The DIAMETER_TOO_BUSY answer to the request `answer` answers (or
    /// to that request itself).
    fn too_busy_answer(&self, answer: &Message<'_>, out: &mut BytesMut) {
        let h = answer.header();
        let mut e = Encoder::new(
            out,
            (h.flags & flags::PROXIABLE) | flags::ERROR,
            h.command_code,
            h.application_id,
            h.hop_by_hop,
            h.end_to_end,
        );
        if let Some(sid) = answer.find(avp::SESSION_ID) {
            e.echo(avp::SESSION_ID, &sid);
        }
        e.str(avp::ORIGIN_HOST, &self.identity.origin_host)
            .str(avp::ORIGIN_REALM, &self.identity.origin_realm)
            .u32(avp::RESULT_CODE, result::TOO_BUSY)
            .str(
                avp::ERROR_MESSAGE,
                "too busy (overloaded, or the change cannot be made durable); try again or elsewhere",
            );
        echo_ids(&mut e, answer);
        if e.finish().is_err() {
            warn!("3004 answer too large");
        }
    }
}

/// An error answer to `req` from `identity` with Result-Code `code` (the
/// E bit for a 3xxx protocol error), echoing what a CCA must echo, with a
/// Failed-AVP holding the request's AVP of code `avp_code` when not 0.
pub(crate) fn reject(
    identity: &LocalIdentity,
    req: &Message<'_>,
    code: u32,
    avp_code: u32,
    out: &mut BytesMut,
) {
    let protocol_error = (3000..4000).contains(&code);
    let mut e = Encoder::answer(out, req, protocol_error);
    e.u32(avp::RESULT_CODE, code)
        .str(avp::ORIGIN_HOST, &identity.origin_host)
        .str(avp::ORIGIN_REALM, &identity.origin_realm);
    if req.command_code() == cmd::CREDIT_CONTROL {
        echo_ids(&mut e, req);
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

/// Writes what every CCA carries back of its CCR `msg` (or of the answer
/// `msg` already built for it): Auth-Application-Id 4 (the application's,
/// whatever the request's AVP said, or if it had none), and CC-Request-Type
/// and CC-Request-Number when `msg` has them readable, with the flags their
/// definitions prescribe ([`Encoder::echo`]), not the sender's.
pub(crate) fn echo_ids(e: &mut Encoder<'_>, msg: &Message<'_>) {
    e.u32(avp::AUTH_APPLICATION_ID, app::CREDIT_CONTROL);
    for id in [avp::CC_REQUEST_TYPE, avp::CC_REQUEST_NUMBER] {
        if let Some(a) = msg.find(id).filter(|a| a.data().len() == 4) {
            e.echo(id, &a);
        }
    }
}

/// Lowers the calling thread to the idle scheduling class: building a
/// snapshot must never take CPU time from an event loop, even when both
/// share one core. Best effort: without it the snapshot is still correct.
fn background_priority() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: sched_setscheduler with pid 0 changes only the calling
        // thread; `param` is a valid, initialised sched_param.
        let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
        if r != 0 {
            warn!(
                error = %std::io::Error::last_os_error(),
                "cannot lower the snapshot thread's priority"
            );
        }
    }
}

impl Shard for CreditShard {
    fn handle(&mut self, req: &Message<'_>, now_ms: u64, out: &mut BytesMut) {
        let (kind, code) = self.answer(req, now_ms, out);
        self.totals().telemetry.answered(kind, code);
    }

    fn shed(&mut self, kind: ShedKind, count: u64) {
        let kind = telemetry::kind_of_shed(kind);
        self.totals()
            .telemetry
            .answered_n(kind, result::TOO_BUSY, count);
    }

    fn too_busy(&mut self, answer: &Message<'_>, out: &mut BytesMut) {
        let t = &self.totals().telemetry;
        let kind = telemetry::kind_of_message(answer);
        if answer.is_request() {
            t.answered(kind, result::TOO_BUSY);
        } else if let Some(was) = answer.find(avp::RESULT_CODE).and_then(|a| a.u32().ok()) {
            t.answer_changed(kind, was, result::TOO_BUSY);
        }
        self.too_busy_answer(answer, out);
    }

    /// Ends the sessions the restarted peer opened before its restart:
    /// their reservations go back to their accounts, each gets its
    /// session-end CDR (closing cause rejected, 5002: the client no longer
    /// knows it), in the shard's next group commit.
    fn peer_restarted(&mut self, host: &str, restarted_ms: u64, now_ms: u64) {
        let Some((engine, output)) = self.engine_and_output() else {
            return;
        };
        output.clear();
        let ended = engine.release_sessions_of_peer(
            host,
            Timestamp(restarted_ms),
            Timestamp(now_ms),
            output,
        );
        if ended.is_empty() {
            return;
        }
        info!(
            shard = self.index,
            peer = host,
            sessions = ended.len(),
            "sessions of a restarted peer released"
        );
        for sid in &ended {
            self.ended.push(session_key(sid.as_bytes()));
            self.waiting.forget(sid);
        }
        self.record_output();
    }

    fn tick(&mut self, now_ms: u64, ended: &mut Vec<u64>) {
        ended.append(&mut self.ended);
        let Some(ledger) = &mut self.ledger else {
            self.try_reopen(now_ms);
            return;
        };
        self.output.clear();
        ledger.engine.tick(Timestamp(now_ms), &mut self.output);
        for c in self.output.cdrs.iter() {
            if c.record_type == RecordType::SessionEnd
                && c.closing_cause == Some(ClosingCause::SupervisionExpired)
            {
                ended.push(session_key(c.session_id.as_bytes()));
                self.waiting.forget(&c.session_id);
            }
        }
        if !self.record_output() {
            return;
        }
        // Time-driven disk work (an asynchronous sync, a CDR file closed by
        // age) runs in the next group commit, on the sync thread.
        if let Some(ledger) = &mut self.ledger {
            let horizon = ledger.engine.answer_horizon(Timestamp(now_ms));
            match &mut ledger.store {
                Some(store) => store.set_answer_horizon(horizon),
                None => self.archive.forget_below(horizon),
            }
        }
        self.compact();
    }

    fn flush(&mut self) -> Flush {
        let Some(ledger) = &mut self.ledger else {
            return Flush::Failed;
        };
        let Some(store) = &mut ledger.store else {
            return Flush::Done;
        };
        let syncs = store.options().durability == Durability::Sync;
        match store.begin_commit(unix_now()) {
            Ok(Some(job)) => {
                let job: SyncJob = Box::new(move || job.run().map_err(std::io::Error::other));
                if syncs {
                    Flush::Sync(job)
                } else {
                    Flush::Write(job)
                }
            }
            Ok(None) => Flush::Done,
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
            Ok(stats) => self.count_commit(&stats),
            Err(e) => self.fail(&e.to_string()),
        }
    }

    fn sessions(&mut self, open: &mut Vec<u64>, lingering: &mut Vec<u64>) {
        if let Some(ledger) = &mut self.ledger {
            // Recovery's list is needed once, for this.
            lingering.append(&mut std::mem::take(&mut ledger.lingering));
            open.extend(
                ledger
                    .engine
                    .ledger()
                    .sessions
                    .values()
                    .map(|s| session_key(s.session_id.as_bytes())),
            );
        }
    }
}

impl Drop for CreditShard {
    fn drop(&mut self) {
        if let Some(h) = self.compacting.take() {
            let done = h.join().map_or(
                Err(gyro_store::Error::Busy("snapshot thread panicked")),
                |d| d.0,
            );
            if let Some(store) = self.ledger.as_mut().and_then(|l| l.store.as_mut()) {
                store.finish_compaction(&done);
            }
        }
        match self.ledger.as_mut().map(|l| l.store.as_mut()) {
            Some(Some(store)) => {
                if let Err(e) = store.close_cdr_file(unix_now()) {
                    warn!(
                        shard = self.index,
                        error = %e,
                        "cannot close the CDR file: the CDRs it lacks are in the journal \
                         and are written to a CDR file at the next start"
                    );
                }
            }
            // Without storage (durability "none"): nothing to close.
            Some(None) => {}
            None => warn!(
                shard = self.index,
                "stopping with the ledger unavailable (see the errors above): CDRs journaled \
                 but not yet in a CDR file are written to one at the next start"
            ),
        }
    }
}

impl CreditShard {
    /// Charges an engine request that came over another interface than
    /// Diameter (Nchf_ConvergedCharging): the same engine, duplicate
    /// detection, supervision, journal and CDRs as a CCR, with the answer
    /// written to `answer` instead of a CCA. The effects join the shard's
    /// batch, so the caller answers only once the runtime says the batch
    /// is durable. Returns false, changing nothing, when the shard cannot
    /// make changes durable now (answer as 3004 DIAMETER_TOO_BUSY).
    pub fn charge(&mut self, request: &CcRequest, now_ms: u64, answer: &mut CcAnswer) -> bool {
        let Some(ledger) = &mut self.ledger else {
            return false;
        };
        self.output.clear();
        let (store, archive) = (&ledger.store, &self.archive);
        ledger.engine.handle_with(
            request,
            Timestamp(now_ms),
            answer,
            &mut self.output,
            |seq| match store {
                Some(store) => store.read_answer(seq).unwrap_or_else(|e| {
                    warn!(error = %e, seq, "cannot read a remembered answer; answering anew");
                    None
                }),
                None => archive.read(seq).map(<[u8]>::to_vec),
            },
        );
        self.record_output()
    }
}
