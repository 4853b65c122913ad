//! One event loop per worker thread: a current-thread tokio runtime that
//! accepts connections, serves them, handles requests other loops hand
//! over, ticks its shard and runs its group commits.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use gyro_diameter::app::{Application, Shard};
use gyro_diameter::Message;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Notify};
use tracing::{debug, warn};

use crate::commit::{self, GroupCommit, Outgoing};
use crate::directory::Pinner;
use crate::metrics::WorkerStats;
use crate::worker::{Job, Shared, Worker};

/// Runs worker `index` on the current thread until shutdown completes.
/// `ready` is waited on once this worker's sessions are in the directory,
/// so no loop accepts a connection before every session can be found.
pub(crate) fn run<F: Application>(
    index: usize,
    shared: Arc<Shared<F>>,
    listeners: Vec<std::net::TcpListener>,
    inbox: mpsc::UnboundedReceiver<Vec<Job>>,
    shutdown: watch::Receiver<bool>,
    ready: Arc<std::sync::Barrier>,
) {
    let started = (|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let delay = Duration::from_micros(shared.config.storage.commit_delay_us);
        Ok::<_, std::io::Error>((rt, GroupCommit::new(index, delay)?))
    })();
    let count = shared.inboxes.len();
    let mut shard = shared.factory.shard(index, count);
    let (mut open, mut lingering) = (Vec::new(), Vec::new());
    if shared.routes() {
        shard.sessions(&mut open, &mut lingering);
    }
    let mut pinner = Pinner::new(index, shared.factory.session_linger_ms());
    for key in open {
        shared.directory.pin(key, pinner.next(index));
    }
    let now = shared.unix_ms();
    for key in lingering {
        let pin = pinner.next(index);
        shared.directory.pin(key, pin);
        pinner.release_later(key, pin, now);
    }
    ready.wait();
    let (rt, commit) = match started {
        Ok(s) => s,
        Err(e) => {
            warn!(worker = index, error = %e, "cannot start the event loop");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    let worker = Rc::new(Worker {
        index,
        shard: RefCell::new(shard),
        shared: shared.clone(),
        commit,
        pinner: RefCell::new(pinner),
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
        let control_task = tokio::task::spawn_local(crate::control::serve(worker.clone()));
        let w = worker.clone();
        let commit_task =
            tokio::task::spawn_local(async move { commit::run(&w.commit, &w.shard).await });
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
        control_task.abort();
        inbox_task.abort();
        // Let a group commit in progress finish, then make a last one here
        // for whatever the final ticks changed.
        let until = Instant::now() + Duration::from_secs(5);
        while !worker.commit.is_idle() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        commit_task.abort();
        let last = worker.shard.borrow_mut().flush();
        if let gyro_diameter::app::Flush::Sync(job) | gyro_diameter::app::Flush::Write(job) = last {
            let r = job();
            worker.shard.borrow_mut().synced(&r);
        }
        debug!(worker = index, "worker stopped");
    });
}

async fn accept_loop<F: Application>(
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

/// Handles requests handed over by other event loops, batch by batch, and
/// queues each connection's answers in one piece per batch.
async fn inbox_loop<F: Application>(
    worker: Rc<Worker<F>>,
    mut inbox: mpsc::UnboundedReceiver<Vec<Job>>,
) {
    let stats = worker.stats();
    let mut out = BytesMut::with_capacity(16 * 1024);
    while let Some(batch) = inbox.recv().await {
        let now = worker.shared.unix_ms();
        let n = batch.len() as u64;
        let mut shard = worker.shard.borrow_mut();
        let mut pending: Option<(mpsc::UnboundedSender<Outgoing>, usize)> = None;
        for job in batch {
            if let Some((tx, count)) = &pending {
                if !tx.same_channel(&job.reply) {
                    worker.commit.release_after_commit(
                        tx,
                        Outgoing {
                            bytes: out.split().freeze(),
                            answers: *count,
                        },
                    );
                    pending = None;
                }
            }
            // Validated and routed by the reader: only the header is read
            // here, the AVPs are walked once by the application.
            if let Ok(msg) = Message::parse(&job.frame) {
                shard.handle(&msg, now, &mut out);
            }
            match &mut pending {
                Some((_, count)) => *count += 1,
                None => pending = Some((job.reply, 1)),
            }
        }
        if let Some((tx, count)) = pending {
            worker.commit.release_after_commit(
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

/// Ticks the shard, releases the pins of sessions it ended and of
/// sessions that have lingered long enough.
async fn tick_loop<F: Application>(worker: Rc<Worker<F>>) {
    let every = Duration::from_millis(worker.shared.factory.tick_interval_ms().max(1));
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ended = Vec::new();
    let directory = &worker.shared.directory;
    loop {
        interval.tick().await;
        let now = worker.shared.unix_ms();
        worker.shard.borrow_mut().tick(now, &mut ended);
        if !worker.shared.routes() {
            ended.clear();
        }
        let mut pinner = worker.pinner.borrow_mut();
        for key in ended.drain(..) {
            if let Some(pin) = directory.lookup(key) {
                pinner.release_later(key, pin, now);
            }
        }
        pinner.release_due(directory, now);
        drop(pinner);
        worker.commit.wake();
    }
}
