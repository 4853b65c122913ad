//! How the shard's background threads (the CDR writer, the compactor)
//! take their queue: idle, they wait for the next message; while commits
//! keep coming, they take what arrived every [`PAUSE`] instead of waking
//! for each one. A shard committing thousands of small batches a second
//! then wakes each of them a few hundred times, and on a machine where a
//! thread's wake-up costs tens of microseconds that is most of what they
//! would cost.

use std::sync::mpsc::Receiver;
use std::time::Duration;

/// How long messages gather between two takes while commits keep coming.
pub(super) const PAUSE: Duration = Duration::from_millis(20);

/// Serves `rx` until every sender is gone or `handle` returns false. After
/// a message that `keeps_busy` says comes from a commit, the thread parks
/// for [`PAUSE`] and takes everything queued, again and again until a
/// pause brings no such message. A sender whose message wants an answer
/// at once unparks the thread after sending it.
pub(super) fn serve<M>(
    rx: &Receiver<M>,
    keeps_busy: impl Fn(&M) -> bool,
    mut handle: impl FnMut(M) -> bool,
) {
    while let Ok(first) = rx.recv() {
        let mut busy = keeps_busy(&first);
        if !handle(first) {
            return;
        }
        while busy {
            std::thread::park_timeout(PAUSE);
            busy = false;
            while let Ok(msg) = rx.try_recv() {
                busy |= keeps_busy(&msg);
                if !handle(msg) {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::sync_channel;

    #[test]
    fn every_message_is_handled_in_order_until_a_stop() {
        let (tx, rx) = sync_channel(16);
        for m in [1, 2, 0, 3] {
            tx.send(m).unwrap();
        }
        let mut seen = Vec::new();
        serve(
            &rx,
            |_| true,
            |m| {
                seen.push(m);
                m != 0
            },
        );
        assert_eq!(seen, [1, 2, 0]);
        // What came after the stop is left queued.
        assert_eq!(rx.try_recv(), Ok(3));
    }

    #[test]
    fn messages_sent_during_a_pause_are_taken_together_and_a_closed_queue_ends_it() {
        let (tx, rx) = sync_channel(16);
        let sender = std::thread::spawn(move || {
            tx.send(1).unwrap();
            std::thread::sleep(Duration::from_millis(1));
            tx.send(2).unwrap();
            tx.send(3).unwrap();
        });
        let mut seen = Vec::new();
        serve(
            &rx,
            |_| true,
            |m| {
                seen.push(m);
                true
            },
        );
        sender.join().unwrap();
        assert_eq!(seen, [1, 2, 3]);
    }
}
