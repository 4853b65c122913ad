//! Naps an event loop takes at a low rate, and how another thread cuts one
//! short.
//!
//! At a low rate an event loop's thread sleeps through its small batch's
//! commit delay and sync (see `commit.rs`) instead of waking for every
//! request. What another loop sends it meanwhile (requests handed over to
//! its shard, answers for its connections) and its own sync's result would
//! otherwise wait for the end of the nap: with two workers a request read
//! by one loop and charged by the other waited out both loops' delays.
//! Whoever sends such work wakes the loop ([`Nap::wake`]): one atomic load
//! while it is not asleep, a thread unpark while it is.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::Instant;

/// One event loop's nap.
#[derive(Debug, Default)]
pub(crate) struct Nap {
    /// The loop's thread, known from its first nap.
    thread: OnceLock<Thread>,
    /// Whether the loop is asleep in [`Nap::sleep_until`].
    asleep: AtomicBool,
    /// Whether work was sent since the loop last took the flag: set by
    /// [`Nap::wake`] whether the loop sleeps or not, so a wake just before
    /// the loop falls asleep is not lost (the nap then ends at once).
    woken: AtomicBool,
}

impl Nap {
    /// Sleeps on the calling thread (always the loop's own) until `until`
    /// or until [`Nap::wake`] is called; returns whether it was woken (or
    /// had been since the flag was last taken).
    pub(crate) fn sleep_until(&self, until: Instant) -> bool {
        self.thread.get_or_init(std::thread::current);
        self.asleep.store(true, SeqCst);
        let woken = loop {
            if self.woken.swap(false, SeqCst) {
                break true;
            }
            let now = Instant::now();
            if now >= until {
                break false;
            }
            // A stale unpark token only makes this loop go round once more.
            std::thread::park_timeout(until - now);
        };
        self.asleep.store(false, SeqCst);
        woken
    }

    /// Forgets wakes sent so far: what they announced has been handled.
    pub(crate) fn clear(&self) {
        self.woken.store(false, SeqCst);
    }

    /// Work for the loop has just been sent: cuts its nap short if it is
    /// taking one, or the next one it starts before it has looked.
    pub(crate) fn wake(&self) {
        self.woken.store(true, SeqCst);
        if self.asleep.load(SeqCst) {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_nap_lasts_until_its_deadline_when_nobody_wakes_it() {
        let nap = Nap::default();
        let start = Instant::now();
        assert!(!nap.sleep_until(start + Duration::from_millis(30)));
        assert!(start.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn a_wake_from_another_thread_ends_the_nap_early() {
        let nap = Arc::new(Nap::default());
        let waker = nap.clone();
        let t = std::thread::spawn(move || {
            // Until the nap has begun; then wake it.
            while !waker.asleep.load(SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            waker.wake();
        });
        let start = Instant::now();
        assert!(nap.sleep_until(start + Duration::from_secs(10)));
        assert!(start.elapsed() < Duration::from_secs(5));
        t.join().unwrap();
    }

    #[test]
    fn a_wake_before_the_nap_ends_it_at_once_and_a_cleared_one_does_not() {
        let nap = Nap::default();
        nap.wake();
        let start = Instant::now();
        assert!(nap.sleep_until(start + Duration::from_secs(10)));
        assert!(start.elapsed() < Duration::from_secs(5));

        nap.wake();
        nap.clear();
        let start = Instant::now();
        assert!(!nap.sleep_until(start + Duration::from_millis(20)));
        assert!(start.elapsed() >= Duration::from_millis(20));
    }
}
