//! Snapshots: written off the loop from the compactor's copy of the ledger
//! or built there from the previous snapshot and the closed journals
//! ([`CompactionJob`]), or from the caller's state ([`SnapshotWriter`]),
//! and the removal of the files they cover.

use super::compactor::Captured;
use super::files::{journal_name, list_ledger, snapshot_name};
use super::recovery::for_each_effect;
use super::ShardStore;
use crate::error::{corrupt, io_err, Error, Result};
use crate::journal::{self, FrameInfo};
use crate::names::sync_dir;
use crate::snapshot;
use gyro_charging::{Effect, Snapshot, Timestamp};
use std::path::{Path, PathBuf};

/// A snapshot writer handed out by [`ShardStore::prepare_snapshot`]:
/// writes the snapshot (on any thread) and then removes the files it
/// replaces.
#[derive(Debug)]
pub struct SnapshotWriter {
    dir: PathBuf,
    generation: u64,
    horizon: u64,
    answer_ends: Vec<(u64, u64)>,
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
        remove_covered(&self.dir, self.generation, self.horizon, &self.answer_ends)?;
        Ok(size)
    }
}

/// Removes snapshots older than `generation` and the journals it covers
/// whose answers are all below `horizon`: `answer_ends` holds, for each
/// generation with answers, one past its last answer's sequence number
/// (from the store's answer index, so no journal is read again here).
/// Returns the journals removed.
pub(super) fn remove_covered(
    dir: &Path,
    generation: u64,
    horizon: u64,
    answer_ends: &[(u64, u64)],
) -> Result<Vec<u64>> {
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
        // Kept while any of its answers may still be asked for.
        let end = answer_ends
            .iter()
            .find(|(e, _)| e == g)
            .map_or(0, |(_, end)| *end);
        if horizon != u64::MAX && end > horizon {
            continue;
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

/// A snapshot to write off the event loop, from
/// [`ShardStore::begin_compaction`]: the one the compactor thread took at
/// the closed journals' boundary (see [`ShardStore::start_compactor`]), or
/// else one to build from the previous snapshot and the closed journal
/// generations. `Send`: run it on any thread with [`CompactionJob::run`],
/// then hand the result to [`ShardStore::finish_compaction`].
#[derive(Debug)]
pub struct CompactionJob {
    /// The compactor's snapshot at this job's boundary.
    captured: Option<Captured>,
    dir: PathBuf,
    previous: Option<PathBuf>,
    journals: Vec<PathBuf>,
    generation: u64,
    horizon: u64,
    answer_ends: Vec<(u64, u64)>,
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
    /// Whether the snapshot came from the compactor's copy of the ledger
    /// (nothing read back from the disk) rather than from the files.
    pub from_memory: bool,
}

impl CompactionJob {
    /// The generation the new snapshot will have.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether the caller's `restore` never gets `None`: the snapshot is
    /// the compactor's, or a previous snapshot exists to start from
    /// (otherwise `restore` gets `None` and builds the initial state).
    pub fn has_previous(&self) -> bool {
        self.captured.is_some() || self.previous.is_some()
    }

    /// Builds and writes the new snapshot: the compactor's as it is, or
    /// else `restore` gets the previous snapshot (or `None`) and builds the
    /// caller's state, `apply` is called for every effect of the closed
    /// journals in order, and `snapshot` turns the state into the snapshot
    /// to write (taking it: no copy needed). Then older snapshots and the
    /// journals it covers (whose answers are all older than the horizon
    /// given to [`ShardStore::begin_compaction`]) are deleted. On error
    /// nothing is deleted.
    pub fn run<T>(
        self,
        restore: impl FnOnce(Option<Snapshot>) -> T,
        mut apply: impl FnMut(&mut T, &Effect) -> std::result::Result<(), gyro_charging::Error>,
        snapshot: impl FnOnce(T) -> Snapshot,
    ) -> Result<CompactionDone> {
        if let Some(c) = &self.captured {
            return self.write(&c.snapshot, c.effects, true);
        }
        let prev = match &self.previous {
            Some(p) => Some(snapshot::read(p)?.1),
            None => None,
        };
        let mut state = restore(prev);
        let mut journals = Vec::new();
        for p in &self.journals {
            let scan = journal::scan(p)?;
            if scan.torn_bytes() != 0 {
                return Err(corrupt(
                    p,
                    scan.valid_len,
                    "damaged frame in a closed journal",
                ));
            }
            journals.push((p.clone(), scan.frames));
        }
        // Counters the effects do not carry: one past the closed journals'
        // last CDR and answer.
        let frames = || journals.iter().flat_map(|(_, frames)| frames);
        let next_cdr = frames().map(FrameInfo::cdrs_end).max().unwrap_or(0);
        let next_answer = frames().map(FrameInfo::answers_end).max().unwrap_or(0);
        let mut effects = 0;
        for_each_effect(&journals, |path, record, e| {
            effects += 1;
            apply(&mut state, &e).map_err(|source| Error::Replay {
                path: path.to_path_buf(),
                record,
                source,
            })
        })?;
        let mut snap = snapshot(state);
        snap.next_cdr_sequence = snap.next_cdr_sequence.max(next_cdr);
        snap.next_answer_seq = snap.next_answer_seq.max(next_answer);
        self.write(&snap, effects, false)
    }

    /// Writes `snap` as this job's snapshot and deletes what it covers.
    fn write(&self, snap: &Snapshot, effects: u64, from_memory: bool) -> Result<CompactionDone> {
        let path = self.dir.join(snapshot_name(self.generation));
        let bytes = snapshot::write(&path, self.generation, snap)?;
        let removed_journals =
            remove_covered(&self.dir, self.generation, self.horizon, &self.answer_ends)?;
        Ok(CompactionDone {
            generation: self.generation,
            bytes,
            effects,
            removed_journals,
            from_memory,
        })
    }
}

impl ShardStore {
    /// Whether enough was journaled since the last snapshot that one should
    /// be taken (see [`StoreOptions::snapshot_every_records`](super::StoreOptions::snapshot_every_records)).
    pub fn should_snapshot(&self) -> bool {
        self.records_since_snapshot >= self.options.snapshot_every_records
            || self.bytes_since_snapshot >= self.options.snapshot_every_bytes
    }

    /// Records journaled since the last journal generation started.
    pub fn records_since_snapshot(&self) -> u64 {
        self.records_since_snapshot
    }

    /// Asks for a new journal generation: the next commit job closes the
    /// current journal and starts the next, on its thread. Once the CDR
    /// writer has made the closed journal's CDRs durable in a CDR file,
    /// [`ShardStore::begin_compaction`] can build a snapshot covering it.
    pub fn request_journal_rotation(&mut self) {
        self.rotate_requested = true;
    }

    /// Starts building a snapshot off the loop when one is due: returns a
    /// [`CompactionJob`] when closed journal generations exist that no
    /// snapshot covers, whose CDRs the CDR writer made durable (and no
    /// compaction is running), and, with a compactor, once it has reached
    /// their boundary; otherwise, when [`ShardStore::should_snapshot`],
    /// asks the next commit to rotate the journal and returns `None` (call
    /// again after that commit).
    pub fn begin_compaction(&mut self) -> Option<CompactionJob> {
        if self.compacting || self.failed.is_some() {
            return None;
        }
        let covered = self.snapshot_generation.unwrap_or(0);
        if self.generation > covered && self.inflight.is_none() {
            if !self.cdrs_durable_below(self.generation) {
                // The CDR writer has not yet made the closed journals'
                // CDRs durable in a CDR file: ask again later.
                return None;
            }
            // The compactor's snapshot at this boundary, unless it started
            // after it (closed journals recovered at start), a job already
            // took it (and failed: this one reads the files), or the
            // compactor failed.
            let captured = match &self.compactor {
                Some(c) if self.generation > self.compactor_from && c.failure().is_none() => {
                    // Not reached yet: ask again later.
                    let c = c.take(self.generation)?;
                    self.compactor_from = self.generation;
                    Some(c)
                }
                _ => None,
            };
            let previous = self
                .snapshot_generation
                .map(|g| self.ledger_dir.join(snapshot_name(g)));
            let journals = (covered..self.generation)
                .map(|g| self.ledger_dir.join(journal_name(g)))
                .collect();
            self.compacting = true;
            return Some(CompactionJob {
                captured,
                dir: self.ledger_dir.clone(),
                previous,
                journals,
                generation: self.generation,
                horizon: self.answer_horizon,
                answer_ends: self.answer_ends_below(self.generation),
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
            answer_ends: self.answer_ends_below(self.generation),
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
