//! One Diameter connection over a socket: the codec's sans-IO
//! [`Connection`] frames, drives the peer and validates; this module reads
//! and writes, routes each validated request to its shard and keeps the
//! in-flight limit.
//!
//! Requests whose shard is local are handled inline; the others are handed
//! (as refcounted `Bytes`, never copied) to the owning worker in one batch
//! per read. Before either, overload control may refuse a request
//! (`overload`): its DIAMETER_TOO_BUSY answer goes straight to the writer,
//! since nothing was changed that would need a commit. A request that has
//! already waited too long (dated by `overload::Arrivals`, which also sees
//! the bytes waiting in the socket) is refused by the connection itself,
//! before validation and routing: a refusal must cost far less than an
//! answer, or refusing would not relieve an overloaded server. Answers
//! from every
//! worker come back on one channel and leave in as few writes as possible,
//! in whatever order they complete (Diameter matches them by Hop-by-Hop
//! Identifier).
//!
//! A connection runs over any [`Transport`]: a plain `TcpStream` (split
//! into its owned halves, as before TLS existed) or a TLS stream (split
//! with `tokio::io::split`); the code is generic over it, so the plain path
//! pays nothing for TLS.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;

use rustc_hash::FxHashMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use gyro_diameter::app::{session_key, Application, SessionStep, Shard};
use gyro_diameter::codes::{avp, result};
use gyro_diameter::connection::{Close, Connection, Event};
use gyro_diameter::peer::{disconnect_cause, CertificateIdentity, CloseReason, State};
use gyro_diameter::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Notify};
use tracing::{debug, info, warn};

use crate::commit::Outgoing;
use crate::conn_limit::{Accepted, PeerSlot};
use crate::metrics::WorkerStats;
use crate::outbound::{Job as OutboundJob, OutboundError, Registration};
use crate::overload::{self, Refusal};
use crate::worker::{Job, Worker};

/// A byte stream a Diameter connection is served over, split into a read
/// half (the connection's loop) and a write half (its writer task).
pub(crate) trait Transport: Sized + 'static {
    /// The read half.
    type Read: AsyncRead + Unpin + 'static;
    /// The write half.
    type Write: AsyncWrite + Unpin + 'static;
    /// Splits the stream.
    fn into_halves(self) -> (Self::Read, Self::Write);
    /// Bytes of the stream waiting in the socket to be read, when the
    /// transport can tell (0 when it cannot).
    fn waiting(read: &Self::Read) -> usize;
    /// The TCP socket's descriptor (see [`reset_on_close`]).
    fn socket(&self) -> std::os::fd::RawFd;
    /// Drops the write half without ending the stream (no FIN): the
    /// socket closes when the read half is gone too.
    fn drop_write(write: Self::Write);
}

/// Makes the close of TCP socket `fd` send a reset (SO_LINGER with a zero
/// time): RFC 6733 section 2.1 closes a stream that cannot be parsed any
/// more "using a RESET call (send a TCP RST bit)", graceful closure being
/// compromised. What was written before still goes out first. Must be
/// called while the connection's halves hold the socket open.
fn reset_on_close(fd: std::os::fd::RawFd) {
    // SAFETY: the caller's halves keep `fd` open for this call.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let _ = socket2::SockRef::from(&fd).set_linger(Some(Duration::ZERO));
}

impl Transport for TcpStream {
    type Read = OwnedReadHalf;
    type Write = OwnedWriteHalf;
    fn into_halves(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        self.into_split()
    }
    fn waiting(read: &OwnedReadHalf) -> usize {
        socket_waiting(read.as_ref())
    }
    fn socket(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(self)
    }
    fn drop_write(write: OwnedWriteHalf) {
        write.forget();
    }
}

/// Bytes waiting in a TCP socket's receive queue (SIOCINQ, alias
/// FIONREAD); 0 when it cannot be asked.
fn socket_waiting(s: &TcpStream) -> usize {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD on a socket descriptor writes one int through the
    // pointer, which points to a live c_int.
    let r = unsafe { libc::ioctl(s.as_raw_fd(), libc::FIONREAD, &mut n) };
    if r == 0 {
        n.max(0) as usize
    } else {
        0
    }
}

/// TLS/TCP: both halves share the TLS session, behind the lock of
/// `tokio::io::split`.
impl Transport for tokio_rustls::server::TlsStream<TcpStream> {
    type Read = tokio::io::ReadHalf<Self>;
    type Write = tokio::io::WriteHalf<Self>;
    fn into_halves(self) -> (Self::Read, Self::Write) {
        tokio::io::split(self)
    }
    /// The socket holds TLS records, not the stream's bytes; the reads
    /// alone date the stream.
    fn waiting(_: &Self::Read) -> usize {
        0
    }
    fn socket(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(self.get_ref().0)
    }
    /// Dropping a half of `tokio::io::split` sends nothing.
    fn drop_write(write: Self::Write) {
        drop(write);
    }
}

struct Conn<F: Application> {
    worker: Rc<Worker<F>>,
    conn: Connection,
    tx: mpsc::UnboundedSender<Outgoing>,
    local_answers: usize,
    batches: Vec<Vec<Job>>,
    inflight: Rc<Cell<usize>>,
    /// DIAMETER_TOO_BUSY answers of overload control, for the writer.
    busy: BytesMut,
    busy_answers: usize,
    /// This connection's place among its peer's connections, once open.
    peer_slot: Option<PeerSlot>,
    /// Refused at the CER by the per-peer connection limit.
    peer_refused: bool,
    /// When the bytes of the received stream arrived.
    arrivals: overload::Arrivals,
    /// Until when every request this connection reads is shed: it fell
    /// behind its peer (see `drain`).
    behind_until: u64,
    /// Where requests the server starts come from, once open.
    outbound: Option<Registration>,
    /// Those requests sent and not answered, by Hop-by-Hop Identifier.
    pending: FxHashMap<u32, OutboundJob>,
}

/// While its event loop sheds, a connection with more than
/// 1/`LIGHT_SHARE` of `max_inflight_per_connection` unanswered (64 of the
/// default 1,024), or bytes left in its socket, has what it reads shed
/// too; any other is light and keeps every request that has not waited
/// too long.
const LIGHT_SHARE: usize = 16;

/// While its event loop's answers are late (`Worker::answers_late`), a
/// connection has at most this many requests unanswered: what it reads
/// beyond them is shed. Its other limits see only what it has read, and
/// a read holds a few hundred requests: a connection light when its read
/// began would have them all served, late.
const LIGHT_WHILE_LATE: usize = 8;

/// Serves one accepted connection until it closes; `_slot` is its place
/// among the server's connections, given back when it ends. `remote` is
/// the peer's address; `certificate` the identity of its verified TLS
/// client certificate, which its CER's Origin-Host must match.
pub(crate) async fn serve<F: Application, S: Transport>(
    worker: Rc<Worker<F>>,
    stream: S,
    remote: Option<SocketAddr>,
    certificate: Option<CertificateIdentity>,
    mut shutdown: watch::Receiver<bool>,
    _slot: Accepted,
) {
    let shared = worker.shared.clone();
    let cfg = &shared.config;
    let stats = &shared.stats[worker.index];
    WorkerStats::bump(&stats.connections, 1);
    WorkerStats::bump(&stats.open_connections, 1);
    let socket = stream.socket();
    let (mut rd, wr) = stream.into_halves();
    let (tx, rx) = mpsc::unbounded_channel::<Outgoing>();
    let inflight = Rc::new(Cell::new(0usize));
    let written = Rc::new(Notify::new());
    let reset = Rc::new(Cell::new(false));
    let writer = tokio::task::spawn_local(write_loop::<S>(
        wr,
        rx,
        inflight.clone(),
        written.clone(),
        reset.clone(),
    ));

    let now = shared.now_ms();
    let seed = now ^ (worker.index as u64).rotate_left(32) ^ remote.map_or(0, |a| a.port() as u64);
    let mut connection = Connection::accept(shared.connection.clone(), now, seed);
    if let Some(cert) = certificate {
        connection.set_peer_certificate(cert);
    }
    let mut c = Conn {
        conn: connection,
        tx,
        local_answers: 0,
        batches: (0..shared.inboxes.len()).map(|_| Vec::new()).collect(),
        inflight: inflight.clone(),
        worker: worker.clone(),
        busy: BytesMut::new(),
        busy_answers: 0,
        peer_slot: None,
        peer_refused: false,
        arrivals: overload::Arrivals::new(now),
        behind_until: 0,
        outbound: None,
        pending: FxHashMap::default(),
    };
    let max_inflight = cfg.limits.max_inflight_per_connection;
    let read_cap = cfg.limits.read_buffer_size;
    let mut stopping = *shutdown.borrow();
    // Whether the last read may have left more in the socket.
    let mut more = false;
    let reason: Option<Close> = loop {
        if stopping && matches!(c.conn.state(), State::Handshake | State::Open) {
            c.conn.close(disconnect_cause::REBOOTING, shared.now_ms());
        }
        // Everything whole in the read buffer, one message at a time.
        let closed = c.drain(shared.unix_ms());
        c.flush();
        worker.peer_turn(&c.conn, &inflight, remote);
        if closed.is_some() {
            break closed;
        }
        if more {
            // One read's worth at a time: the writers (this connection's
            // answers) and the other connections get their turn before
            // the next, instead of waiting for a busy peer's whole backlog.
            tokio::task::yield_now().await;
        }
        let now = shared.now_ms();
        let lag = worker.lag_ms.get();
        // Past its window a connection is no longer read, unless the loop
        // is overloaded or the bytes waiting in the socket have waited too
        // long already: then its requests are answered 3004 at once (see
        // `drain`) and reading goes on, so nothing waits unseen in the
        // socket's buffers; only a peer that does not read those answers
        // either (twice the window unwritten) is held back.
        let late = shared.admission.late_before(now);
        let window = if shared.admission.overloaded(lag)
            || late.is_some_and(|t| c.arrivals.arrived_by(t) > c.conn.received())
            || c.arrivals.behind(now, shared.admission.backlog_ms())
            || now < worker.shedding_until.get()
            || worker.answers_late()
        {
            2 * max_inflight
        } else {
            max_inflight
        };
        let can_read = inflight.get() < window && c.conn.read_buffer().len() < read_cap;
        c.conn.set_reading(can_read, now);
        if !can_read {
            // Not reading: date what waits in the socket meanwhile.
            let waiting = S::waiting(&rd) as u64;
            c.arrivals.look(c.conn.received(), waiting, false, now, lag);
        }
        let deadline = c.conn.poll_timeout().unwrap_or(now + 60_000);
        let sleep = tokio::time::sleep(Duration::from_millis(deadline.saturating_sub(now)));
        let rbuf = c.conn.read_buffer();
        if rbuf.capacity() - rbuf.len() < 4096 {
            // Larger reads while the socket has more: fewer system calls
            // for a connection that is behind.
            rbuf.reserve(if more { 64 * 1024 } else { 16 * 1024 });
        }
        let space = rbuf.capacity() - rbuf.len();
        tokio::select! {
            biased;
            r = rd.read_buf(rbuf), if can_read => match r {
                Ok(0) | Err(_) => break None,
                Ok(n) => {
                    let now = shared.now_ms();
                    // A read that filled its space may have left more in
                    // the socket: date that too.
                    more = n == space;
                    let waiting = if more { S::waiting(&rd) as u64 } else { 0 };
                    c.arrivals
                        .look(c.conn.received(), waiting, true, now, worker.lag_ms.get());
                    c.conn.handle_read(now);
                    worker.commit.mark_read();
                }
            },
            _ = written.notified(), if !can_read => {}
            _ = sleep => c.conn.handle_timeout(shared.now_ms()),
            Some(job) = next_job(&mut c.outbound) => c.send_job(job),
            r = shutdown.changed(), if !stopping => {
                stopping = true;
                if r.is_err() { break None; }
            },
        }
    };
    let abort = reason.is_some_and(|r| r.is_abort());
    if abort {
        WorkerStats::bump(&stats.aborted_connections, 1);
    }
    if matches!(reason, Some(Close::InvalidLength(_))) {
        reset_on_close(socket);
        reset.set(true);
    }
    match reason {
        Some(Close::Peer(CloseReason::Rejected(_))) if c.peer_refused => {}
        Some(Close::Peer(CloseReason::Rejected(code))) => {
            let peer = c.conn.peer();
            let host = peer.remote_host();
            let why = host.and_then(|h| {
                gyro_diameter::peer::identity_refusal(&c.conn.config().peer, peer.certificate(), h)
            });
            info!(
                ?remote,
                code,
                host,
                reason = why.as_deref().unwrap_or(""),
                "capabilities exchange refused"
            )
        }
        Some(r) if abort => {
            let w = &shared.warnings.broken_stream;
            if let Some(count) = w.hit(1, shared.now_ms()) {
                warn!(?remote, reason = ?r, count, "{}", w.what());
            }
        }
        Some(r) => debug!(?remote, reason = ?r, "closing connection"),
        None => debug!(?remote, "connection closed"),
    }
    drop(rd);
    c.fail_over();
    let Conn { tx, .. } = c;
    drop(tx);
    // The writer ends once everything queued (a 5011 answer included) and
    // every answer in flight from any worker is written and every sender is
    // gone. The wait is bounded: a peer that broke the stream gets the
    // handshake timeout, any other one the watchdog interval, so a peer
    // that stopped reading (a zero window) cannot hold the connection, and
    // its queued answers, forever.
    let grace = if abort {
        cfg.peers.handshake_timeout_secs
    } else {
        cfg.peers.watchdog_secs
    };
    let abort_handle = writer.abort_handle();
    if tokio::time::timeout(grace, writer).await.is_err() {
        let w = &shared.warnings.stopped_reading;
        if let Some(count) = w.hit(1, shared.now_ms()) {
            warn!(?remote, count, "{}", w.what());
        }
        abort_handle.abort();
    }
    WorkerStats::bump_down(&stats.open_connections);
}

impl<F: Application> Conn<F> {
    /// Handles every event the connection has; returns why it closed, if
    /// it did. Requests that waited too long, and, while the loop is
    /// overloaded, those past the connection's window, are shed by the
    /// connection (see `Connection::shed_until`).
    fn drain(&mut self, unix_now: u64) -> Option<Close> {
        let shared = self.worker.shared.clone();
        let admission = &shared.admission;
        let window = shared.config.limits.max_inflight_per_connection;
        let lag = self.worker.lag_ms.get();
        // What waited too long, or everything while the loop sheds: once
        // per read's worth (a drain), not per request.
        let now = shared.now_ms();
        let backlog = admission.backlog_ms();
        // A connection that fell behind its peer has requests queued where
        // they cannot be dated: it sheds everything it reads until it has
        // kept up for the backlog bound, and so, meanwhile, does every
        // other heavy connection of its loop: one with bytes left in its
        // socket after its last read, or more than a light share of its
        // window unanswered (the loop reads past the window meanwhile, see
        // `serve`). A light peer keeps what has not waited too long: it is
        // not refused for a heavy peer's backlog.
        if self.arrivals.behind(now, backlog) {
            self.behind_until = now + backlog;
            self.worker.shedding_until.set(now + backlog);
        }
        // A loop short of CPU whose answers are late sheds its heavy
        // connections too, and holds every other to a few requests
        // unanswered (below): what it admitted would leave late as well.
        let late = self.worker.answers_late();
        let heavy = self.arrivals.backlogged() || self.unanswered() > window / LIGHT_SHARE;
        let shedding = late || now < self.worker.shedding_until.get();
        let until = if now < self.behind_until || (heavy && shedding) {
            u64::MAX
        } else {
            admission
                .late_before(now)
                .map_or(0, |t| self.arrivals.arrived_by(t))
        };
        self.conn.shed_until(until);
        // Shed answers counted as waited / past the window.
        let (mut waited, mut beyond) = (0, false);
        let closed = loop {
            if !beyond
                && (admission.beyond_window(
                    self.unanswered() + self.conn.shed_pending(),
                    window,
                    lag,
                ) || late && self.unanswered() >= LIGHT_WHILE_LATE)
            {
                waited = self.conn.shed_pending();
                beyond = true;
                self.conn.shed_until(u64::MAX);
            }
            let Some(ev) = self.conn.poll_event() else {
                break None;
            };
            match ev {
                Event::Request(frame) => self.request(frame, unix_now, now),
                Event::Opened {
                    origin_host,
                    origin_realm,
                } => self.opened(&origin_host, &origin_realm),
                Event::Rejected { .. } => {
                    // The error answer is already queued.
                    WorkerStats::bump(&self.worker.stats().rejected, 1);
                    self.local_answers += 1;
                }
                Event::Answer(frame) => self.answered(frame),
                Event::AnswerTimeout { hop_by_hop } => self.timed_out(hop_by_hop),
                Event::UnexpectedAnswer {
                    hop_by_hop,
                    command_code,
                } => info!(
                    host = self.conn.peer().remote_host(),
                    hop_by_hop,
                    command_code,
                    "answer matching no request of ours dropped (RFC 6733 section 6.2.1)"
                ),
                Event::Closed(r) => break Some(r),
            }
        };
        let shed = self.conn.shed_pending();
        if !beyond {
            waited = shed;
        }
        let stats = self.worker.stats();
        Refusal::Waited.count(stats, waited as u64);
        Refusal::PeerShare.count(stats, (shed - waited) as u64);
        self.arrivals.consumed(self.conn.consumed());
        closed
    }

    /// Requests of this connection read and not answered yet.
    fn unanswered(&self) -> usize {
        self.inflight.get() + self.local_answers + self.busy_answers
    }

    /// Routes one validated application request: handled here when its
    /// shard is local, else handed to the owning worker. `now_ms`: the
    /// drain's clock (`Shared::now_ms`).
    fn request(&mut self, frame: Bytes, unix_now: u64, now_ms: u64) {
        let Ok(msg) = Message::parse(&frame) else {
            return; // validated by the connection: cannot happen
        };
        let arrived_ms = self.arrivals.arrival(self.conn.consumed());
        let shard = self.route(&msg, unix_now);
        if let Err(why) = self.admit(shard, arrived_ms, now_ms) {
            self.too_busy(&msg, why);
            return;
        }
        if shard == self.worker.index {
            let worker = &self.worker;
            WorkerStats::bump(&worker.stats().requests, 1);
            self.conn
                .send_with(|out| worker.shard.borrow_mut().handle(&msg, unix_now, out));
            self.local_answers += 1;
        } else {
            WorkerStats::bump(&self.worker.stats().forwarded, 1);
            self.inflight.set(self.inflight.get() + 1);
            self.batches[shard].push(Job {
                frame,
                reply: self.tx.clone(),
                arrived_ms,
                from: self.worker.index,
            });
        }
    }

    /// Overload control: whether `shard` takes a request of this
    /// connection that arrived at `arrived_ms`, at `now_ms`. Its queue counts what other
    /// loops handed it and what this read is about to; a local request is
    /// also held to the wait bound here, a handed-over one by its owner.
    fn admit(&self, shard: usize, arrived_ms: u64, now_ms: u64) -> Result<(), Refusal> {
        let shared = &self.worker.shared;
        let admission = &shared.admission;
        let queued = shared.queues[shard].get() + self.batches[shard].len();
        admission.admit(queued, || (self.inflight.get(), shared.limits.open()))?;
        if shard == self.worker.index && admission.waited_too_long(arrived_ms, now_ms) {
            return Err(Refusal::Waited);
        }
        Ok(())
    }

    /// Answers a refused request DIAMETER_TOO_BUSY, as its application
    /// words it, without touching any shard's state.
    fn too_busy(&mut self, msg: &Message<'_>, why: Refusal) {
        self.worker.shard.borrow_mut().too_busy(msg, &mut self.busy);
        self.busy_answers += 1;
        why.count(self.worker.stats(), 1);
    }

    /// The capabilities exchange succeeded: take a place among the peer's
    /// connections, or refuse the CER (DIAMETER_UNABLE_TO_COMPLY, as RFC
    /// 6733 has a refusal by local policy) when it has no place left.
    fn opened(&mut self, origin_host: &str, origin_realm: &str) {
        let shared = &self.worker.shared;
        match shared.limits.open_peer(origin_host) {
            Ok(slot) => {
                self.peer_slot = Some(slot);
                self.outbound = Some(shared.outbound.open(origin_host, origin_realm));
                self.note_restart(origin_host);
            }
            Err(limit) => {
                let text = format!("too many connections from this peer (at most {limit})");
                if self.conn.refuse_opened(result::UNABLE_TO_COMPLY, &text) {
                    self.peer_refused = true;
                    WorkerStats::bump(&self.worker.stats().refused_peers, 1);
                    let w = &shared.warnings.peer_limit;
                    if let Some(count) = w.hit(1, shared.now_ms()) {
                        warn!(peer = origin_host, limit, count, "{}", w.what());
                    }
                }
            }
        }
    }

    /// A peer that opened with a higher Origin-State-Id than it last did
    /// restarted and lost its state (RFC 6733 section 8.16): every shard
    /// is told, so that the sessions it opened before now are ended
    /// ([`Shard::peer_restarted`]).
    fn note_restart(&self, origin_host: &str) {
        let shared = &self.worker.shared;
        if !shared.config.peers.release_sessions_on_restart {
            return;
        }
        let Some(state) = self.conn.peer().remote_origin_state_id() else {
            return;
        };
        if !shared.peer_states.restarted(origin_host, state) {
            return;
        }
        let at = shared.unix_ms();
        info!(
            peer = origin_host,
            origin_state_id = state,
            "peer restarted (a higher Origin-State-Id): the sessions it opened before are released"
        );
        for shard in 0..shared.operations.shards() {
            let host = origin_host.to_string();
            let _ = shared.operations.send(
                shard,
                Box::new(move |s: &mut F::Shard, now| {
                    s.peer_restarted(&host, at, now);
                    Box::new(|_| {})
                }),
            );
        }
    }

    /// The shard for a validated application request: the one the
    /// application names, else the one its session is pinned to, else this
    /// event loop's. Pins and releases the session as the application says.
    fn route(&mut self, msg: &Message<'_>, unix_now: u64) -> usize {
        let shared = &self.worker.shared;
        let n = self.batches.len();
        let route = shared.factory.route(msg, n);
        let named = route.shard.filter(|s| *s < n);
        if route.session == SessionStep::None {
            return named.unwrap_or(self.worker.index);
        }
        let Some(sid) = msg.find(avp::SESSION_ID) else {
            return named.unwrap_or(self.worker.index);
        };
        let key = session_key(sid.data());
        if let Some(r) = &mut self.outbound {
            // The session's owner, and the client behind it, for requests
            // the server starts.
            let ends = route.session == SessionStep::End;
            let (id, peer, registry) = (r.id, r.peer, &shared.outbound);
            registry.note(key, id, peer, ends, || {
                match (msg.find(avp::ORIGIN_HOST), msg.find(avp::ORIGIN_REALM)) {
                    (Some(h), Some(realm)) => r.origin(registry, h.data(), realm.data()),
                    _ => 0,
                }
            });
        }
        if !shared.routes() {
            return self.worker.index;
        }
        let directory = &shared.directory;
        match (route.session, named) {
            (SessionStep::Open, Some(shard)) => {
                let pin = self.worker.pinner.borrow_mut().next(shard);
                directory.pin(key, pin);
                shard
            }
            (SessionStep::End, named) => {
                let pinned = directory.lookup(key);
                if let Some(pin) = pinned {
                    self.worker
                        .pinner
                        .borrow_mut()
                        .release_later(key, pin, unix_now);
                }
                named
                    .or(pinned.map(|p| p.shard()))
                    .unwrap_or(self.worker.index)
            }
            (_, Some(shard)) => shard,
            (_, None) => directory
                .lookup(key)
                .map_or(self.worker.index, |p| p.shard()),
        }
    }

    /// Sends a request the server starts; one this connection cannot send
    /// goes to another connection of the peer.
    fn send_job(&mut self, mut job: OutboundJob) {
        let shared = &self.worker.shared;
        let timeout = shared.outbound.timeout_ms;
        match self
            .conn
            .send_request(&job.request, job.sent, shared.now_ms(), timeout)
        {
            Some(hbh) => {
                job.sent = true;
                self.pending.insert(hbh, job);
            }
            None => shared.outbound.failover(job),
        }
    }

    /// The answer to a request the server started.
    fn answered(&mut self, frame: Bytes) {
        let Ok(msg) = Message::parse(&frame) else {
            return;
        };
        if let Some(job) = self.pending.remove(&msg.header().hop_by_hop) {
            let _ = job.reply.send(Ok(frame));
        }
    }

    /// A request the server started got no answer in time.
    fn timed_out(&mut self, hop_by_hop: u32) {
        if let Some(job) = self.pending.remove(&hop_by_hop) {
            let ms = self.worker.shared.outbound.timeout_ms;
            let command_code = Message::parse(&job.request).map_or(0, |m| m.command_code());
            warn!(
                host = self.conn.peer().remote_host(),
                hop_by_hop,
                command_code,
                timeout_ms = ms,
                "no answer to a request of ours in time; given up"
            );
            let _ = job.reply.send(Err(OutboundError::Timeout(ms)));
        }
    }

    /// The connection closed: what it had to send, or sent without an
    /// answer, goes to another connection of the peer.
    fn fail_over(&mut self) {
        let Some(mut r) = self.outbound.take() else {
            return;
        };
        let outbound = &self.worker.shared.outbound;
        outbound.close(r.id);
        r.rx.close();
        while let Ok(job) = r.rx.try_recv() {
            outbound.failover(job);
        }
        for (_, job) in self.pending.drain() {
            outbound.failover(job);
        }
    }

    /// Hands locally built output to the writer (through the group commit
    /// where it must wait for one) and forwarded requests to their
    /// workers.
    fn flush(&mut self) {
        if let Some((bytes, answers)) = self.conn.poll_shed() {
            // Counted with the application's answers, by request kind.
            let mut shard = self.worker.shard.borrow_mut();
            self.conn.take_shed_kinds(|kind, n| shard.shed(kind, n));
            drop(shard);
            self.inflight.set(self.inflight.get() + answers);
            if self.tx.send(Outgoing { bytes, answers }).is_err() {
                self.inflight.set(self.inflight.get() - answers);
            }
        }
        if self.busy_answers > 0 {
            // Nothing to make durable: straight to the writer.
            let answers = std::mem::take(&mut self.busy_answers);
            self.inflight.set(self.inflight.get() + answers);
            let bytes = self.busy.split().freeze();
            if self.tx.send(Outgoing { bytes, answers }).is_err() {
                self.inflight.set(self.inflight.get() - answers);
            }
        }
        if let Some(bytes) = self.conn.poll_transmit() {
            let answers = std::mem::take(&mut self.local_answers);
            if answers == 0 && self.unanswered() == 0 {
                // Base protocol only (a CEA, a DWA, a DPA) on a connection
                // with nothing unanswered, in a group commit or on its way
                // to the writer: nothing to make durable and nothing to
                // keep order with, so it does not wait for the commit (a
                // DWA on an idle connection would otherwise wait out a
                // slow disk's sync of other connections' answers).
                let _ = self.tx.send(Outgoing { bytes, answers });
            } else {
                self.inflight.set(self.inflight.get() + answers);
                // Through the worker's group commit: nothing leaves before
                // the batch it belongs to is durable, and a connection's
                // output keeps its order (a DPA never overtakes the answers
                // before it).
                self.worker
                    .commit
                    .release_after_commit(&self.tx, Outgoing { bytes, answers });
            }
        }
        self.hand_over();
    }

    /// Hands the requests read for other workers' shards over, one batch
    /// per worker.
    fn hand_over(&mut self) {
        let shared = &self.worker.shared;
        for (i, batch) in self.batches.iter_mut().enumerate() {
            if !batch.is_empty() {
                let jobs = std::mem::take(batch);
                // Counted before it is sent, so the owner never takes more
                // than was counted.
                shared.queues[i].add(jobs.len());
                // An owner napping through its delay or sync takes them
                // when its nap ends: they join its next batch either way.
                if let Err(e) = shared.inboxes[i].send(jobs) {
                    // The worker is gone (shutting down): its answers will
                    // never come, so stop waiting for them.
                    let lost = e.0.len();
                    shared.queues[i].sub(lost);
                    self.inflight.set(self.inflight.get().saturating_sub(lost));
                }
            }
        }
    }
}

/// The next request the server starts for this connection (never, before
/// it is open).
async fn next_job(outbound: &mut Option<Registration>) -> Option<OutboundJob> {
    match outbound {
        Some(r) => r.rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Writes answers as they arrive, many per write when they queue up: in
/// one `writev` of the queued buffers where the transport has one (plain
/// TCP), else copied into one buffer first (TLS, whose records would
/// otherwise be one per buffer). Ends the stream once every sender is
/// gone: with a FIN, or, when `reset` was set meanwhile, with none (the
/// socket's close then resets it, see [`reset_on_close`]).
async fn write_loop<S: Transport>(
    mut wr: S::Write,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    inflight: Rc<Cell<usize>>,
    written: Rc<Notify>,
    reset: Rc<Cell<bool>>,
) {
    let vectored = wr.is_write_vectored();
    let mut queued: Vec<Bytes> = Vec::new();
    let mut scratch = BytesMut::new();
    while let Some(first) = rx.recv().await {
        let mut answers = first.answers;
        let mut bytes = first.bytes.len();
        queued.clear();
        queued.push(first.bytes);
        while bytes < 256 * 1024 {
            match rx.try_recv() {
                Ok(o) => {
                    bytes += o.bytes.len();
                    answers += o.answers;
                    queued.push(o.bytes);
                }
                Err(_) => break,
            }
        }
        let res = match queued.as_mut_slice() {
            [one] => wr.write_all(one).await,
            many if vectored => write_all_vectored(&mut wr, many).await,
            many => {
                scratch.clear();
                many.iter().for_each(|b| scratch.extend_from_slice(b));
                wr.write_all(&scratch).await
            }
        };
        inflight.set(inflight.get().saturating_sub(answers));
        written.notify_one();
        if res.is_err() {
            break;
        }
    }
    if reset.get() {
        S::drop_write(wr);
    } else {
        let _ = wr.shutdown().await;
    }
}

/// Writes all of `bufs`, in order, with vectored writes (at most
/// [`MAX_SLICES`] buffers each); what was written is consumed from them.
async fn write_all_vectored<W: AsyncWrite + Unpin>(
    wr: &mut W,
    bufs: &mut [Bytes],
) -> std::io::Result<()> {
    let mut first = 0;
    loop {
        // An empty buffer would make a write of nothing look like a
        // stalled peer.
        while first < bufs.len() && bufs[first].is_empty() {
            first += 1;
        }
        if first == bufs.len() {
            return Ok(());
        }
        let mut slices = [std::io::IoSlice::new(&[]); MAX_SLICES];
        let n = (bufs.len() - first).min(MAX_SLICES);
        for (slice, b) in slices.iter_mut().zip(&bufs[first..first + n]) {
            *slice = std::io::IoSlice::new(b);
        }
        let mut done = wr.write_vectored(&slices[..n]).await?;
        if done == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while first < bufs.len() && done >= bufs[first].len() {
            done -= bufs[first].len();
            first += 1;
        }
        if done > 0 {
            bytes::Buf::advance(&mut bufs[first], done);
        }
    }
}

/// Most buffers one vectored write takes (Linux allows 1024 per writev).
const MAX_SLICES: usize = 64;
