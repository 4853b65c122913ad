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
use crate::fd_limit::{self, Spare};
use crate::metrics::{StatsSnapshot, WorkerStats};
use crate::overload::{self, Refusal};
use crate::tls::TlsContext;
use crate::worker::{Job, Shared, Worker};
use gyro_diameter::peer::CertificateIdentity;

/// Runs worker `index` on the current thread until shutdown completes.
/// `ready` is waited on once this worker's sessions are in the directory,
/// so no loop accepts a connection before every session can be found.
pub(crate) fn run<F: Application>(
    index: usize,
    shared: Arc<Shared<F>>,
    listeners: Vec<(std::net::TcpListener, Option<Arc<TlsContext>>)>,
    inbox: mpsc::UnboundedReceiver<Vec<Job>>,
    shutdown: watch::Receiver<bool>,
    ready: Arc<std::sync::Barrier>,
) {
    let started = (|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let delay = Duration::from_micros(shared.config.storage.commit_delay_us);
        let telemetry = shared.telemetry.clone();
        let naps = shared.naps.clone();
        Ok::<_, std::io::Error>((rt, GroupCommit::new(index, delay, telemetry, naps)?))
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
        lag_ms: Cell::new(0),
        peers: Default::default(),
        shedding_until: Cell::new(0),
    });
    local.block_on(&rt, async move {
        let conns = Rc::new((Cell::new(0usize), Notify::new()));
        let mut accepts = Vec::new();
        for (l, tls) in listeners {
            let addr = l.local_addr().ok();
            match TcpListener::from_std(l) {
                Ok(l) => accepts.push(tokio::task::spawn_local(accept_loop(
                    worker.clone(),
                    l,
                    addr,
                    tls,
                    shutdown.clone(),
                    conns.clone(),
                ))),
                Err(e) => warn!(worker = index, error = %e, "cannot use listener"),
            }
        }
        let inbox_task = tokio::task::spawn_local(inbox_loop(worker.clone(), inbox));
        let tick_task = tokio::task::spawn_local(tick_loop(worker.clone()));
        let control_task = tokio::task::spawn_local(crate::control::serve(worker.clone()));
        let lag_task = tokio::task::spawn_local(lag_probe(worker.clone()));
        let peers_task = tokio::task::spawn_local(crate::peers::serve(worker.clone()));
        let w = worker.clone();
        let commit_task =
            tokio::task::spawn_local(async move { commit::run(&w.commit, &w.shard).await });
        for a in accepts {
            let _ = a.await;
        }
        // Shutdown: wait for this worker's connections to finish (they send
        // DPR and drain what is in flight), then for every worker's, since
        // their requests may still come to this shard.
        let grace = shared.config.peers.handshake_timeout_secs + Duration::from_secs(1);
        let until = Instant::now() + grace;
        while conns.0.get() > 0 && Instant::now() < until {
            let _ = tokio::time::timeout(Duration::from_millis(50), conns.1.notified()).await;
        }
        while shared.open_connections() > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tick_task.abort();
        control_task.abort();
        lag_task.abort();
        peers_task.abort();
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

/// How long accepting pauses after a failed accept: doubled while accepts
/// keep failing, from the first to the second.
const ACCEPT_BACKOFF: (Duration, Duration) =
    (Duration::from_millis(10), Duration::from_millis(250));

/// At most this many waiting connections are refused in one go when out of
/// file descriptors.
const REFUSE_AT_ONCE: usize = 64;

async fn accept_loop<F: Application>(
    worker: Rc<Worker<F>>,
    listener: TcpListener,
    addr: Option<SocketAddr>,
    tls: Option<Arc<TlsContext>>,
    mut shutdown: watch::Receiver<bool>,
    conns: Rc<(Cell<usize>, Notify)>,
) {
    let shared = &worker.shared;
    let stats = worker.stats();
    let mut spare = Spare::new();
    let mut backoff = ACCEPT_BACKOFF.0;
    loop {
        if *shutdown.borrow() {
            break;
        }
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, remote)) => {
                    backoff = ACCEPT_BACKOFF.0;
                    let Some(slot) = shared.limits.accept() else {
                        // Beyond the connection limit: closed at once.
                        drop(stream);
                        WorkerStats::bump(&stats.refused_connections, 1);
                        let w = &shared.warnings.connection_limit;
                        if let Some(count) = w.hit(1, shared.now_ms()) {
                            let limit = shared.config.limits.max_connections;
                            warn!(%remote, limit, count, "{}", w.what());
                        }
                        continue;
                    };
                    let w = worker.clone();
                    let sd = shutdown.clone();
                    let c = conns.clone();
                    let tls = tls.clone();
                    c.0.set(c.0.get() + 1);
                    tokio::task::spawn_local(async move {
                        let _ = stream.set_nodelay(true);
                        let remote = Some(remote);
                        match tls {
                            None => crate::conn::serve(w, stream, remote, None, sd, slot).await,
                            Some(tls) => {
                                if let Some((s, cert)) = tls_accept(&w, &tls, stream, remote).await {
                                    crate::conn::serve(w, s, remote, cert, sd, slot).await
                                }
                            }
                        }
                        c.0.set(c.0.get() - 1);
                        c.1.notify_one();
                    });
                }
                Err(e) if fd_limit::out_of_fds(&e) => {
                    // Give the spare descriptor up for a moment to accept
                    // the connections waiting in the backlog and close
                    // them: their clients learn at once, instead of
                    // waiting for a CEA that cannot come.
                    let mut refused = 0;
                    if spare.release() {
                        while refused < REFUSE_AT_ONCE {
                            match tokio::time::timeout(Duration::ZERO, listener.accept()).await {
                                Ok(Ok((stream, _))) => {
                                    drop(stream);
                                    refused += 1;
                                }
                                _ => break,
                            }
                        }
                        spare.refill();
                    }
                    WorkerStats::bump(&stats.refused_connections, refused as u64);
                    let w = &shared.warnings.out_of_fds;
                    if let Some(count) = w.hit(refused.max(1) as u64, shared.now_ms()) {
                        warn!(?addr, error = %e, count, "{}", w.what());
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF.1);
                }
                Err(e) => {
                    let w = &shared.warnings.accept_failed;
                    if let Some(count) = w.hit(1, shared.now_ms()) {
                        warn!(?addr, error = %e, count, "{}", w.what());
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF.1);
                }
            },
            _ = shutdown.changed() => {}
        }
    }
}

/// The TLS handshake of a connection accepted on a TLS listener (RFC 6733
/// section 13: TLS starts at connect, before the CER), bounded by the
/// handshake timeout. Returns the TLS stream and the identity of the
/// client certificate it verified, if the client presented one; `None`
/// (the connection is dropped) when the handshake fails.
async fn tls_accept<F: Application>(
    worker: &Worker<F>,
    tls: &TlsContext,
    stream: tokio::net::TcpStream,
    remote: Option<SocketAddr>,
) -> Option<(
    tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    Option<CertificateIdentity>,
)> {
    let shared = &worker.shared;
    let limit = shared.config.peers.handshake_timeout_secs;
    let error = match tokio::time::timeout(limit, tls.acceptor().accept(stream)).await {
        Ok(Ok(s)) => {
            let cert = s
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .map(|c| crate::tls::certificate_identity(c));
            debug!(?remote, client_certificate = ?cert.as_ref().map(|c| &c.dns_names), "TLS handshake done");
            return Some((s, cert));
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => "timed out".to_string(),
    };
    let w = &shared.warnings.tls_handshake_failed;
    if let Some(count) = w.hit(1, shared.now_ms()) {
        warn!(?remote, error = %error, count, "{}", w.what());
    }
    None
}

/// Handles requests handed over by other event loops, batch by batch, and
/// queues each connection's answers in one piece per batch.
async fn inbox_loop<F: Application>(
    worker: Rc<Worker<F>>,
    mut inbox: mpsc::UnboundedReceiver<Vec<Job>>,
) {
    let stats = worker.stats();
    let shared = &worker.shared;
    let mut out = BytesMut::with_capacity(16 * 1024);
    while let Some(batch) = inbox.recv().await {
        let now = shared.unix_ms();
        let taken_ns = worker.commit.now_ns();
        let n = batch.len();
        let mut waited = 0;
        let mut shard = worker.shard.borrow_mut();
        let mut pending: Option<(mpsc::UnboundedSender<Outgoing>, usize, usize)> = None;
        for job in batch {
            if let Some((tx, count, reader)) = &pending {
                if !tx.same_channel(&job.reply) {
                    worker.commit.release_read_at(
                        tx,
                        Outgoing {
                            bytes: out.split().freeze(),
                            answers: *count,
                        },
                        taken_ns,
                        *reader,
                    );
                    pending = None;
                }
            }
            // Validated and routed by the reader: only the header is read
            // here, the AVPs are walked once by the application. One that
            // waited too long is refused without touching the shard.
            if let Ok(msg) = Message::parse(&job.frame) {
                if shared
                    .admission
                    .waited_too_long(job.arrived_ms, shared.now_ms())
                {
                    shard.too_busy(&msg, &mut out);
                    waited += 1;
                } else {
                    shard.handle(&msg, now, &mut out);
                }
            }
            match &mut pending {
                Some((_, count, _)) => *count += 1,
                None => pending = Some((job.reply, 1, job.from)),
            }
        }
        if let Some((tx, count, reader)) = pending {
            worker.commit.release_read_at(
                &tx,
                Outgoing {
                    bytes: out.split().freeze(),
                    answers: count,
                },
                taken_ns,
                reader,
            );
        }
        shared.queues[worker.index].sub(n);
        let handled = (n - waited) as u64;
        WorkerStats::bump(&stats.requests, handled);
        WorkerStats::bump(&stats.from_other_workers, handled);
        Refusal::Waited.count(stats, waited as u64);
        WorkerStats::bump(
            &shared.telemetry.workers[worker.index].inbox_waited,
            waited as u64,
        );
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
    let mut too_busy = 0;
    loop {
        interval.tick().await;
        report_overload(&worker.shared, worker.stats(), &mut too_busy);
        let now = worker.shared.unix_ms();
        worker.shard.borrow_mut().tick(now, &mut ended);
        for key in &ended {
            worker.shared.outbound.forget(*key);
        }
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
        worker.prune_peers();
        worker.commit.wake();
    }
}

/// Samples how late this event loop's timers fire (see `overload`).
async fn lag_probe<F: Application>(worker: Rc<Worker<F>>) {
    let shared = &worker.shared;
    loop {
        let due = shared.now_ms() + overload::LAG_PROBE_MS;
        tokio::time::sleep(Duration::from_millis(overload::LAG_PROBE_MS)).await;
        let lag = overload::smoothed_lag(worker.lag_ms.get(), due, shared.now_ms());
        worker.lag_ms.set(lag);
    }
}

/// Counts this worker's DIAMETER_TOO_BUSY answers since the last tick
/// (`seen`: the total then) into the rate-limited WARN line, and logs the
/// other rate-limited lines that are due.
fn report_overload<F: Application>(shared: &Shared<F>, stats: &WorkerStats, seen: &mut u64) {
    let total = stats.snapshot().too_busy();
    let new = total - *seen;
    *seen = total;
    let now = shared.now_ms();
    let w = &shared.warnings.too_busy;
    if let Some(count) = w.hit(new, now) {
        let all = shared
            .stats
            .iter()
            .fold(StatsSnapshot::default(), |a, s| a + s.snapshot());
        warn!(
            count,
            queue_full = all.too_busy_queue_full,
            peer_share = all.too_busy_peer_share,
            waited = all.too_busy_waited,
            max_queued_per_worker = shared.admission.max_queued,
            max_queue_wait_ms = shared.admission.max_wait_ms,
            "{} (since the last report; totals by reason follow)",
            w.what()
        );
    }
    shared.warnings.flush(now);
}
