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
//! * A FIFO ring of 24-byte slots, one per answer, in `seq` order (time to
//!   live expiry is FIFO): the 64-bit hash of (Session-Id,
//!   CC-Request-Number), the 64-bit hash of (Origin-Host, End-to-End
//!   Identifier, Session-Id) and the answer time. A slot's `seq` is implied
//!   by its position, so it is not stored.
//! * Two open-addressing hash tables (linear probing, backward-shift
//!   deletion, load at most 1/2) of 4-byte slot numbers, one per duplicate
//!   rule: 8 to 16 bytes per answer each.
//!
//! That is 40 bytes per ring slot. The ring holds a power of two of slots,
//! at least as many as the answers live, so 40 to 80 bytes per remembered
//! answer whatever the sizes of the Session-Id and the answer. Both
//! structures grow by doubling (a one-off copy each time the load reaches
//! a new high) and are reused from then on: a warm index allocates
//! nothing per request.
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
//! default, 2^25, covers 300 s at 100,000 answers per second: 1.25 GiB at
//! that load; an idle index takes almost nothing).

use crate::request::CcRequest;
use crate::types::Timestamp;
use std::hash::{BuildHasher, Hasher};

/// A ring slot. `at == VACANT` marks a `seq` with no entry (a gap in a
/// replayed journal).
#[derive(Clone, Copy, Debug)]
struct Slot {
    number_hash: u64,
    e2e_hash: u64,
    at: u64,
}

const VACANT: u64 = u64::MAX;

impl Slot {
    const EMPTY: Slot = Slot {
        number_hash: 0,
        e2e_hash: 0,
        at: VACANT,
    };
}

/// Which hash of a slot a table is keyed by.
type KeyOf = fn(&Slot) -> u64;

fn by_number(s: &Slot) -> u64 {
    s.number_hash
}

fn by_e2e(s: &Slot) -> u64 {
    s.e2e_hash
}

/// Open-addressing table of slot numbers (+1; 0 is empty).
#[derive(Clone, Debug, Default)]
struct Table {
    buckets: Vec<u32>,
}

impl Table {
    fn home(&self, h: u64) -> usize {
        // The high bits: the low ones also pick ring slots nowhere, but
        // high bits of a 64-bit hash are as good and independent of them.
        (h >> 32 ^ h) as usize & (self.buckets.len() - 1)
    }

    fn find(&self, ring: &[Slot], key: KeyOf, h: u64) -> Option<usize> {
        if self.buckets.is_empty() {
            return None;
        }
        let mask = self.buckets.len() - 1;
        let mut i = self.home(h);
        loop {
            let v = self.buckets[i];
            if v == 0 {
                return None;
            }
            let slot = v as usize - 1;
            if key(&ring[slot]) == h {
                return Some(slot);
            }
            i = (i + 1) & mask;
        }
    }

    /// Points `h` at `slot` (replacing an older slot with the same hash).
    fn insert(&mut self, ring: &[Slot], key: KeyOf, h: u64, slot: usize) {
        let mask = self.buckets.len() - 1;
        let mut i = self.home(h);
        loop {
            let v = self.buckets[i];
            if v == 0 || key(&ring[v as usize - 1]) == h {
                self.buckets[i] = slot as u32 + 1;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Removes `slot` if the table points `h` at it.
    fn remove(&mut self, ring: &[Slot], key: KeyOf, h: u64, slot: usize) {
        let mask = self.buckets.len() - 1;
        let mut i = self.home(h);
        loop {
            let v = self.buckets[i];
            if v == 0 {
                return;
            }
            if v as usize - 1 == slot {
                break;
            }
            i = (i + 1) & mask;
        }
        // Backward-shift deletion: move later members of the probe run
        // into the hole when their home allows it.
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let v = self.buckets[j];
            if v == 0 {
                break;
            }
            let home = self.home(key(&ring[v as usize - 1]));
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.buckets[hole] = v;
                hole = j;
            }
        }
        self.buckets[hole] = 0;
    }
}

/// The duplicate index. See the module documentation.
#[derive(Clone, Debug)]
pub struct AnswerIndex {
    ttl_ms: u64,
    capacity: usize,
    ring: Vec<Slot>,
    /// `seq` of the oldest slot held.
    tail: u64,
    /// `seq` after the newest slot held.
    head: u64,
    live: usize,
    numbers: Table,
    e2es: Table,
    hasher: foldhash::fast::RandomState,
}

/// Smallest ring allocated.
const MIN_RING: usize = 1024;

impl AnswerIndex {
    /// An index keeping answers `ttl_secs` seconds, at most `capacity`.
    pub fn new(ttl_secs: u64, capacity: usize) -> Self {
        AnswerIndex {
            ttl_ms: ttl_secs.saturating_mul(1000),
            capacity: capacity.clamp(1, 1 << 31),
            ring: Vec::new(),
            tail: 0,
            head: 0,
            live: 0,
            numbers: Table::default(),
            e2es: Table::default(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// Number of answers indexed.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no answer is indexed.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Heap bytes held by the index.
    pub fn memory_bytes(&self) -> usize {
        self.ring.capacity() * std::mem::size_of::<Slot>()
            + (self.numbers.buckets.capacity() + self.e2es.buckets.capacity()) * 4
    }

    /// The hashes of a request's two duplicate keys.
    pub fn keys(&self, req: &CcRequest) -> (u64, u64) {
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
    ) -> (u64, u64) {
        let mut h = self.hasher.build_hasher();
        h.write(session_id.as_bytes());
        h.write_u32(request_number);
        let number = h.finish();
        let mut h = self.hasher.build_hasher();
        // DiameterIdentity compares case-insensitively.
        for b in origin_host.bytes() {
            h.write_u8(b.to_ascii_lowercase());
        }
        h.write_u32(end_to_end);
        h.write(session_id.as_bytes());
        (number, h.finish())
    }

    fn mask(&self) -> usize {
        self.ring.len() - 1
    }

    fn seq_of(&self, slot: usize) -> u64 {
        let mask = self.mask() as u64;
        self.tail + ((slot as u64).wrapping_sub(self.tail) & mask)
    }

    /// The `seq` of the remembered answer that `req` repeats, if any.
    pub fn lookup(&self, req: &CcRequest) -> Option<u64> {
        if self.live == 0 {
            return None;
        }
        let (number, e2e) = self.keys(req);
        self.numbers
            .find(&self.ring, by_number, number)
            .or_else(|| self.e2es.find(&self.ring, by_e2e, e2e))
            .map(|slot| self.seq_of(slot))
    }

    /// `seq` after the newest entry (where the next one goes).
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Drops entries past their time to live at `now`, and any beyond the
    /// capacity.
    pub fn expire(&mut self, now: Timestamp) {
        while self.tail < self.head {
            let s = self.ring[self.tail as usize & self.mask()];
            let expired = s.at == VACANT
                || s.at.saturating_add(self.ttl_ms) <= now.as_millis()
                || self.live > self.capacity;
            if !expired {
                break;
            }
            self.pop_tail();
        }
    }

    fn pop_tail(&mut self) {
        let slot = self.tail as usize & self.mask();
        let s = self.ring[slot];
        if s.at != VACANT {
            self.numbers
                .remove(&self.ring, by_number, s.number_hash, slot);
            self.e2es.remove(&self.ring, by_e2e, s.e2e_hash, slot);
            self.ring[slot] = Slot::EMPTY;
            self.live -= 1;
        }
        self.tail += 1;
    }

    /// The smallest `seq` still live at `now` (the index's head when none
    /// is): records below it are no longer needed.
    pub fn horizon(&self, now: Timestamp) -> u64 {
        let mut seq = self.tail;
        while seq < self.head {
            let s = &self.ring[seq as usize & self.mask()];
            if s.at != VACANT && s.at.saturating_add(self.ttl_ms) > now.as_millis() {
                return seq;
            }
            seq += 1;
        }
        self.head
    }

    /// Indexes the answer to `req`, numbered `seq`, given at `at`.
    pub fn insert(&mut self, seq: u64, req: &CcRequest, at: Timestamp) {
        let (number, e2e) = self.keys(req);
        self.insert_hashed(seq, number, e2e, at);
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
        let (number, e2e) = self.keys_of(session_id, request_number, origin_host, end_to_end);
        self.insert_hashed(seq, number, e2e, at);
    }

    fn insert_hashed(&mut self, seq: u64, number: u64, e2e: u64, at: Timestamp) {
        if seq < self.head {
            return;
        }
        if self.live == 0 && self.tail == self.head {
            // Empty: start wherever the numbering is.
            self.tail = seq;
            self.head = seq;
        }
        if seq - self.head >= self.capacity as u64 {
            // A gap wider than anything kept: nothing older survives it.
            while self.tail < self.head {
                self.pop_tail();
            }
            self.tail = seq;
            self.head = seq;
        }
        // Fill a gap (records missing from a replayed journal).
        while self.head < seq {
            self.push(Slot::EMPTY);
        }
        while self.live >= self.capacity {
            self.pop_tail();
        }
        self.push(Slot {
            number_hash: number,
            e2e_hash: e2e,
            at: at.as_millis().min(VACANT - 1),
        });
    }

    fn push(&mut self, s: Slot) {
        if (self.head - self.tail) as usize == self.ring.len() {
            if self.ring.len() >= self.capacity.next_power_of_two() {
                self.pop_tail();
            } else {
                self.grow();
            }
        }
        let slot = self.head as usize & self.mask();
        self.ring[slot] = s;
        self.head += 1;
        if s.at != VACANT {
            self.live += 1;
            self.numbers
                .insert(&self.ring, by_number, s.number_hash, slot);
            self.e2es.insert(&self.ring, by_e2e, s.e2e_hash, slot);
        }
    }

    /// Doubles the ring and rebuilds the tables.
    fn grow(&mut self) {
        let len = (self.ring.len() * 2)
            .max(MIN_RING)
            .min(self.capacity.next_power_of_two().max(MIN_RING));
        let mut ring = vec![Slot::EMPTY; len];
        for seq in self.tail..self.head {
            ring[seq as usize & (len - 1)] = self.ring[seq as usize & self.mask()];
        }
        self.ring = ring;
        self.numbers.buckets = vec![0; len * 2];
        self.e2es.buckets = vec![0; len * 2];
        for seq in self.tail..self.head {
            let slot = seq as usize & (len - 1);
            let s = self.ring[slot];
            if s.at != VACANT {
                self.numbers
                    .insert(&self.ring, by_number, s.number_hash, slot);
                self.e2es.insert(&self.ring, by_e2e, s.e2e_hash, slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(sid: &str, n: u32, e2e: u32) -> CcRequest {
        CcRequest {
            session_id: sid.into(),
            origin_host: "PGW.example".into(),
            end_to_end: e2e,
            request_number: n,
            ..CcRequest::default()
        }
    }

    #[test]
    fn both_rules_find_the_answer_and_other_sessions_do_not() {
        let mut ix = AnswerIndex::new(300, 100);
        ix.insert(7, &req("a", 1, 10), Timestamp(0));
        assert_eq!(ix.lookup(&req("a", 1, 99)), Some(7));
        let mut same_e2e = req("a", 5, 10);
        same_e2e.origin_host = "pgw.EXAMPLE".into();
        assert_eq!(ix.lookup(&same_e2e), Some(7));
        assert_eq!(ix.lookup(&req("b", 5, 10)), None);
        assert_eq!(ix.lookup(&req("a", 2, 11)), None);
    }

    #[test]
    fn entries_expire_in_order_and_the_capacity_bounds_them() {
        let mut ix = AnswerIndex::new(10, 3000);
        for i in 0..3000u32 {
            ix.insert(u64::from(i), &req("s", i, i), Timestamp(u64::from(i) * 10));
        }
        assert_eq!(ix.len(), 3000);
        ix.expire(Timestamp(10_000 + 1000 * 10));
        assert_eq!(ix.horizon(Timestamp(20_000)), 1001);
        assert_eq!(ix.len(), 1999);
        assert_eq!(ix.lookup(&req("s", 1000, 0)), None);
        assert_eq!(ix.lookup(&req("s", 1001, 0)), Some(1001));
        // Past the capacity the oldest go.
        for i in 3000..5000u32 {
            ix.insert(u64::from(i), &req("s", i, i), Timestamp(30_000));
        }
        assert_eq!(ix.len(), 3000);
        assert_eq!(ix.lookup(&req("s", 1999, 0)), None);
        assert_eq!(ix.lookup(&req("s", 2000, 0)), Some(2000));
        assert_eq!(ix.lookup(&req("s", 4999, 0)), Some(4999));
    }

    #[test]
    fn gaps_in_the_numbering_are_skipped() {
        let mut ix = AnswerIndex::new(300, 10_000);
        ix.insert(5, &req("a", 1, 1), Timestamp(0));
        ix.insert(50, &req("a", 2, 2), Timestamp(0));
        assert_eq!(ix.len(), 2);
        assert_eq!(ix.lookup(&req("a", 2, 9)), Some(50));
        assert_eq!(ix.horizon(Timestamp(0)), 5);
        ix.insert(1_000_000, &req("a", 3, 3), Timestamp(0));
        assert_eq!(ix.len(), 1);
        assert_eq!(ix.lookup(&req("a", 1, 9)), None);
    }
}
