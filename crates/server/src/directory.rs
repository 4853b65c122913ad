//! The Session-Id -> shard directory shared by all event loops.
//!
//! A request that opens a session pins its Session-Id (by its 64-bit
//! [`gyro_diameter::app::session_key`]) to the shard that handles it; a
//! later request of the session that does not name its shard follows the
//! pin, from any connection on any event loop. A pin is released only
//! when the application says its session ended, after the session's
//! answers are forgotten, and only if the pin was not replaced meanwhile.
//! Nothing ever clears the directory wholesale.
//!
//! # Memory
//!
//! Every session that ended within the duplicate time to live keeps its
//! pin (a retransmitted CCR-Terminate must reach the shard that remembers
//! its answer), so at a steady rate the directory holds sessions/s x TTL
//! pins: it is sized per pin, not per request. A pin costs:
//!
//! * one 12-byte entry (the 64-bit key and a 32-bit pin) of a plain hash
//!   table: 13 bytes with the table's control byte, between 15 and 30
//!   with its free room (a table doubles when 7/8 full). The pins are
//!   spread over [`SHARDS`] tables each behind its own lock (a lookup is
//!   one uncontended lock: event loops rarely meet on the same table at
//!   the same moment);
//! * one 12-byte entry of its event loop's release queue while it
//!   lingers, in 48 KiB chunks allocated as the queue's end enters them
//!   and freed as its front leaves them (no doubling, no copy, no slack
//!   beyond the two chunks at the ends). Releases fall due on whole steps
//!   of [`RELEASE_STEP_MS`] (a pin lingers up to that much longer), so
//!   their times take one 16-byte mark a step, not one a pin.
//!
//! That is 27 to 42 bytes per lingering pin
//! (`tests::a_lingering_pin_takes_its_table_entry_and_12_bytes_of_queue`
//! measures it); 16-byte entries (a 64-bit pin), a release queue that
//! doubled and a time mark for every millisecond in which pins ended took
//! 35 to 71, and up to 32 more at a pin a millisecond.
//!
//! A pin names its shard in 10 bits (a server runs at most 1,024 event
//! loops, `MAX_WORKERS`) and holds a 22-bit stamp, its event loop's
//! counter from an offset of its own, so that a delayed release leaves a
//! newer pin of the same Session-Id alone. Session-Ids are unique for all
//! time (RFC 6733 section 8.8), so a newer pin of the same Session-Id
//! takes a client that reuses one while its earlier session lingers; even
//! then the newer pin is released early only when the two stamps are
//! equal: never for two of the 4,194,304 pins in a row of one event
//! loop, about one chance in 4 million otherwise.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

use rustc_hash::FxHashMap;

/// Releases fall due on multiples of this many milliseconds.
const RELEASE_STEP_MS: u64 = 100;

/// Tables the pins are spread over (a power of two).
const SHARDS: usize = 64;

/// Bits of a pin that name its shard.
const SHARD_BITS: u32 = 10;

/// A session key as stored: the 64-bit key as two halves, so that an
/// entry (key and pin) needs 4-byte alignment only and takes 12 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key([u32; 2]);

impl Key {
    fn new(key: u64) -> Key {
        Key([key as u32, (key >> 32) as u32])
    }

    fn get(self) -> u64 {
        u64::from(self.0[0]) | u64::from(self.0[1]) << 32
    }
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.get());
    }
}

type Pins = FxHashMap<Key, u32>;

/// One table of pins, alone on its cache lines.
#[repr(align(128))]
#[derive(Default)]
struct Table(Mutex<Pins>);

/// The shared directory.
pub(crate) struct Directory {
    tables: Box<[Table]>,
}

/// A pin as stored: the shard in the low [`SHARD_BITS`] bits, above it a
/// stamp drawn from the pinning event loop and its counter, so a delayed
/// release (almost) never removes a newer pin of the same Session-Id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pin(u32);

impl Pin {
    pub(crate) fn shard(self) -> usize {
        (self.0 & ((1 << SHARD_BITS) - 1)) as usize
    }
}

impl Directory {
    pub(crate) fn new() -> Directory {
        Directory {
            tables: (0..SHARDS).map(|_| Table::default()).collect(),
        }
    }

    /// The table holding `key`, locked. The key is a hash already; its
    /// high bits pick the table so that the table's own hash (of all the
    /// bits) stays spread within it.
    fn table(&self, key: u64) -> MutexGuard<'_, Pins> {
        self.tables[(key >> 58) as usize & (SHARDS - 1)]
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The pin of a session, if any.
    pub(crate) fn lookup(&self, key: u64) -> Option<Pin> {
        self.table(key).get(&Key::new(key)).copied().map(Pin)
    }

    /// Pins a session to a shard, replacing any earlier pin.
    pub(crate) fn pin(&self, key: u64, pin: Pin) {
        self.table(key).insert(Key::new(key), pin.0);
    }

    /// Removes the pin of a session if it still is `pin`; shrinks its
    /// table when it has become mostly empty, so that a burst of sessions
    /// does not keep its memory after it has ended.
    pub(crate) fn release(&self, key: u64, pin: Pin) {
        let mut table = self.table(key);
        let key = Key::new(key);
        if table.get(&key) == Some(&pin.0) {
            table.remove(&key);
            if table.capacity() > 1024 && table.len() < table.capacity() / 8 {
                let len = table.len();
                table.shrink_to(len * 2);
            }
        }
    }

    /// Number of pinned sessions.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.tables
            .iter()
            .map(|t| t.0.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }

    /// Bytes the directory's tables hold: a bucket per 7/8 of an entry
    /// that fits, a power of two, each an entry and a control byte.
    #[cfg(test)]
    pub(crate) fn memory_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(Key, u32)>() + 1;
        self.tables
            .iter()
            .map(|t| t.0.lock().unwrap_or_else(|e| e.into_inner()).capacity())
            .filter(|&c| c > 0)
            .map(|c| (c * 8).div_ceil(7).next_power_of_two() * entry)
            .sum()
    }
}

/// A pin waiting for its release (12 bytes).
#[derive(Clone, Copy, Debug)]
struct Release {
    key: Key,
    pin: u32,
}

/// Releases per chunk of the queue (48 KiB).
const QUEUE_CHUNK: usize = 4096;

/// A FIFO of releases in fixed-size chunks: a chunk is allocated when the
/// end enters it and freed (or kept as the one spare) when the front
/// leaves it, so the queue never copies an entry and never holds much
/// more than it needs.
#[derive(Default)]
struct Queue {
    /// Every chunk but the last is full.
    chunks: VecDeque<Vec<Release>>,
    /// Entries of the first chunk already taken.
    front: usize,
    len: usize,
    spare: Option<Vec<Release>>,
}

impl Queue {
    fn push(&mut self, r: Release) {
        if self.chunks.back().is_none_or(|c| c.len() == QUEUE_CHUNK) {
            let chunk = self
                .spare
                .take()
                .unwrap_or_else(|| Vec::with_capacity(QUEUE_CHUNK));
            self.chunks.push_back(chunk);
        }
        if let Some(chunk) = self.chunks.back_mut() {
            chunk.push(r);
            self.len += 1;
        }
    }

    fn pop(&mut self) -> Option<Release> {
        let chunk = self.chunks.front()?;
        let r = *chunk.get(self.front)?;
        self.front += 1;
        self.len -= 1;
        if self.front == QUEUE_CHUNK {
            self.front = 0;
            if let Some(mut chunk) = self.chunks.pop_front() {
                if self.spare.is_none() {
                    chunk.clear();
                    self.spare = Some(chunk);
                }
            }
        }
        Some(r)
    }

    /// Heap bytes held.
    #[cfg(test)]
    fn memory_bytes(&self) -> usize {
        let chunks = self.chunks.len() + usize::from(self.spare.is_some());
        chunks * QUEUE_CHUNK * std::mem::size_of::<Release>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<Release>>()
    }
}

/// One event loop's side of the directory: makes its pins unique and
/// releases the pins of ended sessions once they have lingered.
pub(crate) struct Pinner {
    worker: u64,
    counter: u64,
    linger_ms: u64,
    /// Pins to release, oldest first.
    releases: Queue,
    /// `(n, at)`: the releases counted from the queue's front that are
    /// due at `at` (ms, a multiple of [`RELEASE_STEP_MS`]), in order;
    /// consecutive pins due the same step share one mark.
    due: VecDeque<(u64, u64)>,
}

impl Pinner {
    pub(crate) fn new(worker: usize, linger_ms: u64) -> Pinner {
        Pinner {
            worker: worker as u64,
            counter: 0,
            linger_ms,
            releases: Queue::default(),
            due: VecDeque::new(),
        }
    }

    /// A new pin to `shard` (below 1,024). Its stamp is the event loop's
    /// counter from an offset of its own: 2^22 pins of one event loop in a
    /// row have different stamps, and those of two event loops meet only
    /// as their counters drift apart.
    pub(crate) fn next(&mut self, shard: usize) -> Pin {
        self.counter += 1;
        let offset = self.worker.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (32 + SHARD_BITS);
        let stamp = (self.counter.wrapping_add(offset) as u32) << SHARD_BITS;
        Pin(stamp | (shard as u32 & ((1 << SHARD_BITS) - 1)))
    }

    /// Releases `pin` of session `key` once it has lingered (from `now_ms`;
    /// up to [`RELEASE_STEP_MS`] more).
    pub(crate) fn release_later(&mut self, key: u64, pin: Pin, now_ms: u64) {
        // Times never go back along the queue: a clock step back joins
        // the latest mark.
        let at = now_ms
            .saturating_add(self.linger_ms)
            .div_ceil(RELEASE_STEP_MS)
            .saturating_mul(RELEASE_STEP_MS);
        match self.due.back_mut() {
            Some((n, last)) if *last >= at => *n += 1,
            _ => self.due.push_back((1, at)),
        }
        self.releases.push(Release {
            key: Key::new(key),
            pin: pin.0,
        });
    }

    /// Releases every pin whose time has come.
    pub(crate) fn release_due(&mut self, directory: &Directory, now_ms: u64) {
        while let Some(&(n, at)) = self.due.front() {
            if at > now_ms {
                break;
            }
            for _ in 0..n {
                if let Some(r) = self.releases.pop() {
                    directory.release(r.key.get(), Pin(r.pin));
                }
            }
            self.due.pop_front();
        }
        if self.due.capacity() > 1024 && self.due.len() < self.due.capacity() / 8 {
            self.due.shrink_to(self.due.len() * 2);
        }
    }

    /// Pins waiting for their release.
    #[cfg(test)]
    pub(crate) fn lingering(&self) -> usize {
        self.releases.len
    }

    /// Heap bytes held by the release queue.
    #[cfg(test)]
    fn memory_bytes(&self) -> usize {
        self.releases.memory_bytes() + self.due.capacity() * std::mem::size_of::<(u64, u64)>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_is_followed_and_released_after_lingering() {
        let d = Directory::new();
        let mut p = Pinner::new(0, 1_000);
        let pin = p.next(3);
        d.pin(42, pin);
        assert_eq!(d.lookup(42).map(Pin::shard), Some(3));
        p.release_later(42, pin, 10_000);
        p.release_due(&d, 10_999);
        assert_eq!(d.lookup(42).map(Pin::shard), Some(3));
        p.release_due(&d, 11_000);
        assert_eq!(d.lookup(42), None);
        // Between steps: due at the next one.
        let pin = p.next(2);
        d.pin(43, pin);
        p.release_later(43, pin, 11_001);
        p.release_due(&d, 12_001);
        assert!(d.lookup(43).is_some());
        p.release_due(&d, 12_000 + RELEASE_STEP_MS);
        assert_eq!(d.lookup(43), None);
    }

    #[test]
    fn a_delayed_release_leaves_a_newer_pin_alone() {
        let d = Directory::new();
        let mut a = Pinner::new(0, 1_000);
        let mut b = Pinner::new(1, 1_000);
        let old = a.next(1);
        d.pin(7, old);
        a.release_later(7, old, 0);
        // The Session-Id is opened again (on another event loop) before
        // the old pin's release is due.
        let new = b.next(2);
        d.pin(7, new);
        a.release_due(&d, 5_000);
        assert_eq!(d.lookup(7).map(Pin::shard), Some(2));
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn pins_name_every_shard_and_the_stamps_of_an_event_loop_do_not_repeat() {
        const _: () = assert!(crate::config::MAX_WORKERS <= 1 << SHARD_BITS);
        let stamp = |p: Pin| p.0 >> SHARD_BITS;
        // The first pins of every event loop, to every shard.
        let mut pinners: Vec<Pinner> = (0..1024).map(|w| Pinner::new(w, 0)).collect();
        let mut firsts = std::collections::HashSet::new();
        for (w, p) in pinners.iter_mut().enumerate() {
            for shard in 0..1024 {
                let pin = p.next((w + shard) % 1024);
                assert_eq!(pin.shard(), (w + shard) % 1024);
                if shard == 0 {
                    firsts.insert(stamp(pin));
                }
            }
        }
        assert_eq!(firsts.len(), 1024);
        // 2^22 pins in a row of one event loop.
        let mut p = Pinner::new(5, 0);
        let mut seen = vec![false; 1 << 22];
        for _ in 0..1 << 22 {
            let s = stamp(p.next(1)) as usize;
            assert!(!seen[s], "stamp {s} repeated");
            seen[s] = true;
        }
    }

    fn key(i: u64) -> u64 {
        i.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    #[test]
    fn releases_come_due_in_order_and_their_memory_returns() {
        let d = Directory::new();
        let mut p = Pinner::new(0, 1_000);
        // 100,000 sessions end over 1 s, a hundred a millisecond, from
        // 10,000 ms: due at 11,000 (the first millisecond's), then at each
        // 100 ms step up to 12,000.
        for i in 0..100_000u64 {
            let pin = p.next((i % 4) as usize);
            d.pin(key(i), pin);
            p.release_later(key(i), pin, 10_000 + i / 100);
        }
        assert_eq!(p.due.len(), 11);
        let full = d.memory_bytes();
        assert!(full >= 100_000 * 13, "{full}");
        // Those ended by 10,500 ms are due at 11,500: exactly those,
        // oldest first.
        p.release_due(&d, 11_599);
        assert_eq!(d.len(), 49_900);
        assert_eq!(p.lingering(), 49_900);
        assert!(d.lookup(key(50_100)).is_some());
        assert!(d.lookup(key(50_099)).is_none());
        // A clock that steps back does not reorder the queue.
        let late = p.next(1);
        d.pin(7, late);
        p.release_later(7, late, 5_000);
        p.release_due(&d, 11_999);
        assert_eq!(d.len(), 9_901);
        p.release_due(&d, 12_000);
        assert_eq!(d.len(), 0);
        assert_eq!(p.lingering(), 0);
        // Each table shrinks back to a small fixed size, the queue to a
        // chunk.
        assert!(
            d.memory_bytes() <= SHARDS * 2048 * 13,
            "{} of {full}",
            d.memory_bytes()
        );
        assert!(
            p.memory_bytes() <= 2 * QUEUE_CHUNK * 12 + 4096,
            "{}",
            p.memory_bytes()
        );
    }

    #[test]
    fn a_lingering_pin_takes_its_table_entry_and_12_bytes_of_queue() {
        let d = Directory::new();
        let mut p = Pinner::new(0, 300_000);
        let mut worst = 0f64;
        // A session ends a millisecond.
        for i in 0..1_000_000u64 {
            let pin = p.next(0);
            d.pin(key(i), pin);
            p.release_later(key(i), pin, i);
            if i >= 200_000 && i % 997 == 0 {
                let per = (d.memory_bytes() + p.memory_bytes()) as f64 / (i + 1) as f64;
                worst = worst.max(per);
            }
        }
        println!("at most {worst:.1} bytes per lingering pin");
        // 13 bytes in a table at a load of 7/16 or more, 12 in the queue;
        // under a byte for the queue's partly used chunks and time marks.
        assert!(
            worst <= 13.0 * 16.0 / 7.0 + 12.0 + 1.0,
            "{worst} bytes per lingering pin"
        );
        // Entry and release are 12 bytes each.
        assert_eq!(std::mem::size_of::<(Key, u32)>(), 12);
        assert_eq!(std::mem::size_of::<Release>(), 12);
    }
}
