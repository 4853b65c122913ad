//! The shard's compactor thread: a copy of the ledger kept current from
//! memory, so that a snapshot never reads the journal back from the disk.
//!
//! The commit job hands it every batch's effect section once the batch is
//! written (in [`Durability::Sync`](super::Durability::Sync) once it is
//! durable), in journal order, and the start of every journal generation.
//! It applies the effects to its own state (the caller's: the engine the
//! live one was recovered as) and, at each generation boundary, takes the
//! snapshot that covers every journal before it. The loop's
//! [`ShardStore::begin_compaction`] then hands that snapshot to a
//! [`CompactionJob`](super::CompactionJob) to write, once the CDR writer
//! made those journals' CDRs durable, exactly as a snapshot built from the
//! files would be; without a compactor, or after it failed, compactions
//! read the closed journals as before.
//!
//! The queue is bounded ([`QUEUE_BATCHES`]): a compactor behind the
//! journal holds the commit job back rather than growing memory. While
//! commits keep coming it takes its queue in bursts ([`super::bursts`])
//! instead of being woken by each one.

use super::bursts;
use super::pool::BufferPool;
use super::ShardStore;
use crate::error::{Error, Result};
use crate::journal::decode_effects;
use crate::record::StringCache;
use gyro_charging::{Effect, Snapshot};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Batches the compactor may be behind the journal before a commit job
/// waits for it.
const QUEUE_BATCHES: usize = 1024;

/// What the commit job tells the compactor, in journal order.
pub(super) enum Feed {
    /// A batch's effect section (`n` effects), written to the journal;
    /// `next_cdr` and `next_answer` are one past the last CDR and answer
    /// sequence numbers the journal holds after it (what the effects do
    /// not carry).
    Effects {
        bytes: Vec<u8>,
        n: u32,
        next_cdr: u64,
        next_answer: u64,
    },
    /// Journal generation `generation` started: every effect before this
    /// message is in a journal below it.
    Rotated { generation: u64 },
}

/// A snapshot the compactor took at a generation boundary.
#[derive(Debug)]
pub(super) struct Captured {
    /// The generation it covers the journals below of.
    pub(super) generation: u64,
    pub(super) snapshot: Snapshot,
    /// Effects applied since the previous boundary.
    pub(super) effects: u64,
}

/// State shared by the commit job, the compactor and the loop side.
#[derive(Default)]
pub(super) struct Shared {
    /// The latest boundary's snapshot, until the loop takes it.
    captured: Mutex<Option<Captured>>,
    /// Why the compactor stopped following the journal (its state can no
    /// longer be trusted; compactions read the files instead).
    failed: Mutex<Option<String>>,
    /// Buffers of effect sections, between the commit job and the
    /// compactor.
    pub(super) pool: BufferPool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn fail(&self, why: String) {
        lock(&self.failed).get_or_insert(why);
        *lock(&self.captured) = None;
    }
}

/// The commit job's end of the compactor's queue.
pub(super) struct FeedTx {
    pub(super) tx: SyncSender<Feed>,
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for FeedTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FeedTx")
    }
}

impl FeedTx {
    /// Sends `feed`, waiting while the queue is full. A compactor gone
    /// (only after a panic there) is recorded as failed.
    pub(super) fn send(&self, feed: Feed) {
        if self.tx.send(feed).is_err() {
            self.shared.fail("the compactor thread stopped".into());
        }
    }
}

/// The loop side's handle of the compactor thread: stops and joins it
/// when dropped (after the commit job's end of the queue is dropped).
pub(super) struct Compactor {
    pub(super) shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Compactor")
    }
}

impl Compactor {
    /// Takes the snapshot captured at generation `generation`'s boundary,
    /// if the compactor has reached it (and not a later one).
    pub(super) fn take(&self, generation: u64) -> Option<Captured> {
        let mut slot = lock(&self.shared.captured);
        match &*slot {
            Some(c) if c.generation == generation => slot.take(),
            _ => None,
        }
    }

    /// Why the compactor stopped following the journal, if it did.
    pub(super) fn failure(&self) -> Option<String> {
        lock(&self.shared.failed).clone()
    }

    /// Joins the thread; its queue's sender must be gone.
    pub(super) fn join(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts the compactor thread of shard `shard` with `state` and
/// `next_answer` (the durable state as recovered, nothing pending).
fn spawn<T: Send + 'static>(
    shard: usize,
    mut state: T,
    (mut next_cdr, mut next_answer): (u64, u64),
    mut apply: impl FnMut(&mut T, &Effect) -> std::result::Result<(), gyro_charging::Error>
        + Send
        + 'static,
    snapshot: impl Fn(&T) -> Snapshot + Send + 'static,
) -> Result<(Compactor, FeedTx)> {
    let (tx, rx) = sync_channel::<Feed>(QUEUE_BATCHES);
    let shared = Arc::new(Shared::default());
    let theirs = shared.clone();
    let thread = std::thread::Builder::new()
        .name(format!("gyro-compact-{shard}"))
        .spawn(move || {
            let shared = theirs;
            let mut effects = 0u64;
            let mut broken = false;
            let mut strings = StringCache::default();
            let mut handle = |feed: Feed| match feed {
                Feed::Effects {
                    bytes,
                    n,
                    next_cdr: cdr,
                    next_answer: answer,
                } => {
                    if !broken {
                        let r = decode_effects(&bytes, n, Some(&mut strings), |e| {
                            effects += 1;
                            apply(&mut state, &e).map_err(|e| Error::Encode {
                                what: "effect (compactor)",
                                reason: e.to_string(),
                            })
                        });
                        let why = match r {
                            Ok(Ok(())) => None,
                            Ok(Err(e)) => Some(e.to_string()),
                            Err((at, e)) => Some(format!("effect at byte {at}: {e}")),
                        };
                        if let Some(why) = why {
                            broken = true;
                            shared.fail(why);
                        }
                    }
                    next_cdr = next_cdr.max(cdr);
                    next_answer = next_answer.max(answer);
                    shared.pool.give_back(bytes);
                }
                Feed::Rotated { generation } => {
                    if !broken {
                        let mut s = snapshot(&state);
                        s.next_cdr_sequence = s.next_cdr_sequence.max(next_cdr);
                        s.next_answer_seq = s.next_answer_seq.max(next_answer);
                        *lock(&shared.captured) = Some(Captured {
                            generation,
                            snapshot: s,
                            effects: std::mem::take(&mut effects),
                        });
                    }
                }
            };
            bursts::serve(
                &rx,
                |_| true,
                |feed| {
                    handle(feed);
                    true
                },
            );
        })
        .map_err(|e| Error::Io {
            op: "start the compactor thread",
            path: Default::default(),
            source: e,
        })?;
    Ok((
        Compactor {
            shared: shared.clone(),
            thread: Some(thread),
        },
        FeedTx { tx, shared },
    ))
}

impl ShardStore {
    /// Keeps a copy of the ledger current from memory for snapshots (see
    /// the `compactor` module): `state` is the durable state as recovered
    /// (what the engine is right after [`ShardStore::open`] and its
    /// replay, before any new record is appended), `apply` applies one
    /// effect to it and `snapshot` derives a snapshot from it. Compactions
    /// then write the snapshot it took at the closed journals' boundary
    /// instead of reading the journals back. Call it once, before the
    /// first append; `Err(Busy)` otherwise.
    pub fn start_compactor<T: Send + 'static>(
        &mut self,
        state: T,
        apply: impl FnMut(&mut T, &Effect) -> std::result::Result<(), gyro_charging::Error>
            + Send
            + 'static,
        snapshot: impl Fn(&T) -> Snapshot + Send + 'static,
    ) -> Result<()> {
        if self.compactor.is_some()
            || self.pending.n_effects > 0
            || self.inflight.as_ref().is_some_and(|b| b.n_effects > 0)
            || self.effects_committed > 0
        {
            return Err(Error::Busy(
                "a compactor starts before the first append, once",
            ));
        }
        let next_answer = self
            .answer_index
            .last()
            .map_or(0, |s| s.first + s.count as u64);
        let next = (self.next_cdr, next_answer);
        let (compactor, feed) = spawn(self.shard, state, next, apply, snapshot)?;
        super::disk::lock(&self.disk).feed = Some(feed);
        self.compactor = Some(compactor);
        self.compactor_from = self.generation;
        Ok(())
    }

    /// Why the compactor stopped following the journal, if it did (then
    /// compactions read the closed journals from the disk).
    pub fn compactor_failure(&self) -> Option<String> {
        self.compactor.as_ref().and_then(Compactor::failure)
    }

    /// Stops and joins the compactor thread (when the store is dropped).
    pub(super) fn stop_compactor(&mut self) {
        if let Some(c) = self.compactor.take() {
            super::disk::lock(&self.disk).feed = None;
            c.join();
        }
    }
}
