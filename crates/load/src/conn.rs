//! One client connection: capabilities exchange, then many concurrent
//! sessions sharing one socket, requests written in batches and answers
//! matched by Hop-by-Hop Identifier.
//!
//! A connection is a single task that owns all of its state: the session
//! slots, the queue of sessions ready to send, and its counters. Nothing is
//! shared with other connections but a few atomic counters for the progress
//! bar, updated once per batch.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Buf, BytesMut};
use gyro_diameter::codes::{avp, cmd, result};
use gyro_diameter::header::frame_length;
use gyro_diameter::peer::{disconnect_cause, Event, Peer, PeerConfig, Role, State};
use gyro_diameter::types::DiameterTime;
use gyro_diameter::{Encoder, Message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Barrier;

use crate::args::{LoadArgs, Scenario};
use crate::ccr::{self, Builder, Req};
use crate::pacing::{PreciseTimer, Schedule};
use crate::stats::{ConnStats, ReqType};

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
}

/// Counters the progress bar reads while the run goes on.
#[derive(Default)]
pub(crate) struct Live {
    pub sent: AtomicU64,
    pub answered: AtomicU64,
    pub errors: AtomicU64,
    /// Set to stop early (Ctrl-C): no new sessions, a short drain.
    pub stop: AtomicBool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No session: may start one when popped from the ready queue.
    Free,
    /// A session waits to send its next request.
    Ready,
    /// A request of this session is in flight.
    InFlight,
}

/// One session place. A connection has `window` of them, so at most
/// `window` requests are ever in flight.
struct Slot {
    phase: Phase,
    data: bool,
    /// CC-Request-Number of the next (or in-flight) request.
    number: u32,
    /// Subscriber offset in the range.
    offset: u64,
    hbh: u32,
    req: ReqType,
    intended: Instant,
    sent: Instant,
    /// Requests of the session's budget not yet sent.
    reserved: u64,
    sid: Vec<u8>,
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
    /// Requests this connection may still reserve (count mode).
    budget: Option<u64>,
    deadline: Option<Instant>,
    hard_stop: Option<Instant>,
    stopping: bool,
    /// Intended send times (open loop only).
    schedule: Option<Schedule>,
    next_scan: Instant,
    scan_every: Duration,
    rng: u64,
    session_seq: u64,
    sid_prefix: Vec<u8>,
    errors: u64,
    pushed: (u64, u64, u64),
    stats: ConnStats,
    /// Answer records not yet written to the `--record` file.
    recorded: Vec<u8>,
}

/// Runs one connection from connect to close and returns its counters.
pub(crate) async fn run_connection(
    idx: u32,
    plan: Arc<Plan>,
    live: Arc<Live>,
    barrier: Arc<Barrier>,
) -> ConnStats {
    let opened = open(idx, &plan).await;
    barrier.wait().await;
    let t0 = *plan.start.get_or_init(Instant::now);
    let mut stats = ConnStats::new();
    let (stream, peer, pcfg, inbuf) = match opened {
        Ok(x) => x,
        Err(e) => {
            stats.connection_error(e);
            return stats;
        }
    };
    stats.opened = true;
    let mut c = Conn::new(idx, &plan, &live, stats, t0);
    c.drive(stream, peer, pcfg, inbuf).await;
    c.flush_live();
    c.flush_record();
    c.stats
}

fn now_ms(plan: &Plan) -> u64 {
    plan.base.elapsed().as_millis() as u64
}

/// Connects and exchanges capabilities.
async fn open(idx: u32, plan: &Plan) -> Result<(TcpStream, Peer, PeerConfig, BytesMut), String> {
    let t = plan.args.timeout;
    let addr = plan.addr;
    let mut stream = match tokio::time::timeout(t, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(format!("connect to {addr}: {e}")),
        Err(_) => return Err(format!("connect to {addr}: timed out")),
    };
    let _ = stream.set_nodelay(true);
    let host = plan.args.connection_origin_host(idx);
    let mut pcfg = PeerConfig::new(&host, &plan.args.origin_realm);
    if let Ok(local) = stream.local_addr() {
        pcfg.host_ip_addresses = vec![local.ip()];
    }
    pcfg.product_name = "gyro-load".to_string();
    pcfg.origin_state_id = plan.session_high;
    pcfg.watchdog_ms = plan.args.watchdog.as_millis().max(1) as u64;
    pcfg.watchdog_jitter_ms = pcfg.watchdog_ms.min(2_000) / 3;
    pcfg.handshake_timeout_ms = t.as_millis().max(1) as u64;
    let mut peer = Peer::new(
        Role::Initiator,
        &pcfg,
        now_ms(plan),
        plan.seed ^ (u64::from(idx) << 32) ^ 0x9e37_79b9,
    );
    let mut out = BytesMut::with_capacity(1024);
    peer.connect(&pcfg, &mut out)
        .map_err(|e| format!("encoding CER: {e}"))?;
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
    let handshake = async {
        stream
            .write_all(&out)
            .await
            .map_err(|e| format!("sending CER: {e}"))?;
        out.clear();
        loop {
            while let Some(len) = next_frame(&inbuf).map_err(|e| format!("reading CEA: {e}"))? {
                let msg = Message::parse(&inbuf[..len]).map_err(|e| format!("reading CEA: {e}"))?;
                let ev = peer
                    .handle(&pcfg, &msg, now_ms(plan), &mut out)
                    .map_err(|e| format!("reading CEA: {e}"))?;
                inbuf.advance(len);
                match ev {
                    Event::Opened => return Ok(()),
                    Event::Close(r) => return Err(format!("capabilities exchange failed: {r:?}")),
                    _ => {}
                }
            }
            if !out.is_empty() {
                stream.write_all(&out).await.map_err(|e| e.to_string())?;
                out.clear();
            }
            let n = stream
                .read_buf(&mut inbuf)
                .await
                .map_err(|e| format!("waiting for CEA: {e}"))?;
            if n == 0 {
                return Err("connection closed before the CEA".to_string());
            }
        }
    };
    match tokio::time::timeout(t, handshake).await {
        Ok(Ok(())) => Ok((stream, peer, pcfg, inbuf)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("no CEA within the timeout".to_string()),
    }
}

/// The length of the next whole message in `buf`, if there is one.
fn next_frame(buf: &[u8]) -> Result<Option<usize>, gyro_diameter::Error> {
    Ok(frame_length(buf, MAX_MESSAGE)?.filter(|&n| buf.len() >= n))
}

enum Io {
    Wrote(std::io::Result<usize>),
    Read(std::io::Result<usize>),
    Timer,
    Due,
}

fn xorshift(s: &mut u64) -> u64 {
    let mut x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    x
}

impl<'p> Conn<'p> {
    fn new(idx: u32, plan: &'p Plan, live: &'p Live, stats: ConnStats, now: Instant) -> Self {
        let a = &plan.args;
        let window = a.effective_window();
        let slot_bits = 32 - (window - 1).leading_zeros();
        let conns = u64::from(a.connections.max(1));
        let budget = a
            .count
            .map(|n| n / conns + u64::from(u64::from(idx) < n % conns));
        let interval = a
            .rate
            .map(|r| Duration::from_secs_f64((conns as f64 / r).min(1.0e6)));
        let schedule =
            interval.map(|iv| Schedule::new(iv, now + iv.mul_f64(f64::from(idx) / conns as f64)));
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
            budget,
            deadline,
            hard_stop: deadline.map(|d| d + a.timeout),
            stopping: false,
            schedule,
            next_scan: now + scan_every,
            scan_every,
            rng: (plan.seed ^ (u64::from(idx) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1,
            session_seq: 0,
            sid_prefix,
            errors: 0,
            pushed: (0, 0, 0),
            stats,
            recorded: Vec::new(),
        }
    }

    fn done(&self) -> bool {
        self.ready.is_empty() && self.in_flight == 0
    }

    async fn drive(
        &mut self,
        mut stream: TcpStream,
        mut peer: Peer,
        pcfg: PeerConfig,
        mut inbuf: BytesMut,
    ) {
        let mut out = BytesMut::with_capacity(READ_CHUNK);
        let healthy = {
            let (mut rd, mut wr) = stream.split();
            let sleep = tokio::time::sleep_until(Instant::now().into());
            tokio::pin!(sleep);
            let mut armed: Option<Instant> = None;
            let mut pacer = PreciseTimer::new();
            let mut healthy = match self.on_read(&mut inbuf, &mut peer, &pcfg, &mut out) {
                Ok(()) => true,
                Err(e) => {
                    self.broken(e);
                    false
                }
            };
            while healthy {
                let now = Instant::now();
                if self.live.stop.load(Ordering::Relaxed) && !self.stopping {
                    self.stopping = true;
                    let soon = now + self.plan.args.timeout.min(Duration::from_secs(1));
                    self.hard_stop = Some(self.hard_stop.map_or(soon, |h| h.min(soon)));
                }
                if now >= self.next_scan {
                    self.scan_timeouts(now);
                    self.next_scan = now + self.scan_every;
                }
                if self.hard_stop.is_some_and(|h| now >= h) {
                    self.abandon();
                    break;
                }
                let ms = now_ms(self.plan);
                if peer.poll_timeout().is_some_and(|t| ms >= t) {
                    match peer.handle_timeout(&pcfg, ms, &mut out) {
                        Ok(Some(Event::Close(r))) => {
                            self.broken(format!("peer layer closed the connection: {r:?}"));
                            healthy = false;
                            break;
                        }
                        Ok(_) => {}
                        Err(e) => {
                            self.broken(format!("peer layer: {e}"));
                            healthy = false;
                            break;
                        }
                    }
                }
                if peer.state() == State::Open {
                    self.fill(now, &mut out);
                }
                self.flush_live();
                if self.done() && out.is_empty() {
                    break;
                }
                let wake = self.next_wake(&peer);
                if armed != Some(wake) {
                    sleep.as_mut().reset(wake.into());
                    armed = Some(wake);
                }
                let due = self.next_due(&peer, now);
                let io = tokio::select! {
                    biased;
                    r = wr.write_buf(&mut out), if !out.is_empty() => Io::Wrote(r),
                    r = rd.read_buf(&mut inbuf) => Io::Read(r),
                    () = pacer.wait_until(due.unwrap_or(now)), if due.is_some() => Io::Due,
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
                        if let Err(e) = self.on_read(&mut inbuf, &mut peer, &pcfg, &mut out) {
                            self.broken(e);
                            healthy = false;
                        } else if peer.state() != State::Open {
                            // The server sent a DPR (answered by the peer
                            // layer): it is going away.
                            self.stopping = true;
                        }
                        if inbuf.capacity() - inbuf.len() < MIN_READ_ROOM {
                            inbuf.reserve(READ_CHUNK);
                        }
                    }
                }
            }
            healthy
        };
        if healthy {
            self.disconnect(&mut stream, &mut peer, &pcfg, &mut inbuf, &mut out)
                .await;
        }
        let _ = stream.shutdown().await;
    }

    /// Sends a DPR, waits briefly for the DPA.
    async fn disconnect(
        &mut self,
        stream: &mut TcpStream,
        peer: &mut Peer,
        pcfg: &PeerConfig,
        inbuf: &mut BytesMut,
        out: &mut BytesMut,
    ) {
        if peer.state() != State::Open {
            let _ = tokio::time::timeout(DPA_WAIT, stream.write_all(out)).await;
            return;
        }
        if peer
            .disconnect(
                pcfg,
                disconnect_cause::DO_NOT_WANT_TO_TALK_TO_YOU,
                now_ms(self.plan),
                out,
            )
            .is_err()
        {
            return;
        }
        let wait = async {
            stream.write_all(out).await.ok()?;
            out.clear();
            loop {
                while let Some(len) = next_frame(inbuf).ok()? {
                    let msg = Message::parse(&inbuf[..len]).ok()?;
                    let ev = peer.handle(pcfg, &msg, now_ms(self.plan), out).ok()?;
                    inbuf.advance(len);
                    match ev {
                        Event::Close(_) => return Some(()),
                        Event::Application => self.stats.unmatched_answers += 1,
                        _ => {}
                    }
                }
                if !out.is_empty() {
                    stream.write_all(out).await.ok()?;
                    out.clear();
                }
                if stream.read_buf(inbuf).await.ok()? == 0 {
                    return Some(());
                }
            }
        };
        let _ = tokio::time::timeout(DPA_WAIT, wait).await;
    }

    /// The connection broke: everything in flight is lost.
    fn broken(&mut self, why: String) {
        self.stats.connection_error(why);
        for s in &mut self.slots {
            if s.phase == Phase::InFlight {
                self.stats.lost += 1;
                self.errors += 1;
                self.stats.sessions_failed += 1;
            }
            s.phase = Phase::Free;
        }
        self.in_flight = 0;
        self.ready.clear();
    }

    /// The run was stopped with requests in flight.
    fn abandon(&mut self) {
        for s in &mut self.slots {
            if s.phase == Phase::InFlight {
                self.stats.abandoned += 1;
            }
            s.phase = Phase::Free;
        }
        self.in_flight = 0;
        self.ready.clear();
    }

    fn next_wake(&self, peer: &Peer) -> Instant {
        let mut w = self.next_scan;
        if let Some(d) = self.deadline.filter(|_| !self.stopping) {
            w = w.min(d);
        }
        if let Some(h) = self.hard_stop {
            w = w.min(h);
        }
        if let Some(t) = peer.poll_timeout() {
            w = w.min(self.plan.base + Duration::from_millis(t));
        }
        w
    }

    /// When the pacer must wake for the next scheduled request (open loop,
    /// a session ready to send).
    fn next_due(&self, peer: &Peer, now: Instant) -> Option<Instant> {
        let s = self.schedule.as_ref()?;
        (!self.ready.is_empty() && peer.state() == State::Open).then(|| s.wake(now))
    }

    fn flush_live(&mut self) {
        let sent: u64 = self.stats.types.iter().map(|t| t.sent).sum();
        let answered: u64 = self.stats.types.iter().map(|t| t.answered).sum();
        let (ps, pa, pe) = self.pushed;
        if sent != ps {
            self.live.sent.fetch_add(sent - ps, Ordering::Relaxed);
        }
        if answered != pa {
            self.live
                .answered
                .fetch_add(answered - pa, Ordering::Relaxed);
        }
        if self.errors != pe {
            self.live
                .errors
                .fetch_add(self.errors - pe, Ordering::Relaxed);
        }
        self.pushed = (sent, answered, self.errors);
    }

    /// Sends what the window, the schedule and the budget allow.
    fn fill(&mut self, now: Instant, out: &mut BytesMut) {
        if self.deadline.is_some_and(|d| now >= d) {
            self.stopping = true;
        }
        if self.ready.is_empty() {
            return;
        }
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let ts = DiameterTime::from_unix(unix).unwrap_or(DiameterTime(0));
        while let Some(&s) = self.ready.front() {
            let free = self.slots[s as usize].phase == Phase::Free;
            if free && self.stopping {
                self.ready.pop_front();
                continue;
            }
            if self.schedule.as_ref().is_some_and(|s| !s.due(now)) {
                break;
            }
            self.ready.pop_front();
            if free && !self.start_session(s as usize) {
                // Not enough budget left for another session: retire the
                // slot.
                continue;
            }
            let intended = match &mut self.schedule {
                Some(s) => {
                    let t = s.take();
                    self.stats
                        .record_send_lag(now.saturating_duration_since(t).as_micros() as u64);
                    t
                }
                None => now,
            };
            self.send(s as usize, intended, now, ts, out);
        }
    }

    fn start_session(&mut self, s: usize) -> bool {
        let a = &self.plan.args;
        let mut data = match a.scenario {
            Scenario::Data => true,
            Scenario::Sms => false,
            Scenario::Mix => {
                let x = xorshift(&mut self.rng) >> 11;
                (x as f64 / (1u64 << 53) as f64) >= a.sms_ratio
            }
        };
        let mut len = if data { a.data_session_len() } else { 1 };
        if let Some(b) = self.budget {
            if b < len {
                if a.scenario == Scenario::Mix && b >= 1 {
                    data = false;
                    len = 1;
                } else {
                    return false;
                }
            }
            self.budget = Some(b - len);
        }
        let offset = xorshift(&mut self.rng) % a.subscribers.max(1);
        self.session_seq += 1;
        let mut digits = [0u8; 20];
        let slot = &mut self.slots[s];
        slot.sid.clear();
        slot.sid.extend_from_slice(&self.sid_prefix);
        slot.sid
            .extend_from_slice(ccr::decimal(self.session_seq, 0, &mut digits));
        slot.data = data;
        slot.number = 0;
        slot.offset = offset;
        slot.reserved = len;
        self.stats.sessions_started += 1;
        true
    }

    fn send(
        &mut self,
        s: usize,
        intended: Instant,
        now: Instant,
        ts: DiameterTime,
        out: &mut BytesMut,
    ) {
        let updates = self.plan.args.updates;
        self.gen = self.gen.wrapping_add(1);
        self.e2e = self.e2e.wrapping_add(1);
        let hbh = self.gen.wrapping_shl(self.slot_bits) | s as u32;
        let slot = &mut self.slots[s];
        let kind = if !slot.data {
            ReqType::Event
        } else if slot.number == 0 {
            ReqType::Initial
        } else if slot.number <= updates {
            ReqType::Update
        } else {
            ReqType::Terminate
        };
        self.plan.builder.write(
            out,
            &Req {
                kind,
                number: slot.number,
                session_id: &slot.sid,
                msisdn: self.plan.args.subscriber_start.wrapping_add(slot.offset),
                offset: slot.offset,
                hop_by_hop: hbh,
                end_to_end: self.e2e,
                timestamp: ts,
            },
        );
        slot.phase = Phase::InFlight;
        slot.hbh = hbh;
        slot.req = kind;
        slot.intended = intended;
        slot.sent = now;
        slot.reserved = slot.reserved.saturating_sub(1);
        self.in_flight += 1;
        self.stats.types[kind as usize].sent += 1;
    }

    /// Ends the session in slot `s` and frees the slot for a new one.
    fn end_session(&mut self, s: usize, completed: bool) {
        let slot = &mut self.slots[s];
        if let Some(b) = &mut self.budget {
            *b += slot.reserved;
        }
        slot.reserved = 0;
        slot.phase = Phase::Free;
        if completed {
            self.stats.sessions_completed += 1;
        } else {
            self.stats.sessions_failed += 1;
        }
        self.ready.push_back(s as u32);
    }

    fn scan_timeouts(&mut self, now: Instant) {
        if self.in_flight == 0 {
            return;
        }
        let timeout = self.plan.args.timeout;
        for s in 0..self.slots.len() {
            let slot = &self.slots[s];
            if slot.phase == Phase::InFlight && now.duration_since(slot.sent) >= timeout {
                self.stats.types[slot.req as usize].timeouts += 1;
                self.errors += 1;
                self.in_flight -= 1;
                self.end_session(s, false);
            }
        }
    }

    /// Frames and handles everything whole in `inbuf`.
    fn on_read(
        &mut self,
        inbuf: &mut BytesMut,
        peer: &mut Peer,
        pcfg: &PeerConfig,
        out: &mut BytesMut,
    ) -> Result<(), String> {
        let now = Instant::now();
        let ms = now_ms(self.plan);
        loop {
            let len = match next_frame(inbuf) {
                Ok(Some(n)) => n,
                Ok(None) => return Ok(()),
                Err(e) => {
                    self.stats.protocol_errors += 1;
                    return Err(format!("answer stream cannot be framed: {e}"));
                }
            };
            let msg = match Message::parse(&inbuf[..len]) {
                Ok(m) => m,
                Err(e) => {
                    self.stats.protocol_errors += 1;
                    return Err(format!("answer stream cannot be framed: {e}"));
                }
            };
            match peer.handle(pcfg, &msg, ms, out) {
                Ok(Event::Application) => {
                    if msg.is_request() {
                        self.refuse(&msg, pcfg, out);
                    } else if msg.command_code() == cmd::CREDIT_CONTROL {
                        self.on_answer(&msg, now);
                    } else {
                        self.stats.unmatched_answers += 1;
                    }
                }
                Ok(Event::Close(r)) => {
                    return Err(format!("peer layer closed the connection: {r:?}"))
                }
                Ok(_) => {}
                Err(e) => return Err(format!("peer layer: {e}")),
            }
            inbuf.advance(len);
        }
    }

    /// Answers a request the load generator does not serve (RAR, ASR, ...)
    /// with DIAMETER_COMMAND_UNSUPPORTED.
    fn refuse(&mut self, msg: &Message<'_>, pcfg: &PeerConfig, out: &mut BytesMut) {
        self.stats.server_requests += 1;
        let mut e = Encoder::answer(out, msg, true);
        e.u32(avp::RESULT_CODE, result::COMMAND_UNSUPPORTED)
            .str(avp::ORIGIN_HOST, &pcfg.origin_host)
            .str(avp::ORIGIN_REALM, &pcfg.origin_realm);
        let _ = e.finish();
    }

    /// Writes the buffered `--record` lines.
    fn flush_record(&mut self) {
        use std::io::Write;
        if let Some(f) = &self.plan.record {
            if !self.recorded.is_empty() {
                if let Ok(mut f) = f.lock() {
                    let _ = f.write_all(&self.recorded);
                }
                self.recorded.clear();
            }
        }
    }

    fn on_answer(&mut self, msg: &Message<'_>, now: Instant) {
        let hbh = msg.header().hop_by_hop;
        let s = (hbh & self.slot_mask) as usize;
        let matched = self
            .slots
            .get(s)
            .is_some_and(|x| x.phase == Phase::InFlight && x.hbh == hbh);
        if !matched {
            self.stats.unmatched_answers += 1;
            return;
        }
        let slot = &mut self.slots[s];
        let ans = ccr::read_answer(
            msg,
            &slot.sid,
            &mut self.stats.mscc_result_codes,
            &mut self.stats.experimental_result_codes,
        );
        let t = &mut self.stats.types[slot.req as usize];
        t.answered += 1;
        t.record_latency(now.saturating_duration_since(slot.intended).as_micros() as u64);
        if let Some(c) = ans.code() {
            t.result_codes.add(c);
        }
        let ok = ans.is_success();
        if !ans.well_formed {
            self.stats.protocol_errors += 1;
        }
        if !ok {
            t.errors += 1;
            self.errors += 1;
        }
        self.in_flight -= 1;
        self.stats.last_answer = Some(now);
        if self.plan.record.is_some() {
            use std::io::Write;
            let (req, number) = (slot.req, slot.number);
            let sid = String::from_utf8_lossy(&slot.sid).into_owned();
            let _ = writeln!(
                self.recorded,
                "{{\"session_id\":{},\"type\":\"{}\",\"number\":{},\"result_code\":{}}}",
                serde_json::Value::String(sid),
                req.name(),
                number,
                ans.code().unwrap_or(0)
            );
            if self.recorded.len() >= 64 * 1024 {
                self.flush_record();
            }
        }
        let slot = &mut self.slots[s];
        if !ok || matches!(slot.req, ReqType::Terminate | ReqType::Event) {
            self.end_session(s, ok);
        } else {
            slot.number += 1;
            slot.phase = Phase::Ready;
            self.ready.push_back(s as u32);
        }
    }
}
