//! File names of CDR files and ledger files, and the few file system
//! helpers (directory fsync, atomic replace) the store needs.

use crate::error::{io_err, Result};
use gyro_charging::Timestamp;
use std::fs::File;
use std::path::Path;

/// Digits of a sequence number in a file name: names of one shard sort in
/// sequence order as plain strings for the first 10^16 records.
pub const SEQ_DIGITS: usize = 16;

/// Suffix of a closed JSON Lines CDR file.
pub const FINAL_SUFFIX: &str = ".jsonl";

/// How CDR files are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CdrFormat {
    /// One JSON object per line (`.jsonl`). The default.
    #[default]
    JsonLines,
    /// One CSV record per line (`.csv`), every column of
    /// [`gyro_charging::cdr::CSV_HEADER`] in its order (empty where a value
    /// is absent), without a header line.
    Csv,
}

impl CdrFormat {
    /// Suffix of a closed file.
    pub fn suffix(self) -> &'static str {
        match self {
            CdrFormat::JsonLines => FINAL_SUFFIX,
            CdrFormat::Csv => ".csv",
        }
    }

    /// The format of the CDR file at `path`, by its name.
    pub fn of_path(path: &Path) -> CdrFormat {
        CdrFormat::of_name(&path.file_name().unwrap_or_default().to_string_lossy())
    }

    /// The format of a CDR file, by its name.
    pub fn of_name(name: &str) -> CdrFormat {
        let name = name.strip_suffix(".part").unwrap_or(name);
        let name = name.strip_suffix(ZSTD_SUFFIX).unwrap_or(name);
        if name.ends_with(".csv") {
            CdrFormat::Csv
        } else {
            CdrFormat::JsonLines
        }
    }
}

/// What is appended to the name of a zstd-compressed CDR file (before
/// `.part` while it is written): `.jsonl.zst`, `.csv.zst.part`.
pub const ZSTD_SUFFIX: &str = ".zst";

/// Whether CDR files are compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CdrCompression {
    /// Plain lines (`.jsonl`, `.csv`). The default.
    #[default]
    None,
    /// A zstd stream (`.jsonl.zst`, `.csv.zst`) of independent frames, each
    /// holding whole lines: `zstd -d` gives the lines of
    /// [`CdrCompression::None`].
    Zstd {
        /// The zstd compression level (1 to 19; 1 is the fastest).
        level: i32,
    },
}

impl CdrCompression {
    /// The compression of a CDR file, by its name (`level` is 0 for a
    /// compressed one: the level is not in the name).
    pub fn of_name(name: &str) -> CdrCompression {
        let name = name.strip_suffix(".part").unwrap_or(name);
        if name.ends_with(ZSTD_SUFFIX) {
            CdrCompression::Zstd { level: 0 }
        } else {
            CdrCompression::None
        }
    }

    /// The compression of the CDR file at `path`, by its name.
    pub fn of_path(path: &Path) -> CdrCompression {
        CdrCompression::of_name(&path.file_name().unwrap_or_default().to_string_lossy())
    }

    /// Whether files are compressed (any level).
    pub fn is_zstd(self) -> bool {
        matches!(self, CdrCompression::Zstd { .. })
    }

    fn suffix(self) -> &'static str {
        if self.is_zstd() {
            ZSTD_SUFFIX
        } else {
            ""
        }
    }
}

/// The name of a closed CDR file:
/// `cdr-s<shard>-<first>-<last>-<YYYYMMDDTHHMMSSZ>.jsonl`, sequence
/// numbers zero-padded to [`SEQ_DIGITS`], the time (UTC) when it was
/// closed.
pub fn final_name(shard: usize, first: u64, last: u64, closed: Timestamp) -> String {
    final_name_of(
        shard,
        first,
        last,
        closed,
        CdrFormat::JsonLines,
        CdrCompression::None,
    )
}

/// [`final_name`] for a file of the given format and compression
/// (`.jsonl.zst`, `.csv.zst` when compressed).
pub fn final_name_of(
    shard: usize,
    first: u64,
    last: u64,
    closed: Timestamp,
    format: CdrFormat,
    compression: CdrCompression,
) -> String {
    format!(
        "cdr-s{shard}-{first:0w$}-{last:0w$}-{}{}{}",
        utc_compact(closed),
        format.suffix(),
        compression.suffix(),
        w = SEQ_DIGITS
    )
}

/// The name of the CDR file being written, whose first record has sequence
/// number `first`: `cdr-s<shard>-<first>.jsonl.part`.
pub fn part_name(shard: usize, first: u64) -> String {
    part_name_of(shard, first, CdrFormat::JsonLines, CdrCompression::None)
}

/// [`part_name`] for a file of the given format and compression
/// (`.jsonl.zst.part`, `.csv.zst.part` when compressed).
pub fn part_name_of(
    shard: usize,
    first: u64,
    format: CdrFormat,
    compression: CdrCompression,
) -> String {
    format!(
        "cdr-s{shard}-{first:0w$}{}{}.part",
        format.suffix(),
        compression.suffix(),
        w = SEQ_DIGITS
    )
}

/// What a CDR file name says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CdrName {
    /// A closed file: shard, first and last sequence numbers.
    Final {
        /// Shard index.
        shard: usize,
        /// First sequence number.
        first: u64,
        /// Last sequence number.
        last: u64,
    },
    /// A file being written: shard and first sequence number.
    Part {
        /// Shard index.
        shard: usize,
        /// First sequence number.
        first: u64,
    },
}

impl CdrName {
    /// Parses a file name (not a path). `None` for anything else.
    pub fn parse(name: &str) -> Option<CdrName> {
        let rest = name.strip_prefix("cdr-s")?;
        let kind = |s: &str| {
            let s = s.strip_suffix(ZSTD_SUFFIX).unwrap_or(s);
            s.strip_suffix(FINAL_SUFFIX)
                .or_else(|| s.strip_suffix(".csv"))
                .map(str::to_owned)
        };
        if let Some(stem) = rest.strip_suffix(".part").and_then(kind) {
            let (shard, first) = stem.split_once('-')?;
            return Some(CdrName::Part {
                shard: digits(shard)?,
                first: seq(first)?,
            });
        }
        let stem = kind(rest)?;
        let mut it = stem.split('-');
        let shard = digits(it.next()?)?;
        let first = seq(it.next()?)?;
        let last = seq(it.next()?)?;
        let time = it.next()?;
        if it.next().is_some() || !is_utc_compact(time) || last < first {
            return None;
        }
        Some(CdrName::Final { shard, first, last })
    }

    /// The first sequence number.
    pub fn first(&self) -> u64 {
        match *self {
            CdrName::Final { first, .. } | CdrName::Part { first, .. } => first,
        }
    }

    /// The shard.
    pub fn shard(&self) -> usize {
        match *self {
            CdrName::Final { shard, .. } | CdrName::Part { shard, .. } => shard,
        }
    }
}

fn digits<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn seq(s: &str) -> Option<u64> {
    if s.len() < SEQ_DIGITS {
        return None;
    }
    digits(s)
}

fn is_utc_compact(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 16
        && b[8] == b'T'
        && b[15] == b'Z'
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[9..15].iter().all(u8::is_ascii_digit)
}

/// `YYYYMMDDTHHMMSSZ` for a timestamp (UTC).
pub fn utc_compact(t: Timestamp) -> String {
    const FORMAT: &[time::format_description::FormatItem<'static>] =
        time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    let secs = i64::try_from(t.as_secs()).unwrap_or(i64::MAX);
    time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|d| d.format(FORMAT).ok())
        .unwrap_or_else(|| "99991231T235959Z".to_owned())
}

/// Flushes a directory's entries (created, renamed, removed files) to disk.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    let f = File::open(dir).map_err(io_err("open directory", dir))?;
    f.sync_all().map_err(io_err("fsync directory", dir))
}

/// Creates a directory and its parents, and makes the new entries durable.
pub(crate) fn create_dir_durable(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut missing = Vec::new();
    let mut p = Some(dir);
    while let Some(d) = p {
        if d.as_os_str().is_empty() || d.is_dir() {
            break;
        }
        missing.push(d);
        p = d.parent();
    }
    std::fs::create_dir_all(dir).map_err(io_err("create directory", dir))?;
    for d in missing.iter().rev() {
        if let Some(parent) = d.parent() {
            if !parent.as_os_str().is_empty() {
                sync_dir(parent)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sort() {
        let t = Timestamp::from_secs(1_795_309_323); // 2026-11-22T01:02:03Z
        assert_eq!(utc_compact(t), "20261122T010203Z");
        let a = final_name(3, 1, 1000, t);
        assert_eq!(
            a,
            "cdr-s3-0000000000000001-0000000000001000-20261122T010203Z.jsonl"
        );
        assert_eq!(
            CdrName::parse(&a),
            Some(CdrName::Final {
                shard: 3,
                first: 1,
                last: 1000
            })
        );
        let b = final_name(3, 1001, 99_999, Timestamp::from_secs(0));
        assert!(a < b);
        let p = part_name(3, 100_000);
        assert_eq!(
            CdrName::parse(&p),
            Some(CdrName::Part {
                shard: 3,
                first: 100_000
            })
        );
        assert!(b < p);
        for bad in [
            "cdr-s3-1-2-20261122T010203Z.jsonl",
            "cdr-s3-0000000000000002-0000000000000001-20261122T010203Z.jsonl",
            "cdr-sx-0000000000000001.jsonl.part",
            "cdr-s3-0000000000000001-0000000000001000-2026112T010203Z.jsonl",
            "other.jsonl",
        ] {
            assert_eq!(CdrName::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn compressed_names_parse_and_say_their_kind() {
        let t = Timestamp::from_secs(1_795_309_323);
        let z = CdrCompression::Zstd { level: 1 };
        let a = final_name_of(3, 1, 1000, t, CdrFormat::JsonLines, z);
        assert_eq!(
            a,
            "cdr-s3-0000000000000001-0000000000001000-20261122T010203Z.jsonl.zst"
        );
        let b = final_name_of(3, 1001, 1001, t, CdrFormat::Csv, z);
        assert!(b.ends_with("Z.csv.zst"), "{b}");
        let p = part_name_of(3, 1002, CdrFormat::JsonLines, z);
        assert_eq!(p, "cdr-s3-0000000000001002.jsonl.zst.part");
        let q = part_name_of(3, 1002, CdrFormat::Csv, z);
        assert_eq!(q, "cdr-s3-0000000000001002.csv.zst.part");
        for (name, format, zstd) in [
            (&a, CdrFormat::JsonLines, true),
            (&b, CdrFormat::Csv, true),
            (&p, CdrFormat::JsonLines, true),
            (&q, CdrFormat::Csv, true),
        ] {
            assert!(CdrName::parse(name).is_some(), "{name}");
            assert_eq!(CdrFormat::of_name(name), format, "{name}");
            assert_eq!(CdrCompression::of_name(name).is_zstd(), zstd, "{name}");
        }
        assert_eq!(
            CdrName::parse(&p),
            Some(CdrName::Part {
                shard: 3,
                first: 1002
            })
        );
        assert!(!CdrCompression::of_name(&part_name(3, 1)).is_zstd());
        for bad in [
            "cdr-s3-0000000000001002.zst.part",
            "cdr-s3-0000000000001002.jsonl.zst.zst.part",
            "cdr-s3-0000000000000001-0000000000001000-20261122T010203Z.zst",
        ] {
            assert_eq!(CdrName::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc_compact(Timestamp::from_secs(0)), "19700101T000000Z");
        assert_eq!(
            utc_compact(Timestamp::from_secs(951_782_400)),
            "20000229T000000Z"
        );
        assert_eq!(
            utc_compact(Timestamp::from_secs(4_102_444_799)),
            "20991231T235959Z"
        );
    }
}
