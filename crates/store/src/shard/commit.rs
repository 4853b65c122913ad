//! Group commit: [`CommitJob`] (the disk work of one batch, `Send`, run on
//! any thread) and the [`ShardStore`] calls that start and finish it.

use super::answers::AnswerSpan;
use super::batch::Batch;
use super::disk::{echo, lock, Disk};
use super::ShardStore;
use crate::error::{Error, Result};
use crate::journal::{FRAME_HEADER, PAYLOAD_HEADER};
use gyro_charging::Timestamp;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// What one commit (or [`ShardStore::tick`]) did.
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
    /// Bytes appended to the CDR file.
    pub cdr_bytes: u64,
    /// `fsync`/`fdatasync` calls made (1 for a synchronous commit; more
    /// when a CDR file was closed or a journal generation started).
    pub syncs: u32,
    /// The CDR file closed by this call, if any.
    pub rotated: Option<PathBuf>,
    /// The journal generation started by this call, if any.
    pub new_generation: Option<u64>,
    /// Writing the CDR file failed. The batch is durable in the journal
    /// (its answers may be released); the lines stay pending and are
    /// written by the next commit or tick, or from the journal on restart.
    pub cdr_error: Option<Error>,
}

/// The disk work of one commit, from [`ShardStore::begin_commit`]:
/// `Send`, run it on any thread (the worker's sync thread) with
/// [`CommitJob::run`], then call [`ShardStore::finish_commit`] with its
/// result. It does all the I/O: the journal `write` and `fdatasync`
/// ([`Durability::Sync`](super::Durability::Sync)) or the write and a due sync
/// ([`Durability::Async`](super::Durability::Async)), the CDR lines (encoded here), CDR file
/// rotation and journal generation rotation.
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
    /// Whether time-driven disk work is due (a CDR file to close by age,
    /// an asynchronous sync, CDR lines to retry): then
    /// [`ShardStore::begin_commit`] returns a job even with nothing
    /// pending.
    pub fn has_due_work(&self, now: Timestamp) -> bool {
        self.inflight.is_none() && (self.rotate_requested || lock(&self.disk).due(now))
    }

    /// Makes everything appended so far durable, on this thread:
    /// [`ShardStore::begin_commit`], [`CommitJob::run`],
    /// [`ShardStore::finish_commit`].
    ///
    /// On `Err` nothing of the batch is durable and its answers must not be
    /// sent. The batch stays pending: a later `commit` retries it (for
    /// example after space was freed), unless the error is
    /// [`Error::Failed`] (an fsync failed), after which the store must be
    /// reopened.
    pub fn commit(&mut self, now: Timestamp) -> Result<CommitStats> {
        match self.begin_commit(now)? {
            Some(job) => {
                let r = job.run();
                self.finish_commit(r, now)
            }
            None => Ok(CommitStats::default()),
        }
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
        if self.pending.is_empty() && !rotate && !lock(&self.disk).due(now) {
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
        self.cdr_path = o.cdr_path;
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
        let stats = o.stats;
        if let Some((generation, at)) = o.written_at {
            self.next_cdr += batch.n_cdrs as u64;
            self.records_since_snapshot += (batch.n_effects + batch.n_cdrs) as u64;
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

    /// In [`Durability::Async`](super::Durability::Async), syncs the journal (on this thread) if a
    /// commit has been unsynced for the interval. Returns whether it
    /// synced.
    pub fn sync_if_due(&mut self, now: Timestamp) -> Result<bool> {
        self.check_failed()?;
        let mut d = lock(&self.disk);
        if !d.sync_due(now) {
            return Ok(false);
        }
        if let Err(e) = d.sync_journal() {
            self.failed = Some(e.to_string());
            return Err(e);
        }
        Ok(true)
    }

    /// Syncs whatever is unsynced (asynchronous mode), now, on this thread.
    pub fn sync_now(&mut self) -> Result<()> {
        self.check_failed()?;
        let mut d = lock(&self.disk);
        if d.unsynced_since.is_some() {
            if let Err(e) = d.sync_journal() {
                self.failed = Some(e.to_string());
                return Err(e);
            }
        }
        Ok(())
    }

    /// Time-driven work on this thread: commits what is pending, syncs in
    /// asynchronous mode when due, retries pending CDR lines, and closes a
    /// CDR file that reached its age. A runtime that must not block calls
    /// [`ShardStore::begin_commit`] instead, whose job carries the same
    /// work (see [`ShardStore::has_due_work`]).
    pub fn tick(&mut self, now: Timestamp) -> Result<CommitStats> {
        self.check_failed()?;
        if self.inflight.is_some() {
            return Ok(CommitStats::default());
        }
        self.commit(now)
    }

    /// Closes the open CDR file now if it holds any record (for example at
    /// shutdown, so the billing system gets everything). On this thread.
    pub fn close_cdr_file(&mut self, now: Timestamp) -> Result<Option<PathBuf>> {
        self.check_failed()?;
        let mut d = lock(&self.disk);
        d.cdr.flush(now)?;
        if d.unsynced_since.is_some() {
            if let Err(e) = d.sync_journal() {
                self.failed = Some(e.to_string());
                return Err(e);
            }
        }
        let r = d.cdr.rotate(now)?;
        self.cdr_path = d.cdr.path.clone();
        Ok(r)
    }
}
