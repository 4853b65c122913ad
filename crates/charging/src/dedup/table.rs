//! Open-addressing hash tables (linear probing, backward-shift deletion)
//! of ring slot identifiers, stored in fixed-size chunks that are
//! allocated, zeroed, on the first write into them and can be freed one at
//! a time: creating a table costs nothing and dropping a big one never
//! frees it all in one call.

/// Buckets per chunk (64 KiB).
const CHUNK_BITS: u32 = 14;

/// A table of non-zero `u32` identifiers (0 marks an empty bucket), each
/// standing for a ring slot whose 64-bit hash the caller looks up.
#[derive(Clone, Debug, Default)]
pub(super) struct Table {
    chunks: Vec<Option<Box<[u32]>>>,
    chunk_bits: u32,
    /// Buckets - 1 (a power of two), 0 for a table without buckets.
    mask: usize,
    /// Buckets in use.
    count: usize,
}

impl Table {
    /// A table of `buckets` (a power of two) empty buckets.
    pub fn with_buckets(buckets: usize) -> Table {
        debug_assert!(buckets.is_power_of_two());
        let chunk_bits = CHUNK_BITS.min(buckets.trailing_zeros());
        Table {
            chunks: vec![None; buckets >> chunk_bits],
            chunk_bits,
            mask: buckets - 1,
            count: 0,
        }
    }

    /// Number of buckets.
    pub fn buckets(&self) -> usize {
        if self.chunks.is_empty() {
            0
        } else {
            self.mask + 1
        }
    }

    /// Number of buckets in use.
    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.count
    }

    fn home(&self, h: u64) -> usize {
        // The high bits mixed in: the index is the low bits.
        (h >> 32 ^ h) as usize & self.mask
    }

    #[inline]
    fn get(&self, i: usize) -> u32 {
        match &self.chunks[i >> self.chunk_bits] {
            Some(chunk) => chunk[i & ((1 << self.chunk_bits) - 1)],
            None => 0,
        }
    }

    #[inline]
    fn set(&mut self, i: usize, v: u32) {
        let bits = self.chunk_bits;
        let chunk =
            self.chunks[i >> bits].get_or_insert_with(|| vec![0; 1 << bits].into_boxed_slice());
        chunk[i & ((1 << bits) - 1)] = v;
    }

    /// The identifier stored under hash `h`: `hash_of` gives an
    /// identifier's hash, or `None` for one to pass over.
    pub fn find(&self, h: u64, hash_of: impl Fn(u32) -> Option<u64>) -> Option<u32> {
        if self.chunks.is_empty() {
            return None;
        }
        let mut i = self.home(h);
        loop {
            let v = self.get(i);
            if v == 0 {
                return None;
            }
            if hash_of(v) == Some(h) {
                return Some(v);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Stores `id` under hash `h`. An identifier already stored under `h`
    /// is replaced unless `keep(existing)`.
    pub fn insert(
        &mut self,
        h: u64,
        id: u32,
        hash_of: impl Fn(u32) -> u64,
        keep: impl Fn(u32) -> bool,
    ) {
        debug_assert!(id != 0 && self.count < self.buckets());
        let mut i = self.home(h);
        loop {
            let v = self.get(i);
            if v == 0 {
                self.set(i, id);
                self.count += 1;
                return;
            }
            if hash_of(v) == h {
                if !keep(v) {
                    self.set(i, id);
                }
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Removes `id` if it is stored under hash `h`.
    pub fn remove(&mut self, h: u64, id: u32, hash_of: impl Fn(u32) -> u64) {
        if self.chunks.is_empty() {
            return;
        }
        let mut i = self.home(h);
        loop {
            let v = self.get(i);
            if v == 0 {
                return;
            }
            if v == id {
                break;
            }
            i = (i + 1) & self.mask;
        }
        // Backward-shift deletion: move later members of the probe run
        // into the hole when their home allows it.
        let mask = self.mask;
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let v = self.get(j);
            if v == 0 {
                break;
            }
            let home = self.home(hash_of(v));
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.set(hole, v);
                hole = j;
            }
        }
        self.set(hole, 0);
        self.count -= 1;
    }

    /// Frees one chunk of a table no longer used; `false` once none is
    /// left.
    pub fn free_chunk(&mut self) -> bool {
        self.chunks.pop();
        !self.chunks.is_empty()
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        let allocated = self.chunks.iter().filter(|c| c.is_some()).count();
        (allocated << self.chunk_bits) * 4
            + self.chunks.capacity() * std::mem::size_of::<Option<Box<[u32]>>>()
    }
}
