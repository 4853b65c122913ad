//! [`ShardStore`]: the loop side of one shard's store (encoding records
//! into the pending batch, bookkeeping), the commit side ([`CommitJob`],
//! run on any thread: journal `write` and `fdatasync`, what a batch's
//! answers wait for) and the shard's CDR writer thread (CDR lines, CDR
//! file rotation, asynchronous syncs: what they do not wait for).
//!
//! One module per part of the work:
//!
//! * `options`: [`StoreOptions`] and [`Durability`];
//! * `recovery`: [`ShardStore::open`] and what it hands back
//!   ([`Recovered`]);
//! * `batch`: the pending batch the loop encodes records into;
//! * `commit`: [`CommitJob`] and the calls that start and finish it;
//! * `disk`: the journal a commit job writes;
//! * `cdr_thread`: the CDR writer thread;
//! * `answers`: answer retention and [`ShardStore::read_answer`];
//! * `compaction`: snapshots and the removal of what they cover;
//! * `compactor`: the thread that keeps a copy of the ledger current from
//!   the committed batches, for snapshots that read nothing back;
//! * `files`: file names and the shard directories;
//! * `pool`: the byte buffers the commit job hands to those threads.

mod answers;
mod batch;
mod bursts;
mod cdr_thread;
mod commit;
mod compaction;
mod compactor;
mod disk;
pub(crate) mod files;
mod options;
mod pool;
mod recovery;

pub use answers::{u32_prefixed_len, AnswerRecordLen};
pub use cdr_thread::CdrWriterHold;
pub use commit::{CommitJob, CommitStats, SyncHandle};
pub use compaction::{CompactionDone, CompactionJob, SnapshotWriter};
pub use files::{cdr_dir, ledger_dir};
pub use options::{Durability, SnapshotSource, StoreOptions};
pub use recovery::{Recovered, RecoveryReport};

use crate::error::{Error, Result};
use answers::AnswerSpan;
use batch::Batch;
use cdr_thread::CdrThread;
use compactor::Compactor;
use disk::Disk;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The durable state of one shard: a journal of ledger effects, CDRs and
/// answer records with group commit, snapshots, and the shard's CDR
/// files. See the crate documentation for how a worker drives it.
pub struct ShardStore {
    shard: usize,
    ledger_dir: PathBuf,
    options: StoreOptions,
    disk: Arc<Mutex<Disk>>,
    /// The CDR writer thread (stopped and joined when the store is
    /// dropped, after it wrote what is queued).
    cdr: CdrThread,
    /// Sequence number of the first CDR not yet in a committed batch.
    next_cdr: u64,
    pending: Batch,
    inflight: Option<Arc<Batch>>,
    inflight_rotate: bool,
    spare: Batch,
    records_since_snapshot: u64,
    bytes_since_snapshot: u64,
    failed: Option<String>,
    /// Current journal generation.
    generation: u64,
    /// Generation of the latest snapshot (covers journals before it).
    snapshot_generation: Option<u64>,
    rotate_requested: bool,
    compacting: bool,
    answer_horizon: u64,
    answer_len: AnswerRecordLen,
    answer_index: Vec<AnswerSpan>,
    journal_path: PathBuf,
    cdr_path: PathBuf,
    /// The compactor thread, once started.
    compactor: Option<Compactor>,
    /// The generation current when the compactor started, or of the last
    /// snapshot taken from it: later boundaries' snapshots are its.
    compactor_from: u64,
    /// Effects made durable since the store was opened.
    effects_committed: u64,
}

impl Drop for ShardStore {
    fn drop(&mut self) {
        self.stop_compactor();
    }
}

impl std::fmt::Debug for ShardStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardStore")
            .field("shard", &self.shard)
            .field("ledger_dir", &self.ledger_dir)
            .field("generation", &self.generation)
            .field("next_cdr", &self.next_cdr)
            .finish_non_exhaustive()
    }
}

impl ShardStore {
    /// The shard index.
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// Sequence number the next appended CDR must carry.
    pub fn next_cdr_sequence(&self) -> u64 {
        self.next_cdr
            + self.inflight.as_ref().map_or(0, |b| b.n_cdrs as u64)
            + self.pending.n_cdrs as u64
    }

    /// The settings.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// The journal being appended to (as of the last finished commit).
    pub fn journal_path(&self) -> &Path {
        &self.journal_path
    }

    /// The open CDR file (as of the last finished commit).
    pub fn cdr_path(&self) -> &Path {
        &self.cdr_path
    }

    /// Whether appended records wait for a commit.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    fn check_failed(&mut self) -> Result<()> {
        if self.failed.is_none()
            && self
                .cdr
                .shared
                .failed
                .load(std::sync::atomic::Ordering::Acquire)
        {
            self.failed = self.cdr.shared.report().failed.clone();
        }
        match &self.failed {
            Some(reason) => Err(Error::Failed {
                path: self.ledger_dir.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }
}

#[allow(dead_code)]
fn assert_send() {
    fn is_send<T: Send>() {}
    is_send::<CommitJob>();
    is_send::<CompactionJob>();
    is_send::<SnapshotWriter>();
}
