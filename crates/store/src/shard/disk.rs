//! The disk side: every file the store writes, used by one commit job at a
//! time (journal `write` and `fdatasync`, CDR lines, CDR file and journal
//! generation rotation).

use super::batch::Batch;
use super::commit::CommitStats;
use super::files::journal_name;
use super::Durability;
use crate::cdr_file::CdrWriter;
use crate::error::{Error, Result};
use crate::journal::{self, JournalWriter, FRAME_HEADER, PAYLOAD_HEADER};
use crate::names::{sync_dir, CdrFormat};
use gyro_charging::{Cdr, Timestamp};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// Encodes CDR file lines from decoded records.
pub(super) struct LineEncoder {
    pub(super) format: CdrFormat,
}

impl LineEncoder {
    pub(super) fn new(format: CdrFormat) -> Self {
        LineEncoder { format }
    }

    pub(super) fn line(&mut self, c: &Cdr, out: &mut Vec<u8>) -> Result<()> {
        let enc = |e: &dyn std::fmt::Display| Error::Encode {
            what: "CDR line",
            reason: e.to_string(),
        };
        match self.format {
            CdrFormat::JsonLines => c.write_json_line(out).map_err(|e| enc(&e)),
            CdrFormat::Csv => {
                let mut w = csv::WriterBuilder::new()
                    .has_headers(false)
                    .terminator(csv::Terminator::Any(b'\n'))
                    .from_writer(&mut *out);
                w.serialize(c).map_err(|e| enc(&e))?;
                w.flush().map_err(|e| enc(&e))
            }
        }
    }
}

/// The disk side: every file the store writes. Used by one [`CommitJob`]
/// at a time (on the sync thread), or by the loop side when none is in
/// flight.
#[derive(Debug)]
pub(super) struct Disk {
    pub(super) ledger_dir: PathBuf,
    pub(super) generation: u64,
    pub(super) journal: JournalWriter,
    pub(super) cdr: CdrWriter,
    pub(super) durability: Durability,
    pub(super) unsynced_since: Option<Timestamp>,
    pub(super) scratch: Cdr,
    pub(super) lines: Vec<u8>,
    pub(super) encoder_format: CdrFormat,
    pub(super) outcome: Option<Outcome>,
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
    pub(super) cdr_path: PathBuf,
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
    pub(super) fn sync_journal(&mut self) -> Result<()> {
        self.journal.sync()?;
        self.unsynced_since = None;
        Ok(())
    }

    pub(super) fn sync_due(&self, now: Timestamp) -> bool {
        match (self.durability, self.unsynced_since) {
            (Durability::Async { interval }, Some(t)) => {
                now.as_millis().saturating_sub(t.as_millis()) >= interval.as_millis() as u64
            }
            _ => false,
        }
    }

    /// Whether time-driven work is due (a CDR file to close, an
    /// asynchronous sync, CDR lines to retry).
    pub(super) fn due(&self, now: Timestamp) -> bool {
        self.sync_due(now) || self.cdr.backlog() > 0 || self.cdr.due(now)
    }

    /// Everything one commit does on disk.
    pub(super) fn run(&mut self, batch: Option<&Batch>, now: Timestamp, rotate: bool) -> Outcome {
        let mut o = Outcome {
            error: None,
            fatal: false,
            written_at: None,
            stats: CommitStats::default(),
            journal_path: PathBuf::new(),
            cdr_path: PathBuf::new(),
        };
        if let Some(b) = batch.filter(|b| !b.is_empty()) {
            if let Err((e, fatal)) = self.write_batch(b, now, &mut o) {
                o.error = Some(e);
                o.fatal = fatal;
            }
        }
        if o.error.is_none() {
            if let Err(e) = self.after_commit(now, rotate, &mut o.stats) {
                o.error = Some(e);
                o.fatal = true;
            }
        }
        o.journal_path = self.journal.path.clone();
        o.cdr_path = self.cdr.path.clone();
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
        match self.durability {
            Durability::Sync => {
                self.journal.sync().map_err(|e| (e, true))?;
                o.stats.syncs += 1;
            }
            Durability::Async { .. } => {
                self.unsynced_since.get_or_insert(now);
            }
        }
        o.stats.effects = b.n_effects.into();
        o.stats.cdrs = b.n_cdrs.into();
        o.stats.answers = b.n_answers.into();
        // The batch is durable (or written, in asynchronous mode): its CDR
        // lines go to the CDR file, encoded here, off the event loop.
        if b.n_cdrs > 0 {
            self.lines.clear();
            let mut enc = LineEncoder::new(self.encoder_format);
            let (scratch, lines) = (&mut self.scratch, &mut self.lines);
            let mut err = None;
            let decoded = journal::decode_cdrs(&b.cdrs, b.n_cdrs, b.first_cdr, scratch, |c| {
                if let Err(e) = enc.line(c, lines) {
                    err.get_or_insert(e);
                }
            });
            let r = match (decoded, err) {
                (Err((at, e)), _) => Err(Error::Encode {
                    what: "CDR line",
                    reason: format!("record at byte {at}: {e}"),
                }),
                (Ok(()), Some(e)) => Err(e),
                (Ok(()), None) => self.cdr.write(&self.lines, b.n_cdrs.into(), now),
            };
            o.stats.cdr_bytes = self.lines.len() as u64;
            if let Err(e) = r {
                o.stats.cdr_error = Some(e);
            }
        }
        Ok(())
    }

    pub(super) fn after_commit(
        &mut self,
        now: Timestamp,
        rotate: bool,
        stats: &mut CommitStats,
    ) -> Result<()> {
        if stats.cdr_error.is_none() && self.cdr.backlog() > 0 {
            if let Err(e) = self.cdr.flush(now) {
                stats.cdr_error = Some(e);
            }
        }
        if self.sync_due(now) {
            self.sync_journal()?;
            stats.syncs += 1;
        }
        if stats.cdr_error.is_none() && self.cdr.due(now) {
            // A closed file must never hold a record the journal could
            // still lose.
            if self.unsynced_since.is_some() {
                self.sync_journal()?;
                stats.syncs += 1;
            }
            match self.cdr.rotate(now) {
                Ok(p) => {
                    stats.syncs += 2;
                    stats.rotated = p;
                }
                Err(e) => stats.cdr_error = Some(e),
            }
        }
        if rotate {
            // The batch is durable whatever happens here; a failed rotation
            // is reported and asked for again by the next compaction.
            match self.rotate_journal(now) {
                Ok(()) => {
                    stats.syncs += 3;
                    stats.new_generation = Some(self.generation);
                }
                Err(e) => {
                    stats.cdr_error.get_or_insert(e);
                }
            }
        }
        Ok(())
    }

    /// Closes the current journal generation and starts the next: the
    /// journal about to be covered by a snapshot must not hold the only
    /// copy of a CDR, so the CDR file is made durable first.
    pub(super) fn rotate_journal(&mut self, now: Timestamp) -> Result<()> {
        if self.unsynced_since.is_some() {
            self.sync_journal()?;
        }
        self.cdr.flush(now)?;
        self.cdr.sync()?;
        let g = self.generation + 1;
        let path = self.ledger_dir.join(journal_name(g));
        let j = JournalWriter::create(&path)?;
        sync_dir(&self.ledger_dir)?;
        self.journal = j;
        self.generation = g;
        Ok(())
    }
}
