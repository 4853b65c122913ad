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
//! pins: it is sized per pin, not per request. A pin is one 16-byte entry
//! of a plain hash table (between 19 and 37 bytes with the table's
//! control bytes and free room), spread over [`SHARDS`] tables each behind
//! its own lock (a lookup is one uncontended lock: event loops rarely meet
//! on the same table at the same moment), and one 16-byte entry of its
//! event loop's release queue while it lingers (time kept once per
//! millisecond in which pins ended, not per pin).

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use rustc_hash::FxHashMap;

/// Tables the pins are spread over (a power of two).
const SHARDS: usize = 64;

/// One table of pins, alone on its cache lines.
#[repr(align(128))]
#[derive(Default)]
struct Table(Mutex<FxHashMap<u64, u64>>);

/// The shared directory.
pub(crate) struct Directory {
    tables: Box<[Table]>,
}

/// A pin as stored: the shard in the low 16 bits, above it a number unique
/// to this pin (the pinning worker and its counter), so a delayed release
/// never removes a newer pin of the same Session-Id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pin(u64);

impl Pin {
    pub(crate) fn shard(self) -> usize {
        (self.0 & 0xffff) as usize
    }
}

impl Directory {
    pub(crate) fn new() -> Directory {
        Directory {
            tables: (0..SHARDS).map(|_| Table::default()).collect(),
        }
    }

    /// The table holding `key`, locked. The key is a hash already; its
    /// high bits pick the table so that the table's own hash (the low
    /// bits) stays spread within it.
    fn table(&self, key: u64) -> MutexGuard<'_, FxHashMap<u64, u64>> {
        self.tables[(key >> 58) as usize & (SHARDS - 1)]
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The pin of a session, if any.
    pub(crate) fn lookup(&self, key: u64) -> Option<Pin> {
        self.table(key).get(&key).copied().map(Pin)
    }

    /// Pins a session to a shard, replacing any earlier pin.
    pub(crate) fn pin(&self, key: u64, pin: Pin) {
        self.table(key).insert(key, pin.0);
    }

    /// Removes the pin of a session if it still is `pin`; shrinks its
    /// table when it has become mostly empty, so that a burst of sessions
    /// does not keep its memory after it has ended.
    pub(crate) fn release(&self, key: u64, pin: Pin) {
        let mut table = self.table(key);
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

    /// Bytes the directory's tables hold.
    #[cfg(test)]
    pub(crate) fn memory_bytes(&self) -> usize {
        self.tables
            .iter()
            .map(|t| t.0.lock().unwrap_or_else(|e| e.into_inner()).capacity() * 17)
            .sum()
    }
}

/// One event loop's side of the directory: makes its pins unique and
/// releases the pins of ended sessions once they have lingered.
pub(crate) struct Pinner {
    worker: u64,
    counter: u64,
    linger_ms: u64,
    /// Pins to release, oldest first.
    releases: VecDeque<(u64, Pin)>,
    /// `(n, at)`: the releases counted from the queue's front that are
    /// due at `at` (ms), in order; consecutive pins due the same
    /// millisecond share one mark.
    due: VecDeque<(u64, u64)>,
}

impl Pinner {
    pub(crate) fn new(worker: usize, linger_ms: u64) -> Pinner {
        Pinner {
            worker: worker as u64 & 0xff,
            counter: 0,
            linger_ms,
            releases: VecDeque::new(),
            due: VecDeque::new(),
        }
    }

    /// A new pin to `shard`, unique among this event loop's pins.
    pub(crate) fn next(&mut self, shard: usize) -> Pin {
        self.counter += 1;
        Pin((self.counter << 24) | (self.worker << 16) | (shard as u64 & 0xffff))
    }

    /// Releases `pin` of session `key` once it has lingered (from `now_ms`).
    pub(crate) fn release_later(&mut self, key: u64, pin: Pin, now_ms: u64) {
        // Times never go back along the queue: a clock step back joins
        // the latest mark.
        let at = now_ms.saturating_add(self.linger_ms);
        match self.due.back_mut() {
            Some((n, last)) if *last >= at => *n += 1,
            _ => self.due.push_back((1, at)),
        }
        self.releases.push_back((key, pin));
    }

    /// Releases every pin whose time has come.
    pub(crate) fn release_due(&mut self, directory: &Directory, now_ms: u64) {
        while let Some(&(n, at)) = self.due.front() {
            if at > now_ms {
                break;
            }
            for (key, pin) in self.releases.drain(..n as usize) {
                directory.release(key, pin);
            }
            self.due.pop_front();
        }
        if self.releases.capacity() > 1024 && self.releases.len() < self.releases.capacity() / 8 {
            self.releases.shrink_to(self.releases.len() * 2);
        }
    }

    /// Pins waiting for their release.
    #[cfg(test)]
    pub(crate) fn lingering(&self) -> usize {
        self.releases.len()
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
    fn releases_come_due_in_order_and_their_memory_returns() {
        let d = Directory::new();
        let mut p = Pinner::new(0, 1_000);
        // 100,000 sessions end over 100 ms, a thousand a millisecond.
        for i in 0..100_000u64 {
            let key = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let pin = p.next((i % 4) as usize);
            d.pin(key, pin);
            p.release_later(key, pin, 10_000 + i / 1_000);
        }
        assert_eq!(p.due.len(), 100);
        let full = d.memory_bytes();
        assert!(full >= 100_000 * 17, "{full}");
        // Half of them are due: exactly those, oldest first.
        p.release_due(&d, 11_049);
        assert_eq!(d.len(), 50_000);
        assert_eq!(p.lingering(), 50_000);
        let first_left = 50_000u64.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        assert!(d.lookup(first_left).is_some());
        assert!(d
            .lookup(49_999u64.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .is_none());
        // A clock that steps back does not reorder the queue.
        let late = p.next(1);
        d.pin(7, late);
        p.release_later(7, late, 5_000);
        p.release_due(&d, 11_099);
        assert_eq!(d.len(), 0);
        assert_eq!(p.lingering(), 0);
        // Each table shrinks back to a small fixed size.
        assert!(
            d.memory_bytes() <= SHARDS * 1024 * 17,
            "{} of {full}",
            d.memory_bytes()
        );
    }
}
