//! [`ShardStore`]: the journal, snapshots and CDR files of one shard.

use crate::cdr_file::{CdrRepair, CdrWriter};
use crate::error::{corrupt, io_err, Error, Result};
use crate::journal::{self, FrameInfo, FrameReader, JournalWriter};
use crate::names::{create_dir_durable, sync_dir};
use crate::snapshot;
use gyro_charging::{Cdr, Effect, Engine, Output, Snapshot, Timestamp};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// When a commit is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// [`ShardStore::commit`] returns after `fdatasync`: release the
    /// answers of the batch after it returns. The default.
    Sync,
    /// [`ShardStore::commit`] only writes; [`ShardStore::sync_if_due`]
    /// syncs at most `interval` after the first unsynced commit. A crash
    /// (of the machine, not only of gyro) loses up to `interval` of
    /// answered requests: their debits are forgotten and their CDR
    /// sequence numbers are given again.
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
    /// A CDR file is closed this long after its first record was written
    /// (checked by [`ShardStore::commit`] and [`ShardStore::tick`]).
    pub cdr_max_age: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            durability: Durability::Sync,
            snapshot_every_records: 2_000_000,
            snapshot_every_bytes: 512 << 20,
            cdr_max_bytes: 64 << 20,
            cdr_max_age: Duration::from_secs(300),
        }
    }
}

/// What one [`ShardStore::commit`] (or [`ShardStore::tick`]) did.
#[derive(Debug, Default)]
pub struct CommitStats {
    /// Effects made durable.
    pub effects: u64,
    /// CDRs made durable.
    pub cdrs: u64,
    /// Bytes appended to the journal.
    pub journal_bytes: u64,
    /// Bytes appended to the CDR file.
    pub cdr_bytes: u64,
    /// `fsync`/`fdatasync` calls made (1 for a synchronous commit; more
    /// when a CDR file was closed).
    pub syncs: u32,
    /// The CDR file closed by this call, if any.
    pub rotated: Option<PathBuf>,
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
    /// Bytes of valid journal frames.
    pub journal_bytes: u64,
    /// Bytes of a torn last frame that were cut off.
    pub torn_journal_bytes: u64,
    /// What was repaired in the CDR directory.
    pub cdr: CdrRepair,
}

/// What [`ShardStore::open`] recovered: rebuild the engine with
/// `Engine::restore(catalog, options, snapshot)` (or from the
/// configuration when there is no snapshot yet) and then
/// `Engine::apply` every effect, in order.
#[derive(Debug)]
pub struct Recovered {
    /// The latest snapshot, its `next_cdr_sequence` already set to
    /// [`Recovered::next_cdr_sequence`]. `None` before the first snapshot.
    pub snapshot: Option<Snapshot>,
    /// Effects journaled after the snapshot, in order.
    pub effects: Vec<Effect>,
    /// Sequence number of the next CDR.
    pub next_cdr_sequence: u64,
    /// What was found and repaired.
    pub report: RecoveryReport,
}

/// The journals to replay after a snapshot.
struct Replay {
    journals: Vec<(PathBuf, Vec<FrameInfo>)>,
}

impl Replay {
    fn for_each(&self, mut f: impl FnMut(&Path, u64, Effect) -> Result<()>) -> Result<()> {
        let mut index = 0u64;
        for (path, frames) in &self.journals {
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

    /// Journaled CDR lines `[from, to)`, or `None` if the journal does not
    /// hold them all.
    fn cdr_lines(&self, from: u64, to: u64) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        let mut next = from;
        for (path, frames) in &self.journals {
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
                reader.cdr_lines_from(fr, next, &mut out)?;
                next = end;
            }
        }
        Ok((next >= to).then_some(out))
    }
}

/// A writer handed out by [`ShardStore::prepare_snapshot`]: writes the
/// snapshot (on any thread) and then removes the journals it replaces.
#[derive(Debug)]
pub struct SnapshotWriter {
    dir: PathBuf,
    generation: u64,
}

impl SnapshotWriter {
    /// The generation this snapshot will have.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Writes `snapshot` (the engine's state when
    /// [`ShardStore::prepare_snapshot`] was called) atomically, then
    /// deletes older snapshots and journals. Returns the snapshot's size.
    /// On error nothing is lost: the older snapshot and the journals stay.
    pub fn write(self, snapshot: &Snapshot) -> Result<u64> {
        let path = self.dir.join(snapshot_name(self.generation));
        let size = snapshot::write(&path, self.generation, snapshot)?;
        let files = list_ledger(&self.dir)?;
        let mut removed = false;
        for (g, p) in files.snapshots.iter().chain(files.journals.iter()) {
            if *g < self.generation {
                std::fs::remove_file(p).map_err(io_err("remove", p))?;
                removed = true;
            }
        }
        if removed {
            sync_dir(&self.dir)?;
        }
        Ok(size)
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

/// The durable state of one shard: a journal of ledger effects and CDRs
/// with group commit, snapshots, and the shard's CDR files. See the crate
/// documentation for how a worker drives it.
pub struct ShardStore {
    shard: usize,
    ledger_dir: PathBuf,
    generation: u64,
    journal: JournalWriter,
    cdr: CdrWriter,
    options: StoreOptions,
    /// Sequence number the next appended CDR must carry.
    next_cdr: u64,
    pending_effects: Vec<u8>,
    pending_n_effects: u32,
    pending_cdrs: Vec<u8>,
    pending_n_cdrs: u32,
    pending_first_cdr: u64,
    frame: Vec<u8>,
    records_since_snapshot: u64,
    bytes_since_snapshot: u64,
    unsynced_since: Option<Timestamp>,
    failed: Option<String>,
    inflight: Option<InFlight>,
    inflight_spare: Vec<u8>,
}

/// A batch whose journal frame is written and waits for its sync.
struct InFlight {
    effects: u64,
    cdrs: u64,
    journal_bytes: u64,
    cdr_lines: Vec<u8>,
}

/// The `fdatasync` of one batch, from [`ShardStore::begin_commit`]; may
/// run on another thread.
#[derive(Debug)]
pub struct SyncHandle {
    file: std::sync::Arc<std::fs::File>,
    path: PathBuf,
}

impl SyncHandle {
    /// Makes the batch durable (`fdatasync` of the journal).
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(crate::error::io_err("fsync", &self.path))
    }
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

/// The directory of a shard's journal and snapshots.
pub fn ledger_dir(data_dir: &Path, shard: usize) -> PathBuf {
    data_dir.join("ledger").join(format!("shard-{shard}"))
}

/// The directory of a shard's CDR files.
pub fn cdr_dir(data_dir: &Path, shard: usize) -> PathBuf {
    data_dir.join("cdr").join(format!("shard-{shard}"))
}

impl ShardStore {
    /// Opens (creating if needed) the store of shard `shard` under
    /// `data_dir`, repairs what a crash left behind (a torn journal frame,
    /// a torn CDR line, journaled CDRs missing from the CDR file) and
    /// returns what is needed to rebuild the engine. `now` stamps CDR files
    /// closed during repair.
    pub fn open(
        data_dir: &Path,
        shard: usize,
        options: StoreOptions,
        now: Timestamp,
    ) -> Result<(ShardStore, Recovered)> {
        let (store, snapshot, replay, report) = Self::open_inner(data_dir, shard, options, now)?;
        let mut effects = Vec::with_capacity(report.journal_effects.min(1 << 24) as usize);
        replay.for_each(|_, _, e| {
            effects.push(e);
            Ok(())
        })?;
        let next = store.next_cdr;
        Ok((
            store,
            Recovered {
                snapshot,
                effects,
                next_cdr_sequence: next,
                report,
            },
        ))
    }

    /// Opens the store like [`ShardStore::open`] and rebuilds the engine
    /// without holding the journal in memory: `restore` gets the latest
    /// snapshot (`Engine::restore` it) or `None` (build the shard from the
    /// configuration), then every journaled effect is applied to it, which
    /// also rebuilds the engine's duplicate cache; answers older than its
    /// time to live at `now` are forgotten.
    pub fn open_engine(
        data_dir: &Path,
        shard: usize,
        options: StoreOptions,
        now: Timestamp,
        restore: impl FnOnce(Option<Snapshot>) -> Engine,
    ) -> Result<(ShardStore, Engine, RecoveryReport)> {
        let (store, snap, replay, report) = Self::open_inner(data_dir, shard, options, now)?;
        let had_snapshot = snap.is_some();
        let mut engine = restore(snap);
        if !had_snapshot {
            let mut s = engine.snapshot();
            if s.next_cdr_sequence != store.next_cdr {
                s.next_cdr_sequence = store.next_cdr;
                engine = Engine::restore(engine.catalog().clone(), engine.options().clone(), s);
            }
        }
        replay.for_each(|path, record, e| {
            engine.apply(&e).map_err(|source| Error::Replay {
                path: path.to_path_buf(),
                record,
                source,
            })
        })?;
        // Answers replayed from before the restart are kept for the rest of
        // their time to live, counted from when they were given.
        engine.expire_answers(now);
        Ok((store, engine, report))
    }

    #[allow(clippy::type_complexity)]
    fn open_inner(
        data_dir: &Path,
        shard: usize,
        options: StoreOptions,
        now: Timestamp,
    ) -> Result<(ShardStore, Option<Snapshot>, Replay, RecoveryReport)> {
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
        // Older files are what a crash between writing a snapshot and
        // removing what it replaces left behind.
        let mut removed = false;
        for (g, p) in files.snapshots.iter().chain(files.journals.iter()) {
            if *g < snap_gen {
                std::fs::remove_file(p).map_err(io_err("remove", p))?;
                removed = true;
            }
        }
        let journals: Vec<(u64, PathBuf)> = files
            .journals
            .into_iter()
            .filter(|(g, _)| *g >= snap_gen)
            .collect();
        for (i, (g, p)) in journals.iter().enumerate() {
            if *g != snap_gen + i as u64 {
                return Err(corrupt(
                    p,
                    0,
                    format!("journal generation {} is missing", snap_gen + i as u64),
                ));
            }
        }
        let mut next_cdr = snap.as_ref().map_or(1, |s| s.next_cdr_sequence.max(1));
        let mut replay = Replay {
            journals: Vec::new(),
        };
        let mut records = 0u64;
        let mut bytes = 0u64;
        let mut last_scan = None;
        let count = journals.len();
        for (i, (_, p)) in journals.iter().enumerate() {
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
                bytes += f.len as u64 + 8;
            }
            report.journal_frames += scan.frames.len() as u64;
            replay.journals.push((p.clone(), scan.frames.clone()));
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
                removed = true;
                (snap_gen, j)
            }
        };
        if removed {
            sync_dir(&dir)?;
        }
        if let Some(s) = &mut snap {
            s.next_cdr_sequence = next_cdr;
        }
        let (cdr, cdr_repair) = CdrWriter::open(
            &cdr_dir(data_dir, shard),
            shard,
            next_cdr,
            options.cdr_max_bytes,
            options.cdr_max_age.as_millis() as u64,
            now,
            |from, to| replay.cdr_lines(from, to),
        )?;
        report.cdr = cdr_repair;
        let store = ShardStore {
            shard,
            ledger_dir: dir,
            generation,
            journal,
            cdr,
            options,
            next_cdr,
            pending_effects: Vec::with_capacity(64 << 10),
            pending_n_effects: 0,
            pending_cdrs: Vec::with_capacity(64 << 10),
            pending_n_cdrs: 0,
            pending_first_cdr: next_cdr,
            frame: Vec::with_capacity(128 << 10),
            records_since_snapshot: records,
            bytes_since_snapshot: bytes,
            unsynced_since: None,
            failed: None,
            inflight: None,
            inflight_spare: Vec::with_capacity(64 << 10),
        };
        Ok((store, snap, replay, report))
    }

    /// The shard index.
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// Sequence number the next appended CDR must carry.
    pub fn next_cdr_sequence(&self) -> u64 {
        self.next_cdr + self.pending_n_cdrs as u64
    }

    /// The settings.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// The journal being appended to.
    pub fn journal_path(&self) -> &Path {
        &self.journal.path
    }

    /// The open CDR file.
    pub fn cdr_path(&self) -> &Path {
        &self.cdr.path
    }

    /// Whether appended records wait for a [`ShardStore::commit`].
    pub fn has_pending(&self) -> bool {
        self.pending_n_effects > 0 || self.pending_n_cdrs > 0
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
    /// batch of the next [`ShardStore::commit`]. Only encodes: no I/O. CDRs
    /// must carry consecutive sequence numbers continuing
    /// [`ShardStore::next_cdr_sequence`]; otherwise nothing is added.
    pub fn append(&mut self, effects: &[Effect], cdrs: &[Cdr]) -> Result<()> {
        self.check_failed()?;
        for (expected, c) in (self.next_cdr_sequence()..).zip(cdrs) {
            if c.sequence != expected {
                return Err(Error::Sequence {
                    expected,
                    found: c.sequence,
                });
            }
        }
        let (el, cl) = (self.pending_effects.len(), self.pending_cdrs.len());
        let r = (|| {
            for e in effects {
                serde_json::to_writer(&mut self.pending_effects, e).map_err(|e| Error::Encode {
                    what: "effect",
                    reason: e.to_string(),
                })?;
                self.pending_effects.push(b'\n');
            }
            for c in cdrs {
                c.write_json_line(&mut self.pending_cdrs)
                    .map_err(|e| Error::Encode {
                        what: "CDR",
                        reason: e.to_string(),
                    })?;
            }
            Ok(())
        })();
        match r {
            Ok(()) => {
                self.pending_n_effects += effects.len() as u32;
                self.pending_n_cdrs += cdrs.len() as u32;
                Ok(())
            }
            Err(e) => {
                self.pending_effects.truncate(el);
                self.pending_cdrs.truncate(cl);
                Err(e)
            }
        }
    }

    /// [`ShardStore::append`] of everything in an engine [`Output`].
    pub fn append_output(&mut self, out: &Output) -> Result<()> {
        self.append(&out.effects, out.cdrs.as_slice())
    }

    /// Makes everything appended since the last commit durable: one journal
    /// frame, one `write`, one `fdatasync` (in [`Durability::Sync`]), then
    /// the CDR lines are appended to the open CDR file (no sync: the
    /// journal holds them until the file is closed or a snapshot is taken)
    /// and the file is closed if it is due.
    ///
    /// On `Err` nothing of the batch is durable and its answers must not be
    /// sent. The batch stays pending: a later `commit` retries it (for
    /// example after space was freed), unless the error is
    /// [`Error::Failed`] (an fsync failed), after which the store must be
    /// reopened.
    pub fn commit(&mut self, now: Timestamp) -> Result<CommitStats> {
        match self.begin_commit(now)? {
            Some(h) => {
                let r = h.sync();
                self.finish_commit(r, now)
            }
            None => self.finish_commit(Ok(()), now),
        }
    }

    /// [`ShardStore::commit`] in two halves, for a runtime that syncs off
    /// its event loop: writes the batch's journal frame and returns the
    /// `fdatasync` to run (on any thread: [`SyncHandle`] is `Send`), or
    /// `None` when there is nothing to sync (nothing pending, or
    /// asynchronous durability). Pass its result to
    /// [`ShardStore::finish_commit`] and release the batch's answers only
    /// if that returns `Ok`. Records appended meanwhile belong to the next
    /// batch. Only one batch may be in flight.
    pub fn begin_commit(&mut self, now: Timestamp) -> Result<Option<SyncHandle>> {
        self.check_failed()?;
        if self.inflight.is_some() {
            return Err(Error::Busy("a batch is already in flight"));
        }
        if !self.has_pending() {
            return Ok(None);
        }
        journal::encode_frame(
            &mut self.frame,
            &self.pending_effects,
            self.pending_n_effects,
            &self.pending_cdrs,
            self.pending_n_cdrs,
            if self.pending_n_cdrs > 0 {
                self.pending_first_cdr
            } else {
                0
            },
        )?;
        if let Err((e, cut)) = self.journal.write(&self.frame) {
            if !cut {
                self.failed = Some(e.to_string());
            }
            return Err(e);
        }
        let mut f = InFlight {
            effects: self.pending_n_effects as u64,
            cdrs: self.pending_n_cdrs as u64,
            journal_bytes: self.frame.len() as u64,
            cdr_lines: std::mem::take(&mut self.inflight_spare),
        };
        f.cdr_lines.clear();
        std::mem::swap(&mut f.cdr_lines, &mut self.pending_cdrs);
        self.records_since_snapshot += f.effects + f.cdrs;
        self.bytes_since_snapshot += f.journal_bytes;
        self.next_cdr += f.cdrs;
        self.pending_effects.clear();
        self.pending_n_effects = 0;
        self.pending_n_cdrs = 0;
        self.pending_first_cdr = self.next_cdr;
        self.inflight = Some(f);
        match self.options.durability {
            Durability::Sync => Ok(Some(SyncHandle {
                file: self.journal.sync_handle(),
                path: self.journal.path.clone(),
            })),
            Durability::Async { .. } => {
                self.unsynced_since.get_or_insert(now);
                Ok(None)
            }
        }
    }

    /// Second half of [`ShardStore::commit`]: `synced` is the result of
    /// the [`SyncHandle`] from [`ShardStore::begin_commit`] (`Ok(())` when
    /// it returned `None`). On `Ok` the batch is durable: release its
    /// answers. A failed sync makes the store [`Error::Failed`].
    pub fn finish_commit(&mut self, synced: Result<()>, now: Timestamp) -> Result<CommitStats> {
        let mut stats = CommitStats::default();
        let f = self.inflight.take();
        if let Err(e) = synced {
            self.failed = Some(e.to_string());
            return Err(e);
        }
        self.check_failed()?;
        if let Some(mut f) = f {
            if self.options.durability == Durability::Sync {
                stats.syncs += 1;
            }
            stats.effects = f.effects;
            stats.cdrs = f.cdrs;
            stats.journal_bytes = f.journal_bytes;
            stats.cdr_bytes = f.cdr_lines.len() as u64;
            if let Err(e) = self.cdr.write(&f.cdr_lines, f.cdrs, now) {
                stats.cdr_error = Some(e);
            }
            f.cdr_lines.clear();
            self.inflight_spare = f.cdr_lines;
        }
        self.after_commit(now, &mut stats)?;
        Ok(stats)
    }

    fn after_commit(&mut self, now: Timestamp, stats: &mut CommitStats) -> Result<()> {
        if stats.cdr_error.is_none() && self.cdr.backlog() > 0 {
            if let Err(e) = self.cdr.flush(now) {
                stats.cdr_error = Some(e);
            }
        }
        if let Durability::Async { .. } = self.options.durability {
            if self.sync_if_due(now)? {
                stats.syncs += 1;
            }
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
        Ok(())
    }

    fn sync_journal(&mut self) -> Result<()> {
        if let Err(e) = self.journal.sync() {
            self.failed = Some(e.to_string());
            return Err(e);
        }
        self.unsynced_since = None;
        Ok(())
    }

    /// In [`Durability::Async`], syncs the journal if a commit has been
    /// unsynced for the interval. Returns whether it synced.
    pub fn sync_if_due(&mut self, now: Timestamp) -> Result<bool> {
        self.check_failed()?;
        let Durability::Async { interval } = self.options.durability else {
            return Ok(false);
        };
        match self.unsynced_since {
            Some(t)
                if now.as_millis().saturating_sub(t.as_millis()) >= interval.as_millis() as u64 =>
            {
                self.sync_journal()?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Syncs whatever is unsynced (asynchronous mode), now.
    pub fn sync_now(&mut self) -> Result<()> {
        self.check_failed()?;
        if self.unsynced_since.is_some() {
            self.sync_journal()?;
        }
        Ok(())
    }

    /// Time-driven work, to call periodically (every second or so) even
    /// when idle: syncs in asynchronous mode when due, retries pending CDR
    /// lines, and closes a CDR file that reached its age.
    pub fn tick(&mut self, now: Timestamp) -> Result<CommitStats> {
        self.check_failed()?;
        let mut stats = CommitStats::default();
        self.after_commit(now, &mut stats)?;
        Ok(stats)
    }

    /// Closes the open CDR file now if it holds any record (for example at
    /// shutdown, so the billing system gets everything).
    pub fn close_cdr_file(&mut self, now: Timestamp) -> Result<Option<PathBuf>> {
        self.check_failed()?;
        self.cdr.flush(now)?;
        self.sync_now()?;
        self.cdr.rotate(now)
    }

    /// Whether enough was journaled since the last snapshot that one should
    /// be taken (see [`StoreOptions::snapshot_every_records`]).
    pub fn should_snapshot(&self) -> bool {
        self.records_since_snapshot >= self.options.snapshot_every_records
            || self.bytes_since_snapshot >= self.options.snapshot_every_bytes
    }

    /// Records journaled since the last snapshot.
    pub fn records_since_snapshot(&self) -> u64 {
        self.records_since_snapshot
    }

    /// First half of a snapshot: commits what is pending, makes the CDR
    /// file durable and starts a new journal generation. The engine's
    /// `snapshot()` taken right after this call (before any further
    /// `append`) is what the returned writer must write, on this thread
    /// or another; meanwhile commits go to the new journal.
    pub fn prepare_snapshot(&mut self, now: Timestamp) -> Result<SnapshotWriter> {
        if self.inflight.is_some() {
            return Err(Error::Busy(
                "a snapshot cannot start while a batch is in flight",
            ));
        }
        if self.has_pending() {
            let stats = self.commit(now)?;
            if let Some(e) = stats.cdr_error {
                return Err(e);
            }
        }
        self.sync_now()?;
        // The journal about to be replaced by the snapshot must not hold
        // the only copy of a CDR.
        self.cdr.flush(now)?;
        self.cdr.sync()?;
        let g = self.generation + 1;
        let path = self.ledger_dir.join(journal_name(g));
        let j = JournalWriter::create(&path)?;
        sync_dir(&self.ledger_dir)?;
        self.journal = j;
        self.generation = g;
        self.records_since_snapshot = 0;
        self.bytes_since_snapshot = 0;
        Ok(SnapshotWriter {
            dir: self.ledger_dir.clone(),
            generation: g,
        })
    }

    /// Takes a snapshot synchronously: [`ShardStore::prepare_snapshot`]
    /// then [`SnapshotWriter::write`]. `snapshot` must be the engine's
    /// state including every effect appended so far.
    pub fn snapshot(&mut self, snapshot: &Snapshot, now: Timestamp) -> Result<u64> {
        self.prepare_snapshot(now)?.write(snapshot)
    }
}
