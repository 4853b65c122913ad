//! The commit job's side: the journal `write` and (in synchronous mode)
//! `fdatasync` of a batch, handing its CDRs to the CDR writer thread, and
//! journal generation rotation. Nothing else runs before a batch's
//! answers may leave.

use super::batch::Batch;
use super::cdr_thread::{Msg, Shared};
use super::commit::CommitStats;
use super::compactor::{Feed, FeedTx};
use super::files::journal_name;
use super::Durability;
use crate::error::{Error, Result};
use crate::journal::{self, JournalWriter, FRAME_HEADER, PAYLOAD_HEADER};
use crate::names::sync_dir;
use gyro_charging::Timestamp;
use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, MutexGuard};

/// The journal side. Used by one [`CommitJob`](super::CommitJob) at a
/// time (on the sync thread).
#[derive(Debug)]
pub(super) struct Disk {
    pub(super) ledger_dir: PathBuf,
    pub(super) generation: u64,
    pub(super) journal: JournalWriter,
    pub(super) durability: Durability,
    pub(super) outcome: Option<Outcome>,
    /// The CDR writer thread's queue.
    pub(super) cdr_tx: SyncSender<Msg>,
    pub(super) shared: Arc<Shared>,
    /// The compactor thread's queue, once it runs.
    pub(super) feed: Option<FeedTx>,
}

/// What a [`CommitJob`] did, picked up by [`ShardStore::finish_commit`].
#[derive(Debug)]
pub(super) struct Outcome {
    /// The frame's journal write (and sync) failed.
    pub(super) error: Option<Error>,
    /// After a failed write, whether the journal was cut back cleanly (if
    /// not, or if a sync failed, the store is failed).
    pub(super) fatal: bool,
    /// Where the frame was written: generation, offset.
    pub(super) written_at: Option<(u64, u64)>,
    pub(super) stats: CommitStats,
    pub(super) journal_path: PathBuf,
}

/// A copy of `e` for the job's caller (the precise error stays with the
/// store and is returned by [`ShardStore::finish_commit`]).
pub(super) fn echo(e: &Error) -> Error {
    let source = match e {
        Error::Io { source, .. } => match source.raw_os_error() {
            Some(code) => std::io::Error::from_raw_os_error(code),
            None => std::io::Error::new(source.kind(), source.to_string()),
        },
        other => std::io::Error::other(other.to_string()),
    };
    Error::Io {
        op: "commit",
        path: e.path().map(Path::to_path_buf).unwrap_or_default(),
        source,
    }
}

pub(super) fn lock(disk: &Mutex<Disk>) -> MutexGuard<'_, Disk> {
    disk.lock().unwrap_or_else(|p| p.into_inner())
}

impl Disk {
    /// Everything one commit does on disk.
    pub(super) fn run(&mut self, batch: Option<&Batch>, now: Timestamp, rotate: bool) -> Outcome {
        let mut o = Outcome {
            error: None,
            fatal: false,
            written_at: None,
            stats: CommitStats::default(),
            journal_path: PathBuf::new(),
        };
        if let Some(b) = batch.filter(|b| !b.is_empty()) {
            if let Err((e, fatal)) = self.write_batch(b, now, &mut o) {
                o.error = Some(e);
                o.fatal = fatal;
            }
        }
        if o.error.is_none() && rotate {
            // The batch is durable whatever happens here; a failed rotation
            // is reported and asked for again by the next compaction.
            match self.rotate_journal() {
                Ok(()) => {
                    o.stats.syncs += 2;
                    o.stats.new_generation = Some(self.generation);
                }
                Err(e) => {
                    o.stats.cdr_error.get_or_insert(e);
                }
            }
        }
        o.journal_path = self.journal.path.clone();
        o
    }

    pub(super) fn write_batch(
        &mut self,
        b: &Batch,
        now: Timestamp,
        o: &mut Outcome,
    ) -> std::result::Result<(), (Error, bool)> {
        let mut head = [0u8; FRAME_HEADER + PAYLOAD_HEADER];
        journal::header(
            &mut head,
            b.n_effects,
            b.n_cdrs,
            if b.n_cdrs > 0 { b.first_cdr } else { 0 },
            if b.n_answers > 0 { b.first_answer } else { 0 },
            b.n_answers,
            [b.effects.len(), b.cdrs.len(), b.answers.len()],
        )
        .map_err(|e| (e, false))?;
        journal::seal(&mut head, [&b.effects, &b.cdrs, &b.answers]);
        let at = self
            .journal
            .write(&[&head, &b.effects, &b.cdrs, &b.answers])
            .map_err(|(e, cut)| (e, !cut))?;
        o.written_at = Some((self.generation, at));
        o.stats.journal_bytes =
            (head.len() + b.effects.len() + b.cdrs.len() + b.answers.len()) as u64;
        if self.durability == Durability::Sync {
            let started = std::time::Instant::now();
            self.journal.sync().map_err(|e| (e, true))?;
            o.stats.journal_sync = Some(started.elapsed());
            o.stats.syncs += 1;
        }
        o.stats.effects = b.n_effects.into();
        o.stats.cdrs = b.n_cdrs.into();
        o.stats.answers = b.n_answers.into();
        // The frame is durable (or written, in asynchronous mode): its CDRs
        // go to the CDR writer, in order. A full queue makes this wait
        // (backpressure from a slow CDR disk).
        if b.n_cdrs > 0 || matches!(self.durability, Durability::Async { .. }) {
            let msg = Msg::Batch {
                cdrs: self.shared.pool.copy_of(&b.cdrs),
                n: b.n_cdrs,
                first: b.first_cdr,
                now,
            };
            if self.cdr_tx.send(msg).is_err() {
                // Only after a panic there; the lines are in the journal.
                self.shared.fail_writer_gone();
            }
        }
        // And its effects to the compactor, in order.
        if let Some(feed) = &self.feed {
            feed.send(Feed::Effects {
                bytes: feed.shared.pool.copy_of(&b.effects),
                n: b.n_effects,
                next_cdr: b.first_cdr + b.n_cdrs as u64,
                next_answer: b.first_answer + b.n_answers as u64,
            });
        }
        Ok(())
    }

    /// Closes the current journal generation and starts the next: a new
    /// file and a directory fsync, nothing else. Making the CDR file
    /// durable (so that the closed journal never holds the only copy of a
    /// CDR once a snapshot covers it) and, in asynchronous mode, syncing
    /// the closed journal are the CDR writer's work; a compaction waits for
    /// it (`Shared::ready_generation`).
    pub(super) fn rotate_journal(&mut self) -> Result<()> {
        let g = self.generation + 1;
        let path = self.ledger_dir.join(journal_name(g));
        let j = JournalWriter::create(&path)?;
        sync_dir(&self.ledger_dir)?;
        let file = j.handle()?;
        self.journal = j;
        self.generation = g;
        let msg = Msg::JournalRotated {
            file,
            path,
            generation: g,
        };
        if self.cdr_tx.send(msg).is_err() {
            self.shared.fail_writer_gone();
        }
        if let Some(feed) = &self.feed {
            feed.send(Feed::Rotated { generation: g });
        }
        Ok(())
    }
}
