//! The Session-Id -> shard directory shared by all event loops.
//!
//! A request that opens a session pins its Session-Id (by its 64-bit
//! [`gyro_diameter::app::session_key`]) to the shard that handles it; a
//! later request of the session that does not name its shard follows the
//! pin, from any connection on any event loop. Reads take no lock (a
//! lock-free map, read-mostly: one insert per session); a pin is released
//! only when the application says its session ended, after the session's
//! answers are forgotten, and only if the pin was not replaced meanwhile.
//! Nothing ever clears the directory wholesale.

use std::collections::VecDeque;

use rustc_hash::FxBuildHasher;

/// The shared directory.
pub(crate) struct Directory {
    pins: papaya::HashMap<u64, u64, FxBuildHasher>,
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
            pins: papaya::HashMap::builder()
                .hasher(FxBuildHasher)
                .capacity(1 << 16)
                .build(),
        }
    }

    /// The pin of a session, if any.
    pub(crate) fn lookup(&self, key: u64) -> Option<Pin> {
        self.pins.pin().get(&key).copied().map(Pin)
    }

    /// Pins a session to a shard, replacing any earlier pin.
    pub(crate) fn pin(&self, key: u64, pin: Pin) {
        self.pins.pin().insert(key, pin.0);
    }

    /// Removes the pin of a session if it still is `pin`.
    pub(crate) fn release(&self, key: u64, pin: Pin) {
        let _ = self.pins.pin().remove_if(&key, |_, v| *v == pin.0);
    }

    /// Number of pinned sessions.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.pins.len()
    }
}

/// One event loop's side of the directory: makes its pins unique and
/// releases the pins of ended sessions once they have lingered.
pub(crate) struct Pinner {
    worker: u64,
    counter: u64,
    linger_ms: u64,
    releases: VecDeque<(u64, u64, Pin)>,
}

impl Pinner {
    pub(crate) fn new(worker: usize, linger_ms: u64) -> Pinner {
        Pinner {
            worker: worker as u64 & 0xff,
            counter: 0,
            linger_ms,
            releases: VecDeque::new(),
        }
    }

    /// A new pin to `shard`, unique among this event loop's pins.
    pub(crate) fn next(&mut self, shard: usize) -> Pin {
        self.counter += 1;
        Pin((self.counter << 24) | (self.worker << 16) | (shard as u64 & 0xffff))
    }

    /// Releases `pin` of session `key` once it has lingered (from `now_ms`).
    pub(crate) fn release_later(&mut self, key: u64, pin: Pin, now_ms: u64) {
        self.releases
            .push_back((now_ms.saturating_add(self.linger_ms), key, pin));
    }

    /// Releases every pin whose time has come.
    pub(crate) fn release_due(&mut self, directory: &Directory, now_ms: u64) {
        while let Some(&(at, key, pin)) = self.releases.front() {
            if at > now_ms {
                break;
            }
            directory.release(key, pin);
            self.releases.pop_front();
        }
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
}
