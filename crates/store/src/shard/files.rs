//! Names and listing of a shard's ledger files, and the shard directories.

use crate::error::{io_err, Result};
use std::path::{Path, PathBuf};

pub(super) fn journal_name(g: u64) -> String {
    format!("journal-{g:016}.log")
}

pub(crate) fn snapshot_name(g: u64) -> String {
    format!("snapshot-{g:016}.snap")
}

pub(crate) struct LedgerFiles {
    pub(crate) journals: Vec<(u64, PathBuf)>,
    pub(crate) snapshots: Vec<(u64, PathBuf)>,
    pub(crate) temporaries: Vec<PathBuf>,
}

pub(crate) fn list_ledger(dir: &Path) -> Result<LedgerFiles> {
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
