//! The FIFO of index slots, in fixed-size chunks: a chunk is allocated when
//! the head enters it and freed (or kept as the one spare) when the tail
//! leaves it, so the ring never moves a slot and never allocates more than
//! one chunk at a time.

use std::collections::VecDeque;

/// Slots per chunk (96 KiB of 24-byte slots).
const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;
const CHUNK_MASK: u64 = CHUNK as u64 - 1;

/// Bit of [`Slot::at`] marking a `seq` with no entry (a gap in a replayed
/// journal).
const VACANT_BIT: u64 = 1 << 63;

/// One remembered answer. Its `seq` is its position in the ring.
#[derive(Clone, Copy, Debug)]
pub(super) struct Slot {
    /// Hash of (Session-Id, CC-Request-Number).
    pub number_hash: u64,
    /// Hash of (Origin-Host, End-to-End Identifier, Session-Id).
    pub e2e_hash: u64,
    /// Answer time in milliseconds, never below an earlier slot's, with
    /// [`VACANT_BIT`] set for a gap.
    at: u64,
}

impl Slot {
    /// The latest time a slot can carry.
    pub const MAX_TIME: u64 = VACANT_BIT - 1;

    const PADDING: Slot = Slot {
        number_hash: 0,
        e2e_hash: 0,
        at: VACANT_BIT,
    };

    /// An answer given at `at` (at most [`Slot::MAX_TIME`]).
    pub fn new(number_hash: u64, e2e_hash: u64, at: u64) -> Slot {
        debug_assert!(at <= Self::MAX_TIME);
        Slot {
            number_hash,
            e2e_hash,
            at,
        }
    }

    /// A gap, timed `at` so that times stay ordered along the ring.
    pub fn vacant(at: u64) -> Slot {
        Slot {
            at: at | VACANT_BIT,
            ..Self::PADDING
        }
    }

    /// Whether the slot is a gap.
    pub fn is_vacant(&self) -> bool {
        self.at & VACANT_BIT != 0
    }

    /// The answer time (a gap's: the time of the answer before it).
    pub fn time(&self) -> u64 {
        self.at & !VACANT_BIT
    }
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

    /// Appends `s`, numbered [`Ring::head`].
    pub fn push(&mut self, s: Slot) {
        if self.chunks.back().is_none_or(|c| c.len() == CHUNK) {
            let mut chunk = self
                .spare
                .take()
                .unwrap_or_else(|| Vec::with_capacity(CHUNK));
            // A ring started inside a chunk: the slots before it are never
            // read.
            chunk.resize((self.head & CHUNK_MASK) as usize, Slot::PADDING);
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
    }

    fn recycle(&mut self, mut chunk: Vec<Slot>) {
        if self.spare.is_none() {
            chunk.clear();
            self.spare = Some(chunk);
        }
    }

    /// The first `seq` in `from..head` whose slot fails `pred`, all those
    /// before it passing (`pred` must hold for a prefix of the ring only).
    pub fn partition_point(&self, from: u64, pred: impl Fn(&Slot) -> bool) -> u64 {
        let (mut lo, mut hi) = (from.max(self.tail), self.head);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.get(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        let chunks = self.chunks.len() + usize::from(self.spare.is_some());
        chunks * CHUNK * std::mem::size_of::<Slot>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<Slot>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_keep_their_numbers_across_chunks_and_drained_chunks_are_reused() {
        let mut ring = Ring::default();
        ring.restart(3 * CHUNK as u64 - 5);
        for i in 0..3 * CHUNK as u64 {
            ring.push(Slot::new(i, i, i));
        }
        for _ in 0..CHUNK + 10 {
            ring.pop();
        }
        let tail = ring.tail();
        for seq in tail..ring.head() {
            assert_eq!(ring.get(seq).number_hash, seq - (3 * CHUNK as u64 - 5));
        }
        assert!(ring.spare.is_some());
        let held = ring.memory_bytes();
        for i in 0..CHUNK as u64 {
            ring.pop();
            ring.push(Slot::new(i, i, i));
        }
        assert_eq!(ring.memory_bytes(), held);
        assert_eq!(
            ring.partition_point(0, |s| s.time() < 7),
            ring.head() - CHUNK as u64 + 7
        );
    }
}
