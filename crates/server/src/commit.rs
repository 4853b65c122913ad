//! Group commit: answers leave only once the batch they belong to is
//! durable.
//!
//! Every answer an event loop produces (local or for another loop's
//! connection) is queued here with the connection it goes to (only
//! base-protocol answers of a connection with nothing unanswered, a CEA or
//! the DWA of an idle peer, go straight to its writer: see `conn.rs`). Once per
//! event-loop turn with something queued, the shard writes what the turn
//! changed ([`Shard::flush`]); the job that makes it durable runs on this
//! event loop's sync thread while the loop goes on handling requests; then
//! the queued output is released. For a batch that could not be made
//! durable the shard itself rewrites each of its answers as "not now,
//! nothing happened" ([`Shard::too_busy`]); base-protocol messages pass
//! unchanged. A shard whose answers depend on its job's outcome
//! ([`Flush::Settle`], a remote ledger) rewrites each of them once the job
//! is done ([`Shard::settle`]).

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use gyro_diameter::app::{Flush, Shard, SyncJob};
use gyro_diameter::codes::cmd;
use gyro_diameter::header::frame_length;
use gyro_diameter::Message;
use tokio::sync::{mpsc, Notify};

use crate::nap::Nap;
use crate::telemetry::Telemetry;

/// Encoded messages for one connection's writer.
pub(crate) struct Outgoing {
    /// One or more whole messages.
    pub bytes: Bytes,
    /// How many of them answer requests (for the in-flight limit).
    pub answers: usize,
}

/// A sync job for the sync thread and where its result goes.
type SyncRequest = (SyncJob, oneshot::Sender<std::io::Result<()>>);

/// Output waiting for a group commit: where it goes, what it is, when
/// the requests it answers were read ([`Telemetry`]'s clock, ns), and the
/// event loop whose connection it goes to.
type Pending = (mpsc::UnboundedSender<Outgoing>, Outgoing, u64, usize);

/// One event loop's group-commit queue.
pub(crate) struct GroupCommit {
    /// Output waiting for the next group commit, in order.
    pending: RefCell<Vec<Pending>>,
    wake: Notify,
    /// Since when a group commit has been between flush and release
    /// (`None` while none is).
    committing_since: Cell<Option<Instant>>,
    /// When the last batch with answers was released, and how long its
    /// oldest answer had been in the server by then (ns).
    last_release: Cell<Option<(Instant, u64)>>,
    /// When the oldest output now pending was queued.
    pending_since: Cell<Option<Instant>>,
    /// Answers now pending.
    pending_answers: Cell<usize>,
    /// Whether the last batch needed a durability job.
    last_synced: Cell<bool>,
    /// Whether the last batch taken was small ([`QUIET_BELOW_ANSWERS`]): a
    /// low rate, where that batch's sync and the next batch's delay are
    /// waited for with the thread asleep (see [`GroupCommit::sync`] and
    /// [`GroupCommit::gather`]).
    quiet: Cell<bool>,
    /// How long a small batch that needs a durability job waits for more.
    delay: Duration,
    /// Whether the last wait for more answers saw fewer join than a
    /// quarter of the batch: the clients are waiting for its answers (closed loop),
    /// so small batches go at once, but one in [`PROBE_EVERY`] waits
    /// again to see whether that still holds.
    fruitless: Cell<bool>,
    /// Small batches gone at once since the last probe.
    skipped: Cell<u32>,
    syncer: std::sync::mpsc::Sender<SyncRequest>,
    /// Replies of control operations waiting for the next group commit.
    replies: RefCell<Vec<crate::control::Reply>>,
    /// Answer latency and answers awaiting commit are counted here.
    telemetry: Arc<Telemetry>,
    worker: usize,
    /// When this event loop last read from a connection (ns): the start
    /// of the latency of the answers that connection's turn queues.
    read_ns: Cell<u64>,
    /// Every event loop's nap: this one's is taken at a low rate, the
    /// others' are cut short when this one releases their connections'
    /// answers.
    naps: Arc<[Nap]>,
}

/// A batch with at least this many answers is committed at once; a smaller
/// one waits up to the configured delay for more (when it needs a sync).
const DELAY_BELOW_ANSWERS: usize = 64;

/// A batch with fewer answers than this marks a low rate (below about 16
/// answers a millisecond at the default delay): the next small batch
/// spends its wait, and its sync, with the event loop's thread asleep.
/// Not up to [`DELAY_BELOW_ANSWERS`]: a batch that is small because
/// several workers share one connection's window (closed loop) gets
/// bigger while its loop serves the requests the others hand over, and
/// asleep it would not (with 2 workers on one connection that cost a
/// fifth of the throughput); at 20,000 requests a second on one worker it
/// would have saved about a third of the CPU per answer.
const QUIET_BELOW_ANSWERS: usize = 16;

/// While waiting for more answers is fruitless, one small batch in this
/// many waits all the same, to notice when requests arrive again.
const PROBE_EVERY: u32 = 8;

impl GroupCommit {
    /// A queue whose durability jobs run on a new thread named
    /// `gyro-sync-<worker>`.
    /// `delay`: how long a small batch that needs an fdatasync waits for
    /// more answers to share it (0: never). `naps`: every event loop's,
    /// indexed by worker.
    pub(crate) fn new(
        worker: usize,
        delay: Duration,
        telemetry: Arc<Telemetry>,
        naps: Arc<[Nap]>,
    ) -> std::io::Result<GroupCommit> {
        let (syncer, jobs) = std::sync::mpsc::channel::<SyncRequest>();
        let loop_naps = naps.clone();
        std::thread::Builder::new()
            .name(format!("gyro-sync-{worker}"))
            .spawn(move || {
                for (job, done) in jobs {
                    let _ = done.send(job());
                    // A loop napping through its sync goes on at once.
                    loop_naps[worker].wake();
                }
            })?;
        Ok(GroupCommit {
            pending: RefCell::new(Vec::new()),
            wake: Notify::new(),
            committing_since: Cell::new(None),
            last_release: Cell::new(None),
            pending_since: Cell::new(None),
            pending_answers: Cell::new(0),
            last_synced: Cell::new(false),
            quiet: Cell::new(false),
            delay,
            fruitless: Cell::new(false),
            skipped: Cell::new(0),
            syncer,
            replies: RefCell::new(Vec::new()),
            telemetry,
            worker,
            read_ns: Cell::new(0),
            naps,
        })
    }

    /// A connection of this event loop has just read: the answers its turn
    /// queues were read now.
    #[inline]
    pub(crate) fn mark_read(&self) {
        self.read_ns.set(self.telemetry.now_ns());
    }

    /// The clock of [`GroupCommit::release_read_at`].
    pub(crate) fn now_ns(&self) -> u64 {
        self.telemetry.now_ns()
    }

    /// Queues output for a connection; it leaves once everything this
    /// event loop's shard did up to now is durable. Its answers answer
    /// requests read at the last [`GroupCommit::mark_read`].
    pub(crate) fn release_after_commit(&self, tx: &mpsc::UnboundedSender<Outgoing>, out: Outgoing) {
        self.release_read_at(tx, out, self.read_ns.get(), self.worker);
    }

    /// [`GroupCommit::release_after_commit`] for answers to requests read
    /// at `read_ns` ([`GroupCommit::now_ns`]) by event loop `reader`, whose
    /// connection `tx` writes to.
    pub(crate) fn release_read_at(
        &self,
        tx: &mpsc::UnboundedSender<Outgoing>,
        out: Outgoing,
        read_ns: u64,
        reader: usize,
    ) {
        if self.pending_since.get().is_none() {
            self.pending_since.set(Some(Instant::now()));
        }
        self.pending_answers
            .set(self.pending_answers.get() + out.answers);
        self.telemetry.workers[self.worker]
            .awaiting_commit
            .fetch_add(out.answers as u64, Relaxed);
        self.pending
            .borrow_mut()
            .push((tx.clone(), out, read_ns, reader));
        self.wake.notify_one();
    }

    /// Group commit with a delay (as databases' `commit_delay`): at a low
    /// rate every request would pay its own fdatasync; a small batch that
    /// needs one waits, from its first answer, up to the delay or until
    /// enough answers have joined. A large batch, or one that needs no
    /// sync, goes at once.
    ///
    /// At a low rate (the last batch was small) the wait puts the event
    /// loop's thread to sleep for the rest of the delay instead of parking
    /// it on the sockets, then reads what arrived meanwhile into this
    /// batch. The answers leave at the same time either way, after the
    /// batch's sync; what changes is that requests arriving during the
    /// delay no longer wake the thread one by one: a thread wake-up costs
    /// far more than handling a request (at 5,000 requests a second on
    /// one connection this took about a quarter off the event loop's CPU
    /// per answer). The sleep is bounded by the delay (2 ms by default)
    /// and happens only while a batch is waiting for its sync anyway;
    /// timers and other connections of the loop wait at most that long.
    /// Answers another event loop releases for this one's connections
    /// wake it at once ([`Nap`]): they are written, then the nap goes on
    /// to the end of the delay.
    ///
    /// A wait in which fewer answers joined than a quarter of the batch
    /// was not worth it: the clients are mostly waiting for these answers
    /// before they send more (a closed loop with a small window), and
    /// every wait would only slow them down. Small batches then go at
    /// once, except one in [`PROBE_EVERY`], which waits to see whether
    /// requests arrive again (at 5,000 requests a second a 2 ms wait
    /// gathers about ten). Closed loop, 4 connections x 16 requests on 2
    /// workers: 24,200-24,600 answers/s with a 1 ms delay and no such
    /// rule, 18,800 with 2 ms, 27,100-27,600 with 2 ms and the rule.
    async fn gather(&self) {
        if self.delay.is_zero() || !self.last_synced.get() {
            return;
        }
        let Some(since) = self.pending_since.get() else {
            return;
        };
        if self.pending_answers.get() >= DELAY_BELOW_ANSWERS {
            return;
        }
        if self.fruitless.get() {
            let skipped = self.skipped.get() + 1;
            if skipped < PROBE_EVERY {
                self.skipped.set(skipped);
                return;
            }
            self.skipped.set(0);
        }
        let before = self.pending_answers.get();
        self.wait_for_more(since + self.delay).await;
        let joined = self.pending_answers.get() - before;
        self.fruitless.set(joined * 4 < before);
    }

    /// Waits until `until` or until [`DELAY_BELOW_ANSWERS`] answers are
    /// pending (see [`GroupCommit::gather`]).
    async fn wait_for_more(&self, until: Instant) {
        if self.quiet.get() {
            while self.pending_answers.get() < DELAY_BELOW_ANSWERS && Instant::now() < until {
                let woken = self.naps[self.worker].sleep_until(until);
                // The sockets and channels are polled before this task
                // runs again: what arrived during the nap is read and
                // joins the batch.
                tokio::task::yield_now().await;
                if !woken {
                    break;
                }
            }
            return;
        }
        while self.pending_answers.get() < DELAY_BELOW_ANSWERS {
            let now = Instant::now();
            if now >= until {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(until - now) => break,
                _ = self.wake.notified() => {}
            }
        }
    }

    /// Calls `reply` once everything this event loop's shard did up to now
    /// is durable (`true`) or could not be made so (`false`).
    pub(crate) fn reply_after_commit(&self, reply: crate::control::Reply) {
        self.pending_since
            .set(self.pending_since.get().or(Some(Instant::now())));
        self.replies.borrow_mut().push(reply);
        self.wake.notify_one();
    }

    /// Asks for a group commit even without output (after a tick).
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// How long the oldest output not released yet has waited (in the
    /// group commit in progress, or queued for the next; zero while there
    /// is none), and, for the last batch released with answers, how long
    /// ago that was and how long its oldest answer had spent in the
    /// server: what tells whether this loop's answers are late
    /// (`overload::Admission::answers_late`).
    pub(crate) fn lateness(&self) -> (Duration, Option<(Duration, Duration)>) {
        let oldest = match (self.committing_since.get(), self.pending_since.get()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let age = oldest.map_or(Duration::ZERO, |since| since.elapsed());
        let last = self
            .last_release
            .get()
            .map(|(at, sojourn_ns)| (at.elapsed(), Duration::from_nanos(sojourn_ns)));
        (age, last)
    }

    /// Whether nothing is queued or being committed.
    pub(crate) fn is_idle(&self) -> bool {
        self.committing_since.get().is_none()
            && self.pending.borrow().is_empty()
            && self.replies.borrow().is_empty()
    }

    /// Runs `job` on the sync thread and waits for its result.
    ///
    /// A small batch (a low rate, [`QUIET_BELOW_ANSWERS`]) waits with the
    /// event loop's thread asleep, up to the commit delay, before it goes
    /// back to the sockets: requests that arrive during the sync are then
    /// read together once it is done, instead of each waking the thread
    /// (at a low rate a thread wake-up costs far more than a request).
    /// A sync that takes longer than the delay is awaited as usual, with
    /// the loop serving its sockets and timers: the loop never waits on
    /// the disk longer than the delay. Work another event loop sends
    /// this one meanwhile ends the nap too ([`Nap`]), and the sync is
    /// then awaited as usual.
    async fn sync(&self, job: SyncJob) -> std::io::Result<()> {
        let gone = || std::io::Error::other("sync thread gone");
        let (done, result) = oneshot::channel();
        if self.syncer.send((job, done)).is_err() {
            return Err(gone());
        }
        if self.quiet.get() && !self.delay.is_zero() {
            let nap = &self.naps[self.worker];
            let until = Instant::now() + self.delay;
            // Wakes from before are handled; the sync thread wakes the
            // nap once the result is there.
            nap.clear();
            match result.try_recv() {
                Ok(r) => return r,
                Err(oneshot::TryRecvError::Disconnected) => return Err(gone()),
                Err(oneshot::TryRecvError::Empty) => {}
            }
            // Woken by the sync thread, the result is there now; woken by
            // another loop (or not at all), it is awaited below, with the
            // loop serving its sockets.
            if nap.sleep_until(until) {
                if let Ok(r) = result.try_recv() {
                    return r;
                }
            }
        }
        result.await.unwrap_or_else(|_| Err(gone()))
    }
}

/// Runs the group commits of one event loop, forever.
pub(crate) async fn run<S: Shard>(commit: &GroupCommit, shard: &RefCell<S>) {
    loop {
        commit.wake.notified().await;
        // Let the tasks that are ready now add to this batch.
        tokio::task::yield_now().await;
        commit.gather().await;
        let batch = std::mem::take(&mut *commit.pending.borrow_mut());
        let replies = std::mem::take(&mut *commit.replies.borrow_mut());
        commit.pending_since.set(None);
        commit
            .quiet
            .set(commit.pending_answers.replace(0) < QUIET_BELOW_ANSWERS);
        commit.committing_since.set(Some(Instant::now()));
        let flush = shard.borrow_mut().flush();
        commit
            .last_synced
            .set(matches!(flush, Flush::Sync(_)) && !batch.is_empty());
        let mut settle = false;
        let durable = match flush {
            Flush::Done => true,
            Flush::Failed => false,
            Flush::Sync(job) | Flush::Write(job) => {
                let r = commit.sync(job).await;
                shard.borrow_mut().synced(&r);
                r.is_ok()
            }
            Flush::Settle(job) => {
                let r = commit.sync(job).await;
                shard.borrow_mut().synced(&r);
                settle = r.is_ok();
                settle
            }
        };
        let telemetry = &commit.telemetry.workers[commit.worker];
        let now_ns = commit.telemetry.now_ns();
        let mut released = 0;
        let mut oldest_ns = now_ns;
        for (tx, out, read_ns, reader) in batch {
            let answers = out.answers as u64;
            if answers > 0 {
                released += answers;
                oldest_ns = oldest_ns.min(read_ns);
                let latency = now_ns.saturating_sub(read_ns);
                telemetry.answer_latency.record_n(latency, answers);
            }
            let out = if settle {
                Outgoing {
                    bytes: rewrite(&out.bytes, |m, o| shard.borrow_mut().settle(m, o)),
                    answers: out.answers,
                }
            } else if durable {
                out
            } else {
                Outgoing {
                    bytes: rewrite(&out.bytes, |m, o| shard.borrow_mut().too_busy(m, o)),
                    answers: out.answers,
                }
            };
            let _ = tx.send(out);
            if reader != commit.worker {
                commit.naps[reader].wake();
            }
        }
        telemetry.awaiting_commit.fetch_sub(released, Relaxed);
        if released > 0 {
            commit
                .last_release
                .set(Some((Instant::now(), now_ns - oldest_ns)));
        }
        replies.into_iter().for_each(|reply| reply(durable));
        commit.committing_since.set(None);
    }
}

/// The application answers in `bytes` as `shard_answer` rewrites them
/// (the shard's "not now" answers, or its settled ones); base-protocol
/// messages (CEA, DWA, DPA, DWR, DPR) pass unchanged.
fn rewrite(bytes: &[u8], mut shard_answer: impl FnMut(&Message<'_>, &mut BytesMut)) -> Bytes {
    let mut out = BytesMut::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Ok(Some(n)) = frame_length(rest, usize::MAX) {
        let Some(one) = rest.get(..n) else { break };
        rest = &rest[n..];
        let Ok(m) = Message::parse(one) else { continue };
        let base = matches!(
            m.command_code(),
            cmd::CAPABILITIES_EXCHANGE | cmd::DEVICE_WATCHDOG | cmd::DISCONNECT_PEER
        );
        if base || m.is_request() {
            out.extend_from_slice(one);
        } else {
            shard_answer(&m, &mut out);
        }
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::overload::QueueDepth;

    fn commit(delay: Duration) -> GroupCommit {
        commit_of(1, delay).0
    }

    /// A single-threaded runtime, as an event loop's.
    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// The group commit of loop 0 of `loops`, and every loop's nap.
    fn commit_of(loops: usize, delay: Duration) -> (GroupCommit, Arc<[Nap]>) {
        let queues: Arc<[QueueDepth]> = (0..loops).map(|_| QueueDepth::default()).collect();
        let telemetry = Arc::new(Telemetry::new(Instant::now(), queues));
        let naps: Arc<[Nap]> = (0..loops).map(|_| Nap::default()).collect();
        let commit = GroupCommit::new(0, delay, telemetry, naps.clone()).unwrap();
        (commit, naps)
    }

    /// Runs `job` as a low-rate batch's sync on a single-threaded loop
    /// that also runs a task ticking every millisecond; returns the sync's
    /// result, how long it took, and the ticks seen meanwhile.
    fn sync_beside_a_ticker(delay: Duration, job: SyncJob) -> (std::io::Result<()>, Duration, u32) {
        let commit = commit(delay);
        commit.quiet.set(true);
        let rt = runtime();
        let local = tokio::task::LocalSet::new();
        let ticks = std::rc::Rc::new(Cell::new(0u32));
        let seen = ticks.clone();
        local.spawn_local(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                seen.set(seen.get() + 1);
            }
        });
        local.block_on(&rt, async {
            // The ticker starts before the sync.
            tokio::time::sleep(Duration::from_millis(5)).await;
            let before = ticks.get();
            let start = Instant::now();
            let r = commit.sync(job).await;
            (r, start.elapsed(), ticks.get() - before)
        })
    }

    #[test]
    fn a_quick_sync_of_a_low_rate_batch_is_waited_for_asleep() {
        let (r, took, ticks) = sync_beside_a_ticker(
            Duration::from_millis(200),
            Box::new(|| {
                std::thread::sleep(Duration::from_millis(20));
                Ok(())
            }),
        );
        assert!(r.is_ok());
        assert!(took >= Duration::from_millis(20), "{took:?}");
        // The thread slept through it: the loop's other task did not run.
        assert_eq!(ticks, 0);
    }

    #[test]
    fn a_sync_longer_than_the_delay_leaves_the_loop_running() {
        let (r, took, ticks) = sync_beside_a_ticker(
            Duration::from_millis(2),
            Box::new(|| {
                std::thread::sleep(Duration::from_millis(300));
                Err(std::io::Error::other("disk gone"))
            }),
        );
        assert_eq!(r.unwrap_err().to_string(), "disk gone");
        assert!(took >= Duration::from_millis(300), "{took:?}");
        // Blocked for the whole sync, the ticker would have seen one tick
        // at most; served, it ticks about every millisecond.
        assert!(
            ticks >= 50,
            "the loop ran {ticks} ticks during a 300 ms sync"
        );
    }

    #[test]
    fn another_loops_answer_for_a_napping_loop_is_written_at_once() {
        let delay = Duration::from_millis(300);
        let (commit, naps) = commit_of(2, delay);
        // A low-rate batch of one answer, waiting out its delay asleep.
        commit.quiet.set(true);
        commit.last_synced.set(true);
        commit.pending_answers.set(1);
        let rt = runtime();
        let local = tokio::task::LocalSet::new();
        let (tx, mut rx) = mpsc::unbounded_channel::<()>();
        let start = Instant::now();
        // This loop's connection writer.
        let written = local.spawn_local(async move {
            rx.recv().await;
            start.elapsed()
        });
        // The other loop releases an answer for that connection 20 ms in.
        let other = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.send(()).unwrap();
            naps[0].wake();
        });
        local.block_on(&rt, async {
            commit.pending_since.set(Some(Instant::now()));
            commit.gather().await;
        });
        other.join().unwrap();
        let written = local.block_on(&rt, written).unwrap();
        // The batch still waited out its delay; the answer did not.
        assert!(start.elapsed() >= delay, "{:?}", start.elapsed());
        assert!(
            written < Duration::from_millis(150),
            "written after {written:?}"
        );
    }

    #[test]
    fn after_a_wait_that_nothing_joined_small_batches_go_at_once_but_one_in_eight() {
        let delay = Duration::from_millis(40);
        let commit = commit(delay);
        commit.last_synced.set(true);
        let rt = runtime();
        // One small batch after another, to which nothing ever joins (a
        // closed loop's whole window): how long each waited.
        let waits: Vec<Duration> = (0..10)
            .map(|_| {
                commit.pending_answers.set(1);
                commit.pending_since.set(Some(Instant::now()));
                let start = Instant::now();
                rt.block_on(commit.gather());
                start.elapsed()
            })
            .collect();
        let waited: Vec<bool> = waits.iter().map(|w| *w >= delay).collect();
        let mut expected = vec![true];
        expected.extend([false; 7]);
        expected.extend([true, false]);
        assert_eq!(waited, expected, "{waits:?}");
    }

    #[test]
    fn a_sync_thread_that_is_gone_is_an_error_not_a_hang() {
        let (r, _, _) = sync_beside_a_ticker(
            Duration::from_millis(2),
            Box::new(|| panic!("the sync thread dies")),
        );
        assert!(r.is_err());
    }
}
