//! Open-addressing hash tables (linear probing, backward-shift deletion)
//! of ring slot identifiers, stored in fixed-size chunks that are
//! allocated, zeroed, on the first write into them and can be freed one at
//! a time: creating a table costs nothing and dropping a big one never
//! frees it all in one call.
//!
//! A bucket is 4 bytes: the slot identifier, and in the bits it leaves
//! free a few bits of the hash (a tag), so that probing passes over most
//! other hashes without reading their slots. That keeps probing cheap at a
//! load of up to 3/4.

/// Buckets per chunk (64 KiB).
const CHUNK_BITS: u32 = 14;

/// The bit set in every used bucket (0 marks an empty one).
const USED: u32 = 1 << 31;

/// The 32 bits of a hash that place it: the low ones give its home
/// bucket, the high ones its tag.
fn mix(h: u64) -> u32 {
    (h >> 32 ^ h) as u32
}

/// A hint to the CPU to load the cache line at `p` (nothing on other
/// architectures than x86-64).
#[inline(always)]
fn prefetch(p: *const u32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and never faults,
    // whatever the address; `p` points into a live chunk anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A table of identifiers of `id_bits` bits, each standing for a ring slot
/// whose 64-bit hash the caller looks up.
#[derive(Clone, Debug, Default)]
pub(super) struct Table {
    chunks: Vec<Option<Box<[u32]>>>,
    chunk_bits: u32,
    /// Buckets - 1 (a power of two), 0 for a table without buckets.
    mask: usize,
    /// Buckets in use.
    count: usize,
    /// Bits of an identifier (at most 31); the rest below [`USED`] hold
    /// the tag.
    id_bits: u32,
}

impl Table {
    /// A table of `buckets` (a power of two) empty buckets, for
    /// identifiers below `2^id_bits` (`id_bits` at most 31).
    pub fn with_buckets(buckets: usize, id_bits: u32) -> Table {
        debug_assert!(buckets.is_power_of_two() && id_bits <= 31);
        let chunk_bits = CHUNK_BITS.min(buckets.trailing_zeros());
        Table {
            chunks: vec![None; buckets >> chunk_bits],
            chunk_bits,
            mask: buckets - 1,
            count: 0,
            id_bits,
        }
    }

    fn id_mask(&self) -> u32 {
        ((1u64 << self.id_bits) - 1) as u32
    }

    /// The tag of hash `h`, in place (above the identifier bits).
    fn tag(&self, h: u64) -> u32 {
        let tag_bits = 31 - self.id_bits;
        if tag_bits == 0 {
            return 0;
        }
        (mix(h) >> (32 - tag_bits)) << self.id_bits
    }

    /// The bucket value storing `id` under hash `h`.
    fn entry(&self, h: u64, id: u32) -> u32 {
        USED | self.tag(h) | id
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
        mix(h) as usize & self.mask
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

    /// Asks the CPU to bring the home bucket of hash `h` into its cache,
    /// so that a [`Table::find`], insert or removal of `h` soon after
    /// does not wait for memory (buckets are read at random across
    /// megabytes, so nearly every first read of one misses the caches).
    /// Only a hint: it changes nothing and reads nothing.
    #[inline]
    pub fn prefetch(&self, h: u64) {
        if self.chunks.is_empty() {
            return;
        }
        let i = self.home(h);
        if let Some(chunk) = &self.chunks[i >> self.chunk_bits] {
            prefetch(chunk[i & ((1 << self.chunk_bits) - 1)..].as_ptr());
        }
    }

    /// The identifier stored under hash `h`: `hash_of` gives an
    /// identifier's hash, or `None` for one to pass over.
    pub fn find(&self, h: u64, hash_of: impl Fn(u32) -> Option<u64>) -> Option<u32> {
        if self.chunks.is_empty() {
            return None;
        }
        let (tag, ids) = (USED | self.tag(h), self.id_mask());
        let mut i = self.home(h);
        loop {
            let v = self.get(i);
            if v == 0 {
                return None;
            }
            if v & !ids == tag && hash_of(v & ids) == Some(h) {
                return Some(v & ids);
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
        debug_assert!(id <= self.id_mask() && self.count < self.buckets());
        let (entry, ids) = (self.entry(h, id), self.id_mask());
        let mut i = self.home(h);
        loop {
            let v = self.get(i);
            if v == 0 {
                self.set(i, entry);
                self.count += 1;
                return;
            }
            if v & !ids == entry & !ids && hash_of(v & ids) == h {
                if !keep(v & ids) {
                    self.set(i, entry);
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
        let (entry, ids) = (self.entry(h, id), self.id_mask());
        let mut i = self.home(h);
        loop {
            let v = self.get(i);
            if v == 0 {
                return;
            }
            if v == entry {
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
            let home = self.home(hash_of(v & ids));
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
