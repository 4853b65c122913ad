//! One client connection: capabilities exchange, then many concurrent
//! sessions sharing one socket, requests written in batches and answers
//! matched by Hop-by-Hop Identifier.
//!
//! A connection is a single task that owns all of its state: the session
//! slots, the queue of sessions ready to send, and its counters. Nothing is
//! shared with other connections but a few atomic counters for the progress
//! bar, updated once per batch. By what each part does:
//!
//! * this module drives the codec's sans-IO [`Connection`] (framing, the
//!   peer state machine with DWR/DWA and DPR/DPA) over the socket;
//! * [`handshake`]: connect, TLS with `--tls`, and exchange capabilities
//!   (CER/CEA);
//! * [`sessions`]: the session slots, which request each sends next and
//!   when (closed loop, or, in open loop, when its thread's pacer releases
//!   a slot of the schedule to it: see [`crate::pacing`]);
//! * [`accounting`]: what each answer counts for, the progress counters
//!   and the `--record` file.

mod accounting;
mod handshake;
mod sessions;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use gyro_diameter::codes::{avp, cmd, result};
use gyro_diameter::connection::{Connection, Event};
use gyro_diameter::peer::{disconnect_cause, State};
use gyro_diameter::{Encoder, Message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Barrier;

use crate::args::LoadArgs;
use crate::ccr::Builder;
use crate::pacing::{Pace, Paced};
use crate::stats::{ConnStats, ReqType};

use handshake::{open, Stream, Transport};
pub(crate) use handshake::{tls_client, tls_client_offering, TlsClient};
use sessions::{Phase, Slot};

/// Largest answer accepted; a larger declared length breaks the stream.
const MAX_MESSAGE: usize = 1 << 20;
/// Read buffer growth step.
const READ_CHUNK: usize = 256 * 1024;
/// Read again only with at least this much room.
const MIN_READ_ROOM: usize = 32 * 1024;
/// How long to wait for the DPA at the end.
const DPA_WAIT: Duration = Duration::from_secs(1);

/// Read-only facts shared by all connections.
pub(crate) struct Plan {
    pub args: LoadArgs,
    pub addr: SocketAddr,
    pub builder: Builder,
    /// Zero of the millisecond clock given to the peer state machine.
    pub base: Instant,
    /// When to stop starting sessions, from the common start.
    pub duration: Option<Duration>,
    /// First two numeric parts of every Session-Id.
    pub session_high: u32,
    pub session_low: u32,
    pub seed: u64,
    /// The common start, set by whichever task passes the start barrier
    /// first.
    pub start: OnceLock<Instant>,
    /// Where `--record` writes answers.
    pub record: Option<std::sync::Mutex<std::fs::File>>,
    /// With `--tls`: the TLS client every connection uses.
    pub tls: Option<TlsClient>,
}

/// Counters the progress bar reads while the run goes on.
#[derive(Default)]
pub(crate) struct Live {
    pub sent: AtomicU64,
    pub answered: AtomicU64,
    pub errors: AtomicU64,
    /// Set to stop early (Ctrl-C): no new sessions, the drain.
    pub stop: AtomicBool,
    /// Set to give up the drain (a second Ctrl-C): the sessions not yet
    /// finished are left open.
    pub abort: AtomicBool,
}

struct Conn<'p> {
    plan: &'p Plan,
    live: &'p Live,
    slots: Vec<Slot>,
    ready: VecDeque<u32>,
    slot_bits: u32,
    slot_mask: u32,
    gen: u32,
    e2e: u32,
    in_flight: usize,
    /// Sessions waiting for credit (topup scenario).
    waiting: usize,
    /// Places waiting to try a refused CCR-Initial again (topup scenario).
    parked: usize,
    /// Sessions waiting to send their CCR-Terminate again.
    backoff: usize,
    /// Index of this connection's first session place over all
    /// connections (the topup scenario gives each place one subscriber).
    place_base: u64,
    /// Requests this connection may still reserve (count mode).
    budget: Option<u64>,
    deadline: Option<Instant>,
    /// When the drain is given up: the sessions not finished by then are
    /// left open.
    hard_stop: Option<Instant>,
    /// No new session starts.
    stopping: bool,
    /// The run has stopped and the sessions still open are ended with
    /// their CCR-Terminate, unpaced and out of the measured figures.
    draining: bool,
    /// The slots of the schedule released to this connection by its
    /// thread's pacer (open loop only).
    paced: Option<Paced>,
    /// Requests intended before this are left out of the latency figures
    /// (`--warmup`).
    measure_from: Instant,
    next_scan: Instant,
    scan_every: Duration,
    /// Picks subscribers and, in the mix scenario, the kind of session.
    rng: fastrand::Rng,
    session_seq: u64,
    sid_prefix: Vec<u8>,
    errors: u64,
    pushed: (u64, u64, u64),
    stats: ConnStats,
    /// Answer records not yet written to the `--record` file.
    recorded: Vec<u8>,
}

/// Runs one connection from connect to close and returns its counters.
/// In open loop `pace` is its thread's pace and the connection's index in
/// it.
pub(crate) async fn run_connection(
    idx: u32,
    plan: Arc<Plan>,
    live: Arc<Live>,
    barrier: Arc<Barrier>,
    pace: Option<(Arc<Pace>, usize)>,
) -> ConnStats {
    let opened = open(idx, &plan).await;
    barrier.wait().await;
    let t0 = *plan.start.get_or_init(Instant::now);
    let mut stats = ConnStats::starting_at(t0);
    let (stream, conn) = match opened {
        Ok((stream, conn, tls)) => {
            stats.tls_handshake_us = tls.map(|d| d.as_micros() as u64);
            (stream, conn)
        }
        Err(e) => {
            stats.connection_error(e);
            return stats;
        }
    };
    stats.opened = true;
    let paced = pace.map(|(pace, i)| Paced::new(pace, i, t0));
    let mut c = Conn::new(idx, &plan, &live, stats, t0, paced);
    match stream {
        Stream::Plain(s) => c.drive(s, conn).await,
        Stream::Tls(s) => c.drive(*s, conn).await,
    }
    c.flush_live();
    c.flush_record();
    c.stats
}

/// Waits until the pacer releases a slot past the `taken` ones to this
/// connection (never, in closed loop).
async fn wait_slot(lane: &Option<(Arc<Pace>, usize)>, taken: u64) {
    match lane {
        Some((pace, i)) => pace.lane(*i).wait(taken).await,
        None => std::future::pending().await,
    }
}

fn now_ms(plan: &Plan) -> u64 {
    plan.base.elapsed().as_millis() as u64
}

enum Io {
    Wrote(std::io::Result<usize>),
    Read(std::io::Result<usize>),
    Timer,
    Due,
}

impl<'p> Conn<'p> {
    fn new(
        idx: u32,
        plan: &'p Plan,
        live: &'p Live,
        stats: ConnStats,
        now: Instant,
        paced: Option<Paced>,
    ) -> Self {
        let a = &plan.args;
        let window = a.effective_window();
        let slot_bits = 32 - (window - 1).leading_zeros();
        let conns = u64::from(a.connections.max(1));
        // Data sessions: the count is dealt out in whole sessions, so a
        // count below one session per connection still sends them.
        let share = |n: u64| n / conns + u64::from(u64::from(idx) < n % conns);
        let budget = a.count.map(|n| {
            if a.whole_sessions() {
                let len = a.data_session_len();
                share(n / len) * len
            } else {
                share(n)
            }
        });
        let deadline = plan.duration.map(|d| now + d);
        let scan_every =
            (a.timeout / 4).clamp(Duration::from_millis(1), Duration::from_millis(100));
        let slots = (0..window)
            .map(|_| Slot {
                phase: Phase::Free,
                data: true,
                number: 0,
                offset: 0,
                hbh: 0,
                req: ReqType::Initial,
                intended: now,
                sent: now,
                reserved: 0,
                sid: Vec::with_capacity(a.origin_host.len() + 40),
                request: Vec::new(),
                aborted: false,
                resume: false,
                re_auth_in_flight: false,
                open: false,
                failed: false,
                drain: false,
                tries: 0,
            })
            .collect();
        let sid_prefix = format!(
            "{};{};{};",
            a.origin_host,
            plan.session_high,
            plan.session_low.wrapping_add(idx)
        )
        .into_bytes();
        Conn {
            plan,
            live,
            slots,
            ready: (0..window).collect(),
            slot_bits,
            slot_mask: if slot_bits == 0 {
                0
            } else {
                u32::MAX >> (32 - slot_bits)
            },
            gen: 0,
            e2e: (plan.seed as u32) ^ idx.rotate_left(20),
            in_flight: 0,
            waiting: 0,
            parked: 0,
            backoff: 0,
            place_base: u64::from(idx) * u64::from(window),
            budget,
            deadline,
            hard_stop: deadline.map(|d| d + a.drain_time()),
            stopping: false,
            draining: false,
            paced,
            measure_from: now + a.warmup,
            next_scan: now + scan_every,
            scan_every,
            rng: fastrand::Rng::with_seed(plan.seed ^ (u64::from(idx) + 1).rotate_left(32)),
            session_seq: 0,
            sid_prefix,
            errors: 0,
            pushed: (0, 0, 0),
            stats,
            recorded: Vec::new(),
        }
    }

    fn done(&self) -> bool {
        self.ready.is_empty() && self.in_flight == 0 && self.waiting == 0 && self.backoff == 0
    }

    /// The run stops (`--duration` is over, or Ctrl-C): no session starts
    /// any more, and the sessions still open are ended with their
    /// CCR-Terminate within [`LoadArgs::drain_time`].
    fn begin_drain(&mut self, now: Instant) {
        if self.draining {
            return;
        }
        self.stopping = true;
        self.draining = true;
        let bound = now + self.plan.args.drain_time();
        self.hard_stop = Some(self.hard_stop.map_or(bound, |h| h.min(bound)));
    }

    /// Sessions waiting for credit end (CCR-Terminate) once the run stops,
    /// or, in count mode, once nothing else is left to do.
    fn end_waiting_if_over(&mut self, now: Instant) {
        if self.waiting == 0 {
            return;
        }
        if self.deadline.is_some_and(|d| now >= d) {
            self.begin_drain(now);
        }
        let idle = self.deadline.is_none()
            && self.ready.is_empty()
            && self.in_flight == 0
            && self.parked == 0;
        if self.stopping || idle {
            self.release_waiting();
        }
    }

    async fn drive<S: Transport>(&mut self, mut stream: S, mut conn: Connection) {
        // What is being written: taken whole from the connection's queue.
        let mut wbuf = Bytes::new();
        let healthy = {
            let (mut rd, mut wr) = stream.split();
            let sleep = tokio::time::sleep_until(Instant::now().into());
            tokio::pin!(sleep);
            let mut armed: Option<Instant> = None;
            let lane = self.paced.as_ref().map(Paced::lane);
            let mut healthy = match self.on_events(&mut conn) {
                Ok(()) => true,
                Err(e) => {
                    self.broken(e);
                    false
                }
            };
            while healthy {
                let now = Instant::now();
                if self.live.abort.load(Ordering::Relaxed) {
                    self.abandon("the drain was interrupted (a second Ctrl-C)");
                    break;
                }
                if self.live.stop.load(Ordering::Relaxed) {
                    self.begin_drain(now);
                }
                if now >= self.next_scan {
                    self.scan_timeouts(now);
                    self.next_scan = now + self.scan_every;
                }
                if self.hard_stop.is_some_and(|h| now >= h) {
                    self.abandon("the drain time (twice --timeout) ran out");
                    break;
                }
                if self.stopping && self.in_flight == 0 && conn.state() != State::Open {
                    // The server said goodbye: nothing more can be sent.
                    self.abandon("the server closed the connection (DPR)");
                    break;
                }
                self.end_waiting_if_over(now);
                let ms = now_ms(self.plan);
                if conn.poll_timeout().is_some_and(|t| ms >= t) {
                    conn.handle_timeout(ms);
                    if let Err(e) = self.on_events(&mut conn) {
                        self.broken(e);
                        healthy = false;
                        break;
                    }
                }
                if conn.state() == State::Open {
                    conn.send_with(|out| self.fill(now, out));
                }
                if wbuf.is_empty() {
                    wbuf = conn.poll_transmit().unwrap_or_default();
                }
                self.flush_live();
                if self.done() && wbuf.is_empty() {
                    break;
                }
                let wake = self.next_wake(&conn);
                if armed != Some(wake) {
                    sleep.as_mut().reset(wake.into());
                    armed = Some(wake);
                }
                // Open loop, a session ready: wait for the pacer to
                // release the next slot.
                let want_slot = self.wants_slot(&conn);
                let taken = self.paced.as_ref().map_or(0, Paced::taken);
                let rbuf = conn.read_buffer();
                if rbuf.capacity() - rbuf.len() < MIN_READ_ROOM {
                    rbuf.reserve(READ_CHUNK);
                }
                let io = tokio::select! {
                    biased;
                    r = wr.write_buf(&mut wbuf), if !wbuf.is_empty() => Io::Wrote(r),
                    r = rd.read_buf(rbuf) => Io::Read(r),
                    () = wait_slot(&lane, taken), if want_slot => Io::Due,
                    () = &mut sleep => Io::Timer,
                };
                match io {
                    Io::Wrote(Ok(_)) | Io::Timer | Io::Due => {}
                    Io::Wrote(Err(e)) | Io::Read(Err(e)) => {
                        self.broken(format!("connection error: {e}"));
                        healthy = false;
                    }
                    Io::Read(Ok(0)) => {
                        self.broken("connection closed by the server".to_string());
                        healthy = false;
                    }
                    Io::Read(Ok(_)) => {
                        conn.handle_read(now_ms(self.plan));
                        if let Err(e) = self.on_events(&mut conn) {
                            self.broken(e);
                            healthy = false;
                        } else if conn.state() != State::Open {
                            // The server sent a DPR (answered by the peer
                            // layer): it is going away.
                            self.stopping = true;
                        }
                    }
                }
            }
            healthy
        };
        if healthy {
            self.disconnect(&mut stream, &mut conn, wbuf).await;
        }
        let _ = stream.shutdown().await;
    }

    /// Sends a DPR, waits briefly for the DPA.
    async fn disconnect<S: Transport>(
        &mut self,
        stream: &mut S,
        conn: &mut Connection,
        wbuf: Bytes,
    ) {
        if conn.state() != State::Open {
            let rest = conn.poll_transmit().unwrap_or_default();
            let _ = tokio::time::timeout(DPA_WAIT, async {
                stream.write_all(&wbuf).await?;
                stream.write_all(&rest).await
            })
            .await;
            return;
        }
        conn.close(
            disconnect_cause::DO_NOT_WANT_TO_TALK_TO_YOU,
            now_ms(self.plan),
        );
        let wait = async {
            stream.write_all(&wbuf).await.ok()?;
            loop {
                while let Some(ev) = conn.poll_event() {
                    match ev {
                        Event::Closed(_) => return Some(()),
                        Event::Answer(_) | Event::Request(_) => self.stats.unmatched_answers += 1,
                        _ => {}
                    }
                }
                if let Some(out) = conn.poll_transmit() {
                    stream.write_all(&out).await.ok()?;
                }
                if stream.read_buf(conn.read_buffer()).await.ok()? == 0 {
                    return Some(());
                }
                conn.handle_read(now_ms(self.plan));
            }
        };
        let _ = tokio::time::timeout(DPA_WAIT, wait).await;
    }

    fn next_wake(&self, conn: &Connection) -> Instant {
        let mut w = self.next_scan;
        if let Some(d) = self.deadline.filter(|_| !self.stopping) {
            w = w.min(d);
        }
        if let Some(h) = self.hard_stop {
            w = w.min(h);
        }
        if let Some(t) = conn.poll_timeout() {
            w = w.min(self.plan.base + Duration::from_millis(t));
        }
        w
    }

    /// True when the connection waits for its pacer: open loop, a session
    /// ready to send and no slot released for it.
    fn wants_slot(&self, conn: &Connection) -> bool {
        self.paced.is_some()
            && !self.draining
            && !self.ready.is_empty()
            && conn.state() == State::Open
    }

    /// Handles everything the connection has for us: answers, requests
    /// from the server, the close.
    fn on_events(&mut self, conn: &mut Connection) -> Result<(), String> {
        let now = Instant::now();
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Answer(frame) => match Message::parse(&frame) {
                    Ok(msg) if msg.command_code() == cmd::CREDIT_CONTROL => {
                        self.on_answer(&msg, now)
                    }
                    _ => self.stats.unmatched_answers += 1,
                },
                Event::Request(frame) => {
                    if let Ok(msg) = Message::parse(&frame) {
                        match msg.command_code() {
                            cmd::RE_AUTH | cmd::ABORT_SESSION => self.server_request(&msg, conn),
                            _ => self.refuse(&msg, conn),
                        }
                    }
                }
                // Answered by the connection with the prescribed error.
                Event::Rejected { .. } => self.stats.server_requests += 1,
                Event::Opened { .. } => {}
                // The client sends no request through send_request.
                Event::AnswerTimeout { .. } | Event::UnexpectedAnswer { .. } => {
                    self.stats.unmatched_answers += 1
                }
                Event::Closed(r) if r.is_abort() => {
                    self.stats.protocol_errors += 1;
                    return Err(format!("answer stream cannot be framed: {r:?}"));
                }
                Event::Closed(r) => return Err(format!("peer layer closed the connection: {r:?}")),
            }
        }
        Ok(())
    }

    /// Answers a Re-Auth-Request or Abort-Session-Request as a PGW does:
    /// 2001 for a session in progress (its next request follows at once: a
    /// CCR-Update after an RAR, the CCR-Terminate after an ASR; a session
    /// waiting for credit sends it now), 5002 (DIAMETER_UNKNOWN_SESSION_ID)
    /// for one it does not hold.
    fn server_request(&mut self, msg: &Message<'_>, conn: &mut Connection) {
        let abort = msg.command_code() == cmd::ABORT_SESSION;
        if abort {
            self.stats.abort_requests += 1;
        } else {
            self.stats.re_auth_requests += 1;
        }
        let sid = msg.find(avp::SESSION_ID);
        let slot = sid.as_ref().and_then(|sid| {
            self.slots.iter().position(|s| {
                !matches!(s.phase, Phase::Free | Phase::Parked) && s.sid == sid.data()
            })
        });
        let code = match slot {
            Some(s) => {
                self.wake(s, abort);
                result::SUCCESS
            }
            None => {
                self.stats.unknown_session_requests += 1;
                result::UNKNOWN_SESSION_ID
            }
        };
        let config = conn.config().clone();
        conn.send_with(|out| {
            // Encoder::answer writes the request's Session-Id first.
            let mut e = Encoder::answer(out, msg, false);
            e.u32(avp::RESULT_CODE, code)
                .str(avp::ORIGIN_HOST, &config.peer.origin_host)
                .str(avp::ORIGIN_REALM, &config.peer.origin_realm);
            let _ = e.finish();
        });
    }

    /// Answers a request the load generator does not serve (STR, ...)
    /// with DIAMETER_COMMAND_UNSUPPORTED.
    fn refuse(&mut self, msg: &Message<'_>, conn: &mut Connection) {
        self.stats.server_requests += 1;
        let config = conn.config().clone();
        conn.send_with(|out| {
            let mut e = Encoder::answer(out, msg, true);
            e.u32(avp::RESULT_CODE, result::COMMAND_UNSUPPORTED)
                .str(avp::ORIGIN_HOST, &config.peer.origin_host)
                .str(avp::ORIGIN_REALM, &config.peer.origin_realm);
            let _ = e.finish();
        });
    }
}
