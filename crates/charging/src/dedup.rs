//! Duplicate detection: a bounded cache of recent answers.
//!
//! A request is a duplicate of one already answered when it has the same
//! Session-Id and CC-Request-Number (RFC 8506 section 5.7), or the same
//! Origin-Host and End-to-End Identifier together with the same Session-Id
//! (RFC 6733 section 6.3; a retransmission never changes its Session-Id, so
//! an End-to-End match under another Session-Id is a client reusing
//! identifiers, not a retransmission). The T flag is not needed: any
//! request matching a cached answer gets that answer again and changes
//! nothing.
//!
//! Entries live `ttl` after the answer (RFC 6733 keeps End-to-End
//! identifiers unique for at least 4 minutes) and at most `capacity` are
//! kept; the oldest go first. Slots and their buffers are reused, so a warm
//! cache allocates nothing per request.
//!
//! The engine journals every answer it remembers
//! ([`crate::Effect::Answered`]) and keeps the live entries in its
//! [`crate::Snapshot`], so the cache is rebuilt on restart and duplicates
//! are recognised across restarts for the cache's lifetime.

use crate::answer::CcAnswer;
use crate::request::CcRequest;
use crate::types::Timestamp;
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;

#[derive(Clone, Debug, Default)]
struct Slot {
    live: bool,
    generation: u64,
    session_id: String,
    request_number: u32,
    origin_host: String,
    end_to_end: u32,
    session_hash: u64,
    e2e_hash: u64,
    answer: CcAnswer,
    at: Timestamp,
}

/// One remembered answer, as [`AnswerCache::entries`] lists it.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    /// Session-Id of the answered request.
    pub session_id: &'a str,
    /// CC-Request-Number of the answered request.
    pub request_number: u32,
    /// Origin-Host of the answered request.
    pub origin_host: &'a str,
    /// End-to-End Identifier of the answered request.
    pub end_to_end: u32,
    /// The answer.
    pub answer: &'a CcAnswer,
    /// When it was answered.
    pub at: Timestamp,
}

/// The answer cache.
#[derive(Clone, Debug)]
pub struct AnswerCache {
    ttl_ms: u64,
    capacity: usize,
    slots: Vec<Slot>,
    free: Vec<usize>,
    order: VecDeque<(Timestamp, usize, u64)>,
    by_session: HashMap<u64, usize>,
    by_e2e: HashMap<u64, usize>,
    hasher: RandomState,
    generation: u64,
    live: usize,
    clock: Timestamp,
}

impl AnswerCache {
    /// A cache keeping answers `ttl_secs` seconds, at most `capacity`.
    pub fn new(ttl_secs: u64, capacity: usize) -> Self {
        AnswerCache {
            ttl_ms: ttl_secs.saturating_mul(1000),
            capacity: capacity.max(1),
            slots: Vec::new(),
            free: Vec::new(),
            order: VecDeque::new(),
            by_session: HashMap::new(),
            by_e2e: HashMap::new(),
            hasher: RandomState::new(),
            generation: 0,
            live: 0,
            clock: Timestamp(0),
        }
    }

    /// Number of answers held.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    fn session_hash(&self, session_id: &str, number: u32) -> u64 {
        self.hasher.hash_one((session_id, number))
    }

    fn e2e_hash(&self, origin_host: &str, e2e: u32) -> u64 {
        // DiameterIdentity compares case-insensitively.
        let mut h = self.hasher.build_hasher();
        use std::hash::Hasher;
        for b in origin_host.bytes() {
            h.write_u8(b.to_ascii_lowercase());
        }
        h.write_u32(e2e);
        h.finish()
    }

    /// The remembered answer to `req`, if it repeats an answered request.
    pub fn lookup(&self, req: &CcRequest) -> Option<&CcAnswer> {
        let sh = self.session_hash(&req.session_id, req.request_number);
        if let Some(&i) = self.by_session.get(&sh) {
            let s = &self.slots[i];
            if s.live && s.session_id == req.session_id && s.request_number == req.request_number {
                return Some(&s.answer);
            }
        }
        let eh = self.e2e_hash(&req.origin_host, req.end_to_end);
        if let Some(&i) = self.by_e2e.get(&eh) {
            let s = &self.slots[i];
            if s.live
                && s.end_to_end == req.end_to_end
                && s.origin_host.eq_ignore_ascii_case(&req.origin_host)
                && s.session_id == req.session_id
            {
                return Some(&s.answer);
            }
        }
        None
    }

    /// The newest time the cache was told about (by [`AnswerCache::expire`]
    /// or [`AnswerCache::insert`]).
    pub fn clock(&self) -> Timestamp {
        self.clock
    }

    /// The answers still live at [`AnswerCache::clock`], oldest first (in
    /// the order they were inserted). Inserting them in this order, with
    /// their times, into an empty cache with the same settings rebuilds a
    /// cache that lists the same entries.
    pub fn entries(&self) -> impl Iterator<Item = Entry<'_>> {
        let clock = self.clock;
        self.order
            .iter()
            .filter(move |(expires, _, _)| *expires > clock)
            .filter_map(|&(_, idx, generation)| {
                let s = self.slots.get(idx)?;
                (s.live && s.generation == generation).then_some(Entry {
                    session_id: &s.session_id,
                    request_number: s.request_number,
                    origin_host: &s.origin_host,
                    end_to_end: s.end_to_end,
                    answer: &s.answer,
                    at: s.at,
                })
            })
    }

    /// Drops answers older than the time to live.
    pub fn expire(&mut self, now: Timestamp) {
        self.clock = self.clock.max(now);
        while let Some(&(expires, idx, generation)) = self.order.front() {
            if expires > now && self.live <= self.capacity {
                break;
            }
            self.order.pop_front();
            self.evict(idx, generation);
        }
    }

    fn evict(&mut self, idx: usize, generation: u64) {
        let Some(s) = self.slots.get_mut(idx) else {
            return;
        };
        if !s.live || s.generation != generation {
            return;
        }
        s.live = false;
        self.live -= 1;
        if self.by_session.get(&s.session_hash) == Some(&idx) {
            self.by_session.remove(&s.session_hash);
        }
        if self.by_e2e.get(&s.e2e_hash) == Some(&idx) {
            self.by_e2e.remove(&s.e2e_hash);
        }
        self.free.push(idx);
    }

    /// Remembers `answer` as the answer to `req`.
    pub fn insert(&mut self, req: &CcRequest, answer: &CcAnswer, now: Timestamp) {
        self.insert_parts(
            &req.session_id,
            req.request_number,
            &req.origin_host,
            req.end_to_end,
            answer,
            now,
        );
    }

    /// Remembers `answer` as the answer to the request with these
    /// identifiers, answered at `now` (replay of a journaled answer). An
    /// answer already past its time to live at the cache's clock is not
    /// kept.
    pub fn insert_parts(
        &mut self,
        session_id: &str,
        request_number: u32,
        origin_host: &str,
        end_to_end: u32,
        answer: &CcAnswer,
        now: Timestamp,
    ) {
        self.clock = self.clock.max(now);
        let expires = Timestamp(now.0.saturating_add(self.ttl_ms));
        if expires <= self.clock {
            return;
        }
        while self.live >= self.capacity {
            match self.order.pop_front() {
                Some((_, idx, generation)) => self.evict(idx, generation),
                None => break,
            }
        }
        let sh = self.session_hash(session_id, request_number);
        let eh = self.e2e_hash(origin_host, end_to_end);
        self.generation += 1;
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                self.slots.len() - 1
            }
        };
        let s = &mut self.slots[idx];
        s.live = true;
        s.generation = self.generation;
        s.session_id.clear();
        s.session_id.push_str(session_id);
        s.request_number = request_number;
        s.origin_host.clear();
        s.origin_host.push_str(origin_host);
        s.end_to_end = end_to_end;
        s.session_hash = sh;
        s.e2e_hash = eh;
        s.answer.clone_from(answer);
        s.answer.duplicate = false;
        s.at = now;
        self.live += 1;
        self.by_session.insert(sh, idx);
        self.by_e2e.insert(eh, idx);
        self.order.push_back((expires, idx, self.generation));
    }
}
