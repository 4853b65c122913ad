//! The logic of `gyro cdr`: list CDR files, print their records, follow
//! them as they are written (`tail -f`), convert them to CSV.
//!
//! Every function takes a directory that is either one shard's CDR
//! directory (`<data_dir>/cdr/shard-<i>`), the CDR root (`<data_dir>/cdr`,
//! whose `shard-*` directories are all read) or the data directory itself.
//! Records are read from whole lines only: a line still being written
//! (no newline yet) is left for later, never printed half. Compressed
//! files (`.jsonl.zst`, see [`cdr_zstd`]) are read transparently, from
//! their complete frames.

use crate::cdr_zstd;
use crate::error::{corrupt, io_err, Error, Result};
use crate::names::{CdrCompression, CdrName};
use gyro_charging::cdr::CSV_HEADER;
use gyro_charging::Cdr;
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One CDR file found by [`list`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CdrFileInfo {
    /// Where it is.
    pub path: PathBuf,
    /// Shard that wrote it.
    pub shard: usize,
    /// `true` for the file being written (`.jsonl.part`,
    /// `.jsonl.zst.part`), `false` for a closed file a billing system may
    /// take.
    pub open: bool,
    /// Sequence number of its first record (`None`: empty).
    pub first: Option<u64>,
    /// Sequence number of its last record.
    pub last: Option<u64>,
    /// Whole records in it.
    pub records: u64,
    /// Size in bytes.
    pub bytes: u64,
    /// Bytes after the last whole record (a line, or a compressed frame,
    /// being written).
    pub partial_bytes: u64,
}

/// How records are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line, as stored.
    Json,
    /// [`CSV_HEADER`] and one CSV line per record.
    Csv,
}

fn out_err(e: std::io::Error) -> Error {
    io_err("write output", Path::new("-"))(e)
}

/// The shard CDR directories under `dir` (see the module documentation).
pub fn shard_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut own_files = false;
    let mut shards = Vec::new();
    let mut cdr_sub = None;
    for entry in std::fs::read_dir(dir).map_err(io_err("list", dir))? {
        let entry = entry.map_err(io_err("list", dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if !is_dir && CdrName::parse(name).is_some() {
            own_files = true;
        } else if is_dir {
            if let Some(n) = name.strip_prefix("shard-") {
                if let Ok(i) = n.parse::<usize>() {
                    shards.push((i, entry.path()));
                }
            } else if name == "cdr" {
                cdr_sub = Some(entry.path());
            }
        }
    }
    if own_files || (shards.is_empty() && cdr_sub.is_none()) {
        return Ok(vec![dir.to_path_buf()]);
    }
    if shards.is_empty() {
        if let Some(c) = cdr_sub {
            return shard_dirs(&c);
        }
    }
    shards.sort();
    Ok(shards.into_iter().map(|(_, p)| p).collect())
}

/// The CDR files of one shard directory, in sequence order (closed files,
/// then the open one).
pub fn shard_files(dir: &Path) -> Result<Vec<(PathBuf, CdrName)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err("list", dir))? {
        let entry = entry.map_err(io_err("list", dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(n) = CdrName::parse(name) {
            files.push((entry.path(), n));
        }
    }
    files.sort_by_key(|(_, n)| (n.shard(), n.first(), matches!(n, CdrName::Part { .. })));
    Ok(files)
}

/// Calls `each` for every whole record of `data` (a file's contents from
/// byte `base`); returns the bytes consumed (up to the last newline).
fn records_in(
    path: &Path,
    base: u64,
    data: &[u8],
    mut each: impl FnMut(Cdr) -> Result<()>,
) -> Result<u64> {
    let mut pos = 0usize;
    while let Some(nl) = data[pos..].iter().position(|&b| b == b'\n') {
        let line = &data[pos..pos + nl];
        if !line.iter().all(u8::is_ascii_whitespace) {
            let cdr: Cdr = serde_json::from_slice(line)
                .map_err(|e| corrupt(path, base + pos as u64, format!("not a CDR line: {e}")))?;
            each(cdr)?;
        }
        pos += nl + 1;
    }
    Ok(pos as u64)
}

/// The lines of a CDR file from byte `offset` on (a frame boundary of a
/// compressed file).
struct Chunk {
    /// The lines: the file's bytes, or the content of a compressed file's
    /// complete frames.
    lines: Vec<u8>,
    /// File bytes read.
    bytes: u64,
    /// A compressed file's complete frames (offsets from `offset`).
    frames: Option<cdr_zstd::Scan>,
}

impl Chunk {
    /// File bytes the reader is done with once `consumed` bytes of the
    /// lines were used.
    fn advance(&self, consumed: u64) -> u64 {
        match &self.frames {
            None => consumed,
            Some(s) => s.frame_before(consumed).0,
        }
    }

    /// Bytes of the file after the last whole record.
    fn partial(&self, consumed: u64) -> u64 {
        self.bytes - self.advance(consumed)
    }
}

fn read_from(path: &Path, offset: u64) -> Result<Chunk> {
    let mut f = File::open(path).map_err(io_err("open", path))?;
    f.seek(SeekFrom::Start(offset))
        .map_err(io_err("seek", path))?;
    let mut data = Vec::new();
    f.read_to_end(&mut data).map_err(io_err("read", path))?;
    let bytes = data.len() as u64;
    if !CdrCompression::of_path(path).is_zstd() {
        return Ok(Chunk {
            lines: data,
            bytes,
            frames: None,
        });
    }
    let mut scan = cdr_zstd::scan(&data);
    let lines = std::mem::take(&mut scan.content);
    Ok(Chunk {
        lines,
        bytes,
        frames: Some(scan),
    })
}

/// Calls `each` for every whole record of one CDR file, in order (a
/// compressed file's complete frames).
pub fn read_file(path: &Path, each: impl FnMut(Cdr) -> Result<()>) -> Result<u64> {
    let data = read_from(path, 0)?;
    let consumed = records_in(path, 0, &data.lines, each)?;
    Ok(data.advance(consumed))
}

/// Lists the CDR files under `dir` with their record counts and sequence
/// ranges.
pub fn list(dir: &Path) -> Result<Vec<CdrFileInfo>> {
    let mut out = Vec::new();
    for sd in shard_dirs(dir)? {
        for (path, name) in shard_files(&sd)? {
            let data = read_from(&path, 0)?;
            let (mut first, mut last, mut records) = (None, None, 0u64);
            let consumed = records_in(&path, 0, &data.lines, |c| {
                first.get_or_insert(c.sequence);
                last = Some(c.sequence);
                records += 1;
                Ok(())
            })?;
            out.push(CdrFileInfo {
                path,
                shard: name.shard(),
                open: matches!(name, CdrName::Part { .. }),
                first,
                last,
                records,
                bytes: data.bytes,
                partial_bytes: data.partial(consumed),
            });
        }
    }
    Ok(out)
}

/// Writes a table of [`list`] to `out`.
pub fn write_list(files: &[CdrFileInfo], out: &mut impl Write) -> Result<()> {
    writeln!(
        out,
        "{:<6} {:<6} {:>10} {:>20} {:>20} {:>12}  file",
        "shard", "state", "records", "first", "last", "bytes"
    )
    .map_err(out_err)?;
    for f in files {
        let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
        writeln!(
            out,
            "{:<6} {:<6} {:>10} {:>20} {:>20} {:>12}  {}",
            f.shard,
            if f.open { "open" } else { "closed" },
            f.records,
            opt(f.first),
            opt(f.last),
            f.bytes,
            f.path.display()
        )
        .map_err(out_err)?;
    }
    Ok(())
}

fn emit(cdr: &Cdr, format: Format, out: &mut impl Write, line: &mut String) -> Result<()> {
    match format {
        Format::Json => {
            let mut buf = Vec::with_capacity(512);
            cdr.write_json_line(&mut buf).map_err(|e| Error::Encode {
                what: "CDR",
                reason: e.to_string(),
            })?;
            out.write_all(&buf).map_err(out_err)
        }
        Format::Csv => {
            line.clear();
            cdr.write_csv(line);
            out.write_all(line.as_bytes()).map_err(out_err)
        }
    }
}

/// Prints every record of `path` (a CDR file or a directory, see the
/// module documentation) in `format`; CSV starts with [`CSV_HEADER`].
/// Returns the number of records.
pub fn print(path: &Path, format: Format, out: &mut impl Write) -> Result<u64> {
    if format == Format::Csv {
        out.write_all(CSV_HEADER.as_bytes()).map_err(out_err)?;
    }
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut v = Vec::new();
        for sd in shard_dirs(path)? {
            v.extend(shard_files(&sd)?.into_iter().map(|(p, _)| p));
        }
        v
    } else {
        vec![path.to_path_buf()]
    };
    let mut n = 0;
    let mut line = String::new();
    for f in files {
        read_file(&f, |c| {
            n += 1;
            emit(&c, format, out, &mut line)
        })?;
    }
    out.flush().map_err(out_err)?;
    Ok(n)
}

/// Converts CDRs (a file or a directory) to CSV: [`print()`] with
/// [`Format::Csv`].
pub fn to_csv(path: &Path, out: &mut impl Write) -> Result<u64> {
    print(path, Format::Csv, out)
}

#[derive(Debug, Default)]
struct ShardCursor {
    /// Last sequence number delivered.
    last: Option<u64>,
    /// Bytes already read of the file starting at this sequence number
    /// (the open file keeps its contents when it is renamed on closing).
    offsets: HashMap<u64, u64>,
}

/// Follows the CDR files under a directory as they grow and rotate:
/// every [`Follower::poll`] delivers the records written since the last
/// one, each exactly once, in sequence order per shard.
#[derive(Debug)]
pub struct Follower {
    dir: PathBuf,
    shards: HashMap<PathBuf, ShardCursor>,
    start_last: usize,
}

impl Follower {
    /// A follower whose first poll delivers the last `last` records of
    /// each shard (`usize::MAX`: all of them) and, later, new records.
    pub fn new(dir: &Path, last: usize) -> Self {
        Follower {
            dir: dir.to_path_buf(),
            shards: HashMap::new(),
            start_last: last,
        }
    }

    fn start_position(files: &[(PathBuf, CdrName)], n: usize) -> Result<Option<u64>> {
        // The highest sequence number on disk.
        let mut max = None;
        for (path, name) in files.iter().rev() {
            match *name {
                CdrName::Final { last, .. } => {
                    max = Some(last);
                    break;
                }
                CdrName::Part { .. } => {
                    let data = read_from(path, 0)?;
                    records_in(path, 0, &data.lines, |c| {
                        max = Some(c.sequence);
                        Ok(())
                    })?;
                    if max.is_some() {
                        break;
                    }
                }
            }
        }
        Ok(max.and_then(|m| m.checked_sub(n as u64)).filter(|&s| s > 0))
    }

    /// Delivers every record written since the last poll. Returns how many.
    pub fn poll(&mut self, mut each: impl FnMut(&Cdr) -> Result<()>) -> Result<u64> {
        let mut n = 0;
        for sd in shard_dirs(&self.dir)? {
            let files = shard_files(&sd)?;
            if !self.shards.contains_key(&sd) {
                let last = Self::start_position(&files, self.start_last)?;
                self.shards.insert(
                    sd.clone(),
                    ShardCursor {
                        last,
                        offsets: HashMap::new(),
                    },
                );
            }
            let Some(cur) = self.shards.get_mut(&sd) else {
                continue;
            };
            for (path, name) in &files {
                if let (CdrName::Final { last, .. }, Some(done)) = (name, cur.last) {
                    if *last <= done {
                        continue;
                    }
                }
                let first = name.first();
                let offset = cur.offsets.get(&first).copied().unwrap_or(0);
                let data = match read_from(path, offset) {
                    Ok(d) => d,
                    // Renamed between listing and reading: next poll.
                    Err(Error::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        continue
                    }
                    Err(e) => return Err(e),
                };
                let consumed = records_in(path, offset, &data.lines, |c| {
                    if cur.last.is_none_or(|l| c.sequence > l) {
                        cur.last = Some(c.sequence);
                        n += 1;
                        each(&c)?;
                    }
                    Ok(())
                })?;
                cur.offsets.insert(first, offset + data.advance(consumed));
            }
            if let Some(done) = cur.last {
                let keep: Vec<u64> = files
                    .iter()
                    .filter(|(_, n)| match n {
                        CdrName::Final { last, .. } => *last > done,
                        CdrName::Part { .. } => true,
                    })
                    .map(|(_, n)| n.first())
                    .collect();
                cur.offsets.retain(|k, _| keep.contains(k));
            }
        }
        Ok(n)
    }
}

/// `tail -f`: prints the last `last` records of each shard, then every new
/// record as it is written, polling every `interval`, until `stop` returns
/// `true` (checked after every poll). Returns the number printed.
pub fn follow(
    dir: &Path,
    last: usize,
    format: Format,
    interval: Duration,
    out: &mut impl Write,
    mut stop: impl FnMut() -> bool,
) -> Result<u64> {
    let mut f = Follower::new(dir, last);
    let mut total = 0;
    let mut line = String::new();
    if format == Format::Csv {
        out.write_all(CSV_HEADER.as_bytes()).map_err(out_err)?;
    }
    loop {
        total += f.poll(|c| emit(c, format, out, &mut line))?;
        out.flush().map_err(out_err)?;
        if stop() {
            return Ok(total);
        }
        std::thread::sleep(interval);
    }
}

/// `tail` without `-f`: prints the last `last` records of each shard.
pub fn tail(dir: &Path, last: usize, format: Format, out: &mut impl Write) -> Result<u64> {
    follow(dir, last, format, Duration::ZERO, out, || true)
}
