//! Repair of a journal damaged in the middle (`gyro ledger repair`).
//!
//! Opening a store cuts a torn last frame by itself, but refuses damage
//! anywhere else ([`crate::Error::Corrupt`]): what follows a damaged frame
//! cannot be trusted to apply to the state before it. Repair makes the
//! shard open again at the price of what follows the damage, and says
//! exactly what that is:
//!
//! 1. [`inspect`] reads the shard (nothing is written) and finds the last
//!    consistent frame: every frame before it is whole, its checksum and
//!    header hold, every effect and CDR record decodes, and the CDR
//!    sequence numbers run on without a gap. What follows is counted as
//!    far as it can be read ([`Dropped`]). Journals older than the
//!    snapshot (kept only for their answers) are cut at their own damage.
//! 2. [`apply`] keeps a copy of every file it changes under a backup
//!    directory (files it drops whole are moved there), cuts the damaged
//!    journal to its consistent prefix, moves the later journals away,
//!    and cuts from the open CDR file the records the journal no longer
//!    holds.
//! 3. When closed CDR files (which a billing system may already have
//!    taken) hold records of the dropped frames, their sequence numbers
//!    must not be given again: the caller rebuilds the state from the cut
//!    journal and writes it as a new snapshot whose next CDR sequence
//!    follows the last published one ([`write_snapshot`]).
//!
//! The caller holds the data directory's [`crate::DataDirLock`].

use crate::cdr_file::line_sequence;
use crate::error::{corrupt, io_err, Result};
use crate::journal::{
    decode_cdrs, decode_effects, parse_payload_header, sections, FrameInfo, FRAME_HEADER, MAGIC,
    MAX_FRAME, PAYLOAD_HEADER,
};
use crate::names::{sync_dir, CdrName};
use crate::shard::files::{list_ledger, snapshot_name};
use crate::shard::{cdr_dir, ledger_dir};
use crate::snapshot;
use gyro_charging::Snapshot;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// What follows the last consistent frame, as far as it can be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Frames (commits) dropped, the damaged one included.
    pub frames: u64,
    /// Frames among them whose contents cannot be read (the damaged one).
    pub unreadable_frames: u64,
    /// Bytes after the last frame whose length could be followed.
    pub unreadable_bytes: u64,
    /// Effect records in the readable dropped frames.
    pub effects: u64,
    /// CDR records in the readable dropped frames.
    pub cdrs: u64,
    /// Answer records in the readable dropped frames.
    pub answers: u64,
    /// Lowest and highest CDR sequence numbers in the readable dropped
    /// frames.
    pub cdr_range: Option<(u64, u64)>,
    /// Bytes dropped in all.
    pub bytes: u64,
}

impl Dropped {
    fn add_frame(&mut self, f: &FrameInfo) {
        self.frames += 1;
        self.effects += f.effects as u64;
        self.cdrs += f.cdrs as u64;
        self.answers += f.answers as u64;
        if f.cdrs > 0 {
            let last = f.first_cdr.saturating_add(f.cdrs as u64 - 1);
            self.cdr_range = Some(match self.cdr_range {
                Some((lo, hi)) => (lo.min(f.first_cdr), hi.max(last)),
                None => (f.first_cdr, last),
            });
        }
    }

    fn add(&mut self, o: &Dropped) {
        self.frames += o.frames;
        self.unreadable_frames += o.unreadable_frames;
        self.unreadable_bytes += o.unreadable_bytes;
        self.effects += o.effects;
        self.cdrs += o.cdrs;
        self.answers += o.answers;
        self.bytes += o.bytes;
        if let Some((lo, hi)) = o.cdr_range {
            self.cdr_range = Some(match self.cdr_range {
                Some((a, b)) => (a.min(lo), b.max(hi)),
                None => (lo, hi),
            });
        }
    }
}

/// One journal file cut (or dropped whole) by a repair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalCut {
    /// The journal.
    pub path: PathBuf,
    /// Where its consistent prefix ends: the byte range
    /// `keep_len..file_len` is dropped. At most the 8-byte file header
    /// means the whole file is dropped.
    pub keep_len: u64,
    /// Its length.
    pub file_len: u64,
    /// What is wrong at `keep_len` (`None` for a journal dropped whole
    /// because an earlier one is damaged).
    pub reason: Option<String>,
    /// What the dropped range holds.
    pub dropped: Dropped,
}

impl JournalCut {
    /// Whether the whole file goes.
    pub fn whole(&self) -> bool {
        self.keep_len <= MAGIC.len() as u64
    }
}

/// What a repair does to the CDR files of the shard.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CdrCut {
    /// The open CDR file (`.part`), if it holds records at or after the
    /// first dropped sequence number: the file, the bytes kept, its
    /// length, and the sequence numbers of the records cut from it.
    pub part: Option<(PathBuf, u64, u64, (u64, u64))>,
    /// Closed CDR files holding records at or after the first dropped
    /// sequence number, with their ranges. They stay (a billing system
    /// may have them); numbering continues after the last.
    pub published: Vec<(PathBuf, u64, u64)>,
}

impl CdrCut {
    /// The highest sequence number a closed CDR file already holds among
    /// those dropped from the journal.
    pub fn last_published(&self) -> Option<u64> {
        self.published.iter().map(|(_, _, last)| *last).max()
    }
}

/// What [`inspect`] found in one shard.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardDamage {
    /// Shard index.
    pub shard: usize,
    /// Journals to cut or drop, in order (empty: nothing to repair).
    pub journals: Vec<JournalCut>,
    /// Sequence number of the first CDR the repaired journal does not hold.
    pub next_cdr: u64,
    /// Generation of the last journal kept (the snapshot [`write_snapshot`]
    /// writes is one above it).
    pub last_kept_generation: u64,
    /// What happens to the CDR files.
    pub cdr: CdrCut,
    /// A torn last frame (bytes) that opening the store cuts by itself;
    /// not a reason to repair.
    pub torn_tail: u64,
}

impl ShardDamage {
    /// Whether anything needs repair.
    pub fn is_damaged(&self) -> bool {
        !self.journals.is_empty()
    }

    /// Everything dropped from the journals of the replayed state (not the
    /// older journals kept only for their answers).
    pub fn dropped(&self) -> Dropped {
        let mut d = Dropped::default();
        for j in &self.journals {
            d.add(&j.dropped);
        }
        d
    }
}

/// How a frame walk ended.
struct Walk {
    /// End of the consistent prefix.
    keep_len: u64,
    file_len: u64,
    /// Why it stopped before the end, and whether that is only a torn tail
    /// (the file ends inside the frame, or only zero bytes follow).
    stop: Option<(String, bool)>,
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Whether everything from `from` to the end of the file is zero bytes.
fn zeros_from(path: &Path, from: u64) -> Result<bool> {
    let mut f = File::open(path).map_err(io_err("open", path))?;
    f.seek(SeekFrom::Start(from))
        .map_err(io_err("seek", path))?;
    let mut r = std::io::BufReader::new(f);
    let mut buf = [0u8; 1 << 16];
    loop {
        let n = read_full(&mut r, &mut buf).map_err(io_err("read", path))?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        if n < buf.len() {
            return Ok(true);
        }
    }
}

/// Checks every frame of a journal (checksum, header, every record, the
/// CDR sequence running on from `next_cdr` once `seen_cdrs`) and stops at
/// the first that fails. Advances `next_cdr` past the good frames.
fn walk(path: &Path, next_cdr: &mut u64, seen_cdrs: &mut bool) -> Result<Walk> {
    let file = File::open(path).map_err(io_err("open", path))?;
    let file_len = file.metadata().map_err(io_err("stat", path))?.len();
    let mut r = std::io::BufReader::with_capacity(1 << 20, file);
    let mut magic = [0u8; 8];
    let n = read_full(&mut r, &mut magic).map_err(io_err("read", path))?;
    if n < 8 || &magic != MAGIC {
        let torn = n < 8 && magic[..n] == MAGIC[..n];
        let why = if torn {
            "torn file header"
        } else {
            "not a journal (bad magic)"
        };
        return Ok(Walk {
            keep_len: 0,
            file_len,
            stop: Some((why.to_string(), torn)),
        });
    }
    let mut pos = 8u64;
    let mut payload = Vec::new();
    let stop = |why: &str, torn: bool| Some((why.to_string(), torn));
    let stop = loop {
        if pos == file_len {
            break None;
        }
        let mut h = [0u8; FRAME_HEADER];
        let got = read_full(&mut r, &mut h).map_err(io_err("read", path))?;
        if got < FRAME_HEADER {
            break stop("the file ends inside a frame header", true);
        }
        let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        if len > MAX_FRAME || (len as usize) < PAYLOAD_HEADER {
            if h == [0; FRAME_HEADER] && zeros_from(path, pos)? {
                break None; // zero bytes the writer prepared ahead
            }
            break stop("impossible frame length", zeros_from(path, pos)?);
        }
        payload.resize(len as usize, 0);
        let got = read_full(&mut r, &mut payload).map_err(io_err("read", path))?;
        if got < len as usize {
            break stop("the file ends inside a frame", true);
        }
        if crc32fast::hash(&payload) != crc {
            break stop("checksum mismatch", zeros_from(path, pos)?);
        }
        let Some(f) = parse_payload_header(&payload, pos + FRAME_HEADER as u64, len) else {
            break stop("malformed frame header", false);
        };
        let (e, c, _) = sections(&payload, &f);
        match decode_effects(e, f.effects, None, |_| Ok(())) {
            Err((_, e)) => break stop(&format!("effect record: {e}"), false),
            Ok(Err(e)) => break stop(&format!("effect record: {e}"), false),
            Ok(Ok(())) => {}
        }
        if let Err((_, e)) = decode_cdrs(c, f.cdrs, f.first_cdr, |_| {}) {
            break stop(&format!("CDR record: {e}"), false);
        }
        if f.cdrs > 0 {
            if *seen_cdrs && f.first_cdr != *next_cdr {
                break stop(
                    &format!("CDR sequence {} where {next_cdr} was expected", f.first_cdr),
                    false,
                );
            }
            *seen_cdrs = true;
            *next_cdr = (*next_cdr).max(f.first_cdr.saturating_add(f.cdrs as u64));
        }
        pos += FRAME_HEADER as u64 + len as u64;
    };
    Ok(Walk {
        keep_len: pos,
        file_len,
        stop,
    })
}

/// Counts what lies in `from..` of a journal by following frame lengths:
/// frames whose checksum holds are counted with their records; the first
/// whose length cannot be followed ends the count (the rest is
/// unreadable bytes).
fn count_from(path: &Path, from: u64) -> Result<Dropped> {
    let mut f = File::open(path).map_err(io_err("open", path))?;
    let file_len = f.metadata().map_err(io_err("stat", path))?.len();
    let mut d = Dropped {
        bytes: file_len.saturating_sub(from),
        ..Dropped::default()
    };
    let mut pos = from.max(MAGIC.len() as u64);
    let mut payload = Vec::new();
    while pos < file_len {
        let mut h = [0u8; FRAME_HEADER];
        f.seek(SeekFrom::Start(pos)).map_err(io_err("seek", path))?;
        let got = read_full(&mut f, &mut h).map_err(io_err("read", path))?;
        let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let end = pos + FRAME_HEADER as u64 + len as u64;
        if got < FRAME_HEADER
            || len > MAX_FRAME
            || (len as usize) < PAYLOAD_HEADER
            || end > file_len
        {
            // A length that cannot be followed: the rest is one damaged
            // frame as far as anyone can tell.
            d.frames += 1;
            d.unreadable_frames += 1;
            d.unreadable_bytes += file_len - pos;
            break;
        }
        payload.resize(len as usize, 0);
        f.read_exact(&mut payload).map_err(io_err("read", path))?;
        let crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        match parse_payload_header(&payload, pos + FRAME_HEADER as u64, len) {
            Some(info) if crc32fast::hash(&payload) == crc => d.add_frame(&info),
            _ => {
                d.frames += 1;
                d.unreadable_frames += 1;
            }
        }
        pos = end;
    }
    Ok(d)
}

/// Finds what a repair of shard `shard` would cut (reads only).
pub fn inspect(data_dir: &Path, shard: usize) -> Result<ShardDamage> {
    let dir = ledger_dir(data_dir, shard);
    let files = list_ledger(&dir)?;
    let (snap_gen, snap) = match files.snapshots.last() {
        Some((_, p)) => {
            let (g, s) = snapshot::read(p)?;
            (g, Some(s))
        }
        None => (0, None),
    };
    let mut damage = ShardDamage {
        shard,
        last_kept_generation: snap_gen,
        ..ShardDamage::default()
    };
    let (old, journals): (Vec<_>, Vec<_>) =
        files.journals.into_iter().partition(|(g, _)| *g < snap_gen);
    // Older journals hold only answers: each is cut at its own damage.
    for (_, p) in &old {
        let (mut n, mut seen) = (0, false);
        let w = walk(p, &mut n, &mut seen)?;
        if let Some((why, _)) = w.stop {
            damage.journals.push(JournalCut {
                path: p.clone(),
                keep_len: w.keep_len,
                file_len: w.file_len,
                reason: Some(why),
                dropped: count_from(p, w.keep_len)?,
            });
        }
    }
    let mut next_cdr = snap.as_ref().map_or(1, |s| s.next_cdr_sequence.max(1));
    let mut seen = false;
    let count = journals.len();
    let mut cut_at = None;
    for (i, (g, p)) in journals.iter().enumerate() {
        if *g != snap_gen + i as u64 {
            let why = format!("journal generation {} is missing", snap_gen + i as u64);
            cut_at = Some((i, 0, why));
            break;
        }
        let w = walk(p, &mut next_cdr, &mut seen)?;
        if let Some((why, torn)) = w.stop {
            if torn && i + 1 == count {
                damage.torn_tail = w.file_len - w.keep_len;
            } else {
                cut_at = Some((i, w.keep_len, why));
            }
            break;
        }
    }
    // The generation of the last journal of the state that stays.
    let kept = match &cut_at {
        Some((i, keep_len, _)) if *keep_len > MAGIC.len() as u64 => journals.get(*i),
        Some((i, _, _)) => i.checked_sub(1).and_then(|k| journals.get(k)),
        None => journals.last(),
    };
    damage.last_kept_generation = kept.map_or(snap_gen, |(g, _)| *g).max(snap_gen);
    damage.next_cdr = next_cdr;
    if let Some((i, keep_len, why)) = cut_at {
        for (k, (_, p)) in journals.iter().enumerate().skip(i) {
            let file_len = std::fs::metadata(p).map_err(io_err("stat", p))?.len();
            let keep = if k == i { keep_len } else { 0 };
            damage.journals.push(JournalCut {
                path: p.clone(),
                keep_len: keep,
                file_len,
                reason: (k == i).then(|| why.clone()),
                dropped: count_from(p, keep)?,
            });
        }
        damage.cdr = inspect_cdrs(&cdr_dir(data_dir, shard), shard, next_cdr)?;
    }
    Ok(damage)
}

/// The CDR files holding records at or after `next`.
fn inspect_cdrs(dir: &Path, shard: usize, next: u64) -> Result<CdrCut> {
    let mut cut = CdrCut::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(cut),
        Err(e) => return Err(io_err("list", dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io_err("list", dir))?;
        let name = entry.file_name();
        let Some(parsed) = name.to_str().and_then(CdrName::parse) else {
            continue;
        };
        if parsed.shard() != shard {
            continue;
        }
        let path = entry.path();
        match parsed {
            CdrName::Final { first, last, .. } if last >= next => {
                cut.published.push((path, first, last));
            }
            CdrName::Final { .. } => {}
            // A compressed open file is cut to what the journal holds
            // when the store opens (its frames are not cut here).
            CdrName::Part { .. }
                if crate::names::CdrCompression::of_name(&name.to_string_lossy()).is_zstd() => {}
            CdrName::Part { .. } => {
                let data = std::fs::read(&path).map_err(io_err("read", &path))?;
                let (mut keep, mut pos) = (0usize, 0usize);
                let (mut lo, mut hi) = (None, None);
                while let Some(nl) = data[pos..].iter().position(|&b| b == b'\n') {
                    match line_sequence(&data[pos..pos + nl]) {
                        Some(s) if s >= next => {
                            lo.get_or_insert(s);
                            hi = Some(s);
                        }
                        _ if lo.is_none() => keep = pos + nl + 1,
                        _ => {}
                    }
                    pos += nl + 1;
                }
                if let (Some(lo), Some(hi)) = (lo, hi) {
                    cut.part = Some((path, keep as u64, data.len() as u64, (lo, hi)));
                }
            }
        }
    }
    cut.published.sort_by_key(|(_, first, _)| *first);
    Ok(cut)
}

/// What [`apply`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Files copied to the backup before being cut, and files moved there
    /// whole (backup paths).
    pub backed_up: Vec<PathBuf>,
}

/// Where `path` (under `data_dir`) goes in `backup`.
fn backup_path(data_dir: &Path, backup: &Path, path: &Path) -> PathBuf {
    match path.strip_prefix(data_dir) {
        Ok(rel) => backup.join(rel),
        Err(_) => backup.join(path.file_name().unwrap_or_default()),
    }
}

fn prepare(dest: &Path) -> Result<()> {
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).map_err(io_err("create", parent))?;
    }
    Ok(())
}

/// Copies `path` to the backup (fsynced), then cuts it to `len` bytes
/// (or moves it there whole when `len` is `None`).
fn back_up_and_cut(
    data_dir: &Path,
    backup: &Path,
    path: &Path,
    len: Option<u64>,
    applied: &mut Applied,
) -> Result<()> {
    let dest = backup_path(data_dir, backup, path);
    prepare(&dest)?;
    match len {
        None => std::fs::rename(path, &dest).map_err(io_err("move", path))?,
        Some(len) => {
            std::fs::copy(path, &dest).map_err(io_err("copy", path))?;
            File::open(&dest)
                .and_then(|f| f.sync_all())
                .map_err(io_err("fsync", &dest))?;
            let f = OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io_err("open", path))?;
            f.set_len(len).map_err(io_err("truncate", path))?;
            f.sync_all().map_err(io_err("fsync", path))?;
        }
    }
    if let Some(parent) = dest.parent() {
        sync_dir(parent)?;
    }
    if let Some(parent) = path.parent() {
        sync_dir(parent)?;
    }
    applied.backed_up.push(dest);
    Ok(())
}

/// Carries out what [`inspect`] found: keeps a copy of every file it
/// changes (or the file itself, moved) under `backup` (mirroring its path
/// under `data_dir`), cuts the damaged journal to its consistent prefix,
/// moves later journals away, and cuts from the open CDR file the records
/// after the last one the journal holds (moving it away when it holds no
/// other, or when closed files already hold records of the dropped
/// frames: numbering then continues after them, see [`write_snapshot`]).
pub fn apply(data_dir: &Path, damage: &ShardDamage, backup: &Path) -> Result<Applied> {
    let mut applied = Applied::default();
    for j in &damage.journals {
        let len = (!j.whole()).then_some(j.keep_len);
        back_up_and_cut(data_dir, backup, &j.path, len, &mut applied)?;
    }
    if let Some((path, keep, _, _)) = &damage.cdr.part {
        let whole = *keep == 0 || damage.cdr.last_published().is_some();
        let len = (!whole).then_some(*keep);
        back_up_and_cut(data_dir, backup, path, len, &mut applied)?;
    } else if damage.cdr.last_published().is_some() {
        // An open file after published ones starts past the journal.
        let dir = cdr_dir(data_dir, damage.shard);
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                let name = e.file_name();
                if let Some(CdrName::Part { shard, .. }) = name.to_str().and_then(CdrName::parse) {
                    if shard == damage.shard {
                        back_up_and_cut(data_dir, backup, &e.path(), None, &mut applied)?;
                    }
                }
            }
        }
    }
    Ok(applied)
}

/// Writes `snapshot` (the state rebuilt from the repaired journals) as the
/// shard's snapshot of generation `damage.last_kept_generation + 1`, so
/// that the store starts a new journal after it and numbers CDRs from
/// `snapshot.next_cdr_sequence`. Returns its path.
pub fn write_snapshot(
    data_dir: &Path,
    damage: &ShardDamage,
    snapshot: &Snapshot,
) -> Result<PathBuf> {
    let generation = damage.last_kept_generation + 1;
    let path = ledger_dir(data_dir, damage.shard).join(snapshot_name(generation));
    if path.exists() {
        return Err(corrupt(
            &path,
            0,
            "a snapshot of this generation already exists",
        ));
    }
    snapshot::write(&path, generation, snapshot)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::encode_frame;

    /// A shard whose only journal holds `n` frames of one answer record
    /// each; returns the journal's path and its frames' offsets.
    fn journal(data: &Path, n: u64) -> (PathBuf, Vec<usize>) {
        let dir = ledger_dir(data, 0);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("journal-0000000000000000.log");
        let mut bytes = MAGIC.to_vec();
        let mut at = Vec::new();
        for i in 0..n {
            at.push(bytes.len());
            let f = encode_frame((&[], 0), (&[], 0, 0), (b"answer", 1, i + 1)).unwrap();
            bytes.extend_from_slice(&f);
        }
        std::fs::write(&path, &bytes).unwrap();
        (path, at)
    }

    #[test]
    fn damage_in_the_middle_is_cut_at_the_last_consistent_frame() {
        let data = tempfile::tempdir().unwrap();
        let (path, at) = journal(data.path(), 5);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[at[2] + 12] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let d = inspect(data.path(), 0).unwrap();
        assert!(d.is_damaged());
        let j = &d.journals[0];
        assert_eq!((j.keep_len, j.file_len), (at[2] as u64, bytes.len() as u64));
        assert_eq!(j.reason.as_deref(), Some("checksum mismatch"));
        let dropped = d.dropped();
        assert_eq!((dropped.frames, dropped.unreadable_frames), (3, 1));
        assert_eq!(dropped.answers, 2, "the readable frames after it");
        assert_eq!(dropped.bytes, (bytes.len() - at[2]) as u64);

        let backup = data.path().join("backup");
        let applied = apply(data.path(), &d, &backup).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), &bytes[..at[2]]);
        assert_eq!(std::fs::read(&applied.backed_up[0]).unwrap(), bytes);
        assert!(!inspect(data.path(), 0).unwrap().is_damaged());
    }

    #[test]
    fn a_torn_last_frame_is_no_damage() {
        let data = tempfile::tempdir().unwrap();
        let (path, at) = journal(data.path(), 3);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..at[2] + 10]).unwrap();
        let d = inspect(data.path(), 0).unwrap();
        assert!(!d.is_damaged());
        assert_eq!(d.torn_tail, 10);
    }

    #[test]
    fn zero_bytes_written_ahead_are_neither_damage_nor_a_torn_tail() {
        let data = tempfile::tempdir().unwrap();
        let (path, _) = journal(data.path(), 3);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.resize(bytes.len() + 70_000, 0);
        std::fs::write(&path, &bytes).unwrap();
        let d = inspect(data.path(), 0).unwrap();
        assert!(!d.is_damaged());
        assert_eq!(d.torn_tail, 0);
    }
}
