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

use crate::app::{AppFactory, ShardApp};
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

/// One worker: its index, the shared state and its own shard.
pub(crate) struct Worker<F: AppFactory> {
    pub index: usize,
    pub shared: Arc<Shared<F>>,
    pub shard: RefCell<F::Shard>,
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
    let worker = Rc::new(Worker {
        index,
        shard: RefCell::new(shared.factory.shard(index, count)),
        shared: shared.clone(),
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
                    let _ = tx.send(Outgoing {
                        bytes: out.split().freeze(),
                        answers: *count,
                    });
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
            let _ = tx.send(Outgoing {
                bytes: out.split().freeze(),
                answers: count,
            });
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
    }
}
