//! The CDR files of one shard: the open `.jsonl.part` file, rotation into
//! closed files, and repair after a crash.

use crate::error::{corrupt, io_err, Error, Result};
use crate::names::{final_name_as, part_name_as, sync_dir, CdrFormat, CdrName};
use crate::writeback::WriteBehind;
use gyro_charging::Timestamp;
use serde::Deserialize;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

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
    /// Bytes cut from the end of the open file (a torn line, or records the
    /// journal does not hold because they were never made durable).
    pub truncated_bytes: u64,
    /// Records copied from the journal into the open file because they
    /// were journaled but missing from it.
    pub rewritten: u64,
    /// Open files of an interrupted rotation that were closed now.
    pub closed: Vec<PathBuf>,
}

/// The CDR writer of one shard.
#[derive(Debug)]
pub(crate) struct CdrWriter {
    pub dir: PathBuf,
    shard: usize,
    pub format: CdrFormat,
    file: Option<File>,
    pub path: PathBuf,
    /// First sequence number of the open file.
    pub first: u64,
    /// Next sequence number to write to the open file.
    pub next: u64,
    /// Valid bytes in the open file.
    pub len: u64,
    opened_at: Option<Timestamp>,
    /// Write-behind of the open file.
    wb: WriteBehind,
    /// Lines journaled but not yet in the file (a write failed).
    backlog: Vec<u8>,
    backlog_records: u64,
    max_bytes: u64,
    max_age_ms: u64,
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
        journal_next: u64,
        max_bytes: u64,
        max_age_ms: u64,
        now: Timestamp,
        fetch: impl FnOnce(u64, u64) -> Result<Option<Vec<u8>>>,
    ) -> Result<(CdrWriter, CdrRepair)> {
        crate::names::create_dir_durable(dir)?;
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
        // Older open files are left over from a rotation interrupted after
        // the new file was created: they are complete; close them. So is an
        // open file of another format than the configured one.
        let mut dir_changed = false;
        let other_format = |p: &Path| {
            CdrFormat::of_name(&p.file_name().unwrap_or_default().to_string_lossy()) != format
        };
        while parts.len() > 1 || parts.first().is_some_and(|(_, p)| other_format(p)) {
            let (first, path) = parts.remove(0);
            let its_format =
                CdrFormat::of_name(&path.file_name().unwrap_or_default().to_string_lossy());
            let data = read_all(&path)?;
            let v = valid_prefix(&data, Some(first));
            if v.damaged_inside {
                return Err(corrupt(&path, v.len, "damaged CDR line"));
            }
            if v.tail {
                cut(&path, v.len)?;
                repair.truncated_bytes += data.len() as u64 - v.len;
            }
            if v.records == 0 {
                std::fs::remove_file(&path).map_err(io_err("remove", &path))?;
            } else {
                let to = dir.join(final_name_as(
                    shard,
                    first,
                    first + v.records - 1,
                    now,
                    its_format,
                ));
                std::fs::rename(&path, &to).map_err(io_err("rename", &path))?;
                repair.closed.push(to);
            }
            dir_changed = true;
        }
        let (first, path, len, next) = match parts.pop() {
            Some((first, path)) => {
                let data = read_all(&path)?;
                let v = valid_prefix_fast(&data, first);
                if v.damaged_inside {
                    return Err(corrupt(&path, v.len, "damaged CDR line"));
                }
                if first > journal_next {
                    return Err(corrupt(
                        &path,
                        0,
                        format!(
                            "the open CDR file starts at sequence {first}, after what the journal knows ({journal_next})"
                        ),
                    ));
                }
                // Records the journal does not hold were never durable
                // (asynchronous mode): their numbers will be given again.
                let mut keep_records = v.records;
                let mut keep_len = v.len;
                if first + v.records > journal_next {
                    keep_records = journal_next - first;
                    keep_len = nth_line_end(&data, keep_records);
                }
                if keep_len < data.len() as u64 {
                    cut(&path, keep_len)?;
                    repair.truncated_bytes += data.len() as u64 - keep_len;
                }
                (first, path, keep_len, first + keep_records)
            }
            None => {
                let path = dir.join(part_name_as(shard, journal_next, format));
                File::create(&path).map_err(io_err("create", &path))?;
                dir_changed = true;
                (journal_next, path, 0, journal_next)
            }
        };
        let mut file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        let mut len = len;
        let mut next = next;
        if next < journal_next {
            let Some(lines) = fetch(next, journal_next)? else {
                return Err(corrupt(
                    &path,
                    len,
                    format!(
                        "CDRs {next}..{} are neither in this file nor in the journal",
                        journal_next - 1
                    ),
                ));
            };
            if let Err(e) = file.write_all(&lines) {
                // No torn line is left behind (a full disk): the records
                // stay in the journal for the next try.
                let _ = file.set_len(len);
                return Err(io_err("write", &path)(e));
            }
            repair.rewritten = journal_next - next;
            len += lines.len() as u64;
            next = journal_next;
        }
        if repair.rewritten > 0 || repair.truncated_bytes > 0 {
            file.sync_all().map_err(io_err("fsync", &path))?;
        }
        if dir_changed {
            sync_dir(dir)?;
        }
        Ok((
            CdrWriter {
                dir: dir.to_path_buf(),
                shard,
                format,
                file: Some(file),
                path,
                first,
                next,
                len,
                opened_at: (len > 0).then_some(now),
                wb: WriteBehind::at(len),
                backlog: Vec::new(),
                backlog_records: 0,
                max_bytes,
                max_age_ms,
            },
            repair,
        ))
    }

    /// Journaled records not yet written to the file.
    pub(crate) fn backlog(&self) -> u64 {
        self.backlog_records
    }

    /// Appends lines (sequence numbers `self.next + backlog ..`) and writes
    /// what is pending. On error the lines stay pending and the file is cut
    /// back to its last whole line.
    pub(crate) fn write(&mut self, lines: &[u8], records: u64, now: Timestamp) -> Result<()> {
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

    /// Writes pending lines.
    pub(crate) fn flush(&mut self, now: Timestamp) -> Result<()> {
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
    /// is cut back to its last whole line and nothing is counted.
    fn write_now(&mut self, lines: &[u8], records: u64, now: Timestamp) -> Result<()> {
        let file = ensure_open(&mut self.file, &self.path)?;
        if let Err(e) = file.write_all(lines) {
            let _ = file.set_len(self.len);
            return Err(io_err("write", &self.path)(e));
        }
        self.len += lines.len() as u64;
        self.wb.advance(file, self.len);
        self.next += records;
        if self.opened_at.is_none() {
            self.opened_at = Some(now);
        }
        Ok(())
    }

    /// Whether the open file is due for rotation by size or age.
    pub(crate) fn due(&self, now: Timestamp) -> bool {
        self.len > 0
            && self.backlog.is_empty()
            && (self.len >= self.max_bytes
                || self.opened_at.is_some_and(|t| {
                    now.as_millis().saturating_sub(t.as_millis()) >= self.max_age_ms
                }))
    }

    /// fsyncs the open file and its directory entry.
    pub(crate) fn sync(&mut self) -> Result<()> {
        if let Some(f) = &self.file {
            f.sync_all().map_err(io_err("fsync", &self.path))?;
        }
        sync_dir(&self.dir)
    }

    /// Closes the open file (fsync, rename to its final name) and starts
    /// the next one; the directory is fsynced once for both. Returns the
    /// closed file's path, or `None` when the open file is empty.
    pub(crate) fn rotate(&mut self, now: Timestamp) -> Result<Option<PathBuf>> {
        if self.len == 0 || !self.backlog.is_empty() {
            return Ok(None);
        }
        let file = ensure_open(&mut self.file, &self.path)?;
        file.sync_all().map_err(io_err("fsync", &self.path))?;
        let last = self.next - 1;
        let to = self.dir.join(final_name_as(
            self.shard,
            self.first,
            last,
            now,
            self.format,
        ));
        std::fs::rename(&self.path, &to).map_err(io_err("rename", &self.path))?;
        self.file = None;
        self.first = self.next;
        self.len = 0;
        self.wb = WriteBehind::default();
        self.opened_at = None;
        self.path = self
            .dir
            .join(part_name_as(self.shard, self.first, self.format));
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(io_err("create", &self.path))?;
        self.file = Some(f);
        sync_dir(&self.dir)?;
        Ok(Some(to))
    }
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
