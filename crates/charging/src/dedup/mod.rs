//! Duplicate detection: a compact in-memory index of the answers given
//! within the time to live, pointing at their journaled records.
//!
//! A request is a duplicate of one already answered when it has the same
//! Session-Id and CC-Request-Number (RFC 8506 section 5.7), or the same
//! Origin-Host and End-to-End Identifier together with the same Session-Id
//! (RFC 6733 section 6.3; a retransmission never changes its Session-Id, so
//! an End-to-End match under another Session-Id is a client reusing
//! identifiers, not a retransmission). The T flag is not needed: any
//! request matching a remembered answer gets that answer again and changes
//! nothing.
//!
//! The index does not hold answers. Every answer the engine gives is
//! written as a compact record ([`crate::answer_log`]) numbered with an
//! answer sequence number (`seq`) and journaled by the store; the index
//! maps the request's identifiers to that `seq`, and the caller fetches the
//! record to answer a duplicate ([`crate::Engine::resolve_duplicate`]).
//!
//! # Layout and memory
//!
//! * A FIFO ring of 12-byte slots, one per answer, in `seq` order (time to
//!   live expiry is FIFO): a 48-bit hash of (Session-Id,
//!   CC-Request-Number) and a 48-bit hash of (Origin-Host, End-to-End
//!   Identifier, Session-Id). A slot's `seq` is implied by its position,
//!   so it is not stored; nor is its time: answer times are rounded up
//!   to whole steps of [`TIME_STEP_MS`] (an answer may be remembered that
//!   much longer than its time to live) and only grow along the ring,
//!   which keeps one 16-byte *time mark* per step in which answers were
//!   given: 160 bytes a second whatever the load (a mark per millisecond
//!   took 16 bytes for every few answers at moderate loads).
//!   The ring is a queue of 48 KiB chunks: one is allocated when the
//!   newest answer enters it and freed when the oldest leaves it (one
//!   drained chunk is kept for reuse), so no slot is ever copied.
//! * Two open-addressing hash tables (linear probing, backward-shift
//!   deletion, load at most 3/4) of 4-byte buckets, one per duplicate
//!   rule: 5.3 to 10.7 bytes per answer each. A bucket holds the slot's
//!   identifier and, in the bits the identifier leaves free, a tag of the
//!   hash, so probing reads the ring only for likely matches. A table's
//!   buckets are 64 KiB chunks allocated on first use.
//!
//! That is 23 to 34 bytes per remembered answer whatever the sizes of the
//! Session-Id and the answer, up to 46 while the tables grow. A warm
//! index allocates nothing per request.
//!
//! # False positives
//!
//! A hash match is only a candidate: the caller reads the journaled record
//! (a file read) to check it. A request that repeats nothing still matches
//! some remembered answer's hash by chance: with `N` answers remembered,
//! each rule's table offers a wrong candidate with probability at most
//! `N / 2^48`, so at most `N / 2^47` of new requests cost a journal read
//! for nothing. At the default capacity (`N` = 2^25, 300 s at 100,000
//! answers per second) that is 2^-22 of requests (2.4 in 10 million): one
//! useless read every 40 s or so at 100,000 requests per second. The 96
//! bits are split evenly because the rate is the sum of the two rules'
//! `N / 2^bits`, least when the bits are equal: the earlier split, 64 bits
//! for the number and 32 for the End-to-End rule, read the journal for
//! `N / 2^32` of requests, 0.8 % at the default capacity (a file open and
//! read on the event loop for one request in 128).
//!
//! Two remembered answers whose hashes for one rule collide (about `N^2 /
//! 2^49` pairs: 2 at the default capacity, none at most loads) keep only
//! the newer in that table; the older is still found by its other hash,
//! since [`AnswerIndex::lookup`] prefers the candidate that matches the
//! request by both hashes (a retransmission keeps its CC-Request-Number
//! and its End-to-End Identifier). A request that matches only a wrong
//! candidate fails the record check and is processed as new.
//!
//! # No pauses
//!
//! Every call does a small bounded amount of work, whatever the size:
//!
//! * A table grows by doubling *incrementally*: the new table takes every
//!   new answer, each insert moves a few of the answers still in the old
//!   table into it (walking the ring in `seq` order), lookups consult both
//!   while both exist, and the old table is then freed one chunk per
//!   insert.
//! * [`AnswerIndex::expire`] removes at most a few entries per call.
//!   Entries past their time to live that are not removed yet are
//!   invisible: a lookup checks the answer time against the latest `now`
//!   given to `expire`, and [`AnswerIndex::len`] and
//!   [`AnswerIndex::horizon`] find the first live entry by binary search
//!   (answer times are kept ordered along the ring: an answer timed before
//!   an earlier one, the clock having stepped back, is given the earlier
//!   one's time, which FIFO expiry implies anyway).
//!
//! Hashes are keyed per process ([`foldhash`]), so a peer cannot choose
//! Session-Ids that collide. A hash match is only a candidate: the record
//! is checked against the request before its answer is used, and a
//! mismatch is processed as a new request.
//!
//! Entries live `ttl` after the answer (RFC 6733 keeps End-to-End
//! identifiers unique for at least 4 minutes). At most `capacity` are
//! kept, oldest evicted first: the capacity is a memory safety bound, not
//! a tuning knob; size it for the time to live at the peak rate (the
//! default, 2^25, covers 300 s at 100,000 answers per second: about
//! 1 GiB at that load; an idle index takes almost nothing).

mod ring;
mod table;

use crate::request::CcRequest;
use crate::types::Timestamp;
use ring::{Ring, Slot, HASH_BITS, HASH_MASK};
use std::hash::{BuildHasher, Hasher};
use table::Table;

/// Answer times are rounded up to multiples of this many milliseconds.
pub const TIME_STEP_MS: u64 = 100;

/// Smallest ring bound and half the smallest table.
const MIN_RING: usize = 1024;

/// Answers moved to a growing table per insert. A table doubles when half
/// full, so the move is over long before the next doubling.
const MIGRATE_PER_INSERT: u64 = 8;

/// Work allowed to one [`AnswerIndex::expire`] call, in ring slots; an
/// entry removed from the tables counts [`EXPIRE_ENTRY_COST`].
const EXPIRE_BUDGET: u32 = 128;
const EXPIRE_ENTRY_COST: u32 = 16;

/// A table slot identifier: the low bits of `seq` (`mask`: as many as
/// the ring can hold slots, at most 31). It names one slot of the ring.
fn id_of(seq: u64, mask: u64) -> u32 {
    (seq & mask) as u32
}

/// The `seq` in `tail..=tail + mask` that `id` names.
fn seq_of(tail: u64, id: u32, mask: u64) -> u64 {
    tail + (u64::from(id).wrapping_sub(tail) & mask)
}

/// A 64-bit hash folded to the [`HASH_BITS`] a slot keeps.
fn fold(h: u64) -> u64 {
    (h ^ h >> HASH_BITS) & HASH_MASK
}

/// The hashes of a request's two duplicate keys ([`AnswerIndex::keys`]):
/// computed once per request, for its lookup and for indexing its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keys {
    number: u64,
    e2e: u64,
}

/// Which duplicate rule (and hash of a slot) a table is keyed by.
#[derive(Clone, Copy, Debug)]
enum Rule {
    Number,
    EndToEnd,
}

impl Rule {
    fn hash(self, s: &Slot) -> u64 {
        match self {
            Rule::Number => s.number_hash(),
            Rule::EndToEnd => s.e2e_hash(),
        }
    }
}

/// Tables being replaced by twice larger ones.
#[derive(Clone, Debug)]
struct Resize {
    numbers: Table,
    e2es: Table,
    /// Slots `next..end` are still in these tables only; slots from `end`
    /// on and those moved are in the new ones.
    next: u64,
    end: u64,
}

/// The duplicate index. See the module documentation.
#[derive(Clone, Debug)]
pub struct AnswerIndex {
    ttl_ms: u64,
    capacity: usize,
    max_ring: u64,
    /// `max_ring - 1`: the bits of a slot identifier.
    id_mask: u64,
    ring: Ring,
    /// Answers held (expired ones not yet removed included).
    live: usize,
    /// Gaps held.
    vacant: usize,
    /// The latest `now` given to [`AnswerIndex::expire`], in milliseconds.
    clock: u64,
    /// The latest answer time indexed.
    latest: u64,
    numbers: Table,
    e2es: Table,
    resize: Option<Resize>,
    /// Tables no longer used, freed a chunk per insert.
    retired: Vec<Table>,
    hasher: foldhash::fast::RandomState,
}

impl AnswerIndex {
    /// An index keeping answers `ttl_secs` seconds, at most `capacity`.
    pub fn new(ttl_secs: u64, capacity: usize) -> Self {
        let capacity = capacity.clamp(1, 1 << 31);
        let max_ring = capacity.next_power_of_two().max(MIN_RING) as u64;
        AnswerIndex {
            ttl_ms: ttl_secs.saturating_mul(1000),
            capacity,
            max_ring,
            id_mask: max_ring - 1,
            ring: Ring::default(),
            live: 0,
            vacant: 0,
            clock: 0,
            latest: 0,
            numbers: Table::default(),
            e2es: Table::default(),
            resize: None,
            retired: Vec::new(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// Number of answers indexed and live at the latest `now` given to
    /// [`AnswerIndex::expire`].
    pub fn len(&self) -> usize {
        let first_live = self.first_live(self.clock);
        let tail = self.ring.tail();
        let expired = if self.vacant == 0 {
            (first_live - tail) as usize
        } else {
            (tail..first_live)
                .filter(|&seq| !self.ring.get(seq).is_vacant())
                .count()
        };
        self.live - expired
    }

    /// Whether no answer is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes held by the index.
    pub fn memory_bytes(&self) -> usize {
        let resizing = self
            .resize
            .as_ref()
            .map_or(0, |r| r.numbers.memory_bytes() + r.e2es.memory_bytes());
        self.ring.memory_bytes()
            + self.numbers.memory_bytes()
            + self.e2es.memory_bytes()
            + resizing
            + self.retired.iter().map(Table::memory_bytes).sum::<usize>()
    }

    /// The hashes of a request's two duplicate keys.
    pub fn keys(&self, req: &CcRequest) -> Keys {
        self.keys_of(
            &req.session_id,
            req.request_number,
            &req.origin_host,
            req.end_to_end,
        )
    }

    fn keys_of(
        &self,
        session_id: &str,
        request_number: u32,
        origin_host: &str,
        end_to_end: u32,
    ) -> Keys {
        // The Session-Id, the longest part of both keys, is hashed once.
        let sid = self.hasher.hash_one(session_id.as_bytes());
        let mut h = self.hasher.build_hasher();
        h.write_u64(sid);
        h.write_u32(request_number);
        // 0 marks a gap in the ring.
        let number = fold(h.finish()).max(1);
        let mut h = self.hasher.build_hasher();
        // DiameterIdentity compares case-insensitively: the host is hashed
        // lowercased, a chunk at a time (one write per byte cost ten times
        // as much).
        h.write_usize(origin_host.len());
        let mut chunk = [0u8; 64];
        for part in origin_host.as_bytes().chunks(chunk.len()) {
            let lower = &mut chunk[..part.len()];
            lower.copy_from_slice(part);
            lower.make_ascii_lowercase();
            h.write(lower);
        }
        h.write_u32(end_to_end);
        h.write_u64(sid);
        Keys {
            number,
            e2e: fold(h.finish()),
        }
    }

    /// Asks the CPU to fetch the buckets a lookup or an insert of `keys`
    /// reads first, so that their cache misses overlap each other and
    /// whatever the caller does before the lookup.
    pub fn prefetch(&self, keys: Keys) {
        self.numbers.prefetch(keys.number);
        self.e2es.prefetch(keys.e2e);
        if let Some(r) = &self.resize {
            r.numbers.prefetch(keys.number);
            r.e2es.prefetch(keys.e2e);
        }
    }

    /// Whether an answer given at `at` (milliseconds) is past its time to
    /// live at `now`.
    fn expired(&self, at: u64, now: u64) -> bool {
        at.saturating_add(self.ttl_ms) <= now
    }

    /// The first `seq` whose answer is live at `now` (the head when none).
    fn first_live(&self, now: u64) -> u64 {
        self.ring.partition_point_by_time(|t| self.expired(t, now))
    }

    /// The `seq` of the remembered answer that `req` repeats, if any (a
    /// candidate, to be checked against the answer's record).
    pub fn lookup(&self, req: &CcRequest) -> Option<u64> {
        if self.live == 0 {
            return None;
        }
        self.lookup_keys(self.keys(req))
    }

    /// [`AnswerIndex::lookup`] by the request's [`Keys`].
    pub fn lookup_keys(&self, keys: Keys) -> Option<u64> {
        if self.live == 0 {
            return None;
        }
        self.prefetch(keys);
        let Keys { number, e2e } = keys;
        // A candidate that matches by both hashes is the answer; an older
        // answer whose hash a newer one took in one table is still in the
        // other.
        let by_number = self.find(Rule::Number, number);
        if by_number.is_some_and(|seq| self.ring.get(seq).e2e_hash() == e2e) {
            return by_number;
        }
        let by_e2e = self.find(Rule::EndToEnd, e2e);
        if by_e2e.is_some_and(|seq| self.ring.get(seq).number_hash() == number) {
            return by_e2e;
        }
        by_number.or(by_e2e)
    }

    fn find(&self, rule: Rule, h: u64) -> Option<u64> {
        let (table, old) = match rule {
            Rule::Number => (&self.numbers, self.resize.as_ref().map(|r| &r.numbers)),
            Rule::EndToEnd => (&self.e2es, self.resize.as_ref().map(|r| &r.e2es)),
        };
        let tail = self.ring.tail();
        let head = self.ring.head();
        let mask = self.id_mask;
        // The old table may still name slots since removed: pass over them.
        let hash_of = |id| {
            let seq = seq_of(tail, id, mask);
            if seq >= head {
                return None;
            }
            let s = self.ring.get(seq);
            (!s.is_vacant()).then(|| rule.hash(s))
        };
        // While tables move, the newest answer with this hash may be in
        // either: an older one with the same hash can have moved first.
        let seq = match (table.find(h, hash_of), old.and_then(|t| t.find(h, hash_of))) {
            (Some(a), Some(b)) => seq_of(tail, a, mask).max(seq_of(tail, b, mask)),
            (Some(id), None) | (None, Some(id)) => seq_of(tail, id, mask),
            (None, None) => return None,
        };
        // The newest answer with this hash: if it has expired, so have
        // older ones.
        (!self.expired(self.ring.time(seq), self.clock)).then_some(seq)
    }

    /// `seq` after the newest entry (where the next one goes).
    pub fn head(&self) -> u64 {
        self.ring.head()
    }

    /// Forgets entries past their time to live at `now`, and any beyond
    /// the capacity. Removes a bounded number per call: the rest are
    /// already invisible and go in later calls.
    pub fn expire(&mut self, now: Timestamp) {
        self.clock = self.clock.max(now.as_millis());
        let mut budget = EXPIRE_BUDGET;
        while !self.ring.is_empty() {
            let s = *self.ring.get(self.ring.tail());
            let cost = if s.is_vacant() { 1 } else { EXPIRE_ENTRY_COST };
            let expired = s.is_vacant()
                || self.expired(self.ring.tail_time(), self.clock)
                || self.live > self.capacity;
            if !expired || budget < cost {
                break;
            }
            budget -= cost;
            self.pop_tail();
        }
        // The answer to go next (most often in a later call): fetch its
        // buckets now, so that removing it does not wait for memory.
        if !self.ring.is_empty() {
            let s = *self.ring.get(self.ring.tail());
            if !s.is_vacant() {
                self.numbers.prefetch(s.number_hash());
                self.e2es.prefetch(s.e2e_hash());
            }
        }
    }

    fn pop_tail(&mut self) {
        let seq = self.ring.tail();
        let s = *self.ring.get(seq);
        if s.is_vacant() {
            self.vacant -= 1;
        } else {
            self.live -= 1;
            let in_old = self
                .resize
                .as_ref()
                .is_some_and(|r| r.next <= seq && seq < r.end);
            if !in_old {
                let (ring, mask) = (&self.ring, self.id_mask);
                let (tail, id) = (ring.tail(), id_of(seq, mask));
                let slot = |v| ring.get(seq_of(tail, v, mask));
                self.numbers
                    .remove(s.number_hash(), id, |v| slot(v).number_hash());
                self.e2es.remove(s.e2e_hash(), id, |v| slot(v).e2e_hash());
            }
        }
        self.ring.pop();
        if let Some(r) = &mut self.resize {
            r.next = r.next.max(self.ring.tail());
        }
    }

    /// The smallest `seq` still live at `now` (the index's head when none
    /// is): records below it are no longer needed.
    pub fn horizon(&self, now: Timestamp) -> u64 {
        let mut seq = self.first_live(now.as_millis().max(self.clock));
        while seq < self.ring.head() && self.ring.get(seq).is_vacant() {
            seq += 1;
        }
        seq
    }

    /// Indexes the answer to `req`, numbered `seq`, given at `at`.
    pub fn insert(&mut self, seq: u64, req: &CcRequest, at: Timestamp) {
        self.insert_keys(seq, self.keys(req), at);
    }

    /// [`AnswerIndex::insert`] by the request's [`Keys`].
    pub fn insert_keys(&mut self, seq: u64, keys: Keys, at: Timestamp) {
        self.insert_hashed(seq, keys.number, keys.e2e, at);
    }

    /// Indexes a journaled answer (replay).
    pub fn insert_parts(
        &mut self,
        seq: u64,
        session_id: &str,
        request_number: u32,
        origin_host: &str,
        end_to_end: u32,
        at: Timestamp,
    ) {
        let keys = self.keys_of(session_id, request_number, origin_host, end_to_end);
        self.insert_keys(seq, keys, at);
    }

    fn insert_hashed(&mut self, seq: u64, number: u64, e2e: u64, at: Timestamp) {
        let head = self.ring.head();
        if seq < head {
            return;
        }
        if seq - head >= self.capacity as u64 {
            // A gap wider than anything kept: nothing older survives it.
            self.clear();
        }
        if self.ring.is_empty() && seq != self.ring.head() {
            // Empty: start wherever the numbering is.
            self.ring.restart(seq);
            self.retire_resize();
        }
        // Fill a gap (records missing from a replayed journal).
        while self.ring.head() < seq {
            self.push(Slot::VACANT);
        }
        while self.live >= self.capacity {
            self.pop_tail();
        }
        let at = at
            .as_millis()
            .div_ceil(TIME_STEP_MS)
            .saturating_mul(TIME_STEP_MS);
        self.latest = self.latest.max(at);
        self.push(Slot::new(number, e2e));
    }

    /// Forgets everything (replay only: the one call whose work grows with
    /// the size).
    fn clear(&mut self) {
        self.ring.restart(self.ring.head());
        self.live = 0;
        self.vacant = 0;
        self.retire_resize();
        let numbers = std::mem::take(&mut self.numbers);
        let e2es = std::mem::take(&mut self.e2es);
        self.retired.extend([numbers, e2es]);
    }

    fn push(&mut self, s: Slot) {
        if self.ring.len() >= self.max_ring {
            self.pop_tail();
        }
        if s.is_vacant() {
            self.ring.push(s, self.latest);
            self.vacant += 1;
            return;
        }
        self.grow_step();
        let seq = self.ring.head();
        self.ring.push(s, self.latest);
        self.live += 1;
        let (ring, mask) = (&self.ring, self.id_mask);
        let (tail, id) = (ring.tail(), id_of(seq, mask));
        let slot = |v| ring.get(seq_of(tail, v, mask));
        let never = |_| false;
        self.numbers
            .insert(s.number_hash(), id, |v| slot(v).number_hash(), never);
        self.e2es
            .insert(s.e2e_hash(), id, |v| slot(v).e2e_hash(), never);
    }

    /// Before an insert: frees a chunk of a retired table, moves a few
    /// answers into growing tables, and starts growing them when the
    /// insert would fill them past half.
    fn grow_step(&mut self) {
        if let Some(t) = self.retired.last_mut() {
            if !t.free_chunk() {
                self.retired.pop();
            }
        }
        self.migrate(MIGRATE_PER_INSERT);
        let buckets = self.numbers.buckets();
        let max_buckets = 2 * self.max_ring as usize;
        if buckets >= max_buckets || (self.live + 1) * 4 <= buckets * 3 {
            return;
        }
        let grown = (buckets * 2).max(2 * MIN_RING);
        if buckets == 0 {
            self.numbers = Table::with_buckets(grown, self.id_bits());
            self.e2es = Table::with_buckets(grown, self.id_bits());
            return;
        }
        // Not expected: the previous move ends long before this.
        self.migrate(u64::MAX);
        let id_bits = self.id_bits();
        let numbers = std::mem::replace(&mut self.numbers, Table::with_buckets(grown, id_bits));
        let e2es = std::mem::replace(&mut self.e2es, Table::with_buckets(grown, id_bits));
        self.resize = Some(Resize {
            numbers,
            e2es,
            next: self.ring.tail(),
            end: self.ring.head(),
        });
    }

    /// Bits of a slot identifier.
    fn id_bits(&self) -> u32 {
        self.max_ring.trailing_zeros()
    }

    /// Moves up to `budget` slots from the old tables to the new ones.
    fn migrate(&mut self, mut budget: u64) {
        let Some(r) = &mut self.resize else {
            return;
        };
        let (ring, mask) = (&self.ring, self.id_mask);
        let tail = ring.tail();
        let slot = |v| ring.get(seq_of(tail, v, mask));
        r.next = r.next.max(tail);
        while r.next < r.end && budget > 0 {
            let seq = r.next;
            r.next += 1;
            budget -= 1;
            let s = ring.get(seq);
            if s.is_vacant() {
                continue;
            }
            // Slots move in `seq` order; an answer with the same hash
            // already in the new table is newer unless it moved earlier.
            let keep = |v| seq_of(tail, v, mask) > seq;
            let id = id_of(seq, mask);
            self.numbers
                .insert(s.number_hash(), id, |v| slot(v).number_hash(), keep);
            self.e2es
                .insert(s.e2e_hash(), id, |v| slot(v).e2e_hash(), keep);
        }
        if r.next >= r.end {
            self.retire_resize();
        }
    }

    /// Ends a resize whose old tables hold nothing needed any more.
    fn retire_resize(&mut self) {
        if let Some(r) = self.resize.take() {
            self.retired.extend([r.numbers, r.e2es]);
        }
    }
}

#[cfg(test)]
mod tests;
