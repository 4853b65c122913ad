//! The logic of `gyro cdr`: list CDR files, print their records, follow
//! them as they are written (`tail -f`), convert them to CSV.
//!
//! Every function takes a directory that is either one shard's CDR
//! directory (`<data_dir>/cdr/shard-<i>`), the CDR root (`<data_dir>/cdr`,
//! whose `shard-*` directories are all read) or the data directory itself.
//! Records are read from whole lines only: a line still being written
//! (no newline yet) is left for later, never printed half. JSON Lines
//! (`.jsonl`) and CSV files (`.csv`, the columns of [`CSV_HEADER`] without
//! a header line) are read alike, by the format their names say.
//! Compressed files (`.jsonl.zst`, `.csv.zst`, see [`cdr_zstd`]) are read
//! transparently, from their complete frames.
//!
//! A closed file's name promises its records (`first` to `last`, see
//! [`CdrName`]): [`list`] and [`print`] check that it holds exactly those,
//! in order, and nothing after the last whole record (a partial line, an
//! incomplete zstd frame), and report a file that does not as a
//! [`Damage`] (its whole records are still listed and printed). Only the
//! open `.part` file may end in a partial line: the server is writing it.

use crate::cdr_zstd;
use crate::error::{corrupt, io_err, Error, Result};
use crate::names::{CdrCompression, CdrFormat, CdrName};
use gyro_charging::cdr::{CdrCsvReader, CSV_HEADER};
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
    /// For a closed file: how its contents differ from what its name
    /// promises (`None`: they do not).
    pub damage: Option<Damage>,
}

/// A closed CDR file whose whole records do not run exactly from the
/// first to the last sequence number its name carries, or that ends in a
/// partial line or an incomplete zstd frame (a truncated or damaged
/// file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// The file.
    pub path: PathBuf,
    /// The first and last sequence numbers its name carries.
    pub expected: (u64, u64),
    /// The first and last sequence numbers of its whole records (`None`:
    /// it has none).
    pub found: Option<(u64, u64)>,
    /// Whole records in it.
    pub records: u64,
    /// The first record out of sequence: the sequence number expected
    /// there and the one found.
    pub out_of_sequence: Option<(u64, u64)>,
    /// Bytes after the last whole record (a partial line, or an
    /// incomplete or undecodable zstd frame).
    pub partial_bytes: u64,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, b) = self.expected;
        write!(
            f,
            "damaged closed CDR file {}: its name says records {a} to {b} ({} records), ",
            self.path.display(),
            (b - a).saturating_add(1)
        )?;
        match self.found {
            Some((x, y)) => write!(f, "it holds {} whole records, {x} to {y}", self.records)?,
            None => write!(f, "it holds no whole record")?,
        }
        if let Some((want, got)) = self.out_of_sequence {
            write!(f, "; record {got} follows where {want} was expected")?;
        }
        if self.partial_bytes > 0 {
            let what = match CdrCompression::of_path(&self.path).is_zstd() {
                true => "an incomplete or undecodable zstd frame",
                false => "a partial line",
            };
            write!(
                f,
                "; it ends in {} bytes of {what} (truncated?)",
                self.partial_bytes
            )?;
        }
        Ok(())
    }
}

/// Checks the records of a closed file against its name as they are read.
#[derive(Debug)]
struct Check {
    /// The range of the name (`None`: an open file, or a name that is not
    /// a CDR file's: nothing to check).
    expected: Option<(u64, u64)>,
    found: Option<(u64, u64)>,
    records: u64,
    out_of_sequence: Option<(u64, u64)>,
}

impl Check {
    fn of(path: &Path) -> Check {
        let name = path.file_name().and_then(|n| n.to_str());
        let expected = match name.and_then(CdrName::parse) {
            Some(CdrName::Final { first, last, .. }) => Some((first, last)),
            _ => None,
        };
        Check {
            expected,
            found: None,
            records: 0,
            out_of_sequence: None,
        }
    }

    fn see(&mut self, sequence: u64) {
        let want = match self.found {
            None => self.expected.map(|(a, _)| a),
            Some((_, last)) => Some(last.wrapping_add(1)),
        };
        if let Some(want) = want {
            if want != sequence && self.out_of_sequence.is_none() {
                self.out_of_sequence = Some((want, sequence));
            }
        }
        self.found = Some((self.found.map_or(sequence, |(a, _)| a), sequence));
        self.records += 1;
    }

    /// The damage found, once the whole file was read (`partial_bytes`
    /// after its last whole record).
    fn finish(self, path: &Path, partial_bytes: u64) -> Option<Damage> {
        let expected = self.expected?;
        let whole = self.out_of_sequence.is_none()
            && self.found.is_some_and(|(_, last)| last == expected.1)
            && partial_bytes == 0;
        (!whole).then(|| Damage {
            path: path.to_path_buf(),
            expected,
            found: self.found,
            records: self.records,
            out_of_sequence: self.out_of_sequence,
            partial_bytes,
        })
    }
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
/// byte `base`, in the format the file's name says); returns the bytes
/// consumed (up to the end of the last whole line).
fn records_in(
    path: &Path,
    base: u64,
    data: &[u8],
    each: impl FnMut(Cdr) -> Result<()>,
) -> Result<u64> {
    match CdrFormat::of_path(path) {
        CdrFormat::JsonLines => json_records_in(path, base, data, each),
        CdrFormat::Csv => csv_records_in(path, base, data, each),
    }
}

fn json_records_in(
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

/// The end of the last whole CSV line of `data`: just past the last
/// newline outside a quoted field (a field may hold a newline; quotes
/// come in pairs in whole lines, an escaped quote being two).
fn csv_whole_lines(data: &[u8]) -> usize {
    let mut quoted = false;
    let mut end = 0;
    for (i, &b) in data.iter().enumerate() {
        match b {
            b'"' => quoted = !quoted,
            b'\n' if !quoted => end = i + 1,
            _ => {}
        }
    }
    end
}

fn csv_records_in(
    path: &Path,
    base: u64,
    data: &[u8],
    mut each: impl FnMut(Cdr) -> Result<()>,
) -> Result<u64> {
    let end = csv_whole_lines(data);
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(&data[..end]);
    let reader = CdrCsvReader::new();
    let mut record = csv::ByteRecord::new();
    loop {
        let at = base + r.position().byte();
        let bad = |e: &dyn std::fmt::Display| corrupt(path, at, format!("not a CDR line: {e}"));
        if !r.read_byte_record(&mut record).map_err(|e| bad(&e))? {
            break;
        }
        each(reader.record(&record).map_err(|e| bad(&e))?)?;
    }
    Ok(end as u64)
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
/// compressed file's complete frames). Returns the bytes read up to the
/// end of the last whole record; see [`read_file_checked`] for a closed
/// file's check.
pub fn read_file(path: &Path, each: impl FnMut(Cdr) -> Result<()>) -> Result<u64> {
    Ok(read_file_checked(path, each)?.0)
}

/// [`read_file`], and for a closed file (by its name) how its records
/// differ from what its name promises.
pub fn read_file_checked(
    path: &Path,
    mut each: impl FnMut(Cdr) -> Result<()>,
) -> Result<(u64, Option<Damage>)> {
    let data = read_from(path, 0)?;
    let mut check = Check::of(path);
    let consumed = records_in(path, 0, &data.lines, |c| {
        check.see(c.sequence);
        each(c)
    })?;
    let damage = check.finish(path, data.partial(consumed));
    Ok((data.advance(consumed), damage))
}

/// Lists the CDR files under `dir` with their record counts and sequence
/// ranges; a closed file that does not hold what its name says has its
/// [`CdrFileInfo::damage`].
pub fn list(dir: &Path) -> Result<Vec<CdrFileInfo>> {
    let mut out = Vec::new();
    for sd in shard_dirs(dir)? {
        for (path, name) in shard_files(&sd)? {
            let data = read_from(&path, 0)?;
            let mut check = Check::of(&path);
            let consumed = records_in(&path, 0, &data.lines, |c| {
                check.see(c.sequence);
                Ok(())
            })?;
            let (first, last) = (check.found.map(|f| f.0), check.found.map(|f| f.1));
            let records = check.records;
            let partial_bytes = data.partial(consumed);
            out.push(CdrFileInfo {
                damage: check.finish(&path, partial_bytes),
                path,
                shard: name.shard(),
                open: matches!(name, CdrName::Part { .. }),
                first,
                last,
                records,
                bytes: data.bytes,
                partial_bytes,
            });
        }
    }
    Ok(out)
}

/// Writes a table of [`list`] to `out` (state `open`, `closed`, or
/// `DAMAGED` for a closed file with a [`Damage`]).
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
            match (f.open, &f.damage) {
                (true, _) => "open",
                (false, None) => "closed",
                (false, Some(_)) => "DAMAGED",
            },
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

/// What [`print()`] printed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Printed {
    /// Records printed.
    pub records: u64,
    /// The closed files that do not hold what their names promise (their
    /// whole records were printed all the same).
    pub damaged: Vec<Damage>,
}

/// Prints every record of `path` (a CDR file or a directory, see the
/// module documentation) in `format`; CSV starts with [`CSV_HEADER`].
/// Closed files are checked against their names (see [`Damage`]).
pub fn print(path: &Path, format: Format, out: &mut impl Write) -> Result<Printed> {
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
    let mut printed = Printed::default();
    let mut line = String::new();
    for f in files {
        let (_, damage) = read_file_checked(&f, |c| {
            printed.records += 1;
            emit(&c, format, out, &mut line)
        })?;
        printed.damaged.extend(damage);
    }
    out.flush().map_err(out_err)?;
    Ok(printed)
}

/// Converts CDRs (a file or a directory) to CSV: [`print()`] with
/// [`Format::Csv`].
pub fn to_csv(path: &Path, out: &mut impl Write) -> Result<Printed> {
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
