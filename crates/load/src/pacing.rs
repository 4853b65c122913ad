//! Open-loop pacing: when each request is due, and a timer precise enough
//! to wake for it.
//!
//! Requests of a connection are due at fixed intended times, one every
//! `connections / rate` seconds. Whenever the connection wakes it sends
//! every request that is due by now, in one batch, and each request's
//! latency is counted from its intended time, not from when it left: a
//! server that stalls shows up as latency, not as a lower rate
//! (coordinated omission).
//!
//! tokio's timer has a 1 ms resolution, so waiting for a request due in
//! 5 us would really wait up to 1 ms and every such request would carry
//! that delay. On Linux the pacer waits on a `timerfd` instead (nanosecond
//! resolution, woken by the same epoll as the socket), but never for less
//! than [`QUANTUM`], which bounds the wake-ups to 20,000 a second per
//! connection: at high rates a batch holds the requests due in the last
//! 50 us, and a request leaves at most about that late.

use std::time::{Duration, Instant};

/// The shortest wait the pacer arms: requests due sooner wait for the
/// next batch.
pub(crate) const QUANTUM: Duration = Duration::from_micros(50);

/// The schedule of one connection's intended send times.
pub(crate) struct Schedule {
    interval: Duration,
    next: Instant,
}

impl Schedule {
    /// One request every `interval`, the first at `first`.
    pub(crate) fn new(interval: Duration, first: Instant) -> Self {
        Schedule {
            interval,
            next: first,
        }
    }

    /// True when the next request is due at `now`.
    pub(crate) fn due(&self, now: Instant) -> bool {
        self.next <= now
    }

    /// Takes the next intended send time.
    pub(crate) fn take(&mut self) -> Instant {
        let t = self.next;
        self.next += self.interval;
        t
    }

    /// When to wake for the next request, seen at `now`: its intended time,
    /// but no sooner than [`QUANTUM`] from now.
    pub(crate) fn wake(&self, now: Instant) -> Instant {
        self.next.max(now + QUANTUM)
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

    #[test]
    fn schedule_hands_out_evenly_spaced_intended_times() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Duration::from_micros(5), t0);
        assert!(s.due(t0));
        assert_eq!(s.take(), t0);
        assert_eq!(s.take(), t0 + Duration::from_micros(5));
        assert!(!s.due(t0 + Duration::from_micros(9)));
        assert_eq!(s.wake(t0), t0 + QUANTUM);
        let later = Schedule::new(Duration::from_millis(1), t0 + Duration::from_secs(1));
        assert_eq!(later.wake(t0), t0 + Duration::from_secs(1));
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
