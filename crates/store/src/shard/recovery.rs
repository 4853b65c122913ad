//! Opening a shard's store: the latest snapshot, the journals after it
//! (a torn last frame cut off), the CDR file repaired from the journal,
//! and what the caller replays to rebuild its state ([`Recovered`]).

use super::answers::{index_answers, u32_prefixed_len};
use super::batch::Batch;
use super::cdr_thread::{CdrThread, LineEncoder};
use super::disk::Disk;
use super::files::{cdr_dir, journal_name, ledger_dir, list_ledger};
use super::{ShardStore, StoreOptions};
use crate::cdr_file::{CdrRepair, CdrWriter};
use crate::error::{corrupt, io_err, Error, Result};
use crate::journal::{self, FrameInfo, FrameReader, JournalWriter, FRAME_HEADER};
use crate::names::{create_dir_durable, sync_dir, CdrFormat};
use crate::snapshot;
use gyro_charging::{Effect, Snapshot, Timestamp};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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

pub(super) fn for_each_effect(
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
pub(super) fn journal_cdr_lines(
    journals: &[(PathBuf, Vec<FrameInfo>)],
    format: CdrFormat,
    from: u64,
    to: u64,
) -> Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    let mut next = from;
    let mut enc = LineEncoder::new(format, &mut out);
    for (path, frames) in journals {
        let mut r: Option<FrameReader> = None;
        for fr in frames {
            let end = fr.cdrs_end();
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
            reader.cdrs_from(fr, next, |c| {
                if let Err(e) = enc.line(c) {
                    err.get_or_insert(e);
                }
            })?;
            if let Some(e) = err {
                return Err(e);
            }
            next = end;
        }
    }
    enc.finish()?;
    Ok((next >= to).then_some(out))
}

/// Fails unless the journals after a snapshot of generation `snap_gen`
/// run `snap_gen`, `snap_gen + 1`, ... without a gap.
fn check_generations(journals: &[(u64, PathBuf)], snap_gen: u64) -> Result<()> {
    for (i, (g, p)) in journals.iter().enumerate() {
        if *g != snap_gen + i as u64 {
            return Err(corrupt(
                p,
                0,
                format!("journal generation {} is missing", snap_gen + i as u64),
            ));
        }
    }
    Ok(())
}

/// The journals after the snapshot, scanned.
struct ReplayScan {
    /// Every journal with its whole frames.
    replay: Vec<(PathBuf, Vec<FrameInfo>)>,
    /// Effects and CDRs in them.
    records: u64,
    /// Bytes of their whole frames.
    bytes: u64,
    /// The scan of the last one (the journal a writer appends to).
    last: Option<journal::Scan>,
}

/// Scans the journals after the snapshot (only the last may end in a torn
/// frame, which is left out, not cut), checks that their CDR sequence
/// numbers run on from `next_cdr` and advances it past them, and counts
/// what they hold into `report`. Reads only.
fn scan_replay(
    journals: &[(u64, PathBuf)],
    next_cdr: &mut u64,
    report: &mut RecoveryReport,
) -> Result<ReplayScan> {
    let mut out = ReplayScan {
        replay: Vec::new(),
        records: 0,
        bytes: 0,
        last: None,
    };
    let count = journals.len();
    for (i, (_, p)) in journals.iter().enumerate() {
        let scan = journal::scan(p)?;
        let torn = scan.torn_bytes();
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
                let end = f.cdrs_end();
                if report.journal_cdrs > 0 && f.first_cdr != *next_cdr {
                    return Err(corrupt(
                        p,
                        f.offset,
                        format!("CDR sequence {} where {next_cdr} was expected", f.first_cdr),
                    ));
                }
                *next_cdr = (*next_cdr).max(end);
            }
            report.journal_cdrs += f.cdrs as u64;
            report.journal_effects += f.effects as u64;
            out.records += f.effects as u64 + f.cdrs as u64;
            out.bytes += f.len as u64 + FRAME_HEADER as u64;
        }
        report.journal_frames += scan.frames.len() as u64;
        out.replay.push((p.clone(), scan.frames.clone()));
        if i + 1 == count {
            out.last = Some(scan);
        }
    }
    report.journal_files = count;
    report.journal_bytes = out.bytes;
    Ok(out)
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
        check_generations(&journals, snap_gen)?;
        let mut answer_index = Vec::new();
        let mut retained = Vec::new();
        for (g, p) in &old {
            let scan = journal::scan(p)?;
            if scan.torn_bytes() != 0 {
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
        let ReplayScan {
            replay,
            records,
            bytes,
            last: last_scan,
        } = scan_replay(&journals, &mut next_cdr, &mut report)?;
        for ((g, _), (_, frames)) in journals.iter().zip(&replay) {
            index_answers(&mut answer_index, *g, frames, &mut report);
        }
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
            options.cdr_compression,
            next_cdr,
            options.cdr_max_bytes,
            options.cdr_max_age.as_millis() as u64,
            now,
            |from, to| journal_cdr_lines(&replay, format, from, to),
        )?;
        report.cdr = cdr_repair;
        let journal_path = journal.path.clone();
        let cdr_path = cdr.path.clone();
        let cdr = CdrThread::spawn(
            shard,
            cdr,
            journal.handle()?,
            journal_path.clone(),
            generation,
            options.durability,
        )?;
        let disk = Disk {
            ledger_dir: dir.clone(),
            generation,
            journal,
            durability: options.durability,
            outcome: None,
            cdr_tx: cdr.tx.clone(),
            shared: cdr.shared.clone(),
            feed: None,
        };
        let mut answers = retained;
        answers.extend(replay.iter().cloned());
        let store = ShardStore {
            shard,
            ledger_dir: dir,
            options,
            disk: Arc::new(Mutex::new(disk)),
            cdr,
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
            compactor: None,
            compactor_from: 0,
            effects_committed: 0,
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
}

impl ShardStore {
    /// Reads what [`ShardStore::open`] would recover for shard `shard`
    /// under `data_dir` without writing anything: no directory or file is
    /// created, cut, renamed or removed, so it works on a read-only or full
    /// disk and beside a running server that holds the directory (then
    /// what it reads is a snapshot of a moving state). A torn last frame is
    /// left out in memory; temporary and older snapshot files are ignored;
    /// the CDR files are not looked at. The journals kept only for their
    /// answers (older than the snapshot) are not read:
    /// [`Recovered::replay_answers`] hands back the answers of the
    /// replayed journals only.
    ///
    /// Beside a running server a file listed here may be removed by its
    /// next snapshot before it is read (here or in
    /// [`Recovered::replay_effects`]): the error is then an
    /// [`Error::Io`] whose source is `NotFound`, and reading again from the
    /// start finds the newer snapshot.
    pub fn read_only(data_dir: &Path, shard: usize) -> Result<Recovered> {
        read_shard(&ledger_dir(data_dir, shard))
    }
}

/// [`ShardStore::read_only`] of one shard directory.
fn read_shard(dir: &Path) -> Result<Recovered> {
    let files = list_ledger(dir)?;
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
    let journals: Vec<_> = files
        .journals
        .into_iter()
        .filter(|(g, _)| *g >= snap_gen)
        .collect();
    check_generations(&journals, snap_gen)?;
    let mut next_cdr = snap.as_ref().map_or(1, |s| s.next_cdr_sequence.max(1));
    let scan = scan_replay(&journals, &mut next_cdr, &mut report)?;
    let mut index = Vec::new();
    for ((g, _), (_, frames)) in journals.iter().zip(&scan.replay) {
        index_answers(&mut index, *g, frames, &mut report);
    }
    if let Some(s) = &mut snap {
        s.next_cdr_sequence = next_cdr;
    }
    Ok(Recovered {
        snapshot: snap,
        next_cdr_sequence: next_cdr,
        report,
        answers: scan.replay.clone(),
        replay: scan.replay,
    })
}
