//! Open-loop pacing: when each request is due, which connection sends it,
//! and one timer per load thread to release it on time.
//!
//! Each load thread drives a share of the connections and the same share
//! of `--rate`. The thread's requests are due at evenly spaced intended
//! times, slot `i` at `first + i / rate` ([`Slots`]), and the slots are
//! dealt round robin to the thread's `n` connections, `b` consecutive
//! slots at a time: slot `i` belongs to connection `(i / b) mod n`. Each
//! connection offers `rate / n`, the thread offers `rate`, and the
//! intended times stay evenly spaced over the whole thread.
//!
//! One [`Pacer`] per thread decides which slots are due. It wakes on one
//! timer at the next slot's intended time, but never sooner than
//! [`QUANTUM`] after its last wake-up, so a thread wakes at most 20,000
//! times a second whatever the rate and however many connections it has.
//! At each wake-up it releases every slot due by then to its connection's
//! [`Lane`] (a count) and wakes that connection; a connection with nothing
//! released is not woken and costs nothing. A slot is never released
//! before its intended time, and at most about a quantum after it.
//!
//! The block `b` is the number of slots due in one quantum (at least one,
//! see [`block_for`]): at 2,000 requests a second every slot goes to the
//! next connection; at 90,000 a second the four or so slots due in one
//! quantum go to one connection, which sends them in one write. So a
//! wake-up of the pacer wakes one or two connections, not one per slot:
//! on a loaded machine each wake-up and each small write costs several
//! microseconds (more than building the request), and with 50 connections
//! at 92,000 requests a second dealing slot by slot cost the generator
//! about 8 us of CPU a request, in blocks about 5.7 us (against a trivial
//! server, one CPU each). The price: at high rates a connection's requests
//! leave in small bursts (each still counted from its own intended time)
//! rather than one by one.
//!
//! A connection sends one request for each released slot while it has a
//! session ready, and each request's latency counts from its slot's
//! intended time, not from when it left: a server that stalls shows up as
//! latency, not as a lower rate (coordinated omission). Slots released
//! while a connection's window is full wait for a free session and keep
//! their intended times.
//!
//! tokio's timer has a 1 ms resolution, so waiting for a slot due in
//! 5 us would really wait up to 1 ms and every request would carry that
//! delay. On Linux the pacer waits on a `timerfd` instead (nanosecond
//! resolution, woken by the same epoll as the sockets).
//!
//! The schedule math ([`Slots`], [`Pacer`], [`block_for`]) is plain functions
//! of the time passed in; only [`run_pacer`] and [`PreciseTimer`] touch a
//! clock.

use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

/// The shortest time between two wake-ups of a thread's pacer: slots due
/// sooner are released together at the next one.
pub(crate) const QUANTUM: Duration = Duration::from_micros(50);

/// Longest offset of a slot from the first one (about 31 years): keeps
/// absurdly low rates from overflowing an `Instant`.
const MAX_OFFSET_SECS: f64 = 1.0e9;

/// The intended send times of one thread's connections: slot `i` is due
/// at `first + i / rate` and belongs to connection `(i / block) mod
/// conns`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Slots {
    first: Instant,
    rate: f64,
    conns: u64,
    block: u64,
}

impl Slots {
    /// `rate` slots a second (above 0) from `first`, dealt round robin to
    /// `conns` connections (at least 1), `block` consecutive slots (at
    /// least 1) at a time.
    pub(crate) fn new(first: Instant, rate: f64, conns: usize, block: u64) -> Self {
        Slots {
            first,
            rate,
            conns: conns.max(1) as u64,
            block: block.max(1),
        }
    }

    /// The intended send time of slot `i`.
    pub(crate) fn at(&self, i: u64) -> Instant {
        let secs = (i as f64 / self.rate).min(MAX_OFFSET_SECS);
        self.first + Duration::from_secs_f64(secs)
    }

    /// The connection slot `i` belongs to.
    #[cfg(test)]
    fn conn(&self, i: u64) -> usize {
        (i / self.block % self.conns) as usize
    }

    /// The number of connection `conn`'s `k`-th slot (from 0).
    pub(crate) fn nth_of(&self, conn: usize, k: u64) -> u64 {
        ((k / self.block) * self.conns + conn as u64) * self.block + k % self.block
    }

    /// How many of the slots before slot `x` belong to connection `conn`.
    fn owned_before(&self, conn: u64, x: u64) -> u64 {
        let cycle = self.conns * self.block;
        let (q, r) = (x / cycle, x % cycle);
        q * self.block + r.saturating_sub(conn * self.block).min(self.block)
    }

    /// Deals the slots `due` to their connections: calls `give(conn,
    /// count)` once for each connection that gets at least one.
    pub(crate) fn shares(&self, due: Range<u64>, mut give: impl FnMut(usize, u64)) {
        if due.is_empty() {
            return;
        }
        let first_block = due.start / self.block;
        let last_block = (due.end - 1) / self.block;
        let touched = (last_block - first_block + 1).min(self.conns);
        for b in first_block..first_block + touched {
            let c = b % self.conns;
            let n = self.owned_before(c, due.end) - self.owned_before(c, due.start);
            give(c as usize, n);
        }
    }

    /// The number of the first slot not yet due at `now`, searching from
    /// slot `from` (one already known not to be due before).
    fn first_not_due(&self, from: u64, now: Instant) -> u64 {
        let Some(since) = now.checked_duration_since(self.first) else {
            return from;
        };
        // A guess from the clock, corrected so that exactly the slots
        // whose intended time is at or before `now` are behind it.
        let guess = (since.as_secs_f64() * self.rate).min(MAX_OFFSET_SECS * self.rate) as u64;
        let mut n = guess.max(from);
        while n > from && self.at(n - 1) > now {
            n -= 1;
        }
        while self.at(n) <= now {
            n += 1;
        }
        n
    }
}

/// The state of one thread's pacer: the next slot to release.
#[derive(Debug)]
pub(crate) struct Pacer {
    slots: Slots,
    next: u64,
    next_at: Instant,
}

impl Pacer {
    pub(crate) fn new(slots: Slots) -> Self {
        Pacer {
            slots,
            next: 0,
            next_at: slots.at(0),
        }
    }

    /// Releases every slot due at `now` (its intended time at or before
    /// `now`) and not released before: their numbers, in order.
    pub(crate) fn release(&mut self, now: Instant) -> Range<u64> {
        if self.next_at > now {
            return self.next..self.next;
        }
        let from = self.next;
        self.next = self.slots.first_not_due(from + 1, now);
        self.next_at = self.slots.at(self.next);
        from..self.next
    }

    /// When to wake next, seen at `now` just after a release: when the
    /// next slot is due, but no sooner than [`QUANTUM`] from `now`.
    pub(crate) fn wake(&self, now: Instant) -> Instant {
        self.next_at.max(now + QUANTUM)
    }
}

/// How many consecutive slots go to one connection at a `rate` (a
/// second): those due in one [`QUANTUM`], at least one.
pub(crate) fn block_for(rate: f64) -> u64 {
    ((rate * QUANTUM.as_secs_f64()).floor() as u64).max(1)
}

/// The slots released to one connection: a count, and the connection
/// waiting for the next one.
#[derive(Debug, Default)]
pub(crate) struct Lane {
    released: AtomicU64,
    waiting: Mutex<Option<Waker>>,
}

impl Lane {
    /// Releases `n` more slots and wakes the connection if it waits.
    pub(crate) fn release(&self, n: u64) {
        self.released.fetch_add(n, Ordering::Release);
        let w = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Slots released so far.
    pub(crate) fn released(&self) -> u64 {
        self.released.load(Ordering::Acquire)
    }

    /// Waits until more than `taken` slots have been released.
    pub(crate) fn wait(&self, taken: u64) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.released() > taken {
                return Poll::Ready(());
            }
            {
                let mut w = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
                match &mut *w {
                    Some(old) if old.will_wake(cx.waker()) => {}
                    other => *other = Some(cx.waker().clone()),
                }
            }
            // A release between the first look and the registration.
            if self.released() > taken {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }
}

/// One thread's open-loop pace: its share of the rate and one lane per
/// connection, shared by the pacer and the connections.
#[derive(Debug)]
pub(crate) struct Pace {
    rate: f64,
    block: u64,
    /// Offset of the first slot from the common start (threads start
    /// apart so their wake-ups do not coincide).
    phase: Duration,
    lanes: Vec<Lane>,
}

impl Pace {
    /// `rate` requests a second (above 0) over `conns` connections, the
    /// first `phase` after the common start.
    pub(crate) fn new(rate: f64, phase: Duration, conns: usize) -> Self {
        Pace {
            rate,
            block: block_for(rate),
            phase,
            lanes: (0..conns.max(1)).map(|_| Lane::default()).collect(),
        }
    }

    /// The schedule, given the common start.
    pub(crate) fn slots(&self, start: Instant) -> Slots {
        Slots::new(start + self.phase, self.rate, self.lanes.len(), self.block)
    }

    pub(crate) fn lane(&self, conn: usize) -> &Lane {
        &self.lanes[conn]
    }
}

/// A connection's view of its thread's pace: its lane and the slots it
/// has taken.
#[derive(Debug)]
pub(crate) struct Paced {
    pace: Arc<Pace>,
    slots: Slots,
    conn: usize,
    taken: u64,
}

impl Paced {
    /// Connection `conn` (its index in its thread) of `pace`, given the
    /// common start.
    pub(crate) fn new(pace: Arc<Pace>, conn: usize, start: Instant) -> Self {
        Paced {
            slots: pace.slots(start),
            pace,
            conn,
            taken: 0,
        }
    }

    /// True when a released slot waits to be taken.
    pub(crate) fn due(&self) -> bool {
        self.pace.lane(self.conn).released() > self.taken
    }

    /// Takes the next released slot: its intended send time. Call only
    /// when [`Paced::due`].
    pub(crate) fn take(&mut self) -> Instant {
        let t = self.slots.at(self.slots.nth_of(self.conn, self.taken));
        self.taken += 1;
        t
    }

    /// The thread's pace and this connection's index in it, to wait with
    /// [`Lane::wait`] while `self` is borrowed elsewhere.
    pub(crate) fn lane(&self) -> (Arc<Pace>, usize) {
        (self.pace.clone(), self.conn)
    }

    /// Slots taken so far.
    pub(crate) fn taken(&self) -> u64 {
        self.taken
    }
}

/// Runs a thread's pacer from the common start `start` until dropped:
/// releases each slot when due and wakes its connection.
pub(crate) async fn run_pacer(pace: Arc<Pace>, start: Instant) {
    let mut pacer = Pacer::new(pace.slots(start));
    let mut timer = PreciseTimer::new();
    loop {
        let now = Instant::now();
        let due = pacer.release(now);
        pacer.slots.shares(due, |c, n| pace.lanes[c].release(n));
        timer.wait_until(pacer.wake(now)).await;
    }
}

/// A one-shot timer with sub-millisecond resolution (a `timerfd` on
/// Linux; tokio's timer elsewhere).
pub(crate) struct PreciseTimer {
    #[cfg(target_os = "linux")]
    fd: Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
    armed: Option<Instant>,
}

impl PreciseTimer {
    /// A disarmed timer (call inside a tokio runtime). Falls back to tokio's timer when no `timerfd` can
    /// be made.
    pub(crate) fn new() -> Self {
        #[cfg(target_os = "linux")]
        {
            use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
            let fd = timerfd_create(
                TimerfdClockId::Monotonic,
                TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
            )
            .ok()
            .and_then(|fd| {
                // SAFETY: the AsyncFd owns the OwnedFd, which stays open
                // and the same descriptor until the AsyncFd is dropped.
                unsafe {
                    tokio::io::unix::AsyncFd::register_with_interest(
                        fd,
                        tokio::io::Interest::READABLE,
                    )
                }
                .ok()
            });
            PreciseTimer { fd, armed: None }
        }
        #[cfg(not(target_os = "linux"))]
        PreciseTimer { armed: None }
    }

    /// Waits until `at`. Cancel safe: dropping the future keeps the timer
    /// armed, and waiting again for the same instant does not re-arm it.
    pub(crate) async fn wait_until(&mut self, at: Instant) {
        #[cfg(target_os = "linux")]
        if let Some(fd) = &self.fd {
            if self.armed != Some(at) {
                let left = at.saturating_duration_since(Instant::now());
                if left.is_zero() || arm(fd.get_ref(), left).is_err() {
                    self.armed = None;
                    return;
                }
                self.armed = Some(at);
            }
            loop {
                let Ok(mut ready) = fd.readable().await else {
                    break;
                };
                let mut expirations = [0u8; 8];
                match ready.try_io(|inner| {
                    rustix::io::read(inner.get_ref(), &mut expirations).map_err(Into::into)
                }) {
                    Ok(_) => {
                        self.armed = None;
                        return;
                    }
                    Err(_would_block) => continue,
                }
            }
        }
        self.armed = None;
        tokio::time::sleep_until(at.into()).await;
    }
}

#[cfg(target_os = "linux")]
fn arm(fd: &std::os::fd::OwnedFd, after: Duration) -> rustix::io::Result<()> {
    use rustix::time::{timerfd_settime, Itimerspec, TimerfdTimerFlags, Timespec};
    let spec = Itimerspec {
        it_interval: Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: Timespec {
            tv_sec: after.as_secs() as _,
            tv_nsec: after.subsec_nanos() as _,
        },
    };
    timerfd_settime(fd, TimerfdTimerFlags::empty(), &spec).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    /// Runs a pacer as its thread would, waking exactly when it asks,
    /// from `t0` for `span`: every release as (wake-up time, slots).
    fn simulate(slots: Slots, t0: Instant, span: Duration) -> Vec<(Instant, Range<u64>)> {
        let mut p = Pacer::new(slots);
        let mut now = t0;
        let mut out = Vec::new();
        while now < t0 + span {
            let due = p.release(now);
            if !due.is_empty() {
                out.push((now, due));
            }
            now = p.wake(now);
        }
        out
    }

    #[test]
    fn slots_are_evenly_spaced_and_dealt_round_robin() {
        let t0 = Instant::now();
        let s = Slots::new(t0, 85_000.0, 50, 1);
        assert_eq!(s.at(0), t0);
        // 85,000 a second over 50 connections: every connection's slots
        // are 50 slots apart, and over the thread they are 1/85,000 s
        // apart, to the nanosecond.
        let step = 1.0e9 / 85_000.0;
        for i in 0..10_000u64 {
            let gap = s.at(i + 1).duration_since(s.at(i)).as_nanos() as f64;
            assert!((gap - step).abs() <= 1.0, "slot {i}: {gap} ns");
            assert_eq!(s.conn(i), (i % 50) as usize);
        }
        for c in 0..50 {
            for k in 0..100 {
                let i = s.nth_of(c, k);
                assert_eq!(s.conn(i), c);
                assert_eq!(i, c as u64 + 50 * k);
            }
        }
        // Dealt four at a time: slots 0-3 to connection 0, 4-7 to 1, ...,
        // 196-199 to 49, 200-203 to 0 again.
        let s4 = Slots::new(t0, 85_000.0, 50, 4);
        assert_eq!(s4.at(1_000), s.at(1_000));
        assert_eq!(
            (s4.conn(3), s4.conn(4), s4.conn(199), s4.conn(200)),
            (0, 1, 49, 0)
        );
        let mut owner = vec![None; 50 * 4 * 3];
        for c in 0..50 {
            for k in 0..12 {
                let i = s4.nth_of(c, k) as usize;
                assert_eq!(s4.conn(i as u64), c);
                assert_eq!(owner[i].replace(c), None, "slot {i} dealt twice");
            }
        }
        assert!(
            owner.iter().all(Option::is_some),
            "every slot has its connection"
        );
        // After an hour the schedule has not drifted: slot 85,000 x 3,600
        // is due exactly an hour after the first.
        let hour = s.at(85_000 * 3_600).duration_since(t0);
        assert_eq!(hour, Duration::from_secs(3_600));
    }

    #[test]
    fn absurd_rates_do_not_overflow() {
        let t0 = Instant::now();
        let slow = Slots::new(t0, 1.0e-300, 1, 1);
        assert!(slow.at(5) > t0 + Duration::from_secs(1_000_000));
        let mut p = Pacer::new(slow);
        assert_eq!(p.release(t0), 0..1);
        assert!(p.release(t0 + Duration::from_secs(3_600)).is_empty());
    }

    #[test]
    fn pacer_never_releases_a_slot_early_and_releases_each_once() {
        let t0 = Instant::now();
        for rate in [10.0, 1_000.0, 20_000.0, 85_000.0, 1_000_000.0] {
            let slots = Slots::new(t0 + Duration::from_millis(1), rate, 7, block_for(rate));
            let releases = simulate(slots, t0, Duration::from_secs(1));
            let mut next = 0;
            for (now, due) in &releases {
                assert_eq!(due.start, next, "no slot skipped or released twice");
                next = due.end;
                for i in due.clone() {
                    assert!(slots.at(i) <= *now, "rate {rate}: slot {i} released early");
                }
                // Not held back either: the next slot was not due yet.
                assert!(slots.at(due.end) > *now);
            }
            // About one second of slots (the first one 1 ms in).
            let expected = rate * 0.999;
            assert!(
                (next as f64 - expected).abs() <= 1.0 + rate * QUANTUM.as_secs_f64(),
                "rate {rate}: {next} slots"
            );
        }
    }

    #[test]
    fn wake_ups_are_bounded_by_the_quantum_whatever_the_rate() {
        let t0 = Instant::now();
        for (rate, conns) in [(1_000_000.0, 50), (85_000.0, 50), (85_000.0, 5_000)] {
            let slots = Slots::new(t0, rate, conns, block_for(rate));
            let releases = simulate(slots, t0, Duration::from_secs(1));
            // 20,000 wake-ups a second at most, each at least a quantum
            // after the one before.
            assert!(releases.len() <= 20_001, "{rate}: {}", releases.len());
            for w in releases.windows(2) {
                assert!(w[1].0.duration_since(w[0].0) >= QUANTUM);
            }
            // And each slot waits at most a quantum for its release.
            for (now, due) in &releases {
                assert!(now.duration_since(slots.at(due.start)) <= QUANTUM);
                // And wakes at most two connections: the slots of one
                // quantum are one block, or straddle two.
                let mut woken = 0;
                slots.shares(due.clone(), |_, _| woken += 1);
                assert!(woken <= 2, "{rate}: {due:?} woke {woken}");
            }
        }
        // A slow rate wakes once per slot, exactly at its time.
        let slots = Slots::new(t0, 1_000.0, 3, 1);
        let releases = simulate(slots, t0, Duration::from_millis(10));
        assert_eq!(releases.len(), 10);
        for (k, (now, due)) in releases.iter().enumerate() {
            assert_eq!(*due, k as u64..k as u64 + 1);
            assert_eq!(*now, slots.at(k as u64));
        }
    }

    #[test]
    fn a_late_wake_up_releases_everything_due_with_its_intended_times() {
        let t0 = Instant::now();
        let slots = Slots::new(t0, 10_000.0, 4, 1);
        let mut p = Pacer::new(slots);
        assert_eq!(p.release(t0), 0..1);
        // The thread was away 10 ms: 100 slots are due at once; their
        // intended times are still 100 us apart.
        let due = p.release(t0 + Duration::from_millis(10));
        assert_eq!(due, 1..101);
        assert_eq!(slots.at(50).duration_since(slots.at(49)), 100 * US);
        assert_eq!(p.wake(t0 + Duration::from_millis(10)), slots.at(101));
    }

    #[test]
    fn shares_deal_each_slot_to_its_connection_once() {
        for block in [1, 3, 4] {
            let slots = Slots::new(Instant::now(), 1.0, 5, block);
            for (a, b) in [(0, 0), (0, 1), (3, 4), (3, 9), (0, 5), (7, 23), (2, 1_000)] {
                let mut got = [0u64; 5];
                let mut calls = 0;
                slots.shares(a..b, |c, n| {
                    assert!(n > 0, "a connection with nothing due is not woken");
                    assert_eq!(got[c], 0, "woken once");
                    got[c] += n;
                    calls += 1;
                });
                let mut want = [0u64; 5];
                for i in a..b {
                    want[slots.conn(i)] += 1;
                }
                assert_eq!(got, want, "block {block}: {a}..{b}");
                assert_eq!(calls, want.iter().filter(|&&n| n > 0).count());
            }
        }
    }

    #[test]
    fn a_block_is_the_slots_of_one_quantum() {
        assert_eq!(block_for(2_000.0), 1);
        assert_eq!(block_for(20_000.0), 1);
        assert_eq!(block_for(85_000.0), 4);
        assert_eq!(block_for(92_000.0), 4);
        assert_eq!(block_for(1_000_000.0), 50);
        assert_eq!(block_for(1.0e-300), 1);
    }

    #[test]
    fn connections_take_their_slots_in_order_with_evenly_spaced_times() {
        // Three connections of one thread take what the pacer releases
        // (three slots at a time); merged, their intended times are the
        // thread's schedule.
        let t0 = Instant::now();
        let pace = Arc::new(Pace::new(60_000.0, Duration::ZERO, 3));
        assert_eq!(pace.block, 3);
        let mut conns: Vec<Paced> = (0..3).map(|c| Paced::new(pace.clone(), c, t0)).collect();
        let mut pacer = Pacer::new(pace.slots(t0));
        let mut taken = Vec::new();
        let mut now = t0;
        while now < t0 + Duration::from_millis(20) {
            let due = pacer.release(now);
            pacer.slots.shares(due, |c, n| pace.lane(c).release(n));
            for c in &mut conns {
                while c.due() {
                    let t = c.take();
                    assert!(t <= now, "taken before it was due");
                    taken.push(t);
                }
            }
            now = pacer.wake(now);
        }
        // Every slot released was taken, by its own connection.
        assert!((1_190..=1_201).contains(&pacer.next), "{}", pacer.next);
        assert_eq!(taken.len() as u64, pacer.next);
        assert_eq!(conns.iter().map(Paced::taken).sum::<u64>(), pacer.next);
        taken.sort();
        for w in taken.windows(2) {
            let gap = w[1].duration_since(w[0]).as_nanos();
            assert!((16_666..=16_667).contains(&gap), "{gap} ns");
        }
    }

    #[tokio::test]
    async fn a_connection_waits_for_its_lane_and_is_woken_by_a_release() {
        let pace = Arc::new(Pace::new(1.0, Duration::ZERO, 2));
        let p = pace.clone();
        let waiter = tokio::spawn(async move {
            p.lane(1).wait(0).await;
            p.lane(1).released()
        });
        tokio::task::yield_now().await;
        pace.lane(0).release(1);
        pace.lane(1).release(2);
        assert_eq!(waiter.await.unwrap(), 2);
        // Already released: no wait.
        pace.lane(0).wait(0).await;
    }

    #[tokio::test]
    async fn precise_timer_never_fires_early() {
        let mut t = PreciseTimer::new();
        for _ in 0..20 {
            let at = Instant::now() + Duration::from_micros(100);
            t.wait_until(at).await;
            assert!(Instant::now() >= at);
        }
        // Waiting for an instant already past returns at once.
        t.wait_until(Instant::now()).await;
    }
}
