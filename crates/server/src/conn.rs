//! One Diameter connection: framing, the peer state machine, validation,
//! routing each request to its shard, and writing answers back in batches.
//!
//! The connection is IO only: requests whose shard is local are handled
//! inline; the others are handed (as refcounted `Bytes`, never copied) to
//! the owning worker in one batch per read. Answers from every worker come
//! back on one channel and leave in as few writes as possible, in whatever
//! order they complete (Diameter matches them by Hop-by-Hop Identifier).

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use gyro_diameter::app::{session_key, Application, SessionStep, Shard};
use gyro_diameter::codes::avp;
use gyro_diameter::header::{frame_length, HEADER_LEN};
use gyro_diameter::peer::{disconnect_cause, CloseReason, Event, Peer, Role, State};
use gyro_diameter::validate::{encode_error_answer, validate_request, Problem};
use gyro_diameter::{Error as CodecError, Message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Notify};
use tracing::{debug, info, warn};

use crate::metrics::WorkerStats;
use crate::worker::{Job, Outgoing, Worker};

struct Conn<F: Application> {
    worker: Rc<Worker<F>>,
    peer: Peer,
    tx: mpsc::UnboundedSender<Outgoing>,
    out: BytesMut,
    local_answers: usize,
    batches: Vec<Vec<Job>>,
    inflight: Rc<Cell<usize>>,
}

/// Serves one accepted connection until it closes.
pub(crate) async fn serve<F: Application>(
    worker: Rc<Worker<F>>,
    stream: TcpStream,
    mut shutdown: watch::Receiver<bool>,
) {
    let shared = worker.shared.clone();
    let cfg = &shared.config;
    let stats = &shared.stats[worker.index];
    WorkerStats::bump(&stats.connections, 1);
    WorkerStats::bump(&stats.open_connections, 1);
    let remote = stream.peer_addr().ok();
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel::<Outgoing>();
    let inflight = Rc::new(Cell::new(0usize));
    let written = Rc::new(Notify::new());
    let writer = tokio::task::spawn_local(write_loop(wr, rx, inflight.clone(), written.clone()));

    let now = shared.now_ms();
    let seed = now ^ (worker.index as u64).rotate_left(32) ^ remote.map_or(0, |a| a.port() as u64);
    let mut conn = Conn {
        peer: Peer::new(Role::Responder, &shared.peer, now, seed),
        tx,
        out: BytesMut::with_capacity(16 * 1024),
        local_answers: 0,
        batches: (0..shared.inboxes.len()).map(|_| Vec::new()).collect(),
        inflight: inflight.clone(),
        worker: worker.clone(),
    };
    let max_msg = cfg.limits.max_message_size;
    let max_inflight = cfg.limits.max_inflight_per_connection;
    let read_cap = cfg.limits.read_buffer_size;
    let msg_timeout = cfg.limits.message_timeout_ms;
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    let mut partial_since: Option<u64> = None;
    let mut stopping = *shutdown.borrow();
    let mut abort = false;
    let reason: Option<CloseReason> = 'conn: loop {
        if stopping && conn.peer.state() == State::Handshake {
            break None;
        }
        if stopping && conn.peer.state() == State::Open {
            let now = shared.now_ms();
            if conn
                .peer
                .disconnect(
                    &shared.peer,
                    disconnect_cause::REBOOTING,
                    now,
                    &mut conn.out,
                )
                .is_err()
            {
                break None;
            }
            conn.flush();
        }
        let now = shared.now_ms();
        let mut deadline = conn.peer.poll_timeout().unwrap_or(now + 60_000);
        if let Some(t) = partial_since {
            deadline = deadline.min(t + msg_timeout);
        }
        let sleep = tokio::time::sleep(Duration::from_millis(deadline.saturating_sub(now)));
        let can_read = inflight.get() < max_inflight && rbuf.len() < read_cap;
        if rbuf.capacity() - rbuf.len() < 4096 {
            rbuf.reserve(16 * 1024);
        }
        tokio::select! {
            biased;
            r = rd.read_buf(&mut rbuf), if can_read => match r {
                Ok(0) | Err(_) => break None,
                Ok(_) => {}
            },
            _ = written.notified(), if !can_read => continue,
            _ = sleep => {
                let now = shared.now_ms();
                if partial_since.is_some_and(|t| now >= t + msg_timeout) {
                    warn!(?remote, "message incomplete for {msg_timeout} ms; closing");
                    abort = true;
                    break None;
                }
                match conn.peer.handle_timeout(&shared.peer, now, &mut conn.out) {
                    Ok(Some(Event::Close(r))) => break Some(r),
                    Ok(_) => conn.flush(),
                    Err(_) => break None,
                }
                continue;
            },
            r = shutdown.changed(), if !stopping => {
                stopping = true;
                if r.is_err() { break None; }
                continue;
            },
        }
        // Frame and process every complete message in the buffer.
        let now = shared.now_ms();
        let unix_now = shared.unix_ms();
        loop {
            match frame_length(&rbuf, max_msg) {
                Ok(Some(n)) if rbuf.len() >= n => {
                    let frame = rbuf.split_to(n).freeze();
                    if let Some(r) = conn.process(frame, now, unix_now) {
                        conn.flush();
                        break 'conn Some(r);
                    }
                }
                Ok(_) => break,
                Err(CodecError::UnsupportedVersion(v)) => {
                    // Answer 5011 when the header is otherwise sane, then
                    // close: the stream can no longer be trusted.
                    if let Some(n) = sane_length(&rbuf, max_msg) {
                        if rbuf.len() >= n {
                            let frame = rbuf.split_to(n);
                            conn.reject_invalid(&frame);
                        }
                    }
                    warn!(
                        ?remote,
                        version = v,
                        "unsupported Diameter version; closing"
                    );
                    conn.flush();
                    abort = true;
                    break 'conn None;
                }
                Err(e) => {
                    warn!(?remote, error = %e, "cannot frame the stream; closing");
                    conn.flush();
                    abort = true;
                    break 'conn None;
                }
            }
        }
        partial_since = if rbuf.is_empty() {
            None
        } else {
            partial_since.or(Some(now))
        };
        conn.flush();
        if conn.peer.state() == State::Closed {
            break None;
        }
    };
    if abort {
        WorkerStats::bump(&stats.aborted_connections, 1);
    }
    match reason {
        Some(CloseReason::Rejected(code)) => {
            info!(
                ?remote,
                code,
                host = conn.peer.remote_host(),
                "capabilities exchange refused"
            )
        }
        Some(r) => debug!(?remote, reason = ?r, "closing connection"),
        None => debug!(?remote, "connection closed"),
    }
    drop(rd);
    let Conn { tx, .. } = conn;
    drop(tx);
    if abort {
        writer.abort();
    } else {
        // The writer ends once every answer in flight (from any worker) is
        // written and every sender is gone.
        let _ = writer.await;
    }
    WorkerStats::bump_down(&stats.open_connections);
}

/// The Message Length of a header whose version is wrong, if it is sane.
fn sane_length(buf: &[u8], max: usize) -> Option<usize> {
    let b = buf.get(..4)?;
    let n = u32::from_be_bytes([0, b[1], b[2], b[3]]) as usize;
    (n >= HEADER_LEN && n % 4 == 0 && n <= max).then_some(n)
}

impl<F: Application> Conn<F> {
    /// Handles one framed message; returns a reason to close, if any.
    fn process(&mut self, frame: Bytes, now: u64, unix_now: u64) -> Option<CloseReason> {
        let worker = self.worker.clone();
        let shared = &worker.shared;
        let msg = match Message::parse(&frame) {
            Ok(m) => m,
            Err(_) => {
                self.reject_invalid(&frame);
                return None;
            }
        };
        match self.peer.handle(&shared.peer, &msg, now, &mut self.out) {
            Ok(Event::Application) => {}
            Ok(Event::Close(r)) => return Some(r),
            Ok(Event::Handled | Event::Opened | Event::Unexpected) => return None,
            Err(_) => return Some(CloseReason::Disconnected),
        }
        if !msg.is_request() {
            // gyro sends no application requests yet; an answer matches
            // nothing pending and is dropped (RFC 6733 section 3).
            return None;
        }
        let msg = match validate_request(shared.dict, &frame, &shared.validation) {
            Ok(m) => m,
            Err(problem) => {
                self.reject(&frame, &problem);
                return None;
            }
        };
        let shard = self.route(&msg, unix_now);
        if shard == self.worker.index {
            WorkerStats::bump(&self.worker.stats().requests, 1);
            self.worker
                .shard
                .borrow_mut()
                .handle(&msg, unix_now, &mut self.out);
            self.local_answers += 1;
        } else {
            WorkerStats::bump(&self.worker.stats().forwarded, 1);
            self.inflight.set(self.inflight.get() + 1);
            self.batches[shard].push(Job {
                frame,
                reply: self.tx.clone(),
            });
        }
        None
    }

    /// Answers a message that does not even parse, if it is a request.
    fn reject_invalid(&mut self, frame: &[u8]) {
        let shared = &self.worker.shared;
        if let Err(problem) = validate_request(shared.dict, frame, &shared.validation) {
            self.reject(frame, &problem);
        }
    }

    /// Answers a request that failed validation with the prescribed error
    /// (computed once, by the validation that found it).
    fn reject(&mut self, frame: &[u8], problem: &Problem<'_>) {
        let shared = &self.worker.shared;
        WorkerStats::bump(&self.worker.stats().rejected, 1);
        let is_request = frame.get(4).is_some_and(|f| f & 0x80 != 0);
        if !is_request {
            return; // never answer an answer
        }
        let host = &shared.peer.origin_host;
        let realm = &shared.peer.origin_realm;
        if encode_error_answer(&mut self.out, frame, problem, host, realm).is_ok() {
            self.local_answers += 1;
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

    /// Hands locally built output to the writer and forwarded requests to
    /// their workers, one batch per worker.
    fn flush(&mut self) {
        if !self.out.is_empty() {
            let answers = std::mem::take(&mut self.local_answers);
            self.inflight.set(self.inflight.get() + answers);
            // Through the worker's group commit: nothing leaves before the
            // batch it belongs to is durable, and a connection's output keeps
            // its order (a DPA never overtakes the answers before it).
            self.worker.commit.release_after_commit(
                &self.tx,
                Outgoing {
                    bytes: self.out.split().freeze(),
                    answers,
                },
            );
        }
        let shared = &self.worker.shared;
        for (i, batch) in self.batches.iter_mut().enumerate() {
            if !batch.is_empty() {
                let jobs = std::mem::take(batch);
                if let Err(e) = shared.inboxes[i].send(jobs) {
                    // The worker is gone (shutting down): its answers will
                    // never come, so stop waiting for them.
                    let lost = e.0.len();
                    self.inflight.set(self.inflight.get().saturating_sub(lost));
                }
            }
        }
    }
}

/// Writes answers as they arrive, many per write when they queue up.
async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    inflight: Rc<Cell<usize>>,
    written: Rc<Notify>,
) {
    let mut scratch = BytesMut::new();
    while let Some(first) = rx.recv().await {
        let mut answers = first.answers;
        let res = match rx.try_recv() {
            Err(_) => wr.write_all(&first.bytes).await,
            Ok(second) => {
                scratch.clear();
                scratch.extend_from_slice(&first.bytes);
                scratch.extend_from_slice(&second.bytes);
                answers += second.answers;
                while scratch.len() < 256 * 1024 {
                    match rx.try_recv() {
                        Ok(o) => {
                            scratch.extend_from_slice(&o.bytes);
                            answers += o.answers;
                        }
                        Err(_) => break,
                    }
                }
                wr.write_all(&scratch).await
            }
        };
        inflight.set(inflight.get().saturating_sub(answers));
        written.notify_one();
        if res.is_err() {
            break;
        }
    }
    let _ = wr.shutdown().await;
}
