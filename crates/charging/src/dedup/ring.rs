//! The FIFO of index slots, in fixed-size chunks: a chunk is allocated when
//! the head enters it and freed (or kept as the one spare) when the tail
//! leaves it, so the ring never moves a slot and never allocates more than
//! one chunk at a time.
//!
//! Answer times are not stored per slot: they only ever grow along the
//! ring, so the ring keeps a list of *time marks*, one for each run of
//! slots with the same time (the first `seq` of the run and the time). The
//! index rounds times to steps of 100 ms, so that is a fraction of a byte
//! per answer at any load above ten answers a second.

use std::collections::VecDeque;

/// Slots per chunk (48 KiB of 12-byte slots).
const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;
const CHUNK_MASK: u64 = CHUNK as u64 - 1;

/// Bits of each of a slot's two hashes.
pub(super) const HASH_BITS: u32 = 48;

/// The low [`HASH_BITS`] bits of a hash.
pub(super) const HASH_MASK: u64 = (1 << HASH_BITS) - 1;

/// One remembered answer (12 bytes): two 48-bit hashes. Its `seq` is its
/// position in the ring, its time the time mark it falls under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slot {
    /// The 48-bit hash of (Session-Id, CC-Request-Number) in the low 32
    /// bits of `words[0]` and the low 16 of `words[1]`; the 48-bit hash of
    /// (Origin-Host, End-to-End Identifier, Session-Id) in `words[2]` and
    /// the high 16 bits of `words[1]`. Three words, so that the slot needs
    /// 4-byte alignment only. A number hash of 0 marks a gap.
    words: [u32; 3],
}

impl Slot {
    /// A slot with no answer: a gap in a replayed journal, or the unused
    /// start of a chunk.
    pub const VACANT: Slot = Slot { words: [0, 0, 0] };

    /// An answer (both hashes below `2^48`; `number_hash` must not be 0,
    /// the mark of a gap).
    pub fn new(number_hash: u64, e2e_hash: u64) -> Slot {
        debug_assert!(number_hash != 0 && number_hash <= HASH_MASK && e2e_hash <= HASH_MASK);
        Slot {
            words: [
                number_hash as u32,
                (number_hash >> 32) as u32 & 0xffff | ((e2e_hash >> 32) as u32) << 16,
                e2e_hash as u32,
            ],
        }
    }

    /// Whether the slot is a gap.
    pub fn is_vacant(&self) -> bool {
        self.number_hash() == 0
    }

    /// Hash of (Session-Id, CC-Request-Number), 48 bits.
    pub fn number_hash(&self) -> u64 {
        u64::from(self.words[0]) | u64::from(self.words[1] & 0xffff) << 32
    }

    /// Hash of (Origin-Host, End-to-End Identifier, Session-Id), 48 bits.
    pub fn e2e_hash(&self) -> u64 {
        u64::from(self.words[2]) | u64::from(self.words[1] >> 16) << 32
    }
}

/// A run of slots with one answer time: from `seq` to the next mark.
#[derive(Clone, Copy, Debug)]
struct Mark {
    seq: u64,
    at: u64,
}

/// Slots numbered `tail..head`, chunk `first_chunk + i` of `chunks`
/// holding `seq`s `(first_chunk + i) << CHUNK_BITS` onwards.
#[derive(Clone, Debug, Default)]
pub(super) struct Ring {
    chunks: VecDeque<Vec<Slot>>,
    first_chunk: u64,
    tail: u64,
    head: u64,
    /// A drained chunk kept for the next one the head needs.
    spare: Option<Vec<Slot>>,
    /// Time marks, `seq` and time ascending; the first covers the tail.
    marks: VecDeque<Mark>,
}

impl Ring {
    /// `seq` of the oldest slot.
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// `seq` after the newest slot.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Number of slots held.
    pub fn len(&self) -> u64 {
        self.head - self.tail
    }

    /// Whether no slot is held.
    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// The slot numbered `seq`, which must be held.
    #[inline]
    pub fn get(&self, seq: u64) -> &Slot {
        debug_assert!(self.tail <= seq && seq < self.head);
        let chunk = ((seq >> CHUNK_BITS) - self.first_chunk) as usize;
        &self.chunks[chunk][(seq & CHUNK_MASK) as usize]
    }

    /// The time of slot `seq`, which must be held.
    pub fn time(&self, seq: u64) -> u64 {
        debug_assert!(self.tail <= seq && seq < self.head);
        let i = self.marks.partition_point(|m| m.seq <= seq);
        self.marks[i - 1].at
    }

    /// The time of the oldest slot (there must be one).
    pub fn tail_time(&self) -> u64 {
        self.marks[0].at
    }

    /// Appends `s` at time `at` (never before the newest slot's time),
    /// numbered [`Ring::head`].
    pub fn push(&mut self, s: Slot, at: u64) {
        debug_assert!(self.marks.back().is_none_or(|m| m.at <= at));
        if self.marks.back().is_none_or(|m| m.at != at) {
            self.marks.push_back(Mark { seq: self.head, at });
            self.trim_marks();
        }
        if self.chunks.back().is_none_or(|c| c.len() == CHUNK) {
            let mut chunk = self
                .spare
                .take()
                .unwrap_or_else(|| Vec::with_capacity(CHUNK));
            // A ring started inside a chunk: the slots before it are never
            // read.
            chunk.resize((self.head & CHUNK_MASK) as usize, Slot::VACANT);
            self.chunks.push_back(chunk);
        }
        if let Some(chunk) = self.chunks.back_mut() {
            chunk.push(s);
        }
        self.head += 1;
    }

    /// Drops the oldest slot (there must be one).
    pub fn pop(&mut self) {
        debug_assert!(self.tail < self.head);
        self.tail += 1;
        if self.tail & CHUNK_MASK == 0 {
            if let Some(chunk) = self.chunks.pop_front() {
                self.recycle(chunk);
            }
            self.first_chunk += 1;
        }
        self.trim_marks();
    }

    /// Drops the marks before the one covering the tail.
    fn trim_marks(&mut self) {
        while self.marks.get(1).is_some_and(|m| m.seq <= self.tail) {
            self.marks.pop_front();
            // Give back what a burst of marks left (amortised: the copy
            // is paid for by the pops since the list was 3 times larger).
            if self.marks.capacity() > 64 && self.marks.capacity() > 3 * self.marks.len() {
                self.marks.shrink_to(self.marks.len() * 3 / 2);
            }
        }
    }

    /// Empties the ring (its chunks are freed: this is the one call whose
    /// work grows with the size) and numbers the next slot `seq`.
    pub fn restart(&mut self, seq: u64) {
        while let Some(chunk) = self.chunks.pop_front() {
            self.recycle(chunk);
        }
        self.first_chunk = seq >> CHUNK_BITS;
        self.tail = seq;
        self.head = seq;
        self.marks.clear();
    }

    fn recycle(&mut self, mut chunk: Vec<Slot>) {
        if self.spare.is_none() {
            chunk.clear();
            self.spare = Some(chunk);
        }
    }

    /// The first `seq` in the ring whose time fails `pred`, all those
    /// before it passing (`pred` must hold for a prefix of the times
    /// only); the head when all pass.
    pub fn partition_point_by_time(&self, pred: impl Fn(u64) -> bool) -> u64 {
        if self.is_empty() {
            return self.head;
        }
        let i = self.marks.partition_point(|m| pred(m.at));
        self.marks
            .get(i)
            .map_or(self.head, |m| m.seq.max(self.tail))
    }

    /// Number of time marks.
    #[cfg(test)]
    pub fn marks(&self) -> usize {
        self.marks.len()
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        let chunks = self.chunks.len() + usize::from(self.spare.is_some());
        chunks * CHUNK * std::mem::size_of::<Slot>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<Slot>>()
            + self.marks.capacity() * std::mem::size_of::<Mark>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_takes_12_bytes_and_keeps_both_48_bit_hashes() {
        assert_eq!(std::mem::size_of::<Slot>(), 12);
        for (n, e) in [
            (1, 0),
            (HASH_MASK, HASH_MASK),
            (0x8000_0000_0001, 0x1234_5678_9abc),
        ] {
            let s = Slot::new(n, e);
            assert_eq!((s.number_hash(), s.e2e_hash()), (n, e));
            assert!(!s.is_vacant());
        }
    }

    #[test]
    fn slots_keep_their_numbers_and_times_across_chunks_and_drained_chunks_are_reused() {
        let mut ring = Ring::default();
        ring.restart(3 * CHUNK as u64 - 5);
        for i in 0..3 * CHUNK as u64 {
            ring.push(Slot::new(i + 1, i << 20), i / 3);
        }
        for _ in 0..CHUNK + 10 {
            ring.pop();
        }
        let (tail, first) = (ring.tail(), 3 * CHUNK as u64 - 5);
        for seq in tail..ring.head() {
            assert_eq!(ring.get(seq).number_hash(), seq - first + 1);
            assert_eq!(ring.get(seq).e2e_hash(), (seq - first) << 20);
            assert_eq!(ring.time(seq), (seq - first) / 3);
        }
        assert_eq!(ring.tail_time(), (tail - first) / 3);
        assert!(ring.spare.is_some());
        let held = ring.memory_bytes();
        let last = ring.time(ring.head() - 1);
        for i in 0..CHUNK as u64 {
            ring.pop();
            ring.push(Slot::new(i + 1, 0), last + 1);
        }
        assert_eq!(
            ring.partition_point_by_time(|t| t <= last),
            ring.head() - CHUNK as u64
        );
        assert!(ring.memory_bytes() <= held);
        while ring.len() > CHUNK as u64 {
            ring.pop();
        }
        assert_eq!(ring.marks.len(), 1, "one time, one mark");
        assert_eq!(ring.tail_time(), last + 1);
    }
}
