//! The session slots of a connection: which request each session sends
//! next, when it may (the window, the open-loop schedule, the `--count`
//! budget), and how the request is built.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

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
}

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
    /// The server asked to end the session (ASR): its next request is the
    /// CCR-Terminate.
    pub(super) aborted: bool,
}

impl Conn<'_> {
    /// The connection broke: everything in flight is lost.
    pub(super) fn broken(&mut self, why: String) {
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
    pub(super) fn abandon(&mut self) {
        for s in &mut self.slots {
            if s.phase == Phase::InFlight {
                self.stats.abandoned += 1;
            }
            s.phase = Phase::Free;
        }
        self.in_flight = 0;
        self.ready.clear();
    }

    /// Sends what the window, the schedule and the budget allow.
    pub(super) fn fill(&mut self, now: Instant, out: &mut BytesMut) {
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

    pub(super) fn start_session(&mut self, s: usize) -> bool {
        let a = &self.plan.args;
        let mut data = match a.scenario {
            Scenario::Data => true,
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
        let offset = self.rng.u64(..a.subscribers.max(1));
        self.session_seq += 1;
        let mut digits = [0u8; 20];
        let slot = &mut self.slots[s];
        slot.sid.clear();
        slot.sid.extend_from_slice(&self.sid_prefix);
        slot.sid
            .extend_from_slice(ccr::decimal(self.session_seq, 0, &mut digits));
        slot.data = data;
        slot.aborted = false;
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
        self.gen = self.gen.wrapping_add(1);
        self.e2e = self.e2e.wrapping_add(1);
        let hbh = self.gen.wrapping_shl(self.slot_bits) | s as u32;
        let slot = &mut self.slots[s];
        let kind = if !slot.data {
            ReqType::Event
        } else if slot.number == 0 {
            ReqType::Initial
        } else if slot.number <= updates && !slot.aborted {
            ReqType::Update
        } else {
            ReqType::Terminate
        };
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
        self.stats.types[kind as usize].sent += 1;
    }

    /// Ends the session in slot `s` and frees the slot for a new one.
    pub(super) fn end_session(&mut self, s: usize, completed: bool) {
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

    pub(super) fn scan_timeouts(&mut self, now: Instant) {
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
}
