//! The CDR files of one shard: the open `.jsonl.part` file (or
//! `.jsonl.zst.part`, see [`cdr_zstd`]), rotation into closed files, and
//! repair after a crash.

use crate::cdr_zstd::{self, FrameEncoder};
use crate::error::{corrupt, io_err, Error, Result};
use crate::names::{final_name_of, part_name_of, sync_dir, CdrCompression, CdrFormat, CdrName};
use crate::writeback::WriteBehind;
use gyro_charging::Timestamp;
use serde::Deserialize;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The zstd level used to close a compressed open file when the store is
/// configured without compression.
pub(crate) const DEFAULT_ZSTD_LEVEL: i32 = 3;

#[derive(Deserialize)]
struct SeqOnly {
    sequence: u64,
}

/// The sequence number of one CDR line (without its newline): a JSON
/// object with a `sequence` field, or a CSV record whose first column is
/// the sequence number.
pub(crate) fn line_sequence(line: &[u8]) -> Option<u64> {
    if line.first() == Some(&b'{') {
        return serde_json::from_slice::<SeqOnly>(line)
            .ok()
            .map(|s| s.sequence);
    }
    let comma = line.iter().position(|&b| b == b',')?;
    let digits = &line[..comma];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) || line.last() == Some(&b'\r') {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The whole lines of a CDR file that carry `first, first + 1, ...`.
pub(crate) struct ValidPrefix {
    /// Bytes of the valid prefix.
    pub len: u64,
    /// Records in it.
    pub records: u64,
    /// Whether something follows the prefix (a torn or bad tail).
    #[cfg_attr(not(test), allow(dead_code))]
    pub tail: bool,
    /// Whether what follows is more than one (last, torn) line.
    pub damaged_inside: bool,
}

/// [`valid_prefix`] for a file whose lines gyro wrote itself: checks the
/// last whole line and the line count instead of decoding every line,
/// falling back to the full check when they disagree.
pub(crate) fn valid_prefix_fast(data: &[u8], first: u64) -> ValidPrefix {
    let end = match data.iter().rposition(|&b| b == b'\n') {
        Some(i) => i + 1,
        None => return valid_prefix(data, Some(first)),
    };
    let start = data[..end - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let lines = data[..end].iter().filter(|&&b| b == b'\n').count() as u64;
    match line_sequence(&data[start..end - 1]) {
        Some(s) if s.checked_sub(first).map(|d| d + 1) == Some(lines) => {
            let tail = end < data.len();
            ValidPrefix {
                len: end as u64,
                records: lines,
                tail,
                // Bytes after the last newline are one torn line.
                damaged_inside: false,
            }
        }
        _ => valid_prefix(data, Some(first)),
    }
}

/// Finds the valid prefix of CDR file contents expected to start at
/// sequence `first` (`None`: whatever the first line carries).
pub(crate) fn valid_prefix(data: &[u8], first: Option<u64>) -> ValidPrefix {
    let mut pos = 0usize;
    let mut records = 0u64;
    let mut expect = first;
    let mut wrong_sequence = false;
    while pos < data.len() {
        let Some(nl) = data[pos..].iter().position(|&b| b == b'\n') else {
            break; // no newline: torn
        };
        let line = &data[pos..pos + nl];
        match line_sequence(line) {
            Some(s) if expect.is_none_or(|e| e == s) => {
                expect = Some(s.saturating_add(1));
                records += 1;
                pos += nl + 1;
            }
            Some(_) => {
                wrong_sequence = true;
                break;
            }
            None => break,
        }
    }
    let tail = pos < data.len();
    let damaged_inside = tail && {
        let rest = &data[pos..];
        // A whole record out of sequence, or more than one line follows
        // (a newline before the last byte).
        wrong_sequence || rest[..rest.len() - 1].contains(&b'\n')
    };
    ValidPrefix {
        len: pos as u64,
        records,
        tail,
        damaged_inside,
    }
}

/// What repairing the CDR directory did on open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CdrRepair {
    /// Bytes cut from the end of the open file (a torn line or frame, or
    /// records the journal does not hold because they were never made
    /// durable).
    pub truncated_bytes: u64,
    /// Records copied from the journal into the open file because they
    /// were journaled but missing from it.
    pub rewritten: u64,
    /// Records of a compressed file kept from a frame that had to be cut
    /// (it also held records the journal does not hold), written again in
    /// a new frame.
    pub recompressed: u64,
    /// Open files of an interrupted rotation, or of another format or
    /// compression than the configured one, that were closed now.
    pub closed: Vec<PathBuf>,
}

/// Lines accepted by a compressed writer but not yet in a finished frame.
#[derive(Debug)]
struct Frames {
    enc: FrameEncoder,
    /// Whole lines not yet in a frame.
    input: Vec<u8>,
    /// Records in `input`.
    records: u64,
    /// When the oldest line of `input` was taken.
    since: Option<Timestamp>,
    /// The last attempt to write a frame failed (retried by `flush`).
    failed: bool,
}

/// The CDR writer of one shard.
#[derive(Debug)]
pub(crate) struct CdrWriter {
    pub dir: PathBuf,
    shard: usize,
    pub format: CdrFormat,
    compression: CdrCompression,
    file: Option<File>,
    pub path: PathBuf,
    /// First sequence number of the open file.
    pub first: u64,
    /// Next sequence number to take (written to the open file, or with
    /// compression possibly still waiting for its frame).
    pub next: u64,
    /// Valid bytes in the open file.
    pub len: u64,
    /// Bytes appended to CDR files since the writer was opened.
    pub appended: u64,
    opened_at: Option<Timestamp>,
    /// Write-behind of the open file.
    wb: WriteBehind,
    /// Lines journaled but not yet in the file (a write failed).
    backlog: Vec<u8>,
    backlog_records: u64,
    /// With compression: lines waiting for their frame.
    frames: Option<Frames>,
    max_bytes: u64,
    max_age_ms: u64,
}

/// The part of an open file to keep on open.
struct Kept {
    /// Bytes of the file kept as they are.
    file_len: u64,
    /// Records kept (in those bytes plus `redo`).
    records: u64,
    /// Lines to write again after `file_len` (compressed: the kept lines
    /// of a frame that is cut).
    redo: Vec<u8>,
    redo_records: u64,
    /// Bytes of the file after `file_len`.
    cut_bytes: u64,
}

/// Reads an open file starting at sequence `first` and finds what to keep:
/// its whole lines (compressed: the lines of its complete frames) in
/// sequence, at most up to `limit` (the journal's next sequence number).
fn examine(path: &Path, first: u64, limit: Option<u64>, fast: bool) -> Result<Kept> {
    let data = read_all(path)?;
    let total = data.len() as u64;
    let limit_records = |records: u64| match limit {
        Some(l) => records.min(l.saturating_sub(first)),
        None => records,
    };
    if !CdrCompression::of_path(path).is_zstd() {
        let v = if fast {
            valid_prefix_fast(&data, first)
        } else {
            valid_prefix(&data, Some(first))
        };
        if v.damaged_inside {
            return Err(corrupt(path, v.len, "damaged CDR line"));
        }
        let records = limit_records(v.records);
        let file_len = if records < v.records {
            nth_line_end(&data, records)
        } else {
            v.len
        };
        return Ok(Kept {
            file_len,
            records,
            redo: Vec::new(),
            redo_records: 0,
            cut_bytes: total - file_len,
        });
    }
    let s = cdr_zstd::scan(&data);
    let v = valid_prefix_fast(&s.content, first);
    if v.damaged_inside {
        let (at, _) = s.frame_before(v.len);
        return Err(corrupt(
            path,
            at,
            "damaged CDR line in the compressed frame at this offset",
        ));
    }
    let records = limit_records(v.records);
    let content_len = nth_line_end(&s.content, records).min(v.len);
    let (file_len, frame_content) = s.frame_before(content_len);
    let redo = s.content[frame_content as usize..content_len as usize].to_vec();
    let redo_records = redo.iter().filter(|&&b| b == b'\n').count() as u64;
    Ok(Kept {
        file_len,
        records,
        redo,
        redo_records,
        cut_bytes: total - file_len,
    })
}

/// Cuts `path` to what `kept` says, writes its `redo` lines again (in a
/// new frame when compressed) and makes it durable.
fn apply_kept(path: &Path, kept: &Kept, level: i32) -> Result<()> {
    if kept.cut_bytes > 0 {
        cut(path, kept.file_len)?;
    }
    if !kept.redo.is_empty() {
        let mut enc = FrameEncoder::new(level)?;
        let frame = enc.frame(&kept.redo)?;
        let mut f = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io_err("open", path))?;
        if let Err(e) = f.write_all(frame) {
            let _ = f.set_len(kept.file_len);
            return Err(io_err("write", path)(e));
        }
        f.sync_all().map_err(io_err("fsync", path))?;
    }
    Ok(())
}

impl CdrWriter {
    /// Opens the shard's CDR directory after a (possible) crash, given the
    /// next CDR sequence number the journal knows (`journal_next`) and a
    /// way to fetch journaled lines `[from, to)` (`None` when the journal
    /// does not hold them all).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        dir: &Path,
        shard: usize,
        format: CdrFormat,
        compression: CdrCompression,
        journal_next: u64,
        max_bytes: u64,
        max_age_ms: u64,
        now: Timestamp,
        fetch: impl FnOnce(u64, u64) -> Result<Option<Vec<u8>>>,
    ) -> Result<(CdrWriter, CdrRepair)> {
        crate::names::create_dir_durable(dir)?;
        let level = match compression {
            CdrCompression::Zstd { level } => level,
            CdrCompression::None => DEFAULT_ZSTD_LEVEL,
        };
        let mut repair = CdrRepair::default();
        let mut parts = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io_err("list", dir))? {
            let entry = entry.map_err(io_err("list", dir))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(CdrName::Part { shard: s, first }) = CdrName::parse(name) {
                if s == shard {
                    parts.push((first, entry.path()));
                }
            }
        }
        parts.sort();
        let mut dir_changed = false;
        let other_kind = |p: &Path| {
            CdrFormat::of_path(p) != format
                || CdrCompression::of_path(p).is_zstd() != compression.is_zstd()
        };
        // Older open files are left over from a rotation interrupted after
        // the new file was created: they are complete; close them. So is an
        // open file of another format or compression than the configured
        // one, cut first to what the journal holds (its records the
        // journal does not hold are given their numbers again below).
        let mut start = journal_next;
        while parts.len() > 1 || parts.first().is_some_and(|(_, p)| other_kind(p)) {
            let (first, path) = parts.remove(0);
            let limit = parts.is_empty().then_some(journal_next);
            if limit.is_some() && first > journal_next {
                return Err(after_journal(&path, first, journal_next));
            }
            let kept = examine(&path, first, limit, false)?;
            apply_kept(&path, &kept, level)?;
            repair.truncated_bytes += kept.cut_bytes;
            repair.recompressed += kept.redo_records;
            if kept.records == 0 {
                std::fs::remove_file(&path).map_err(io_err("remove", &path))?;
            } else {
                let its = if CdrCompression::of_path(&path).is_zstd() {
                    CdrCompression::Zstd { level }
                } else {
                    CdrCompression::None
                };
                let to = dir.join(final_name_of(
                    shard,
                    first,
                    first + kept.records - 1,
                    now,
                    CdrFormat::of_path(&path),
                    its,
                ));
                std::fs::rename(&path, &to).map_err(io_err("rename", &path))?;
                repair.closed.push(to);
            }
            if limit.is_some() {
                start = first + kept.records;
            }
            dir_changed = true;
        }
        let (first, path, kept) = match parts.pop() {
            Some((first, path)) => {
                if first > journal_next {
                    return Err(after_journal(&path, first, journal_next));
                }
                // Records the journal does not hold were never durable
                // (asynchronous mode): their numbers will be given again.
                let kept = examine(&path, first, Some(journal_next), true)?;
                (first, path, kept)
            }
            None => {
                let path = dir.join(part_name_of(shard, start, format, compression));
                File::create(&path).map_err(io_err("create", &path))?;
                dir_changed = true;
                let kept = Kept {
                    file_len: 0,
                    records: 0,
                    redo: Vec::new(),
                    redo_records: 0,
                    cut_bytes: 0,
                };
                (start, path, kept)
            }
        };
        // What the journal must give is fetched before anything is cut, so
        // that a file the journal cannot complete is left as it is.
        let from = first + kept.records;
        let missing = if from < journal_next {
            match fetch(from, journal_next)? {
                Some(lines) => lines,
                None => {
                    return Err(corrupt(
                        &path,
                        kept.file_len,
                        format!(
                            "CDRs {from}..{} are neither in this file nor in the journal",
                            journal_next - 1
                        ),
                    ))
                }
            }
        } else {
            Vec::new()
        };
        if kept.cut_bytes > 0 {
            cut(&path, kept.file_len)?;
            repair.truncated_bytes += kept.cut_bytes;
        }
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        let frames = match compression {
            CdrCompression::Zstd { level } => Some(Frames {
                enc: FrameEncoder::new(level)?,
                input: Vec::new(),
                records: 0,
                since: None,
                failed: false,
            }),
            CdrCompression::None => None,
        };
        let len = kept.file_len;
        let mut w = CdrWriter {
            dir: dir.to_path_buf(),
            shard,
            format,
            compression,
            file: Some(file),
            path,
            first,
            next: first + kept.records - kept.redo_records,
            len,
            appended: 0,
            opened_at: (len > 0).then_some(now),
            wb: WriteBehind::at(len),
            backlog: Vec::new(),
            backlog_records: 0,
            frames,
            max_bytes,
            max_age_ms,
        };
        if kept.redo_records > 0 || !missing.is_empty() {
            // No torn line or frame is left behind on failure (a full
            // disk): the records stay in the journal for the next try.
            w.write_now(&kept.redo, kept.redo_records, now)?;
            w.write_now(&missing, journal_next - from, now)?;
            w.end_frames()?;
            repair.rewritten = journal_next - from;
            repair.recompressed += kept.redo_records;
        }
        if repair.rewritten > 0 || repair.truncated_bytes > 0 || repair.recompressed > 0 {
            if let Some(f) = &w.file {
                f.sync_all().map_err(io_err("fsync", &w.path))?;
            }
        }
        if dir_changed {
            sync_dir(dir)?;
        }
        Ok((w, repair))
    }

    /// Journaled records not yet written to the file because a write
    /// failed (retried by [`CdrWriter::flush`]).
    pub(crate) fn backlog(&self) -> u64 {
        match &self.frames {
            Some(z) if z.failed => z.records,
            Some(_) => 0,
            None => self.backlog_records,
        }
    }

    /// Whether lines are waiting for a frame longer than
    /// [`cdr_zstd::FRAME_DELAY_MS`] (compressed files only).
    pub(crate) fn frame_due(&self, now: Timestamp) -> bool {
        self.frames.as_ref().is_some_and(|z| {
            z.since.is_some_and(|t| {
                now.as_millis().saturating_sub(t.as_millis()) >= cdr_zstd::FRAME_DELAY_MS
            })
        })
    }

    /// Appends lines (sequence numbers `self.next + backlog ..`) and writes
    /// what is pending. On error the lines stay pending and the file is cut
    /// back to its last whole line (or frame).
    pub(crate) fn write(&mut self, lines: &[u8], records: u64, now: Timestamp) -> Result<()> {
        if self.frames.is_some() {
            return self.write_now(lines, records, now);
        }
        if self.backlog.is_empty() {
            // Nothing pending (the usual case): written from the caller's
            // buffer, copied into the backlog only if the write fails.
            return match self.write_now(lines, records, now) {
                Ok(()) => Ok(()),
                Err(e) => {
                    self.backlog.extend_from_slice(lines);
                    self.backlog_records += records;
                    Err(e)
                }
            };
        }
        self.backlog.extend_from_slice(lines);
        self.backlog_records += records;
        self.flush(now)
    }

    /// Writes pending lines (compressed: ends the frame).
    pub(crate) fn flush(&mut self, now: Timestamp) -> Result<()> {
        if self.frames.is_some() {
            return self.end_frames();
        }
        if self.backlog.is_empty() {
            return Ok(());
        }
        let backlog = std::mem::take(&mut self.backlog);
        let r = self.write_now(&backlog, self.backlog_records, now);
        self.backlog = backlog;
        if r.is_ok() {
            self.backlog.clear();
            self.backlog_records = 0;
        }
        r
    }

    /// Appends `lines` (`records` records) to the file; on error the file
    /// is cut back to its last whole line and nothing is counted. With
    /// compression the lines join the frame being built, which is written
    /// once it holds [`cdr_zstd::FRAME_INPUT`] bytes.
    fn write_now(&mut self, lines: &[u8], records: u64, now: Timestamp) -> Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        if self.opened_at.is_none() {
            self.opened_at = Some(now);
        }
        if let Some(z) = &mut self.frames {
            z.input.extend_from_slice(lines);
            z.records += records;
            z.since.get_or_insert(now);
            self.next += records;
            if z.input.len() >= cdr_zstd::FRAME_INPUT {
                return self.end_frames();
            }
            return Ok(());
        }
        let file = ensure_open(&mut self.file, &self.path)?;
        if let Err(e) = file.write_all(lines) {
            let _ = file.set_len(self.len);
            return Err(io_err("write", &self.path)(e));
        }
        self.len += lines.len() as u64;
        self.appended += lines.len() as u64;
        self.wb.advance(file, self.len);
        self.next += records;
        Ok(())
    }

    /// Compressed files: writes the lines waiting for a frame as complete
    /// frames (of about [`cdr_zstd::FRAME_INPUT`] bytes of lines each). On
    /// error the file is cut back to its last whole frame and the lines
    /// stay waiting.
    fn end_frames(&mut self) -> Result<()> {
        let Some(z) = &mut self.frames else {
            return Ok(());
        };
        while !z.input.is_empty() {
            let take = if z.input.len() < 2 * cdr_zstd::FRAME_INPUT {
                z.input.len()
            } else {
                z.input[cdr_zstd::FRAME_INPUT - 1..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(z.input.len(), |i| cdr_zstd::FRAME_INPUT + i)
            };
            let records = if take == z.input.len() {
                z.records
            } else {
                z.input[..take].iter().filter(|&&b| b == b'\n').count() as u64
            };
            let frame = match z.enc.frame(&z.input[..take]) {
                Ok(f) => f,
                Err(e) => {
                    z.failed = true;
                    return Err(e);
                }
            };
            let file = ensure_open(&mut self.file, &self.path)?;
            if let Err(e) = file.write_all(frame) {
                let _ = file.set_len(self.len);
                z.failed = true;
                return Err(io_err("write", &self.path)(e));
            }
            self.len += frame.len() as u64;
            self.appended += frame.len() as u64;
            self.wb.advance(file, self.len);
            z.input.drain(..take);
            z.records -= records.min(z.records);
        }
        z.since = None;
        z.failed = false;
        Ok(())
    }

    /// Records taken but not yet written to the file.
    fn pending_records(&self) -> u64 {
        self.backlog_records + self.frames.as_ref().map_or(0, |z| z.records)
    }

    /// Bytes a plain file may still take before it is due for rotation
    /// by size; `None` for a compressed file (its size grows by whole
    /// frames) or while lines wait to be written again.
    pub(crate) fn room(&self) -> Option<u64> {
        (self.frames.is_none() && self.backlog.is_empty())
            .then(|| self.max_bytes.saturating_sub(self.len))
    }

    /// Whether the open file is due for rotation by size or age.
    pub(crate) fn due(&self, now: Timestamp) -> bool {
        (self.len > 0 || self.pending_records() > 0)
            && self.backlog() == 0
            && (self.len >= self.max_bytes
                || self.opened_at.is_some_and(|t| {
                    now.as_millis().saturating_sub(t.as_millis()) >= self.max_age_ms
                }))
    }

    /// fsyncs the open file (after ending the frame being built) and its
    /// directory entry.
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.end_frames()?;
        if let Some(f) = &self.file {
            f.sync_all().map_err(io_err("fsync", &self.path))?;
        }
        sync_dir(&self.dir)
    }

    /// Closes the open file (fsync, rename to its final name) and starts
    /// the next one; the directory is fsynced once for both. Returns the
    /// closed file's path, or `None` when the open file is empty.
    pub(crate) fn rotate(&mut self, now: Timestamp) -> Result<Option<PathBuf>> {
        self.end_frames()?;
        if self.len == 0 || !self.backlog.is_empty() {
            return Ok(None);
        }
        let file = ensure_open(&mut self.file, &self.path)?;
        file.sync_all().map_err(io_err("fsync", &self.path))?;
        let last = self.next - 1;
        let to = self.dir.join(final_name_of(
            self.shard,
            self.first,
            last,
            now,
            self.format,
            self.compression,
        ));
        // The next open file exists before this one is renamed: a crash at
        // any point leaves an open file where numbering goes on (and this
        // one, complete, either closed or still open beside it; `open`
        // closes it). Renaming first left a moment with no open file, after
        // which a restart started at the journal's next number and the
        // journaled records the writer had not reached yet were never
        // written.
        let next_path = self.dir.join(part_name_of(
            self.shard,
            self.next,
            self.format,
            self.compression,
        ));
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&next_path)
            .map_err(io_err("create", &next_path))?;
        if let Err(e) = std::fs::rename(&self.path, &to) {
            let _ = std::fs::remove_file(&next_path);
            return Err(io_err("rename", &self.path)(e));
        }
        self.file = Some(f);
        self.path = next_path;
        self.first = self.next;
        self.len = 0;
        self.wb = WriteBehind::default();
        self.opened_at = None;
        sync_dir(&self.dir)?;
        Ok(Some(to))
    }
}

fn after_journal(path: &Path, first: u64, journal_next: u64) -> Error {
    corrupt(
        path,
        0,
        format!(
            "the open CDR file starts at sequence {first}, after what the journal knows ({journal_next})"
        ),
    )
}

fn ensure_open<'a>(file: &'a mut Option<File>, path: &Path) -> Result<&'a mut File> {
    if file.is_none() {
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io_err("open", path))?;
        *file = Some(f);
    }
    file.as_mut().ok_or_else(|| Error::Failed {
        path: path.to_path_buf(),
        reason: "CDR file not open".into(),
    })
}

fn read_all(path: &Path) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut data))
        .map_err(io_err("read", path))?;
    Ok(data)
}

fn cut(path: &Path, len: u64) -> Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_err("open", path))?;
    f.set_len(len).map_err(io_err("truncate", path))?;
    f.sync_all().map_err(io_err("fsync", path))
}

/// Byte offset just past the `n`-th line (0 for `n == 0`).
fn nth_line_end(data: &[u8], n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let mut seen = 0;
    for (i, &b) in data.iter().enumerate() {
        if b == b'\n' {
            seen += 1;
            if seen == n {
                return i as u64 + 1;
            }
        }
    }
    data.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_prefix_stops_at_torn_or_wrong_line() {
        let d = b"{\"sequence\":5}\n{\"sequence\":6}\n{\"seque";
        let v = valid_prefix(d, Some(5));
        assert_eq!(
            (v.records, v.len, v.tail, v.damaged_inside),
            (2, 30, true, false)
        );
        let d = b"{\"sequence\":5}\n{\"sequence\":7}\n";
        let v = valid_prefix(d, Some(5));
        assert_eq!((v.records, v.tail, v.damaged_inside), (1, true, true));
        let d = b"{\"sequence\":5}\n{\"sequ\n";
        let v = valid_prefix(d, Some(5));
        assert_eq!((v.records, v.tail, v.damaged_inside), (1, true, false));
        let d = b"{\"sequence\":5}\nxx\n{\"sequence\":6}\n";
        let v = valid_prefix(d, Some(5));
        assert!(v.damaged_inside);
        // The fast check notices the count does not match and checks all.
        let v = valid_prefix_fast(d, 5);
        assert!(v.damaged_inside);
        let d = b"{\"sequence\":5}\n{\"sequence\":6}\n{\"seq";
        let v = valid_prefix_fast(d, 5);
        assert_eq!(
            (v.records, v.len, v.tail, v.damaged_inside),
            (2, 30, true, false)
        );
        let d = b"{\"sequence\":5}\n{\"sequence\":6}\n";
        let v = valid_prefix_fast(d, 5);
        assert_eq!((v.records, v.len, v.tail), (2, 30, false));
        assert_eq!(nth_line_end(b"a\nb\nc\n", 2), 4);
    }
}
