//! Overload control: which requests a shard is too busy to take.
//!
//! Each worker's shard has a queue: the requests handed to it by other
//! event loops and not yet processed. A request is refused, and answered
//! DIAMETER_TOO_BUSY (3004) at once without reaching the application's
//! state, when
//!
//! * its shard's queue already holds `limits.max_queued_per_worker`
//!   requests (so a burst turns into fast refusals, not into latency);
//! * with fair shares on, the queue is at least half full and the
//!   request's connection already has more than its share of the queue
//!   unanswered (one busy peer is refused first, the others keep being
//!   served);
//! * it has waited longer than `limits.max_queue_wait_ms` from the moment
//!   it arrived until its shard gets to it (the client has likely given
//!   up, or is about to: a late answer is worth less than a fast 3004).
//!   A request is known from when it is read; it arrived earlier by about
//!   the reading event loop's lag, how late that loop's timers fire (a
//!   socket that became readable waits that long for its turn), so its
//!   arrival is taken as its read time less that lag. This is what makes
//!   the bound hold for requests handled inline, by a loop busy with
//!   many connections, as well as for requests handed over.
//!
//! Plain functions of counts and times passed in, so they are unit-tested
//! here and the runtime only feeds them.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use crate::metrics::WorkerStats;

/// The depth of one shard's queue: raised by the event loops that hand
/// requests over (before sending them), lowered by the owner once it has
/// taken them. Alone on its cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct QueueDepth(AtomicUsize);

impl QueueDepth {
    /// Requests queued now.
    pub(crate) fn get(&self) -> usize {
        self.0.load(Relaxed)
    }

    /// `n` requests are being handed over.
    pub(crate) fn add(&self, n: usize) {
        self.0.fetch_add(n, Relaxed);
    }

    /// `n` requests were taken (or could not be handed over after all).
    pub(crate) fn sub(&self, n: usize) {
        self.0.fetch_sub(n, Relaxed);
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The shard's queue was full.
    QueueFull,
    /// The request's connection had more than its share of a busy queue,
    /// or more than `max_inflight_per_connection` requests unanswered.
    PeerShare,
    /// The request waited too long before its shard got to it.
    Waited,
}

impl Refusal {
    /// Counts one refusal in the worker's counters.
    pub(crate) fn count(self, stats: &WorkerStats, n: u64) {
        let c = match self {
            Refusal::QueueFull => &stats.too_busy_queue_full,
            Refusal::PeerShare => &stats.too_busy_peer_share,
            Refusal::Waited => &stats.too_busy_waited,
        };
        WorkerStats::bump(c, n);
    }
}

/// How often the event-loop lag is sampled.
pub(crate) const LAG_PROBE_MS: u64 = 10;

/// The event-loop lag after a timer that was due at `due_ms` fired at
/// `fired_ms`, smoothed with the previous value (`lag_ms`) so one slow
/// turn does not refuse a burst by itself: a quarter of the new sample.
pub(crate) fn smoothed_lag(lag_ms: u64, due_ms: u64, fired_ms: u64) -> u64 {
    let sample = fired_ms.saturating_sub(due_ms);
    (lag_ms * 3 + sample) / 4
}

/// When a request read at `read_ms` arrived, by a loop lagging `lag_ms`.
pub(crate) fn arrival(read_ms: u64, lag_ms: u64) -> u64 {
    read_ms.saturating_sub(lag_ms)
}

/// A connection's share of a busy queue is never below this many
/// requests, however many peers are connected.
const MIN_SHARE: usize = 8;

/// The overload limits of every shard (from `[limits]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Admission {
    /// Requests a shard's queue may hold.
    pub max_queued: usize,
    /// Milliseconds a request may wait from its read to its processing.
    pub max_wait_ms: u64,
    /// Whether a connection is limited to its share of a busy queue.
    pub fair_share: bool,
}

impl Admission {
    /// Whether a request may join a shard queue that holds `queued`
    /// requests. `peer()` is asked only when the queue is busy: the
    /// requests the request's connection has unanswered, and the number of
    /// connections sharing the server.
    pub(crate) fn admit(
        &self,
        queued: usize,
        peer: impl FnOnce() -> (usize, usize),
    ) -> Result<(), Refusal> {
        if queued >= self.max_queued {
            return Err(Refusal::QueueFull);
        }
        if self.fair_share && queued.saturating_mul(2) >= self.max_queued {
            let (unanswered, connections) = peer();
            if connections > 1 && unanswered >= self.share(connections) {
                return Err(Refusal::PeerShare);
            }
        }
        Ok(())
    }

    /// A connection's share of a busy queue among `connections`.
    fn share(&self, connections: usize) -> usize {
        (self.max_queued / connections.max(1)).max(MIN_SHARE)
    }

    /// Whether a request that arrived at `arrived_ms` has waited too long
    /// at `now_ms` (both monotonic milliseconds; see [`arrival`]).
    pub(crate) fn waited_too_long(&self, arrived_ms: u64, now_ms: u64) -> bool {
        now_ms.saturating_sub(arrived_ms) > self.max_wait_ms
    }

    /// Whether the event loop is late enough (a quarter of the wait
    /// bound) that a connection past its window is shed rather than left
    /// unread: unread, its requests would wait in the socket's buffers
    /// where no bound can see them. A loop that keeps up only stops
    /// reading (a burst larger than the window is served, later).
    pub(crate) fn overloaded(&self, lag_ms: u64) -> bool {
        lag_ms.saturating_mul(4) >= self.max_wait_ms
    }

    /// Whether a request of a connection with `unanswered` requests in
    /// flight, past a window of `window`, is answered 3004 now.
    pub(crate) fn beyond_window(&self, unanswered: usize, window: usize, lag_ms: u64) -> bool {
        unanswered >= window && self.overloaded(lag_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_its_window_a_connection_is_shed_only_by_a_late_loop() {
        let a = LIMITS;
        // A loop that keeps up: the burst waits for reading, not refused.
        assert!(!a.beyond_window(5000, 1024, 0));
        assert!(!a.beyond_window(5000, 1024, a.max_wait_ms.div_ceil(4) - 1));
        // A loop late by a quarter of the wait bound sheds past the window.
        assert!(a.beyond_window(1024, 1024, a.max_wait_ms.div_ceil(4)));
        assert!(!a.beyond_window(1023, 1024, a.max_wait_ms));
    }

    const LIMITS: Admission = Admission {
        max_queued: 100,
        max_wait_ms: 50,
        fair_share: true,
    };

    fn never() -> (usize, usize) {
        panic!("the peer's share is only asked for when the queue is busy")
    }

    #[test]
    fn a_queue_below_half_admits_everyone_without_asking_about_the_peer() {
        for queued in 0..50 {
            assert_eq!(LIMITS.admit(queued, never), Ok(()));
        }
    }

    #[test]
    fn a_full_queue_refuses_every_request() {
        assert_eq!(LIMITS.admit(100, || (0, 1)), Err(Refusal::QueueFull));
        assert_eq!(LIMITS.admit(5000, || (0, 1)), Err(Refusal::QueueFull));
        let no_share = Admission {
            fair_share: false,
            ..LIMITS
        };
        assert_eq!(no_share.admit(99, never), Ok(()));
        assert_eq!(no_share.admit(100, never), Err(Refusal::QueueFull));
    }

    #[test]
    fn in_a_busy_queue_a_peer_beyond_its_share_is_refused_and_the_others_admitted() {
        // 4 connections: a share of 25 each.
        assert_eq!(LIMITS.admit(60, || (24, 4)), Ok(()));
        assert_eq!(LIMITS.admit(60, || (25, 4)), Err(Refusal::PeerShare));
        assert_eq!(LIMITS.admit(99, || (3, 4)), Ok(()));
        // A lone connection may use the whole queue.
        assert_eq!(LIMITS.admit(99, || (99, 1)), Ok(()));
        // Many connections: the share does not drop below the minimum.
        assert_eq!(LIMITS.admit(60, || (MIN_SHARE - 1, 1000)), Ok(()));
        assert_eq!(
            LIMITS.admit(60, || (MIN_SHARE, 1000)),
            Err(Refusal::PeerShare)
        );
    }

    #[test]
    fn a_lagging_loop_moves_arrival_back_by_its_smoothed_lag() {
        // Timers on time: no lag.
        assert_eq!(smoothed_lag(0, 100, 100), 0);
        // One slow turn counts a quarter; a loop that stays late converges
        // to its lateness.
        assert_eq!(smoothed_lag(0, 100, 500), 100);
        let mut lag = 0;
        for i in 0..40 {
            lag = smoothed_lag(lag, i * 1000, i * 1000 + 400);
        }
        assert!((395..=400).contains(&lag), "{lag}");
        // And back once it keeps up.
        for i in 40..80 {
            lag = smoothed_lag(lag, i * 1000, i * 1000);
        }
        assert_eq!(lag, 0);
        // A request read at 1000 by a loop 300 ms late arrived at 700: at
        // 1000 it has waited 300 ms, past a 50 ms bound.
        assert_eq!(arrival(1000, 300), 700);
        assert!(LIMITS.waited_too_long(arrival(1000, 300), 1000));
        assert!(!LIMITS.waited_too_long(arrival(1000, 0), 1000));
        assert_eq!(arrival(10, 300), 0);
    }

    #[test]
    fn a_request_may_wait_up_to_the_bound_and_not_longer() {
        assert!(!LIMITS.waited_too_long(1000, 1000));
        assert!(!LIMITS.waited_too_long(1000, 1050));
        assert!(LIMITS.waited_too_long(1000, 1051));
        // A clock read before the stamp (another thread's) is no wait.
        assert!(!LIMITS.waited_too_long(1000, 990));
    }
}
