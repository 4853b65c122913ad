//! Rate-limited repeated events (log lines): the first one is reported at
//! once, later ones within the interval are only counted and reported
//! together, with their count, once the interval has passed. Shared by
//! all event loops (two atomics, no lock); time is passed in.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One kind of repeated event.
#[derive(Debug)]
pub struct RateLimit {
    what: &'static str,
    interval_ms: u64,
    /// When a report was last due (ms), `u64::MAX` before the first.
    last_ms: AtomicU64,
    /// Events not yet reported.
    pending: AtomicU64,
}

impl RateLimit {
    /// Events described as `what` (the log line), reported at most once
    /// per `interval_ms`.
    pub const fn new(what: &'static str, interval_ms: u64) -> Self {
        RateLimit {
            what,
            interval_ms,
            last_ms: AtomicU64::new(u64::MAX),
            pending: AtomicU64::new(0),
        }
    }

    /// Counts `n` events at `now_ms`. Returns the number to report now
    /// (these and those held back since the last report) when a report is
    /// due, else `None`: the caller logs one line with that count.
    pub fn hit(&self, n: u64, now_ms: u64) -> Option<u64> {
        if n > 0 {
            self.pending.fetch_add(n, Relaxed);
        }
        self.flush(now_ms)
    }

    /// What the events are (the text of their log line).
    pub fn what(&self) -> &'static str {
        self.what
    }

    /// Events held back, when the interval since the last report has
    /// passed (call it periodically so the last ones are reported too).
    pub fn flush(&self, now_ms: u64) -> Option<u64> {
        if self.pending.load(Relaxed) == 0 {
            return None;
        }
        self.due(now_ms)
    }

    fn due(&self, now_ms: u64) -> Option<u64> {
        let last = self.last_ms.load(Relaxed);
        if last != u64::MAX && now_ms < last.saturating_add(self.interval_ms) {
            return None;
        }
        // One caller wins the report of this interval.
        self.last_ms
            .compare_exchange(last, now_ms, Relaxed, Relaxed)
            .ok()?;
        let n = self.pending.swap(0, Relaxed);
        (n > 0).then_some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_event_is_reported_at_once_and_the_rest_once_per_interval_with_their_count() {
        let r = RateLimit::new("test", 1000);
        assert_eq!(r.hit(1, 5), Some(1));
        for t in 6..1005 {
            assert_eq!(r.hit(1, t), None);
        }
        assert_eq!(r.hit(1, 1005), Some(1000));
        assert_eq!(r.hit(3, 1500), None);
        assert_eq!(r.flush(1800), None);
        assert_eq!(r.flush(2005), Some(3));
        // Nothing pending: nothing to report, and the next event is not
        // held back longer than the interval.
        assert_eq!(r.flush(5000), None);
        assert_eq!(r.hit(1, 5001), Some(1));
        // Counting nothing reports nothing and does not start an interval.
        assert_eq!(r.hit(0, 7000), None);
        assert_eq!(r.hit(1, 7001), Some(1));
    }

    #[test]
    fn concurrent_events_are_each_counted_once() {
        let r = std::sync::Arc::new(RateLimit::new("test", 10));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let r = r.clone();
                std::thread::spawn(move || (0..10_000u64).filter_map(|t| r.hit(1, t)).sum::<u64>())
            })
            .collect();
        let reported: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(reported + r.flush(u64::MAX - 1).unwrap_or(0), 40_000);
    }
}
