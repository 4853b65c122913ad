//! Worker threads: one current-thread event loop each, owning one shard.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use gyro_diameter::dict::Dictionary;
use gyro_diameter::peer::PeerConfig;
use gyro_diameter::validate::Options;
use gyro_diameter::Message;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Notify};
use tracing::{debug, warn};

use crate::app::{AppFactory, Flush, ShardApp, SyncJob};
use crate::config::Config;
use crate::metrics::WorkerStats;

/// A request handed from the worker that read it to the worker that owns
/// its shard.
pub(crate) struct Job {
    /// The whole request, sharing the reader's receive buffer.
    pub frame: Bytes,
    /// Where its answer goes: the writer of the connection it came from.
    pub reply: mpsc::UnboundedSender<Outgoing>,
}

/// Encoded messages for one connection's writer.
pub(crate) struct Outgoing {
    /// One or more whole messages.
    pub bytes: Bytes,
    /// How many of them answer requests (for the in-flight limit).
    pub answers: usize,
}

/// What all workers share, read-only.
pub(crate) struct Shared<F: AppFactory> {
    pub factory: F,
    pub config: Config,
    pub peer: PeerConfig,
    pub dict: &'static Dictionary,
    pub validation: Options,
    pub stats: Arc<[WorkerStats]>,
    pub inboxes: Vec<mpsc::UnboundedSender<Vec<Job>>>,
    pub clock: Instant,
}

impl<F: AppFactory> Shared<F> {
    /// Monotonic milliseconds since the server started.
    pub fn now_ms(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    /// Unix time in milliseconds.
    pub fn unix_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }

    fn open_connections(&self) -> u64 {
        self.stats
            .iter()
            .map(|s| s.open_connections.load(Relaxed))
            .sum()
    }
}

/// A sync job for the worker's sync thread and where its result goes.
type SyncRequest = (SyncJob, tokio::sync::oneshot::Sender<std::io::Result<()>>);

/// One worker: its index, the shared state and its own shard.
pub(crate) struct Worker<F: AppFactory> {
    pub index: usize,
    pub shared: Arc<Shared<F>>,
    pub shard: RefCell<F::Shard>,
    /// Output waiting for the next group commit, in order.
    pending: RefCell<Vec<(mpsc::UnboundedSender<Outgoing>, Outgoing)>>,
    commit_wake: Notify,
    /// True while a group commit is between flush and release.
    committing: Cell<bool>,
    syncer: std::sync::mpsc::Sender<SyncRequest>,
}

impl<F: AppFactory> Worker<F> {
    /// Queues output for a connection; it leaves once everything this
    /// worker's shard did up to now is durable.
    pub fn release_after_commit(&self, tx: &mpsc::UnboundedSender<Outgoing>, out: Outgoing) {
        self.pending.borrow_mut().push((tx.clone(), out));
        self.commit_wake.notify_one();
    }

    /// Asks for a group commit even without output (after a tick).
    fn wake_committer(&self) {
        self.commit_wake.notify_one();
    }
}

/// Runs worker `index` on the current thread until shutdown completes.
pub(crate) fn run<F: AppFactory>(
    index: usize,
    shared: Arc<Shared<F>>,
    listeners: Vec<std::net::TcpListener>,
    inbox: mpsc::UnboundedReceiver<Vec<Job>>,
    shutdown: watch::Receiver<bool>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            warn!(worker = index, error = %e, "cannot start the event loop");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    let count = shared.inboxes.len();
    let (syncer, jobs) = std::sync::mpsc::channel::<SyncRequest>();
    let sync_thread = std::thread::Builder::new()
        .name(format!("gyro-sync-{index}"))
        .spawn(move || {
            for (job, done) in jobs {
                let _ = done.send(job());
            }
        });
    if let Err(e) = sync_thread {
        warn!(worker = index, error = %e, "cannot start the sync thread");
        return;
    }
    let worker = Rc::new(Worker {
        index,
        shard: RefCell::new(shared.factory.shard(index, count)),
        shared: shared.clone(),
        pending: RefCell::new(Vec::new()),
        commit_wake: Notify::new(),
        committing: Cell::new(false),
        syncer,
    });
    local.block_on(&rt, async move {
        let conns = Rc::new((Cell::new(0usize), Notify::new()));
        let mut accepts = Vec::new();
        for l in listeners {
            let addr = l.local_addr().ok();
            match TcpListener::from_std(l) {
                Ok(l) => accepts.push(tokio::task::spawn_local(accept_loop(
                    worker.clone(),
                    l,
                    addr,
                    shutdown.clone(),
                    conns.clone(),
                ))),
                Err(e) => warn!(worker = index, error = %e, "cannot use listener"),
            }
        }
        let inbox_task = tokio::task::spawn_local(inbox_loop(worker.clone(), inbox));
        let tick_task = tokio::task::spawn_local(tick_loop(worker.clone()));
        let commit_task = tokio::task::spawn_local(commit_loop(worker.clone()));
        for a in accepts {
            let _ = a.await;
        }
        // Shutdown: wait for this worker's connections to finish (they send
        // DPR and drain what is in flight), then for every worker's, since
        // their requests may still come to this shard.
        let grace = Duration::from_secs_f64(shared.config.peers.handshake_timeout_secs + 1.0);
        let until = Instant::now() + grace;
        while conns.0.get() > 0 && Instant::now() < until {
            let _ = tokio::time::timeout(Duration::from_millis(50), conns.1.notified()).await;
        }
        while shared.open_connections() > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tick_task.abort();
        inbox_task.abort();
        // Let a group commit in progress finish, then make a last one here
        // for whatever the final ticks changed.
        let until = Instant::now() + Duration::from_secs(5);
        while (worker.committing.get() || !worker.pending.borrow().is_empty())
            && Instant::now() < until
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        commit_task.abort();
        let last = worker.shard.borrow_mut().flush();
        if let Flush::Sync(job) = last {
            let r = job();
            worker.shard.borrow_mut().synced(&r);
        }
        debug!(worker = index, "worker stopped");
    });
}

async fn accept_loop<F: AppFactory>(
    worker: Rc<Worker<F>>,
    listener: TcpListener,
    addr: Option<SocketAddr>,
    mut shutdown: watch::Receiver<bool>,
    conns: Rc<(Cell<usize>, Notify)>,
) {
    loop {
        if *shutdown.borrow() {
            break;
        }
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => {
                    let w = worker.clone();
                    let sd = shutdown.clone();
                    let c = conns.clone();
                    c.0.set(c.0.get() + 1);
                    tokio::task::spawn_local(async move {
                        crate::conn::serve(w, stream, sd).await;
                        c.0.set(c.0.get() - 1);
                        c.1.notify_one();
                    });
                }
                Err(e) => {
                    warn!(?addr, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.changed() => {}
        }
    }
}

/// Processes requests handed over by other workers, batch by batch, and
/// sends each connection its answers in one piece per batch.
async fn inbox_loop<F: AppFactory>(
    worker: Rc<Worker<F>>,
    mut inbox: mpsc::UnboundedReceiver<Vec<Job>>,
) {
    let stats = &worker.shared.stats[worker.index];
    let mut out = BytesMut::with_capacity(16 * 1024);
    while let Some(batch) = inbox.recv().await {
        let now = worker.shared.unix_ms();
        let n = batch.len() as u64;
        let mut shard = worker.shard.borrow_mut();
        let mut pending: Option<(mpsc::UnboundedSender<Outgoing>, usize)> = None;
        for job in batch {
            if let Some((tx, count)) = &pending {
                if !tx.same_channel(&job.reply) {
                    worker.release_after_commit(
                        tx,
                        Outgoing {
                            bytes: out.split().freeze(),
                            answers: *count,
                        },
                    );
                    pending = None;
                }
            }
            // The reader validated the frame; parsing again is a header check.
            if let Ok(msg) = Message::parse(&job.frame) {
                shard.handle(&msg, now, &mut out);
            }
            match &mut pending {
                Some((_, count)) => *count += 1,
                None => pending = Some((job.reply, 1)),
            }
        }
        if let Some((tx, count)) = pending {
            worker.release_after_commit(
                &tx,
                Outgoing {
                    bytes: out.split().freeze(),
                    answers: count,
                },
            );
        }
        WorkerStats::bump(&stats.requests, n);
        WorkerStats::bump(&stats.from_other_workers, n);
    }
}

async fn tick_loop<F: AppFactory>(worker: Rc<Worker<F>>) {
    let every = Duration::from_millis(worker.shared.factory.tick_interval_ms().max(1));
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let now = worker.shared.unix_ms();
        worker.shard.borrow_mut().tick(now);
        worker.wake_committer();
    }
}

/// Group commit: once per event-loop turn with output pending, let the
/// shard write what the turn changed, make it durable on the sync thread
/// (the loop goes on handling requests meanwhile), then release the
/// output. A batch that cannot be made durable is answered 3004.
async fn commit_loop<F: AppFactory>(worker: Rc<Worker<F>>) {
    loop {
        worker.commit_wake.notified().await;
        // Let the tasks that are ready now add to this batch.
        tokio::task::yield_now().await;
        let batch = std::mem::take(&mut *worker.pending.borrow_mut());
        worker.committing.set(true);
        let flush = worker.shard.borrow_mut().flush();
        let durable = match flush {
            Flush::Done => true,
            Flush::Failed => false,
            Flush::Sync(job) => {
                let (done, result) = tokio::sync::oneshot::channel();
                let r = if worker.syncer.send((job, done)).is_err() {
                    Err(std::io::Error::other("sync thread gone"))
                } else {
                    result
                        .await
                        .unwrap_or_else(|_| Err(std::io::Error::other("sync thread gone")))
                };
                worker.shard.borrow_mut().synced(&r);
                r.is_ok()
            }
        };
        for (tx, out) in batch {
            let out = if durable {
                out
            } else {
                let p = &worker.shared.peer;
                Outgoing {
                    bytes: too_busy(&out.bytes, &p.origin_host, &p.origin_realm),
                    answers: out.answers,
                }
            };
            let _ = tx.send(out);
        }
        worker.committing.set(false);
    }
}

/// Rewrites the application answers in `bytes` as DIAMETER_TOO_BUSY (3004)
/// answers to the same requests; peer messages (CEA, DWA, DPA, DWR, DPR)
/// pass unchanged.
fn too_busy(bytes: &[u8], origin_host: &str, origin_realm: &str) -> Bytes {
    use gyro_diameter::codes::{avp, cmd, result};
    use gyro_diameter::header::flags;
    let mut out = BytesMut::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Ok(Some(n)) = gyro_diameter::header::frame_length(rest, usize::MAX) {
        let Some(one) = rest.get(..n) else { break };
        rest = &rest[n..];
        let Ok(m) = Message::parse(one) else { continue };
        let peer = matches!(
            m.command_code(),
            cmd::CAPABILITIES_EXCHANGE | cmd::DEVICE_WATCHDOG | cmd::DISCONNECT_PEER
        );
        if peer || m.is_request() {
            out.extend_from_slice(one);
            continue;
        }
        let h = m.header();
        let mut e = gyro_diameter::Encoder::new(
            &mut out,
            (h.flags & flags::PROXIABLE) | flags::ERROR,
            h.command_code,
            h.application_id,
            h.hop_by_hop,
            h.end_to_end,
        );
        if let Some(sid) = m.find(avp::SESSION_ID) {
            e.raw_avp(&sid);
        }
        e.str(avp::ORIGIN_HOST, origin_host)
            .str(avp::ORIGIN_REALM, origin_realm)
            .u32(avp::RESULT_CODE, result::TOO_BUSY)
            .str(
                avp::ERROR_MESSAGE,
                "cannot make the change durable; try again or elsewhere",
            );
        let _ = e.finish();
    }
    out.freeze()
}
