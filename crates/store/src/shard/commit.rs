//! Group commit: [`CommitJob`] (the disk work of one batch, `Send`, run on
//! any thread) and the [`ShardStore`] calls that start and finish it.

use super::answers::AnswerSpan;
use super::batch::Batch;
use super::cdr_thread::{CdrWriterHold, Msg};
use super::disk::{echo, lock, Disk};
use super::ShardStore;
use crate::error::{Error, Result};
use crate::journal::{FRAME_HEADER, PAYLOAD_HEADER};
use gyro_charging::Timestamp;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// What one commit (or [`ShardStore::tick`]) did, and what the shard's
/// CDR writer thread did since the previous commit finished (all of it,
/// up to this commit's batch, after [`ShardStore::commit`] and
/// [`ShardStore::tick`], which wait for the writer).
#[derive(Debug, Default)]
pub struct CommitStats {
    /// Effects made durable.
    pub effects: u64,
    /// CDRs made durable.
    pub cdrs: u64,
    /// Answer records made durable.
    pub answers: u64,
    /// Bytes appended to the journal (frame header included).
    pub journal_bytes: u64,
    /// Bytes the CDR writer appended to the CDR file.
    pub cdr_bytes: u64,
    /// `fsync`/`fdatasync` calls made (1 for a synchronous commit; more
    /// when a CDR file was closed, a journal generation started, or the
    /// journal was synced in asynchronous mode).
    pub syncs: u32,
    /// How long the batch's journal `fdatasync` took, measured on the
    /// thread that ran it ([`Durability::Sync`](super::Durability::Sync)
    /// only).
    pub journal_sync: Option<std::time::Duration>,
    /// The CDR file the writer closed, if any.
    pub rotated: Option<PathBuf>,
    /// The journal generation started by this call, if any.
    pub new_generation: Option<u64>,
    /// Writing the CDR file failed (or starting a journal generation).
    /// The batches are durable in the journal (their answers may be
    /// released); the lines stay pending and are written by the writer's
    /// next batch or tick, or from the journal on restart.
    pub cdr_error: Option<Error>,
}

/// The disk work of one commit, from [`ShardStore::begin_commit`]:
/// `Send`, run it on any thread (the worker's sync thread) with
/// [`CommitJob::run`], then call [`ShardStore::finish_commit`] with its
/// result. It does only what the batch's answers wait for: the journal
/// `write` and `fdatasync` ([`Durability::Sync`](super::Durability::Sync))
/// or the write alone ([`Durability::Async`](super::Durability::Async)),
/// then hands the batch's CDRs to the shard's CDR writer thread (which
/// encodes and appends the lines, closes CDR files and runs the
/// asynchronous syncs), and starts a journal generation when a snapshot
/// asked for one (a new file and a directory fsync).
#[derive(Debug)]
pub struct CommitJob {
    disk: Arc<Mutex<Disk>>,
    batch: Option<Arc<Batch>>,
    now: Timestamp,
    rotate: bool,
}

impl CommitJob {
    /// Does the batch's I/O. `Err` means the batch is not durable: do
    /// not release its answers (and answer them 3004).
    pub fn run(self) -> Result<()> {
        let mut d = lock(&self.disk);
        let mut o = d.run(self.batch.as_deref(), self.now, self.rotate);
        let r = match &o.error {
            None => Ok(()),
            Some(e) => Err(echo(e)),
        };
        if let Some(old) = d.outcome.take() {
            // Never picked up: keep its statistics.
            o.stats.syncs += old.stats.syncs;
        }
        d.outcome = Some(o);
        r
    }

    /// [`CommitJob::run`] under the name of the earlier `fdatasync`
    /// handle.
    pub fn sync(self) -> Result<()> {
        self.run()
    }
}

/// The `fdatasync` handle of the earlier API: now the whole commit job.
pub type SyncHandle = CommitJob;

impl ShardStore {
    /// Whether disk work for a commit job is due with nothing pending (a
    /// journal generation a snapshot asked for): then
    /// [`ShardStore::begin_commit`] returns a job. Time-driven work (a CDR
    /// file to close by age, an asynchronous sync, CDR lines to retry) is
    /// the CDR writer's; `begin_commit` passes it the time.
    pub fn has_due_work(&self, now: Timestamp) -> bool {
        let _ = now;
        self.inflight.is_none() && self.rotate_requested
    }

    /// Makes everything appended so far durable, on this thread:
    /// [`ShardStore::begin_commit`], [`CommitJob::run`],
    /// [`ShardStore::finish_commit`], then waits for the CDR writer to
    /// write the batch's lines (and close the file if due), so the
    /// returned statistics include its work and errors.
    ///
    /// On `Err` nothing of the batch is durable and its answers must not be
    /// sent. The batch stays pending: a later `commit` retries it (for
    /// example after space was freed), unless the error is
    /// [`Error::Failed`] (an fsync failed), after which the store must be
    /// reopened.
    pub fn commit(&mut self, now: Timestamp) -> Result<CommitStats> {
        let mut stats = match self.begin_commit(now)? {
            Some(job) => {
                let r = job.run();
                self.finish_commit(r, now)?
            }
            None => CommitStats::default(),
        };
        self.cdr.drain(now);
        self.take_report(&mut stats);
        self.check_failed()?;
        Ok(stats)
    }

    /// Adds what the CDR writer did since the last call to `stats`.
    fn take_report(&mut self, stats: &mut CommitStats) {
        let mut r = self.cdr.shared.report();
        stats.cdr_bytes += std::mem::take(&mut r.cdr_bytes);
        stats.syncs += std::mem::take(&mut r.syncs);
        if let Some(p) = r.rotated.take() {
            stats.rotated = Some(p);
        }
        if let Some(e) = r.cdr_error.take() {
            stats.cdr_error.get_or_insert(e);
        }
        if self.cdr_path != r.cdr_path {
            self.cdr_path.clone_from(&r.cdr_path);
        }
        if let Some(reason) = &r.failed {
            self.failed.get_or_insert_with(|| reason.clone());
        }
    }

    /// Test support: holds the CDR writer thread (as a CDR disk that does
    /// not answer would) until the returned value is dropped. Commits go
    /// on meanwhile, up to the writer's queue bound.
    #[doc(hidden)]
    pub fn hold_cdr_writer(&self) -> CdrWriterHold {
        self.cdr.hold()
    }

    /// Starts a commit without doing any I/O: moves the pending batch
    /// (its buffers, not a copy) into a [`CommitJob`] to run on another
    /// thread. `None` when there is nothing to write and no due work.
    /// Pass the job's result to [`ShardStore::finish_commit`] and release
    /// the batch's answers only if that returns `Ok`. Records appended
    /// meanwhile belong to the next batch. Only one job may be in flight.
    pub fn begin_commit(&mut self, now: Timestamp) -> Result<Option<CommitJob>> {
        self.check_failed()?;
        if self.inflight.is_some() {
            return Err(Error::Busy("a batch is already in flight"));
        }
        let rotate = self.rotate_requested;
        if self.pending.is_empty() && !rotate {
            self.cdr.tick(now);
            return Ok(None);
        }
        let mut batch = std::mem::take(&mut self.spare);
        batch.clear();
        std::mem::swap(&mut batch, &mut self.pending);
        let batch = Arc::new(batch);
        self.inflight = Some(batch.clone());
        self.inflight_rotate = rotate;
        self.rotate_requested = false;
        Ok(Some(CommitJob {
            disk: self.disk.clone(),
            batch: Some(batch),
            now,
            rotate,
        }))
    }

    /// Second half of a commit: `ran` is the result of
    /// [`CommitJob::run`]. On `Ok` the batch is durable: release its
    /// answers. On `Err` the batch is not durable (answer 3004): it goes
    /// back before the records appended since, to be retried by the next
    /// commit, unless the store failed (an fsync failed, or a failed write
    /// could not be cut back), after which it must be reopened.
    pub fn finish_commit(&mut self, ran: Result<()>, now: Timestamp) -> Result<CommitStats> {
        let _ = now;
        let Some(batch) = self.inflight.take() else {
            ran?;
            return Ok(CommitStats::default());
        };
        let rotate = std::mem::take(&mut self.inflight_rotate);
        let outcome = lock(&self.disk).outcome.take();
        let Some(o) = outcome else {
            // The job never ran to its end (it panicked or was dropped).
            let reason = match ran {
                Err(e) => e.to_string(),
                Ok(()) => "the commit job did not run".to_string(),
            };
            batch.prepend_to(&mut self.pending);
            self.failed = Some(reason.clone());
            return Err(Error::Failed {
                path: self.ledger_dir.clone(),
                reason,
            });
        };
        self.journal_path = o.journal_path;
        if let Some(e) = o.error {
            if o.written_at.is_none() {
                // Nothing of the batch is in the journal: retry it later.
                batch.prepend_to(&mut self.pending);
                self.rotate_requested |= rotate;
            }
            if o.fatal {
                self.failed = Some(e.to_string());
            }
            return Err(e);
        }
        let mut stats = o.stats;
        self.take_report(&mut stats);
        if let Some((generation, at)) = o.written_at {
            self.next_cdr += batch.n_cdrs as u64;
            self.records_since_snapshot += (batch.n_effects + batch.n_cdrs) as u64;
            self.effects_committed += batch.n_effects as u64;
            self.bytes_since_snapshot += stats.journal_bytes;
            if batch.n_answers > 0 {
                self.answer_index.push(AnswerSpan {
                    first: batch.first_answer,
                    count: batch.n_answers,
                    generation,
                    offset: at
                        + (FRAME_HEADER + PAYLOAD_HEADER) as u64
                        + batch.effects.len() as u64
                        + batch.cdrs.len() as u64,
                    len: batch.answers.len() as u32,
                });
            }
        }
        if let Some(g) = stats.new_generation {
            self.generation = g;
            self.records_since_snapshot = 0;
            self.bytes_since_snapshot = 0;
        }
        if let Ok(b) = Arc::try_unwrap(batch) {
            self.spare = b;
        }
        Ok(stats)
    }

    /// In [`Durability::Async`](super::Durability::Async), syncs the
    /// journal if a commit has been unsynced for the interval (on the CDR
    /// writer thread, after what is queued; this thread waits). Returns
    /// whether it synced.
    pub fn sync_if_due(&mut self, now: Timestamp) -> Result<bool> {
        self.sync_journal(now, false)
    }

    /// Syncs whatever is unsynced (asynchronous mode), now; this thread
    /// waits.
    pub fn sync_now(&mut self) -> Result<()> {
        self.sync_journal(Timestamp(0), true).map(|_| ())
    }

    fn sync_journal(&mut self, now: Timestamp, force: bool) -> Result<bool> {
        self.check_failed()?;
        let r = self.cdr.ask(|reply| Msg::SyncJournal { now, force, reply });
        if let Err(e) = &r {
            self.failed.get_or_insert_with(|| e.to_string());
        }
        r
    }

    /// Time-driven work, waiting for it: commits what is pending, and has
    /// the CDR writer sync in asynchronous mode when due, retry pending
    /// CDR lines and close a CDR file that reached its age. A runtime that
    /// must not block calls [`ShardStore::begin_commit`] instead, which
    /// passes the time to the CDR writer.
    pub fn tick(&mut self, now: Timestamp) -> Result<CommitStats> {
        self.check_failed()?;
        if self.inflight.is_some() {
            return Ok(CommitStats::default());
        }
        self.commit(now)
    }

    /// Closes the open CDR file now if it holds any record (for example at
    /// shutdown, so the billing system gets everything), after the CDR
    /// writer wrote everything queued. This thread waits.
    pub fn close_cdr_file(&mut self, now: Timestamp) -> Result<Option<PathBuf>> {
        self.check_failed()?;
        let r = self.cdr.ask(|reply| Msg::Close(now, reply));
        let mut stats = CommitStats::default();
        self.take_report(&mut stats);
        self.check_failed()?;
        r
    }

    /// Whether the CDR writer made every CDR of the journal generations
    /// below `generation` durable in a CDR file.
    pub(super) fn cdrs_durable_below(&self, generation: u64) -> bool {
        self.cdr.shared.ready_generation.load(Ordering::Acquire) >= generation
    }
}
