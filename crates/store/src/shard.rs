//! [`ShardStore`]: the loop side of one shard's store (encoding records
//! into the pending batch, bookkeeping) and the disk side ([`CommitJob`],
//! run on any thread: journal `write` and `fdatasync`, CDR lines, file
//! rotation).

use crate::cdr_file::{CdrRepair, CdrWriter};
use crate::error::{corrupt, io_err, Error, Result};
use crate::journal::{self, FrameInfo, FrameReader, JournalWriter, FRAME_HEADER, PAYLOAD_HEADER};
use crate::names::{create_dir_durable, sync_dir, CdrFormat};
use crate::record::{encode_cdr, encode_effect};
use crate::snapshot;
use gyro_charging::{Cdr, Effect, Output, Snapshot, Timestamp};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// When a commit is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// The [`CommitJob`] returns after `fdatasync`: release the answers of
    /// the batch after it. The default.
    Sync,
    /// The [`CommitJob`] only writes; a later job (or
    /// [`ShardStore::sync_if_due`]) syncs at most `interval` after the
    /// first unsynced commit. A crash (of the machine, not only of gyro)
    /// loses up to `interval` of answered requests: their debits are
    /// forgotten and their CDR sequence numbers are given again.
    Async {
        /// Longest time a commit stays unsynced.
        interval: Duration,
    },
}

/// Settings of a [`ShardStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// When a commit is durable.
    pub durability: Durability,
    /// [`ShardStore::should_snapshot`] says yes after this many journaled
    /// effects and CDRs since the last snapshot...
    pub snapshot_every_records: u64,
    /// ...or after this many journal bytes.
    pub snapshot_every_bytes: u64,
    /// A CDR file is closed once it holds at least this many bytes (it may
    /// exceed it by one commit's records).
    pub cdr_max_bytes: u64,
    /// A CDR file is closed this long after its first record was written.
    pub cdr_max_age: Duration,
    /// How CDR files are written.
    pub cdr_format: CdrFormat,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            durability: Durability::Sync,
            snapshot_every_records: 2_000_000,
            snapshot_every_bytes: 512 << 20,
            cdr_max_bytes: 64 << 20,
            cdr_max_age: Duration::from_secs(300),
            cdr_format: CdrFormat::JsonLines,
        }
    }
}

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

/// What was found on disk when opening a shard.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Generation of the snapshot restored, if any.
    pub snapshot_generation: Option<u64>,
    /// Journal files replayed.
    pub journal_files: usize,
    /// Journal frames (commits) replayed.
    pub journal_frames: u64,
    /// Effects replayed.
    pub journal_effects: u64,
    /// CDRs found in the journal.
    pub journal_cdrs: u64,
    /// Answer records found in the retained journals.
    pub journal_answers: u64,
    /// Bytes of valid journal frames.
    pub journal_bytes: u64,
    /// Bytes of a torn last frame that were cut off.
    pub torn_journal_bytes: u64,
    /// What was repaired in the CDR directory.
    pub cdr: CdrRepair,
}

/// What [`ShardStore::open`] recovered. Rebuild the state with
/// [`Recovered::snapshot`] (or from the configuration when there is none
/// yet), then [`Recovered::replay_effects`] and
/// [`Recovered::replay_answers`]; neither holds the journal in memory.
#[derive(Debug)]
pub struct Recovered {
    /// The latest snapshot, its `next_cdr_sequence` already set to
    /// [`Recovered::next_cdr_sequence`]. `None` before the first snapshot.
    pub snapshot: Option<Snapshot>,
    /// Sequence number of the next CDR.
    pub next_cdr_sequence: u64,
    /// What was found and repaired.
    pub report: RecoveryReport,
    /// Journals after the snapshot: their effects are replayed.
    replay: Vec<(PathBuf, Vec<FrameInfo>)>,
    /// Every retained journal (older ones kept for their answers, then the
    /// replayed ones): their answer sections are handed back.
    answers: Vec<(PathBuf, Vec<FrameInfo>)>,
}

impl Recovered {
    /// Calls `apply` for every effect journaled after the snapshot, in
    /// order. An error of `apply` becomes [`Error::Replay`] naming the
    /// journal and the effect's index.
    pub fn replay_effects(
        &self,
        mut apply: impl FnMut(Effect) -> std::result::Result<(), gyro_charging::Error>,
    ) -> Result<()> {
        for_each_effect(&self.replay, |path, record, e| {
            apply(e).map_err(|source| Error::Replay {
                path: path.to_path_buf(),
                record,
                source,
            })
        })
    }

    /// Calls `each(first_seq, count, records)` for every answer section of
    /// every retained journal, oldest first (the engine's opaque answer
    /// records, `count` of them numbered from `first_seq`).
    pub fn replay_answers(
        &self,
        mut each: impl FnMut(u64, u32, &[u8]) -> std::result::Result<(), gyro_charging::Error>,
    ) -> Result<()> {
        for (path, frames) in &self.answers {
            let mut r = None;
            for (i, f) in frames.iter().enumerate() {
                if f.answers == 0 {
                    continue;
                }
                let reader = match &mut r {
                    Some(r) => r,
                    None => r.insert(FrameReader::open(path)?),
                };
                let bytes = reader.answers(f)?;
                each(f.first_answer, f.answers, bytes).map_err(|source| Error::Replay {
                    path: path.clone(),
                    record: i as u64,
                    source,
                })?;
            }
        }
        Ok(())
    }

    /// Every effect after the snapshot, in memory (tools and tests).
    pub fn effects(&self) -> Result<Vec<Effect>> {
        let mut v = Vec::new();
        for_each_effect(&self.replay, |_, _, e| {
            v.push(e);
            Ok(())
        })?;
        Ok(v)
    }
}

fn for_each_effect(
    journals: &[(PathBuf, Vec<FrameInfo>)],
    mut f: impl FnMut(&Path, u64, Effect) -> Result<()>,
) -> Result<()> {
    let mut index = 0u64;
    for (path, frames) in journals {
        let mut r = FrameReader::open(path)?;
        for fr in frames {
            r.effects(fr, |e| {
                f(path, index, e)?;
                index += 1;
                Ok(())
            })?;
        }
    }
    Ok(())
}

/// Journaled CDRs `[from, to)` encoded as CDR file lines, or `None` if the
/// journals do not hold them all.
fn journal_cdr_lines(
    journals: &[(PathBuf, Vec<FrameInfo>)],
    format: CdrFormat,
    from: u64,
    to: u64,
) -> Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    let mut next = from;
    let mut scratch = Cdr::default();
    let mut enc = LineEncoder::new(format);
    for (path, frames) in journals {
        let mut r: Option<FrameReader> = None;
        for fr in frames {
            let end = fr.first_cdr + fr.cdrs as u64;
            if fr.cdrs == 0 || end <= next || fr.first_cdr >= to {
                continue;
            }
            if fr.first_cdr > next {
                return Ok(None);
            }
            let reader = match &mut r {
                Some(r) => r,
                None => r.insert(FrameReader::open(path)?),
            };
            let mut err = None;
            reader.cdrs_from(fr, next, &mut scratch, |c| {
                if let Err(e) = enc.line(c, &mut out) {
                    err.get_or_insert(e);
                }
            })?;
            if let Some(e) = err {
                return Err(e);
            }
            next = end;
        }
    }
    Ok((next >= to).then_some(out))
}

/// Encodes CDR file lines from decoded records.
struct LineEncoder {
    format: CdrFormat,
}

impl LineEncoder {
    fn new(format: CdrFormat) -> Self {
        LineEncoder { format }
    }

    fn line(&mut self, c: &Cdr, out: &mut Vec<u8>) -> Result<()> {
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

/// A snapshot writer handed out by [`ShardStore::prepare_snapshot`]:
/// writes the snapshot (on any thread) and then removes the files it
/// replaces.
#[derive(Debug)]
pub struct SnapshotWriter {
    dir: PathBuf,
    generation: u64,
    horizon: u64,
}

impl SnapshotWriter {
    /// The generation this snapshot will have.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Writes `snapshot` (the engine's state when
    /// [`ShardStore::prepare_snapshot`] was called) atomically, then
    /// deletes older snapshots and the journals it covers whose answers
    /// are all older than the answer horizon. Returns the snapshot's size.
    /// On error nothing is lost: the older snapshot and the journals stay.
    pub fn write(self, snapshot: &Snapshot) -> Result<u64> {
        let path = self.dir.join(snapshot_name(self.generation));
        let size = snapshot::write(&path, self.generation, snapshot)?;
        remove_covered(&self.dir, self.generation, self.horizon)?;
        Ok(size)
    }
}

/// Removes snapshots older than `generation` and the journals it covers
/// whose answers are all below `horizon`. Returns the journals removed.
fn remove_covered(dir: &Path, generation: u64, horizon: u64) -> Result<Vec<u64>> {
    let files = list_ledger(dir)?;
    let mut removed = Vec::new();
    let mut changed = false;
    for (g, p) in &files.snapshots {
        if *g < generation {
            std::fs::remove_file(p).map_err(io_err("remove", p))?;
            changed = true;
        }
    }
    for (g, p) in &files.journals {
        if *g >= generation {
            continue;
        }
        if horizon != u64::MAX {
            // Kept while any of its answers may still be asked for.
            let scan = journal::scan(p)?;
            let end = scan
                .frames
                .iter()
                .filter(|f| f.answers > 0)
                .map(|f| f.first_answer + f.answers as u64)
                .max()
                .unwrap_or(0);
            if end > horizon {
                continue;
            }
        }
        std::fs::remove_file(p).map_err(io_err("remove", p))?;
        removed.push(*g);
        changed = true;
    }
    if changed {
        sync_dir(dir)?;
    }
    Ok(removed)
}

/// A snapshot to build off the event loop from the previous snapshot and
/// the closed journal generations, from [`ShardStore::begin_compaction`].
/// `Send`: run it on any thread with [`CompactionJob::run`], then hand the
/// result to [`ShardStore::finish_compaction`].
#[derive(Debug)]
pub struct CompactionJob {
    dir: PathBuf,
    previous: Option<PathBuf>,
    journals: Vec<PathBuf>,
    generation: u64,
    horizon: u64,
}

/// What a [`CompactionJob`] did.
#[derive(Debug)]
pub struct CompactionDone {
    /// Generation of the snapshot written.
    pub generation: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// Effects folded into it.
    pub effects: u64,
    /// Journal generations deleted.
    pub removed_journals: Vec<u64>,
}

impl CompactionJob {
    /// The generation the new snapshot will have.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether a previous snapshot exists to start from (otherwise the
    /// caller's `restore` gets `None` and builds the initial state).
    pub fn has_previous(&self) -> bool {
        self.previous.is_some()
    }

    /// Builds and writes the new snapshot: `restore` gets the previous
    /// snapshot (or `None`) and builds the caller's state, `apply` is
    /// called for every effect of the closed journals in order, and
    /// `snapshot` derives the snapshot to write from the state. Then older
    /// snapshots and the journals it covers (whose answers are all older
    /// than the horizon given to [`ShardStore::begin_compaction`]) are
    /// deleted. On error nothing is deleted.
    pub fn run<T>(
        self,
        restore: impl FnOnce(Option<Snapshot>) -> T,
        mut apply: impl FnMut(&mut T, &Effect) -> std::result::Result<(), gyro_charging::Error>,
        snapshot: impl FnOnce(&T) -> Snapshot,
    ) -> Result<CompactionDone> {
        let prev = match &self.previous {
            Some(p) => Some(snapshot::read(p)?.1),
            None => None,
        };
        let mut state = restore(prev);
        let mut journals = Vec::new();
        for p in &self.journals {
            let scan = journal::scan(p)?;
            if scan.valid_len != scan.file_len {
                return Err(corrupt(
                    p,
                    scan.valid_len,
                    "damaged frame in a closed journal",
                ));
            }
            journals.push((p.clone(), scan.frames));
        }
        let mut effects = 0;
        for_each_effect(&journals, |path, record, e| {
            effects += 1;
            apply(&mut state, &e).map_err(|source| Error::Replay {
                path: path.to_path_buf(),
                record,
                source,
            })
        })?;
        let snap = snapshot(&state);
        drop(state);
        let path = self.dir.join(snapshot_name(self.generation));
        let bytes = snapshot::write(&path, self.generation, &snap)?;
        let removed_journals = remove_covered(&self.dir, self.generation, self.horizon)?;
        Ok(CompactionDone {
            generation: self.generation,
            bytes,
            effects,
            removed_journals,
        })
    }
}

fn journal_name(g: u64) -> String {
    format!("journal-{g:016}.log")
}

fn snapshot_name(g: u64) -> String {
    format!("snapshot-{g:016}.snap")
}

struct LedgerFiles {
    journals: Vec<(u64, PathBuf)>,
    snapshots: Vec<(u64, PathBuf)>,
    temporaries: Vec<PathBuf>,
}

fn list_ledger(dir: &Path) -> Result<LedgerFiles> {
    let mut f = LedgerFiles {
        journals: Vec::new(),
        snapshots: Vec::new(),
        temporaries: Vec::new(),
    };
    for entry in std::fs::read_dir(dir).map_err(io_err("list", dir))? {
        let entry = entry.map_err(io_err("list", dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let gen = |prefix: &str, suffix: &str| {
            name.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix(suffix))
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<u64>().ok())
        };
        if let Some(g) = gen("journal-", ".log") {
            f.journals.push((g, entry.path()));
        } else if let Some(g) = gen("snapshot-", ".snap") {
            f.snapshots.push((g, entry.path()));
        } else if gen("snapshot-", ".tmp").is_some() {
            f.temporaries.push(entry.path());
        }
    }
    f.journals.sort();
    f.snapshots.sort();
    Ok(f)
}

/// The directory of a shard's journal and snapshots.
pub fn ledger_dir(data_dir: &Path, shard: usize) -> PathBuf {
    data_dir.join("ledger").join(format!("shard-{shard}"))
}

/// The directory of a shard's CDR files.
pub fn cdr_dir(data_dir: &Path, shard: usize) -> PathBuf {
    data_dir.join("cdr").join(format!("shard-{shard}"))
}

/// The records of one batch, encoded: the three sections of a journal
/// frame. Moved (not copied) to the disk side.
#[derive(Debug, Default)]
struct Batch {
    effects: Vec<u8>,
    n_effects: u32,
    cdrs: Vec<u8>,
    n_cdrs: u32,
    first_cdr: u64,
    answers: Vec<u8>,
    n_answers: u32,
    first_answer: u64,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.n_effects == 0 && self.n_cdrs == 0 && self.n_answers == 0
    }

    fn clear(&mut self) {
        self.effects.clear();
        self.cdrs.clear();
        self.answers.clear();
        self.n_effects = 0;
        self.n_cdrs = 0;
        self.n_answers = 0;
        self.first_cdr = 0;
        self.first_answer = 0;
    }

    /// `self` followed by `later` (a failed batch put back before the
    /// records appended since).
    fn prepend_to(&self, later: &mut Batch) {
        let mut b = Batch {
            effects: self.effects.clone(),
            n_effects: self.n_effects + later.n_effects,
            cdrs: self.cdrs.clone(),
            n_cdrs: self.n_cdrs + later.n_cdrs,
            first_cdr: if self.n_cdrs > 0 {
                self.first_cdr
            } else {
                later.first_cdr
            },
            answers: self.answers.clone(),
            n_answers: self.n_answers + later.n_answers,
            first_answer: if self.n_answers > 0 {
                self.first_answer
            } else {
                later.first_answer
            },
        };
        b.effects.extend_from_slice(&later.effects);
        b.cdrs.extend_from_slice(&later.cdrs);
        b.answers.extend_from_slice(&later.answers);
        *later = b;
    }

    /// The answer record `seq`, if this batch holds it.
    fn answer(&self, seq: u64, len: AnswerRecordLen) -> Option<Vec<u8>> {
        if self.n_answers == 0
            || seq < self.first_answer
            || seq >= self.first_answer + self.n_answers as u64
        {
            return None;
        }
        nth_answer(&self.answers, (seq - self.first_answer) as usize, len).map(<[u8]>::to_vec)
    }
}

/// Length of the answer record at the start of a buffer (`None`:
/// malformed). The store does not know the layout of answer records; it
/// needs only this to find one record among a section's.
pub type AnswerRecordLen = fn(&[u8]) -> Option<usize>;

/// The default [`AnswerRecordLen`], the layout of the engine's answer
/// records: a record starts with the length of the rest of it as a `u32`,
/// little-endian.
pub fn u32_prefixed_len(b: &[u8]) -> Option<usize> {
    let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let total = n.checked_add(4)?;
    (total <= b.len()).then_some(total)
}

fn nth_answer(section: &[u8], n: usize, len: AnswerRecordLen) -> Option<&[u8]> {
    let mut rest = section;
    for _ in 0..n {
        rest = rest.get(len(rest)?..)?;
    }
    let l = len(rest)?;
    rest.get(..l)
}

/// Where the answers of one journal frame are.
#[derive(Clone, Copy, Debug)]
struct AnswerSpan {
    first: u64,
    count: u32,
    generation: u64,
    offset: u64,
    len: u32,
}

/// The disk side: every file the store writes. Used by one [`CommitJob`]
/// at a time (on the sync thread), or by the loop side when none is in
/// flight.
#[derive(Debug)]
struct Disk {
    ledger_dir: PathBuf,
    generation: u64,
    journal: JournalWriter,
    cdr: CdrWriter,
    durability: Durability,
    unsynced_since: Option<Timestamp>,
    scratch: Cdr,
    lines: Vec<u8>,
    encoder_format: CdrFormat,
    outcome: Option<Outcome>,
}

/// What a [`CommitJob`] did, picked up by [`ShardStore::finish_commit`].
#[derive(Debug)]
struct Outcome {
    /// The frame's journal write (and sync) failed.
    error: Option<Error>,
    /// After a failed write, whether the journal was cut back cleanly (if
    /// not, or if a sync failed, the store is failed).
    fatal: bool,
    /// Where the frame was written: generation, offset.
    written_at: Option<(u64, u64)>,
    stats: CommitStats,
    journal_path: PathBuf,
    cdr_path: PathBuf,
}

/// A copy of `e` for the job's caller (the precise error stays with the
/// store and is returned by [`ShardStore::finish_commit`]).
fn echo(e: &Error) -> Error {
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

fn lock(disk: &Mutex<Disk>) -> MutexGuard<'_, Disk> {
    disk.lock().unwrap_or_else(|p| p.into_inner())
}

impl Disk {
    fn sync_journal(&mut self) -> Result<()> {
        self.journal.sync()?;
        self.unsynced_since = None;
        Ok(())
    }

    fn sync_due(&self, now: Timestamp) -> bool {
        match (self.durability, self.unsynced_since) {
            (Durability::Async { interval }, Some(t)) => {
                now.as_millis().saturating_sub(t.as_millis()) >= interval.as_millis() as u64
            }
            _ => false,
        }
    }

    /// Whether time-driven work is due (a CDR file to close, an
    /// asynchronous sync, CDR lines to retry).
    fn due(&self, now: Timestamp) -> bool {
        self.sync_due(now) || self.cdr.backlog() > 0 || self.cdr.due(now)
    }

    /// Everything one commit does on disk.
    fn run(&mut self, batch: Option<&Batch>, now: Timestamp, rotate: bool) -> Outcome {
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

    fn write_batch(
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

    fn after_commit(
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
    fn rotate_journal(&mut self, now: Timestamp) -> Result<()> {
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

/// The disk work of one commit, from [`ShardStore::begin_commit`]:
/// `Send`, run it on any thread (the worker's sync thread) with
/// [`CommitJob::run`], then call [`ShardStore::finish_commit`] with its
/// result. It does all the I/O: the journal `write` and `fdatasync`
/// ([`Durability::Sync`]) or the write and a due sync
/// ([`Durability::Async`]), the CDR lines (encoded here), CDR file
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

/// The durable state of one shard: a journal of ledger effects, CDRs and
/// answer records with group commit, snapshots, and the shard's CDR
/// files. See the crate documentation for how a worker drives it.
pub struct ShardStore {
    shard: usize,
    ledger_dir: PathBuf,
    options: StoreOptions,
    disk: Arc<Mutex<Disk>>,
    /// Sequence number of the first CDR not yet in a committed batch.
    next_cdr: u64,
    pending: Batch,
    inflight: Option<Arc<Batch>>,
    inflight_rotate: bool,
    spare: Batch,
    records_since_snapshot: u64,
    bytes_since_snapshot: u64,
    failed: Option<String>,
    /// Current journal generation.
    generation: u64,
    /// Generation of the latest snapshot (covers journals before it).
    snapshot_generation: Option<u64>,
    rotate_requested: bool,
    compacting: bool,
    answer_horizon: u64,
    answer_len: AnswerRecordLen,
    answer_index: Vec<AnswerSpan>,
    journal_path: PathBuf,
    cdr_path: PathBuf,
}

impl std::fmt::Debug for ShardStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardStore")
            .field("shard", &self.shard)
            .field("ledger_dir", &self.ledger_dir)
            .field("generation", &self.generation)
            .field("next_cdr", &self.next_cdr)
            .finish_non_exhaustive()
    }
}

impl ShardStore {
    /// Opens (creating if needed) the store of shard `shard` under
    /// `data_dir`, repairs what a crash left behind (a torn journal frame,
    /// a torn CDR line, journaled CDRs missing from the CDR file) and
    /// returns what is needed to rebuild the state. `now` stamps CDR files
    /// closed during repair.
    pub fn open(
        data_dir: &Path,
        shard: usize,
        options: StoreOptions,
        now: Timestamp,
    ) -> Result<(ShardStore, Recovered)> {
        let dir = ledger_dir(data_dir, shard);
        create_dir_durable(&dir)?;
        let files = list_ledger(&dir)?;
        for t in &files.temporaries {
            std::fs::remove_file(t).map_err(io_err("remove", t))?;
        }
        let mut report = RecoveryReport::default();
        let (snap_gen, mut snap) = match files.snapshots.last() {
            Some((g, p)) => {
                let (gen, s) = snapshot::read(p)?;
                if gen != *g {
                    return Err(corrupt(p, 8, "generation differs from the file name"));
                }
                report.snapshot_generation = Some(gen);
                (gen, Some(s))
            }
            None => (0, None),
        };
        // Older snapshots are what a crash between writing a snapshot and
        // removing what it replaces left behind. Older journals are kept
        // for their answers until a compaction finds them past the answer
        // horizon.
        let mut dir_changed = false;
        for (g, p) in &files.snapshots {
            if *g < snap_gen {
                std::fs::remove_file(p).map_err(io_err("remove", p))?;
                dir_changed = true;
            }
        }
        let (old, journals): (Vec<_>, Vec<_>) =
            files.journals.into_iter().partition(|(g, _)| *g < snap_gen);
        for (i, (g, p)) in journals.iter().enumerate() {
            if *g != snap_gen + i as u64 {
                return Err(corrupt(
                    p,
                    0,
                    format!("journal generation {} is missing", snap_gen + i as u64),
                ));
            }
        }
        let mut answer_index = Vec::new();
        let mut retained = Vec::new();
        for (g, p) in &old {
            let scan = journal::scan(p)?;
            if scan.valid_len != scan.file_len {
                return Err(corrupt(
                    p,
                    scan.valid_len,
                    "damaged frame in a journal that is not the last",
                ));
            }
            index_answers(&mut answer_index, *g, &scan.frames, &mut report);
            retained.push((p.clone(), scan.frames));
        }
        let mut next_cdr = snap.as_ref().map_or(1, |s| s.next_cdr_sequence.max(1));
        let mut replay = Vec::new();
        let mut records = 0u64;
        let mut bytes = 0u64;
        let mut last_scan = None;
        let count = journals.len();
        for (i, (g, p)) in journals.iter().enumerate() {
            let scan = journal::scan(p)?;
            let torn = scan.file_len - scan.valid_len.min(scan.file_len);
            if torn > 0 && i + 1 < count {
                return Err(corrupt(
                    p,
                    scan.valid_len,
                    "damaged frame in a journal that is not the last",
                ));
            }
            report.torn_journal_bytes += torn;
            for f in &scan.frames {
                if f.cdrs > 0 {
                    let end = f.first_cdr.saturating_add(f.cdrs as u64);
                    if report.journal_cdrs > 0 && f.first_cdr != next_cdr {
                        return Err(corrupt(
                            p,
                            f.offset,
                            format!("CDR sequence {} where {next_cdr} was expected", f.first_cdr),
                        ));
                    }
                    next_cdr = next_cdr.max(end);
                }
                report.journal_cdrs += f.cdrs as u64;
                report.journal_effects += f.effects as u64;
                records += f.effects as u64 + f.cdrs as u64;
                bytes += f.len as u64 + FRAME_HEADER as u64;
            }
            index_answers(&mut answer_index, *g, &scan.frames, &mut report);
            report.journal_frames += scan.frames.len() as u64;
            replay.push((p.clone(), scan.frames.clone()));
            if i + 1 == count {
                last_scan = Some(scan);
            }
        }
        report.journal_files = count;
        report.journal_bytes = bytes;
        let (generation, journal) = match (journals.last(), last_scan) {
            (Some((g, p)), Some(scan)) => (*g, JournalWriter::open(p, &scan)?),
            _ => {
                let p = dir.join(journal_name(snap_gen));
                let j = JournalWriter::create(&p)?;
                dir_changed = true;
                (snap_gen, j)
            }
        };
        if dir_changed {
            sync_dir(&dir)?;
        }
        if let Some(s) = &mut snap {
            s.next_cdr_sequence = next_cdr;
        }
        let format = options.cdr_format;
        let (cdr, cdr_repair) = CdrWriter::open(
            &cdr_dir(data_dir, shard),
            shard,
            format,
            next_cdr,
            options.cdr_max_bytes,
            options.cdr_max_age.as_millis() as u64,
            now,
            |from, to| journal_cdr_lines(&replay, format, from, to),
        )?;
        report.cdr = cdr_repair;
        let journal_path = journal.path.clone();
        let cdr_path = cdr.path.clone();
        let disk = Disk {
            ledger_dir: dir.clone(),
            generation,
            journal,
            cdr,
            durability: options.durability,
            unsynced_since: None,
            scratch: Cdr::default(),
            lines: Vec::with_capacity(64 << 10),
            encoder_format: format,
            outcome: None,
        };
        let mut answers = retained;
        answers.extend(replay.iter().cloned());
        let store = ShardStore {
            shard,
            ledger_dir: dir,
            options,
            disk: Arc::new(Mutex::new(disk)),
            next_cdr,
            pending: Batch {
                effects: Vec::with_capacity(64 << 10),
                cdrs: Vec::with_capacity(64 << 10),
                answers: Vec::with_capacity(64 << 10),
                ..Batch::default()
            },
            inflight: None,
            inflight_rotate: false,
            spare: Batch::default(),
            records_since_snapshot: records,
            bytes_since_snapshot: bytes,
            failed: None,
            generation,
            snapshot_generation: report.snapshot_generation,
            rotate_requested: false,
            compacting: false,
            answer_horizon: u64::MAX,
            answer_len: u32_prefixed_len,
            answer_index,
            journal_path,
            cdr_path,
        };
        Ok((
            store,
            Recovered {
                snapshot: snap,
                next_cdr_sequence: next_cdr,
                report,
                replay,
                answers,
            },
        ))
    }

    /// The shard index.
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// Sequence number the next appended CDR must carry.
    pub fn next_cdr_sequence(&self) -> u64 {
        self.next_cdr
            + self.inflight.as_ref().map_or(0, |b| b.n_cdrs as u64)
            + self.pending.n_cdrs as u64
    }

    /// The settings.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// The journal being appended to (as of the last finished commit).
    pub fn journal_path(&self) -> &Path {
        &self.journal_path
    }

    /// The open CDR file (as of the last finished commit).
    pub fn cdr_path(&self) -> &Path {
        &self.cdr_path
    }

    /// Whether appended records wait for a commit.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    fn check_failed(&self) -> Result<()> {
        match &self.failed {
            Some(reason) => Err(Error::Failed {
                path: self.ledger_dir.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Adds the effects and CDRs of one request (or any number) to the
    /// pending batch. Only encodes binary records: no I/O. CDRs must carry
    /// consecutive sequence numbers continuing
    /// [`ShardStore::next_cdr_sequence`]; otherwise nothing is added.
    pub fn append(&mut self, effects: &[Effect], cdrs: &[Cdr]) -> Result<()> {
        self.check_failed()?;
        let next = self.next_cdr_sequence();
        for (expected, c) in (next..).zip(cdrs) {
            if c.sequence != expected {
                return Err(Error::Sequence {
                    expected,
                    found: c.sequence,
                });
            }
        }
        for e in effects {
            encode_effect(&mut self.pending.effects, e);
        }
        if !cdrs.is_empty() {
            if self.pending.n_cdrs == 0 {
                self.pending.first_cdr = next;
            }
            for c in cdrs {
                encode_cdr(&mut self.pending.cdrs, c);
            }
        }
        self.pending.n_effects += effects.len() as u32;
        self.pending.n_cdrs += cdrs.len() as u32;
        Ok(())
    }

    /// Adds `count` answer records (the engine's opaque bytes, numbered
    /// from `first_seq`) to the pending batch. Sequence numbers continue
    /// those already pending.
    pub fn append_answers(&mut self, records: &[u8], first_seq: u64, count: u32) -> Result<()> {
        self.check_failed()?;
        if count == 0 {
            return Ok(());
        }
        if self.pending.n_answers == 0 {
            self.pending.first_answer = first_seq;
        } else {
            let expected = self.pending.first_answer + self.pending.n_answers as u64;
            if first_seq != expected {
                return Err(Error::Sequence {
                    expected,
                    found: first_seq,
                });
            }
        }
        self.pending.answers.extend_from_slice(records);
        self.pending.n_answers += count;
        Ok(())
    }

    /// [`ShardStore::append`] and [`ShardStore::append_answers`] of
    /// everything in an engine [`Output`].
    pub fn append_output(&mut self, out: &Output) -> Result<()> {
        self.append(&out.effects, out.cdrs.as_slice())?;
        let a = &out.answers;
        self.append_answers(a.as_bytes(), a.first_seq(), a.count())
    }

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

    /// In [`Durability::Async`], syncs the journal (on this thread) if a
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

    /// Whether enough was journaled since the last snapshot that one should
    /// be taken (see [`StoreOptions::snapshot_every_records`]).
    pub fn should_snapshot(&self) -> bool {
        self.records_since_snapshot >= self.options.snapshot_every_records
            || self.bytes_since_snapshot >= self.options.snapshot_every_bytes
    }

    /// Records journaled since the last journal generation started.
    pub fn records_since_snapshot(&self) -> u64 {
        self.records_since_snapshot
    }

    /// The smallest answer sequence number still live (from the engine's
    /// `answer_horizon(now)`): journals whose answers are all below it may
    /// be deleted once a snapshot covers them. `u64::MAX` (the default)
    /// keeps no journal for its answers.
    pub fn set_answer_horizon(&mut self, horizon: u64) {
        self.answer_horizon = horizon;
        // Spans wholly below the horizon are never asked for again.
        let keep_from = self
            .answer_index
            .partition_point(|s| s.first + s.count as u64 <= horizon);
        if keep_from > 4096 {
            self.answer_index.drain(..keep_from);
        }
    }

    /// How to find one answer record among a section's (default:
    /// [`u32_prefixed_len`]).
    pub fn set_answer_record_len(&mut self, len: AnswerRecordLen) {
        self.answer_len = len;
    }

    /// Reads answer record `seq` back: from the pending batch, the batch
    /// in flight, or the journal on disk. `None` when no retained journal
    /// holds it. Reading from disk is one positioned read on this thread
    /// (duplicates are rare).
    pub fn read_answer(&self, seq: u64) -> Result<Option<Vec<u8>>> {
        if let Some(a) = self.pending.answer(seq, self.answer_len) {
            return Ok(Some(a));
        }
        if let Some(a) = self
            .inflight
            .as_ref()
            .and_then(|b| b.answer(seq, self.answer_len))
        {
            return Ok(Some(a));
        }
        let i = self
            .answer_index
            .partition_point(|s| s.first + s.count as u64 <= seq);
        let Some(span) = self.answer_index.get(i).filter(|s| s.first <= seq) else {
            return Ok(None);
        };
        let path = self.ledger_dir.join(journal_name(span.generation));
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("open", &path)(e)),
        };
        let mut buf = vec![0u8; span.len as usize];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf, span.offset)
            .map_err(io_err("read", &path))?;
        match nth_answer(&buf, (seq - span.first) as usize, self.answer_len) {
            Some(r) => Ok(Some(r.to_vec())),
            None => Err(corrupt(&path, span.offset, "answer section does not split")),
        }
    }

    /// Asks for a new journal generation: the next commit job closes the
    /// current journal (after making the CDR file durable) and starts the
    /// next, on its thread. Then [`ShardStore::begin_compaction`] can build
    /// a snapshot covering the closed one.
    pub fn request_journal_rotation(&mut self) {
        self.rotate_requested = true;
    }

    /// Starts building a snapshot off the loop when one is due: returns a
    /// [`CompactionJob`] when closed journal generations exist that no
    /// snapshot covers (and no compaction is running); otherwise, when
    /// [`ShardStore::should_snapshot`], asks the next commit to rotate the
    /// journal and returns `None` (call again after that commit).
    pub fn begin_compaction(&mut self) -> Option<CompactionJob> {
        if self.compacting || self.failed.is_some() {
            return None;
        }
        let covered = self.snapshot_generation.unwrap_or(0);
        if self.generation > covered && self.inflight.is_none() {
            let previous = self
                .snapshot_generation
                .map(|g| self.ledger_dir.join(snapshot_name(g)));
            let journals = (covered..self.generation)
                .map(|g| self.ledger_dir.join(journal_name(g)))
                .collect();
            self.compacting = true;
            return Some(CompactionJob {
                dir: self.ledger_dir.clone(),
                previous,
                journals,
                generation: self.generation,
                horizon: self.answer_horizon,
            });
        }
        if self.should_snapshot() && !self.rotate_requested && !self.inflight_rotate {
            self.rotate_requested = true;
        }
        None
    }

    /// Takes the result of a [`CompactionJob`].
    pub fn finish_compaction(&mut self, done: &Result<CompactionDone>) {
        self.compacting = false;
        if let Ok(d) = done {
            self.snapshot_generation = Some(
                self.snapshot_generation
                    .map_or(d.generation, |g| g.max(d.generation)),
            );
            if !d.removed_journals.is_empty() {
                let removed = &d.removed_journals;
                self.answer_index
                    .retain(|s| !removed.contains(&s.generation));
            }
        }
    }

    /// First half of a snapshot taken from the caller's current state, on
    /// this thread: commits what is pending, makes the CDR file durable
    /// and starts a new journal generation. The engine's `snapshot()`
    /// taken right after this call (before any further `append`) is what
    /// the returned writer must write, on this thread or another;
    /// meanwhile commits go to the new journal. Prefer
    /// [`ShardStore::begin_compaction`], which does no I/O on the loop.
    pub fn prepare_snapshot(&mut self, now: Timestamp) -> Result<SnapshotWriter> {
        if self.inflight.is_some() {
            return Err(Error::Busy(
                "a snapshot cannot start while a batch is in flight",
            ));
        }
        self.rotate_requested = true;
        let stats = self.commit(now)?;
        if let Some(e) = stats.cdr_error {
            return Err(e);
        }
        if stats.new_generation.is_none() {
            return Err(Error::Busy("the journal generation did not change"));
        }
        self.snapshot_generation = Some(self.generation);
        Ok(SnapshotWriter {
            dir: self.ledger_dir.clone(),
            generation: self.generation,
            horizon: self.answer_horizon,
        })
    }

    /// Takes a snapshot synchronously: [`ShardStore::prepare_snapshot`]
    /// then [`SnapshotWriter::write`]. `snapshot` must be the caller's
    /// state including every effect appended so far.
    pub fn snapshot(&mut self, snapshot: &Snapshot, now: Timestamp) -> Result<u64> {
        let size = self.prepare_snapshot(now)?.write(snapshot)?;
        if self.answer_horizon == u64::MAX {
            let generation = self.generation;
            self.answer_index.retain(|s| s.generation >= generation);
        }
        Ok(size)
    }
}

fn index_answers(
    index: &mut Vec<AnswerSpan>,
    generation: u64,
    frames: &[FrameInfo],
    report: &mut RecoveryReport,
) {
    for f in frames.iter().filter(|f| f.answers > 0) {
        report.journal_answers += f.answers as u64;
        index.push(AnswerSpan {
            first: f.first_answer,
            count: f.answers,
            generation,
            offset: f.answers_offset(),
            len: f.answers_len,
        });
    }
}

#[allow(dead_code)]
fn assert_send() {
    fn is_send<T: Send>() {}
    is_send::<CommitJob>();
    is_send::<CompactionJob>();
    is_send::<SnapshotWriter>();
}
