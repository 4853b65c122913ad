//! gyro's embedded store: a durable journal of ledger effects and CDRs per
//! shard with group commit, snapshots that bound start-up time, and the
//! shard's CDR files for a billing system to pick up.
//!
//! The API is synchronous and runtime-free: a worker thread owns one
//! [`ShardStore`] for its shard, as it owns the shard's
//! [`gyro_charging::Engine`]. Time is passed in (`now`), as to the engine.
//!
//! # How a worker uses it
//!
//! ```no_run
//! # use gyro_store::*;
//! # use gyro_charging::*;
//! # fn demo(config: ChargingConfig, data_dir: &std::path::Path, now: Timestamp,
//! #         requests: Vec<CcRequest>) -> Result<()> {
//! let (shard, shards) = (0, 4);
//! // Start: restore the latest snapshot (or build from the configuration
//! // on the very first start) and replay the journal.
//! let (mut store, mut engine, report) =
//!     ShardStore::open_engine(data_dir, shard, StoreOptions::default(), now, |snap| match snap {
//!         Some(s) => Engine::restore(config.catalog().unwrap(), config.engine.clone(), s),
//!         None => config.build_shard(shard, shards).unwrap(),
//!     })?;
//! if report.snapshot_generation.is_none() {
//!     // First start: persist the configured accounts.
//!     store.snapshot(&engine.snapshot(), now)?;
//! }
//! let mut out = Output::default();
//! let mut answer = CcAnswer::default();
//! // One loop iteration: handle every request that is ready...
//! for req in &requests {
//!     engine.handle(req, now, &mut answer, &mut out);
//!     store.append_output(&out)?; // encode only
//!     out.clear();
//!     // ...keep the answer aside, do not send it yet
//! }
//! // ...then one write and one fdatasync for all of them,
//! let stats = store.commit(now)?;
//! // and only now send the answers of the batch.
//! if store.should_snapshot() {
//!     store.snapshot(&engine.snapshot(), now)?;
//! }
//! # let _ = stats; Ok(()) }
//! ```
//!
//! Also call [`ShardStore::tick`] about once a second (asynchronous sync,
//! CDR files closed by age while idle), append the output of
//! `Engine::tick`, `top_up` and `set_status` like any other, and call
//! [`ShardStore::close_cdr_file`] on a clean shutdown.
//!
//! If [`ShardStore::commit`] fails, the batch is not durable: do not send
//! its answers (answer DIAMETER_UNABLE_TO_COMPLY or TOO_BUSY, or drop them
//! so clients retry), stop taking requests for the shard and retry the
//! commit (a full disk, [`ErrorKind::DiskFull`], can be freed); the
//! engine in memory is ahead of the disk until it succeeds. After
//! [`Error::Failed`] (an fsync failed: what the kernel kept is unknown)
//! reopen the store and rebuild the engine from it.
//!
//! # Files
//!
//! ```text
//! <data_dir>/ledger/shard-<i>/snapshot-<generation>.snap   latest snapshot
//! <data_dir>/ledger/shard-<i>/journal-<generation>.log     effects and CDRs since
//! <data_dir>/cdr/shard-<i>/cdr-s<i>-<first>.jsonl.part     CDR file being written
//! <data_dir>/cdr/shard-<i>/cdr-s<i>-<first>-<last>-<YYYYMMDDTHHMMSSZ>.jsonl
//! ```
//!
//! The journal is the source of truth. Each commit appends one frame
//! (length, CRC-32, the batch's effects and CDRs as JSON lines) with one
//! `write` and one `fdatasync`. The CDR lines are then appended to the open
//! CDR file without a sync: if they are lost in a crash, opening the store
//! copies them back from the journal; lines the journal never made durable
//! (asynchronous mode) are cut from the CDR file and their sequence numbers
//! are given again, so numbers stay unique and gap-free per shard. A
//! snapshot starts a new journal generation only after the CDR file was
//! fsynced, so no CDR ever lives only in a journal that is deleted.
//!
//! # Pick-up contract for billing systems
//!
//! * A closed file is named `cdr-s<shard>-<first>-<last>-<closed>.jsonl`:
//!   shard index, the sequence numbers of its first and last records
//!   (16 digits, zero-padded) and the UTC time it was closed. Within a
//!   shard, names sort in sequence order, and the ranges of consecutive
//!   files are contiguous (`first` of one is `last + 1` of the one before).
//! * A closed file is complete and fsynced before it gets its name (by an
//!   atomic rename, followed by a directory fsync), and is never written,
//!   renamed or removed by gyro afterwards. A billing system may read,
//!   move or delete any file matching `cdr-s*-*-*-*.jsonl` at any time.
//! * Files ending in `.jsonl.part` are being written: do not take them.
//!   They are closed when they reach [`StoreOptions::cdr_max_bytes`] or
//!   [`StoreOptions::cdr_max_age`], and on a clean shutdown.
//! * Each line is one JSON object (a [`gyro_charging::Cdr`]); `sequence`
//!   increases by one per record of the shard, across restarts. A gap in
//!   the ranges a billing system has taken means a file is missing.
//! * `gyro cdr` ([`cdr_tool`]) lists, prints, follows and converts them.
//!
//! # Why a framed log and not an embedded database
//!
//! The engine keeps every account and session of its shard in memory and
//! changes it only through [`gyro_charging::Effect`]s; what must be durable
//! is the sequence of those effects, and a checkpoint to bound replay. That
//! is a write-ahead log plus snapshots: the thing an embedded database
//! builds for itself underneath its trees. Storing the same state as keyed
//! records in an LSM or B-tree store would add a second write (its own
//! log, then its tables), read amplification we never use (nothing is read
//! back except at start) and a page cache for data that already lives in
//! the engine. The log here is small (one file per shard, no shared state
//! between workers, so no contention), and its failure cases are few and
//! tested: a torn last frame is cut on open, anything else is reported as
//! [`Error::Corrupt`] with the file and offset.
//!
//! Measured on one small shared virtual machine (2 cores, virtio disk;
//! absolute times drift, compare within one run):
//!
//! * `examples/redb_compare.rs`: 3,000 durable commits of a 20 KB batch:
//!   redb (one write transaction per batch, durable commit) 420-460 µs per
//!   commit and a 129 MiB file; this journal 260-560 µs per commit with
//!   the JSON encoding included and a 57 MiB file.
//! * `benches/commit.rs`: a group commit of 64 requests (304 effects,
//!   64 of them the answers kept for duplicate detection, 96 CDRs; 108 KB
//!   of journal, 55 KB of CDR lines): encoding about 90 µs,
//!   write and `fdatasync` about 0.5 ms, i.e. about 8 µs per request.
//! * `examples/startup.rs`: 1,000,000 accounts (a 168 MiB snapshot) and
//!   10,000,000 journaled effects with 3.6 million CDRs (3.25 GiB of
//!   journal): a restart that replays all of it takes 12.7 s; after a
//!   snapshot, 1.3 s. With the default snapshot policy (every 2 million
//!   records or 512 MiB of journal) a shard restarts in about 3 s.

mod cdr_file;
pub mod cdr_tool;
mod error;
mod journal;
pub mod names;
mod shard;
mod snapshot;

pub use cdr_file::CdrRepair;
pub use error::{Error, ErrorKind, Result};
pub use shard::{
    cdr_dir, ledger_dir, CommitStats, Durability, Recovered, RecoveryReport, ShardStore,
    SnapshotWriter, StoreOptions, SyncHandle,
};
