//! Time: session supervision (Tcc) and forgetting old answers.

use super::*;

/// Timers of ended sessions tolerated beyond those of open sessions
/// before they are dropped.
const STALE_TIMERS_SLACK: usize = 4096;

impl Engine {
    /// The earliest time [`Engine::tick`] may have work (a session's
    /// supervision deadline). It may be early, never late.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Closes every session whose supervision time (Tcc) has passed:
    /// releases its reservations and writes a session-end CDR with cause
    /// [`ClosingCause::SupervisionExpired`]. Also forgets expired answers.
    /// Returns the number of sessions closed.
    ///
    /// Also drops the timers of sessions that ended before their
    /// supervision time (every session opened pushes one, and a session
    /// that ends normally leaves it behind): once they outnumber the
    /// timers of open sessions, so that the timers take memory in
    /// proportion to the open sessions, not to every session opened
    /// within the supervision time (Tcc, 20 minutes by default). The work
    /// is amortised: each drop pass is paid for by as many sessions ended
    /// since the previous one.
    pub fn tick(&mut self, now: Timestamp, out: &mut Output) -> usize {
        self.dedup.expire(now);
        self.drop_stale_timers();
        let mut closed = 0;
        while let Some(&Reverse((at, key))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            let Some(s) = self.ledger.sessions.get(&key) else {
                continue;
            };
            if s.supervision_until > now {
                self.timers.push(Reverse((s.supervision_until, key)));
                continue;
            }
            let mut answer = CcAnswer::default();
            let mut cx = self.cx(now, &mut answer, out);
            cx.close_session(key, ClosingCause::SupervisionExpired, rc::SUCCESS, None, 0);
            closed += 1;
        }
        closed
    }

    /// Drops the timers of sessions that ended, once they outnumber the
    /// timers of open sessions (see [`Engine::tick`]): called by `tick`,
    /// and by [`Engine::apply`] for a copy that only replays effects (the
    /// store's compactor) and never ticks, whose timers would otherwise
    /// grow by one for every session ever opened.
    pub(super) fn drop_stale_timers(&mut self) {
        let open = self.ledger.sessions.len();
        if self.timers.len() > 2 * open + STALE_TIMERS_SLACK {
            let sessions = &self.ledger.sessions;
            self.timers
                .retain(|Reverse((_, key))| sessions.contains_key(key));
            self.timers
                .shrink_to(2 * self.timers.len() + STALE_TIMERS_SLACK);
        }
    }
}
