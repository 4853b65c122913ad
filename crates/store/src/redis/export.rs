//! CDR export: a slot's stream to CDR files, acknowledged once fsynced.
//!
//! One node exports a stream at a time: the holder of the stream's lease
//! (`gyro_export_lease`, renewed by every export; another node takes over
//! once it lapses). An export reads the entries after the cursor, writes
//! them as JSON lines to `cdr-r<slot>-<first>-<last>.jsonl.part`, fsyncs
//! it, renames it to `cdr-r<slot>-<first>-<last>.jsonl` and fsyncs the
//! directory, and only then acknowledges the range (`gyro_export_ack`),
//! which moves the cursor and trims the stream. So:
//!
//! * a CDR leaves Redis only once it is in a durable file;
//! * within a slot, sequence numbers are gap-free and the ranges of
//!   consecutive files contiguous (`first` of one is `last + 1` of the one
//!   before), whoever exported them;
//! * a node that dies between its rename and its acknowledgement leaves a
//!   range that the next exporter writes again, under the same name and
//!   with the same content (the entries are immutable): a billing system
//!   that collects from several nodes keeps one file per name. The same
//!   node exporting again finds its file and only acknowledges it.
//!
//! The pick-up contract is the embedded store's: a billing system may take
//! any `*.jsonl` file (never a `.part`); gyro never touches a closed file.

use super::client::{int, text};
use super::RedisLedger;
use crate::error::{io_err as io, Error, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A CDR file an export closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportedFile {
    /// The slot whose stream it holds.
    pub slot: u16,
    /// Its path.
    pub path: PathBuf,
    /// Sequence number of its first record.
    pub first: u64,
    /// Sequence number of its last record.
    pub last: u64,
    /// Records in it.
    pub records: usize,
    /// The stream entry of its last record.
    pub last_entry: String,
}

/// What an export of one stream did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Export {
    /// Another node holds the stream's lease.
    NotHolder,
    /// Nothing new in the stream.
    Empty,
    /// A file was closed (and, from [`RedisLedger::export_slot`], its
    /// range acknowledged).
    Written(ExportedFile),
    /// A file was closed (or found, from an earlier attempt) but the lease
    /// lapsed before the acknowledgement: the next holder writes the range
    /// again under the same name.
    Unacknowledged(ExportedFile),
}

/// The name of the file of a slot's records `first..=last`.
pub fn file_name(slot: u16, first: u64, last: u64) -> String {
    format!("cdr-r{slot:05}-{first:016}-{last:016}.jsonl")
}

/// Writes `lines` to `final_path` by way of a `.part` file: write, fsync,
/// rename, directory fsync. A file already there (an earlier attempt) is
/// kept as it is.
fn write_file(dir: &Path, final_path: &Path, lines: &[u8]) -> Result<()> {
    if final_path.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    let part = final_path.with_extension("jsonl.part");
    let mut f = std::fs::File::create(&part).map_err(io("create", &part))?;
    f.write_all(lines).map_err(io("write", &part))?;
    f.sync_all().map_err(io("fsync", &part))?;
    drop(f);
    std::fs::rename(&part, final_path).map_err(io("rename", &part))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync", dir))
}

impl RedisLedger {
    /// Exports up to `max` new CDRs of the stream of `slot` into a file in
    /// `dir` when this node holds (or can take) the stream's lease, which
    /// lasts `lease` from now (export more often than that):
    /// [`RedisLedger::write_export`], then
    /// [`RedisLedger::acknowledge_export`].
    pub async fn export_slot(
        &self,
        slot: u16,
        dir: &Path,
        max: usize,
        lease: Duration,
    ) -> Result<Export> {
        match self.write_export(slot, dir, max, lease).await? {
            Export::Written(file) => {
                if self.acknowledge_export(&file).await? {
                    Ok(Export::Written(file))
                } else {
                    Ok(Export::Unacknowledged(file))
                }
            }
            other => Ok(other),
        }
    }

    /// The first half of an export: takes or renews the lease, reads up to
    /// `max` CDRs after the cursor and closes them in a file (fsynced,
    /// renamed, directory fsynced), without acknowledging it: the file is
    /// [`Export::Written`] but still in the stream until
    /// [`RedisLedger::acknowledge_export`].
    pub async fn write_export(
        &self,
        slot: u16,
        dir: &Path,
        max: usize,
        lease: Duration,
    ) -> Result<Export> {
        let keys = self.keys();
        let node = self.options().node_id.clone();
        let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut c = redis::cmd("FCALL");
        c.arg("gyro_export_lease")
            .arg(4)
            .arg(keys.exporter(slot))
            .arg(keys.exported(slot))
            .arg(keys.cdr_stream(slot))
            .arg(keys.exporting(slot))
            .arg(&node)
            .arg(lease_ms);
        let v = self.call(c, slot, "gyro_export_lease").await?;
        let bad = || Error::Redis {
            op: "gyro_export_lease",
            reason: format!("unexpected answer {v:?}"),
        };
        let redis::Value::Array(parts) = &v else {
            return Err(bad());
        };
        if parts.first().and_then(int) != Some(1) {
            return Ok(Export::NotHolder);
        }
        let done = parts
            .get(1)
            .and_then(int)
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(bad)?;
        let after = parts.get(2).and_then(text).filter(|id| !id.is_empty());
        let pinned = parts
            .get(3)
            .and_then(int)
            .and_then(|n| u64::try_from(n).ok())
            .filter(|&n| n > done);
        // A range pinned by an earlier attempt (this node's or a dead
        // one's) is written again as it was; otherwise the next range is
        // pinned before its file is written.
        let count = match pinned {
            Some(last) => usize::try_from(last - done).unwrap_or(usize::MAX),
            None => max,
        };
        let mut entries = self
            .read_stream(slot, after.as_deref(), Some(count))
            .await?;
        let Some(last) = entries.last() else {
            return Ok(Export::Empty);
        };
        if pinned.is_none() {
            let mut c = redis::cmd("FCALL");
            c.arg("gyro_export_pin")
                .arg(4)
                .arg(keys.exporter(slot))
                .arg(keys.exported(slot))
                .arg(keys.cdr_stream(slot))
                .arg(keys.exporting(slot))
                .arg(&node)
                .arg(last.cdr.sequence)
                .arg(&last.id);
            let v = self.call(c, slot, "gyro_export_pin").await?;
            let redis::Value::Array(p) = &v else {
                return Err(Error::Redis {
                    op: "gyro_export_pin",
                    reason: format!("unexpected answer {v:?}"),
                });
            };
            if p.first().and_then(int) != Some(1) {
                return Ok(Export::NotHolder);
            }
            // Another attempt's pin (a race with a node that just lost
            // the lease): its range, not ours.
            if let Some(pin) = p.get(1).and_then(int).and_then(|n| u64::try_from(n).ok()) {
                entries.retain(|e| e.cdr.sequence <= pin);
            }
        }
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            return Ok(Export::Empty);
        };
        if let Some(pin) = pinned {
            if last.cdr.sequence != pin {
                return Err(Error::Redis {
                    op: "export",
                    reason: format!(
                        "the stream of slot {slot} ends at sequence {} before the pinned {pin}",
                        last.cdr.sequence
                    ),
                });
            }
        }
        let (first_seq, last_seq) = (first.cdr.sequence, last.cdr.sequence);
        if first_seq != done + 1 {
            return Err(Error::Redis {
                op: "export",
                reason: format!(
                    "the stream of slot {slot} continues at sequence {first_seq}, not {}",
                    done + 1
                ),
            });
        }
        let mut lines = Vec::with_capacity(entries.len() * 400);
        for (i, e) in entries.iter().enumerate() {
            if e.cdr.sequence != first_seq + i as u64 {
                return Err(Error::Redis {
                    op: "export",
                    reason: format!("gap in the stream of slot {slot} at {}", e.cdr.sequence),
                });
            }
            e.cdr
                .write_json_line(&mut lines)
                .map_err(|err| Error::Encode {
                    what: "CDR",
                    reason: err.to_string(),
                })?;
        }
        let file = ExportedFile {
            slot,
            path: dir.join(file_name(slot, first_seq, last_seq)),
            first: first_seq,
            last: last_seq,
            records: entries.len(),
            last_entry: last.id.clone(),
        };
        let (d, p) = (dir.to_path_buf(), file.path.clone());
        tokio::task::spawn_blocking(move || write_file(&d, &p, &lines))
            .await
            .map_err(|_| Error::Busy("the CDR file writer did not finish"))??;
        Ok(Export::Written(file))
    }

    /// The second half of an export: records that `file` is durable, which
    /// moves the stream's cursor past it and trims it from the stream.
    /// False when this node no longer holds the lease (the next holder
    /// writes the range again, under the same name).
    pub async fn acknowledge_export(&self, file: &ExportedFile) -> Result<bool> {
        let keys = self.keys();
        let slot = file.slot;
        let mut c = redis::cmd("FCALL");
        c.arg("gyro_export_ack")
            .arg(4)
            .arg(keys.exporter(slot))
            .arg(keys.exported(slot))
            .arg(keys.cdr_stream(slot))
            .arg(keys.exporting(slot))
            .arg(&self.options().node_id)
            .arg(file.last)
            .arg(&file.last_entry);
        let v = self.call(c, slot, "gyro_export_ack").await?;
        match &v {
            redis::Value::Array(a) => Ok(a.first().and_then(int) == Some(1)),
            _ => Err(Error::Redis {
                op: "gyro_export_ack",
                reason: format!("unexpected answer {v:?}"),
            }),
        }
    }
}

/// What [`RedisLedger::export_all`] did.
#[derive(Debug, Default)]
pub struct ExportReport {
    /// Files closed and acknowledged.
    pub files: Vec<ExportedFile>,
    /// Streams with CDRs that another node holds.
    pub not_held: u64,
    /// Files closed whose acknowledgement failed (lease lapsed): written
    /// again by the next holder under the same name.
    pub unacknowledged: Vec<ExportedFile>,
    /// Errors, per stream (retried by the next call).
    pub errors: Vec<Error>,
}

impl RedisLedger {
    /// Exports every slot stream of the namespace that holds CDRs and
    /// whose lease this node holds or can take, up to `max` records a file
    /// (the non-empty streams are found with one pipeline of `XLEN` per
    /// master). Several nodes calling it share the streams by lease: the
    /// first to come takes a stream and keeps it while it calls again
    /// within `lease`.
    pub async fn export_all(&self, dir: &Path, max: usize, lease: Duration) -> ExportReport {
        let mut report = ExportReport::default();
        if let Err(e) = self.refresh_shards().await {
            report.errors.push(e);
            return report;
        }
        let slots = match self.nonempty_streams().await {
            Ok(s) => s,
            Err(e) => {
                report.errors.push(e);
                return report;
            }
        };
        for slot in slots {
            loop {
                match self.export_slot(slot, dir, max, lease).await {
                    Ok(Export::Written(f)) => report.files.push(f),
                    Ok(Export::Unacknowledged(f)) => {
                        report.unacknowledged.push(f);
                        break;
                    }
                    Ok(Export::NotHolder) => {
                        report.not_held += 1;
                        break;
                    }
                    Ok(Export::Empty) => break,
                    Err(e) => {
                        report.errors.push(e);
                        break;
                    }
                }
            }
        }
        report
    }
}
