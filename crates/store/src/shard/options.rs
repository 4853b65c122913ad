//! The settings of a shard's store: [`StoreOptions`], [`Durability`] and
//! [`SnapshotSource`].

use crate::names::{CdrCompression, CdrFormat};
use std::time::Duration;

/// When a commit is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// The [`CommitJob`](super::CommitJob) returns after `fdatasync`: release the answers of
    /// the batch after it. The default.
    Sync,
    /// The [`CommitJob`](super::CommitJob) only writes; a later job (or
    /// [`ShardStore::sync_if_due`](super::ShardStore::sync_if_due)) syncs at most `interval` after the
    /// first unsynced commit. A crash (of the machine, not only of gyro)
    /// loses up to `interval` of answered requests: their debits are
    /// forgotten and their CDR sequence numbers are given again.
    Async {
        /// Longest time a commit stays unsynced.
        interval: Duration,
    },
}

/// What a shard's snapshots are built from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SnapshotSource {
    /// A compactor thread keeps a copy of the ledger current from every
    /// committed batch, in memory
    /// ([`ShardStore::start_compactor`](super::ShardStore::start_compactor)),
    /// and each snapshot is that copy as the closed journals leave it: no
    /// journal is read back, and snapshots keep their schedule at full
    /// load. It costs a second copy of the ledger's memory (accounts and
    /// open sessions) for as long as the shard runs, and the CPU to apply
    /// every effect twice. The default.
    #[default]
    Memory,
    /// Each snapshot replays the closed journals from the disk on the
    /// snapshot thread, at idle priority: no second copy of the ledger,
    /// but the journal is read back, and a shard saturated with requests
    /// defers its snapshots (its journal grows) until it has idle time.
    /// For ledgers too large to hold twice.
    Journal,
}

/// Settings of a [`ShardStore`](super::ShardStore).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// When a commit is durable.
    pub durability: Durability,
    /// [`ShardStore::should_snapshot`](super::ShardStore::should_snapshot) says yes after this many journaled
    /// effects and CDRs since the last snapshot...
    pub snapshot_every_records: u64,
    /// ...or after this many journal bytes.
    pub snapshot_every_bytes: u64,
    /// A CDR file is closed once it holds at least this many bytes (it may
    /// exceed it by one commit's records; with compression, compressed
    /// bytes, and by up to one frame).
    pub cdr_max_bytes: u64,
    /// A CDR file is closed this long after its first record was written.
    pub cdr_max_age: Duration,
    /// How CDR files are written.
    pub cdr_format: CdrFormat,
    /// Whether CDR files are compressed (`.jsonl.zst`); with compression
    /// [`StoreOptions::cdr_max_bytes`] counts compressed bytes.
    pub cdr_compression: CdrCompression,
    /// What snapshots are built from. The store only records the choice:
    /// the application starts the compactor
    /// ([`ShardStore::start_compactor`](super::ShardStore::start_compactor))
    /// when it is [`SnapshotSource::Memory`].
    pub snapshot_source: SnapshotSource,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            durability: Durability::Sync,
            snapshot_every_records: 2_000_000,
            snapshot_every_bytes: 512 << 20,
            cdr_max_bytes: 64 << 20,
            cdr_max_age: Duration::from_secs(300),
            cdr_format: CdrFormat::JsonLines,
            cdr_compression: CdrCompression::None,
            snapshot_source: SnapshotSource::Memory,
        }
    }
}
