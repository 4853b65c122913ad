//! The session slots of a connection: which request each session sends
//! next, when it may (the window, the slots its pacer released in open
//! loop, the `--count` budget), and how the request is built.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use gyro_diameter::types::DiameterTime;

use super::Conn;
use crate::args::Scenario;
use crate::ccr::{self, Req};
use crate::stats::ReqType;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// No session: may start one when popped from the ready queue.
    Free,
    /// A session waits to send its next request.
    Ready,
    /// A request of this session is in flight.
    InFlight,
    /// Topup scenario: the session's quota ran out; it stays open until
    /// the server's Re-Auth-Request (or the end of the run).
    Waiting,
    /// Topup scenario: no session; the last CCR-Initial was refused for
    /// lack of credit, and a new one starts after [`CREDIT_RETRY`].
    Parked,
    /// The session's CCR-Terminate was refused with a protocol error
    /// (3xxx: not processed) or went unanswered: it is sent again after
    /// [`terminate_backoff`].
    Backoff,
}

/// How many times a session's CCR-Terminate is sent at most.
pub(super) const MAX_TERMINATE_TRIES: u32 = 8;

/// How long a session waits before sending its CCR-Terminate again after
/// `tries` tries: 50 ms, doubled each time, at most 1 s.
pub(super) fn terminate_backoff(tries: u32) -> Duration {
    Duration::from_millis(50 << tries.clamp(1, 6).saturating_sub(1)).min(Duration::from_secs(1))
}

/// True when a failed answer says the server processed the request (a
/// 4xxx or 5xxx Result-Code: RFC 8506 has the server end the session
/// then), false for a protocol error (3xxx, e.g. DIAMETER_TOO_BUSY: the
/// request never reached the session) or an unreadable answer.
pub(super) fn processed(code: Option<u32>) -> bool {
    code.is_some_and(|c| c >= 4000)
}

/// Topup scenario: how long a session place whose CCR-Initial was refused
/// with DIAMETER_CREDIT_LIMIT_REACHED waits before it tries again.
pub(super) const CREDIT_RETRY: Duration = Duration::from_secs(1);

/// One session place. A connection has `window` of them, so at most
/// `window` requests are ever in flight.
pub(super) struct Slot {
    pub(super) phase: Phase,
    pub(super) data: bool,
    /// CC-Request-Number of the next (or in-flight) request.
    pub(super) number: u32,
    /// Subscriber offset in the range.
    pub(super) offset: u64,
    pub(super) hbh: u32,
    pub(super) req: ReqType,
    pub(super) intended: Instant,
    pub(super) sent: Instant,
    /// Requests of the session's budget not yet sent.
    pub(super) reserved: u64,
    pub(super) sid: Vec<u8>,
    /// The request in flight, whole (only with `--record-messages`).
    pub(super) request: Vec<u8>,
    /// The server asked to end the session (ASR), or the run ends while it
    /// waits for credit: its next request is the CCR-Terminate.
    pub(super) aborted: bool,
    /// A Re-Auth-Request woke the session: its next request is a
    /// CCR-Update, even after its last planned one.
    pub(super) resume: bool,
    /// A Re-Auth-Request arrived while a request was in flight: if its
    /// answer says the quota ran out, the session asks again at once
    /// instead of waiting.
    pub(super) re_auth_in_flight: bool,
    /// The server holds the session: its CCR-Initial was answered with
    /// success and it has not ended yet. Such a session is ended with a
    /// CCR-Terminate whatever happens to its other requests.
    pub(super) open: bool,
    /// A request of the session failed: it ends as failed even when its
    /// CCR-Terminate succeeds.
    pub(super) failed: bool,
    /// The request in flight was sent in the drain (not measured).
    pub(super) drain: bool,
    /// CCR-Terminates sent for the session so far.
    pub(super) tries: u32,
}

impl Conn<'_> {
    /// The connection broke: everything in flight is lost.
    /// The connection broke: everything in flight is lost, and the
    /// sessions the server holds are left open.
    pub(super) fn broken(&mut self, why: String) {
        let left = format!("connection lost ({why})");
        self.stats.connection_error(why);
        let (lost, mut open) = (self.stats.lost, 0);
        for s in &mut self.slots {
            match s.phase {
                Phase::InFlight if !s.drain => {
                    self.stats.lost += 1;
                    self.errors += 1;
                    self.stats.sessions_failed += 1;
                    self.stats.last_settled = Some(Instant::now());
                }
                Phase::InFlight | Phase::Waiting | Phase::Ready | Phase::Backoff => {
                    self.stats.sessions_failed += 1
                }
                Phase::Free | Phase::Parked => {}
            }
            if s.phase != Phase::Free && s.open {
                open += 1;
            }
            s.open = false;
            s.phase = Phase::Free;
        }
        let lost = self.stats.lost - lost;
        self.stats.per_second.lost(Instant::now(), lost);
        self.leave_open(open, &left);
        self.clear();
    }

    /// The run was stopped with requests in flight (`why`): the sessions
    /// the server still holds are left open.
    pub(super) fn abandon(&mut self, why: &str) {
        let mut open = 0;
        for s in &mut self.slots {
            if s.phase == Phase::InFlight && !s.drain {
                self.stats.abandoned += 1;
            }
            if s.phase != Phase::Free && s.open {
                open += 1;
                self.stats.sessions_failed += 1;
            }
            s.open = false;
            s.phase = Phase::Free;
        }
        self.leave_open(open, why);
        self.clear();
    }

    fn clear(&mut self) {
        self.in_flight = 0;
        self.waiting = 0;
        self.parked = 0;
        self.backoff = 0;
        self.ready.clear();
    }

    /// Counts `n` sessions the server may still hold, with the first
    /// reason.
    pub(super) fn leave_open(&mut self, n: u64, why: &str) {
        if n == 0 {
            return;
        }
        self.stats.left_open += n;
        if self.stats.left_open_reason.is_none() {
            self.stats.left_open_reason = Some(why.to_string());
        }
    }

    /// A CCR-Update of the session in slot `s` failed without being
    /// processed, or went unanswered, while the server holds the session:
    /// its next request is the CCR-Terminate.
    pub(super) fn terminate_next(&mut self, s: usize) {
        let slot = &mut self.slots[s];
        slot.failed = true;
        slot.aborted = true;
        slot.number += 1;
        slot.phase = Phase::Ready;
        self.ready.push_back(s as u32);
    }

    /// The CCR-Terminate of the session in slot `s` was answered `code`
    /// (`ok` for success).
    pub(super) fn terminated(&mut self, s: usize, ok: bool, code: Option<u32>, now: Instant) {
        if ok || processed(code) {
            // Ended (5002 too: the server holds no such session).
            let slot = &self.slots[s];
            let completed = ok && !slot.failed;
            if slot.drain {
                self.stats.drain_finished += 1;
            }
            self.end_session(s, completed);
        } else {
            let why = match code {
                Some(c) => {
                    // Refused unprocessed (3xxx): the next try is a new
                    // request with the next number, so that each
                    // (Session-Id, CC-Request-Number) names one request
                    // and one outcome. An unreadable answer may hide a
                    // processed request: its retry keeps the number.
                    self.slots[s].number += 1;
                    format!("CCR-T refused with Result-Code {c}")
                }
                None => "CCR-T answer unreadable".to_string(),
            };
            self.retry_terminate(s, now, &why);
        }
    }

    /// The CCR-Terminate of the session in slot `s` did not end it
    /// (`why`): it is sent again after a back-off, or, after
    /// [`MAX_TERMINATE_TRIES`], the session is left open.
    pub(super) fn retry_terminate(&mut self, s: usize, now: Instant, why: &str) {
        let slot = &mut self.slots[s];
        if slot.tries >= MAX_TERMINATE_TRIES {
            let why = format!("{why}, {MAX_TERMINATE_TRIES} times");
            self.leave_open(1, &why);
            self.end_session(s, false);
        } else {
            slot.phase = Phase::Backoff;
            slot.sent = now;
            self.backoff += 1;
        }
    }

    /// Topup scenario: the answer to the session in slot `s` says its
    /// quota ran out. It waits for the server's Re-Auth-Request, or asks
    /// again at once when one already came while the request was in
    /// flight.
    pub(super) fn wait_for_credit(&mut self, s: usize) {
        self.stats.sessions_waited += 1;
        let slot = &mut self.slots[s];
        if slot.re_auth_in_flight {
            self.stats.sessions_continued += 1;
            slot.resume = true;
            slot.phase = Phase::Ready;
            self.ready.push_back(s as u32);
        } else {
            slot.phase = Phase::Waiting;
            self.waiting += 1;
        }
    }

    /// A Re-Auth-Request (or, with `abort`, an Abort-Session-Request) for
    /// the session in slot `s`: a waiting session sends its CCR-Update
    /// (its CCR-Terminate) at once; one with a request in flight notes it.
    pub(super) fn wake(&mut self, s: usize, abort: bool) {
        let slot = &mut self.slots[s];
        if abort {
            slot.aborted = true;
        }
        match slot.phase {
            Phase::Waiting => {
                if !abort {
                    slot.resume = true;
                    self.stats.sessions_continued += 1;
                }
                slot.phase = Phase::Ready;
                self.waiting -= 1;
                self.ready.push_back(s as u32);
            }
            Phase::InFlight if !abort => slot.re_auth_in_flight = true,
            _ => {}
        }
    }

    /// The run ends: sessions waiting for credit send their CCR-Terminate.
    pub(super) fn release_waiting(&mut self) {
        for s in 0..self.slots.len() {
            let slot = &mut self.slots[s];
            if slot.phase == Phase::Waiting {
                slot.aborted = true;
                slot.phase = Phase::Ready;
                self.stats.sessions_waiting_at_end += 1;
                self.ready.push_back(s as u32);
            }
        }
        self.waiting = 0;
    }

    /// Topup scenario: the CCR-Initial in slot `s` was refused for lack of
    /// credit; the place starts a new session after [`CREDIT_RETRY`].
    pub(super) fn park(&mut self, s: usize, now: Instant) {
        self.end_session(s, false);
        // end_session queued the place: take it back until the retry.
        self.ready.pop_back();
        let slot = &mut self.slots[s];
        slot.phase = Phase::Parked;
        slot.sent = now;
        self.parked += 1;
    }

    /// Sends what the window, the schedule and the budget allow.
    pub(super) fn fill(&mut self, now: Instant, out: &mut BytesMut) {
        if self.deadline.is_some_and(|d| now >= d) {
            self.begin_drain(now);
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
            // The drain is not paced.
            if !self.draining && self.paced.as_ref().is_some_and(|p| !p.due()) {
                break;
            }
            self.ready.pop_front();
            if free && !self.start_session(s as usize) {
                // Not enough budget left for another session: retire the
                // slot.
                continue;
            }
            let intended = match &mut self.paced {
                Some(p) if !self.draining => {
                    let t = p.take();
                    self.stats.record_send(t, now, self.deadline);
                    t
                }
                _ => now,
            };
            self.send(s as usize, intended, now, ts, out);
        }
    }

    pub(super) fn start_session(&mut self, s: usize) -> bool {
        let a = &self.plan.args;
        let mut data = match a.scenario {
            Scenario::Data | Scenario::Topup => true,
            Scenario::Sms => false,
            Scenario::Mix => self.rng.f64() >= a.sms_ratio,
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
        let offset = match a.scenario {
            Scenario::Topup => (self.place_base + s as u64) % a.subscribers.max(1),
            _ => self.rng.u64(..a.subscribers.max(1)),
        };
        self.session_seq += 1;
        let mut digits = [0u8; 20];
        let slot = &mut self.slots[s];
        slot.sid.clear();
        slot.sid.extend_from_slice(&self.sid_prefix);
        slot.sid
            .extend_from_slice(ccr::decimal(self.session_seq, 0, &mut digits));
        slot.data = data;
        slot.aborted = false;
        slot.resume = false;
        slot.re_auth_in_flight = false;
        slot.open = false;
        slot.failed = false;
        slot.tries = 0;
        slot.number = 0;
        slot.offset = offset;
        slot.reserved = len;
        self.stats.sessions_started += 1;
        true
    }

    pub(super) fn send(
        &mut self,
        s: usize,
        intended: Instant,
        now: Instant,
        ts: DiameterTime,
        out: &mut BytesMut,
    ) {
        let updates = self.plan.args.updates;
        let drain = self.draining;
        self.gen = self.gen.wrapping_add(1);
        self.e2e = self.e2e.wrapping_add(1);
        let hbh = self.gen.wrapping_shl(self.slot_bits) | s as u32;
        let slot = &mut self.slots[s];
        let kind = if !slot.data {
            ReqType::Event
        } else if slot.number == 0 {
            ReqType::Initial
        } else if slot.aborted || drain {
            // In the drain an open session goes straight to its end.
            ReqType::Terminate
        } else if slot.number <= updates || slot.resume {
            ReqType::Update
        } else {
            ReqType::Terminate
        };
        slot.resume = false;
        slot.re_auth_in_flight = false;
        slot.drain = drain;
        if kind == ReqType::Terminate {
            slot.tries += 1;
        }
        let start = out.len();
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
        if self.plan.args.record_messages {
            slot.request.clear();
            slot.request.extend_from_slice(&out[start..]);
        }
        slot.phase = Phase::InFlight;
        slot.hbh = hbh;
        slot.req = kind;
        slot.intended = intended;
        slot.sent = now;
        slot.reserved = slot.reserved.saturating_sub(1);
        self.in_flight += 1;
        if drain {
            self.stats.drain_sent += 1;
        } else {
            self.stats.types[kind as usize].sent += 1;
            self.stats.per_second.sent(now);
        }
    }

    /// Ends the session in slot `s` and frees the slot for a new one.
    pub(super) fn end_session(&mut self, s: usize, completed: bool) {
        let slot = &mut self.slots[s];
        if let Some(b) = &mut self.budget {
            *b += slot.reserved;
        }
        slot.reserved = 0;
        slot.phase = Phase::Free;
        slot.open = false;
        if completed {
            self.stats.sessions_completed += 1;
        } else {
            self.stats.sessions_failed += 1;
        }
        self.ready.push_back(s as u32);
    }

    /// Handles the requests unanswered too long (the session ends, or, if
    /// the server holds it, goes on to its CCR-Terminate), brings parked
    /// places back once their retry time has come, and sends again the
    /// CCR-Terminates whose back-off is over.
    pub(super) fn scan_timeouts(&mut self, now: Instant) {
        if self.in_flight == 0 && self.parked == 0 && self.backoff == 0 {
            return;
        }
        let timeout = self.plan.args.timeout;
        for s in 0..self.slots.len() {
            let slot = &mut self.slots[s];
            match slot.phase {
                Phase::InFlight if now.duration_since(slot.sent) >= timeout => {
                    let (req, open) = (slot.req, slot.open);
                    if !slot.drain {
                        self.stats.types[req as usize].timeouts += 1;
                        self.stats.per_second.timeout(now);
                        self.stats.last_settled = Some(now);
                        self.errors += 1;
                    }
                    self.in_flight -= 1;
                    if req == ReqType::Terminate && open {
                        self.retry_terminate(s, now, "CCR-T unanswered");
                    } else if req == ReqType::Update && open {
                        self.terminate_next(s);
                    } else {
                        self.end_session(s, false);
                    }
                }
                Phase::Backoff
                    if now.duration_since(slot.sent) >= terminate_backoff(slot.tries) =>
                {
                    slot.phase = Phase::Ready;
                    self.backoff -= 1;
                    self.ready.push_back(s as u32);
                }
                Phase::Parked if now.duration_since(slot.sent) >= CREDIT_RETRY => {
                    slot.phase = Phase::Free;
                    self.parked -= 1;
                    self.ready.push_back(s as u32);
                }
                _ => {}
            }
        }
    }
}
