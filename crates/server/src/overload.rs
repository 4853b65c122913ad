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
//! * it has waited longer than half of `limits.max_queue_wait_ms` from
//!   the moment it arrived until its shard gets to it (the other half is
//!   for its processing, group commit and write: an answered request
//!   spends less than the bound in the server; a late answer is worth
//!   less than a fast 3004, with which the client can go elsewhere).
//!   A request's arrival is dated by [`Arrivals`]: from when its bytes
//!   were first seen, read or waiting in the socket's receive queue, and
//!   from the reading event loop's lag, how late that loop's timers fire
//!   (a socket that became readable waits that long for its turn). This
//!   is what makes the bound hold for requests handled inline, by a loop
//!   busy with many connections, for requests handed over, and for
//!   requests that waited in the kernel while their connection was not
//!   read (backpressure) or read slowly (one of many);
//! * with the event loop late by a quarter of the wait bound, its
//!   connection already has its window (`max_inflight_per_connection`)
//!   unanswered;
//! * one of its event loop's connections is behind its peer
//!   ([`Arrivals::behind`]: read, yet its socket has not run dry for a
//!   quarter of the wait bound): requests then wait where they cannot be
//!   dated, in the peer's send buffer, and on one thread a connection
//!   that cannot be drained means the loop has no time to spare, so the
//!   loop refuses every request until a quarter of the bound has passed
//!   with none behind. Refusing is cheap enough that the loop then
//!   catches up, and serves again;
//! * its event loop has no CPU to spare and its answers are late
//!   ([`Admission::answers_late`]: timers late, and output held for a
//!   quarter of the wait bound): its connection is heavy (bytes left in
//!   its socket, or more than a light share of its window unanswered), or
//!   already has a few requests unanswered. A light peer keeps being
//!   served.
//!
//! The refusals by waiting time (of requests read on their shard's own
//! event loop), by being behind and past the window need no routing: the
//! connection itself answers them, from the request's header and
//! Session-Id, without validating or decoding it
//! (`Connection::shed_until`), at a small fraction of the cost of an
//! answer: a refusal that cost as much as an answer would not relieve an
//! overloaded server. The others (a full queue, a peer beyond its share,
//! a handed-over request that waited in its owner's queue) are worded by
//! the application (`Shard::too_busy`).
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

/// Most samples one connection's [`Arrivals`] keeps.
const MAX_SAMPLES: usize = 32;

/// When the bytes of one connection's received stream arrived, as far as
/// the runtime can tell: samples of (stream offset, time) taken whenever
/// it looks at the socket, each saying "every byte before this offset had
/// arrived by then". A read that fills the space it was given is followed
/// by a look at the bytes still waiting in the socket (FIONREAD), so the
/// bytes the kernel holds are dated when they are first seen there, not
/// when they are finally read: a connection read slowly, or not at all
/// for backpressure, has requests that waited unseen, and this is what
/// sees them.
///
/// Between two samples the bytes are taken to have arrived at an even
/// pace (a request's arrival is interpolated from its last byte's
/// offset); bytes first seen at a look are taken to have arrived no
/// earlier than the previous look, nor earlier than the look's time less
/// the event loop's lag (how late it comes to a socket that became
/// readable), so a burst after a quiet spell counts as fresh.
///
/// What waits beyond the socket's receive buffer (in the peer's send
/// buffer, once TCP flow control holds it back) cannot be dated. A
/// connection whose socket never runs dry is falling behind its peer,
/// and then that unseen queue grows: [`Arrivals::behind`] says so.
#[derive(Debug, Clone)]
pub(crate) struct Arrivals {
    /// (offset, ms), increasing in both; never empty.
    samples: std::collections::VecDeque<(u64, u64)>,
    /// Since when every look found bytes waiting in the socket (`None`
    /// when the last one found it empty).
    backlog_since: Option<u64>,
}

impl Arrivals {
    /// A connection accepted at `now_ms`: nothing arrived before.
    pub(crate) fn new(now_ms: u64) -> Self {
        let mut samples = std::collections::VecDeque::with_capacity(4);
        samples.push_back((0, now_ms));
        Arrivals {
            samples,
            backlog_since: None,
        }
    }

    /// A look at the socket at `now_ms`, by a loop lagging `lag_ms`: the
    /// stream's bytes received so far, and `waiting` more in the socket.
    /// `reading`: whether the connection is read at all; one held back
    /// (its window full, a peer that does not read its answers) is not
    /// behind for its socket's backlog, which it chose not to read.
    pub(crate) fn look(
        &mut self,
        received: u64,
        waiting: u64,
        reading: bool,
        now_ms: u64,
        lag_ms: u64,
    ) {
        if waiting == 0 || !reading {
            self.backlog_since = None;
        } else if self.backlog_since.is_none() {
            self.backlog_since = Some(now_ms);
        }
        let arrived = received + waiting;
        let &(offset, at) = self.samples.back().expect("never empty");
        if arrived <= offset {
            return;
        }
        let now_ms = now_ms.max(at);
        // The new bytes began to arrive after the last look, and about
        // `lag_ms` before this one at the earliest.
        let began = now_ms.saturating_sub(lag_ms).max(at);
        if began > at {
            self.push((offset, began));
        }
        self.push((arrived, now_ms));
    }

    fn push(&mut self, sample: (u64, u64)) {
        if self.samples.len() >= MAX_SAMPLES {
            // Coarser: the last stretch is merged into this one (its bytes
            // are dated between the samples around it all the same).
            self.samples.pop_back();
        }
        self.samples.push_back(sample);
    }

    /// Whether the connection has fallen behind its peer: every look for
    /// longer than `bound_ms` up to `now_ms` found bytes waiting in the
    /// socket. A connection that keeps up empties its socket now and then;
    /// one that does not has requests queued where they cannot be dated,
    /// and every request it reads is shed until it catches up.
    pub(crate) fn behind(&self, now_ms: u64, bound_ms: u64) -> bool {
        self.backlog_since
            .is_some_and(|since| now_ms.saturating_sub(since) > bound_ms)
    }

    /// Whether the last look found bytes waiting in the socket after a
    /// read: the peer sends faster than the connection reads.
    pub(crate) fn backlogged(&self) -> bool {
        self.backlog_since.is_some()
    }

    /// Forgets what is no longer needed once the stream is consumed up to
    /// `consumed`: the samples before the last one at or below it.
    pub(crate) fn consumed(&mut self, consumed: u64) {
        while self.samples.len() > 1 && self.samples[1].0 <= consumed {
            self.samples.pop_front();
        }
    }

    /// When the byte just before stream offset `offset` arrived
    /// (estimated, see the type).
    pub(crate) fn arrival(&self, offset: u64) -> u64 {
        let s = &self.samples;
        let Some(j) = s.iter().position(|&(o, _)| o >= offset) else {
            return s.back().expect("never empty").1;
        };
        if j == 0 {
            return s[0].1;
        }
        let ((o0, t0), (o1, t1)) = (s[j - 1], s[j]);
        t0 + ((t1 - t0) as u128 * (offset - o0) as u128 / (o1 - o0) as u128) as u64
    }

    /// The end of the stretch of the stream that had arrived by `ms`
    /// (estimated, see the type): a request ending at or before it has
    /// been waiting since `ms` at least.
    pub(crate) fn arrived_by(&self, ms: u64) -> u64 {
        let s = &self.samples;
        let Some(j) = s.iter().rposition(|&(_, t)| t <= ms) else {
            return 0;
        };
        let Some(&(o1, t1)) = s.get(j + 1) else {
            return s[j].0;
        };
        let (o0, t0) = s[j];
        o0 + ((o1 - o0) as u128 * (ms - t0) as u128 / (t1 - t0) as u128) as u64
    }
}

/// A connection's share of a busy queue is never below this many
/// requests, however many peers are connected.
const MIN_SHARE: usize = 8;

/// The overload limits of every shard (from `[limits]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Admission {
    /// Requests a shard's queue may hold.
    pub max_queued: usize,
    /// Milliseconds a request may spend in the server, from its arrival
    /// to its answer: it may wait half of it to be processed.
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
    /// at `now_ms` (both monotonic milliseconds; see [`Arrivals`]) to be
    /// processed: more than half the wait bound. The other half is left
    /// for what follows processing (the rest of its batch, the group
    /// commit, the write), so that an answered request has spent less
    /// than the bound in the server.
    pub(crate) fn waited_too_long(&self, arrived_ms: u64, now_ms: u64) -> bool {
        now_ms.saturating_sub(arrived_ms) > self.max_wait_ms / 2
    }

    /// The latest arrival time of a request that has waited too long at
    /// `now_ms` (see [`Admission::waited_too_long`]): what
    /// [`Arrivals::arrived_by`] is asked, to shed every such request.
    /// `None` while no request can have waited that long (the clock
    /// starts at 0 with the server).
    pub(crate) fn late_before(&self, now_ms: u64) -> Option<u64> {
        now_ms.checked_sub(self.max_wait_ms / 2 + 1)
    }

    /// How long a connection's socket may hold bytes at every look before
    /// the connection counts as behind its peer ([`Arrivals::behind`]): a
    /// quarter of the wait bound, so that what waits unseen beyond the
    /// socket has not waited the whole bound yet when shedding starts.
    pub(crate) fn backlog_ms(&self) -> u64 {
        self.max_wait_ms / 4
    }

    /// Whether the event loop is late enough (a quarter of the wait
    /// bound) that a connection past its window is shed rather than left
    /// unread: unread, its requests would wait in the socket's buffers
    /// where no bound can see them. A loop that keeps up only stops
    /// reading (a burst larger than the window is served, later).
    pub(crate) fn overloaded(&self, lag_ms: u64) -> bool {
        lag_ms.saturating_mul(4) >= self.max_wait_ms
    }

    /// Whether an event loop's answers are late because it has no CPU to
    /// spare: its timers fire late by an eighth of the wait bound
    /// (`lag_ms`), and its oldest output not released yet has waited
    /// `oldest_ms` (queued for a group commit or in one), or the last batch
    /// it released (`since_ms` ago) held an answer that had spent
    /// `sojourn_ms` in the server, either a quarter of the bound or more (a
    /// released batch counts for a quarter of the bound after its release).
    ///
    /// Then the loop's heavy connections are shed and every other keeps at
    /// most a few requests unanswered (see `conn.rs`): what it admitted now
    /// would leave late too. Without this, a starved loop reads what its
    /// clients send at once, so no request has waited long when it is
    /// processed, and answers each late, after the loop's slow turns and
    /// group commits: the clients' windows fill with requests waiting for
    /// those answers, and what they cannot send waits on their side, where
    /// no bound sees it (at three times the capacity of a server held to a
    /// tenth of a CPU, a p99 of seconds, and fewer answers a second than
    /// the server could give). A slow disk alone (timers on time) is not
    /// a reason: the requests admitted meanwhile are answered when it
    /// recovers, and refusing them would not make it faster.
    pub(crate) fn answers_late(
        &self,
        lag_ms: u64,
        oldest_ms: u64,
        last: Option<(u64, u64)>,
    ) -> bool {
        let quarter = self.max_wait_ms / 4;
        if lag_ms.saturating_mul(8) < self.max_wait_ms {
            return false;
        }
        oldest_ms >= quarter
            || last
                .is_some_and(|(since_ms, sojourn_ms)| since_ms < quarter && sojourn_ms >= quarter)
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

    #[test]
    fn answers_are_late_when_a_lagging_loop_holds_output_for_a_quarter_of_the_bound() {
        let a = LIMITS; // 50 ms: a quarter is 12 ms, an eighth 6.25 ms
        let lag = 7;
        assert!(!a.answers_late(lag, 0, None));
        assert!(!a.answers_late(lag, 11, None));
        assert!(a.answers_late(lag, 12, None));
        // A slow batch counts for a quarter of the bound after its release.
        assert!(!a.answers_late(lag, 0, Some((0, 11))));
        assert!(a.answers_late(lag, 0, Some((0, 12))));
        assert!(a.answers_late(lag, 0, Some((11, 500))));
        assert!(!a.answers_late(lag, 0, Some((12, 500))));
        // Timers on time: a slow disk, not a starved loop.
        assert!(!a.answers_late(6, 500, Some((0, 500))));
        assert!(a.answers_late(7, 500, None));
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
        // A request read at 1000 by a loop 300 ms late, the first bytes
        // since a look at 0, began to arrive at 700: at 1000 it has waited
        // about 300 ms, past a 50 ms bound.
        let mut a = Arrivals::new(0);
        a.look(200, 0, true, 1000, 300);
        assert_eq!(a.arrival(0), 0);
        assert_eq!(a.arrival(1), 701);
        assert!(LIMITS.waited_too_long(a.arrival(100), 1000));
        let mut a = Arrivals::new(0);
        a.look(200, 0, true, 1000, 0);
        assert!(!LIMITS.waited_too_long(a.arrival(200), 1000));
        let mut a = Arrivals::new(0);
        a.look(200, 0, true, 10, 300);
        assert_eq!(a.arrival(1), 0);
    }

    #[test]
    fn bytes_are_dated_by_the_first_look_that_saw_them_waiting_in_the_socket() {
        let mut a = Arrivals::new(0);
        // At 100 an idle loop's read got 1000 bytes and 9000 more waited in
        // the socket: all fresh.
        a.look(10_000, 0, true, 100, 0);
        assert_eq!(a.arrival(5_000), 100);
        // The next read, at 900, by a loop that has been busy (800 ms
        // late), finds 2000 more: they arrived between 100 and 900, and
        // the 9000 bytes seen at 100 have been waiting since then.
        a.look(12_000, 0, true, 900, 800);
        assert_eq!(a.arrival(10_000), 100);
        assert_eq!(a.arrival(11_000), 500);
        assert_eq!(a.arrival(12_000), 900);
        // At 900 with a 500 ms bound: everything that arrived before 649
        // has waited too long (half the bound), the first 11,372 bytes.
        let late = Admission {
            max_wait_ms: 500,
            ..LIMITS
        }
        .late_before(900)
        .unwrap();
        assert_eq!(late, 649);
        assert_eq!(a.arrived_by(late), 11_372);
        assert!(a.arrival(11_372) <= late && a.arrival(11_373) >= late);
        // Nothing arrived before the accept (at 0); everything by the last
        // look.
        assert_eq!(a.arrived_by(0), 0);
        assert_eq!(a.arrived_by(5_000), 12_000);
    }

    #[test]
    fn a_socket_that_never_runs_dry_for_longer_than_the_bound_is_behind() {
        let mut a = Arrivals::new(0);
        a.look(100, 5_000, true, 10, 0);
        assert!(!a.behind(10, 500));
        a.look(200, 5_000, true, 400, 0);
        assert!(!a.behind(510, 500));
        assert!(a.behind(511, 500));
        // Once a look finds it empty, caught up.
        a.look(10_000, 0, true, 600, 0);
        assert!(!a.behind(5_000, 500));
        // And the clock starts again with the next backlog.
        a.look(11_000, 10, true, 700, 0);
        assert!(!a.behind(1_200, 500));
        assert!(a.behind(1_201, 500));
        // Bytes seen waiting are dated by the look all the same.
        assert_eq!(a.arrival(5_100), 10);
        // A connection held back is not behind for what it does not read.
        a.look(11_000, 10, false, 1_300, 0);
        assert!(!a.behind(5_000, 500));
    }

    #[test]
    fn a_burst_after_a_quiet_spell_is_fresh() {
        let mut a = Arrivals::new(0);
        a.look(100, 0, true, 10, 0);
        // Quiet for a minute, then a burst read at once by a loop 5 ms
        // late: it began to arrive at 60_005, not over the minute.
        a.look(50_100, 0, true, 60_010, 5);
        assert_eq!(a.arrival(101), 60_005);
        assert_eq!(a.arrival(50_100), 60_010);
        assert_eq!(a.arrived_by(60_004), 100);
        // A look that finds nothing new changes nothing.
        a.look(50_100, 0, true, 70_000, 0);
        assert_eq!(a.arrived_by(69_000), 50_100);
        assert_eq!(a.arrival(50_100), 60_010);
    }

    #[test]
    fn consumed_bytes_are_forgotten_and_the_samples_stay_bounded() {
        let mut a = Arrivals::new(0);
        for i in 1..=1000 {
            a.look(i * 100, 0, true, i * 10, 0);
        }
        assert!(a.samples.len() <= MAX_SAMPLES);
        // Coarser at the end: still dated between the samples around.
        assert_eq!(a.arrival(100), 10);
        assert_eq!(a.arrival(100_000), 10_000);
        assert_eq!(a.arrival(99_000), 9_900);
        a.consumed(100_000);
        assert_eq!(a.samples.len(), 1);
        assert_eq!(a.arrival(100_000), 10_000);
        a.look(100_500, 0, true, 10_100, 0);
        assert_eq!(a.arrival(100_500), 10_100);
    }

    #[test]
    fn nothing_is_late_before_the_clock_has_run_half_the_bound() {
        // Bytes that arrived at 0, right after the start, are not late at 25.
        assert_eq!(LIMITS.late_before(25), None);
        assert_eq!(LIMITS.late_before(26), Some(0));
        assert!(!LIMITS.waited_too_long(0, 25));
        assert!(LIMITS.waited_too_long(0, 26));
    }

    #[test]
    fn a_request_may_wait_up_to_half_the_bound_to_be_processed_and_not_longer() {
        assert!(!LIMITS.waited_too_long(1000, 1000));
        assert!(!LIMITS.waited_too_long(1000, 1025));
        assert!(LIMITS.waited_too_long(1000, 1026));
        // A clock read before the stamp (another thread's) is no wait.
        assert!(!LIMITS.waited_too_long(1000, 990));
    }
}
