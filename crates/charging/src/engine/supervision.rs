//! Time: session supervision (Tcc) and forgetting old answers.

use super::*;

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
    pub fn tick(&mut self, now: Timestamp, out: &mut Output) -> usize {
        self.dedup.expire(now);
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
}
