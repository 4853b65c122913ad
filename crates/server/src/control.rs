//! Control operations: work that an operator interface (the admin HTTP
//! API) asks a shard to do, carried into the shard's event loop and
//! answered like a request.
//!
//! An operation is application-defined: a closure that runs on the
//! owning event loop with the shard and the Unix time in milliseconds,
//! changes the shard the way a request does (its effects join the same
//! group commit) and returns its [`Reply`]. The runtime calls the reply
//! once the group commit that follows is done: with `true` when
//! everything the operation changed is durable, `false` when the batch
//! could not be made durable (the operation's change must then be
//! treated as not having happened, as a 3004 answer is). Operations go
//! to the shard their application routing names ([`Control::send`]).

use std::rc::Rc;
use std::sync::{Arc, Mutex};

use gyro_diameter::app::Application;
use tokio::sync::mpsc;

use crate::metrics::WorkerStats;
use crate::outbound::Outbound;
use crate::telemetry::Telemetry;
use crate::worker::Worker;

/// What an operation leaves to do once the group commit after it is
/// done: called with whether it is durable. Runs on the event loop.
pub type Reply = Box<dyn FnOnce(bool)>;

/// An operation for a shard of type `S`: runs on the shard's event loop
/// with the shard and the Unix time in milliseconds.
pub type Operation<S> = Box<dyn FnOnce(&mut S, u64) -> Reply + Send>;

/// The sending side: hands operations to shards, and reads the runtime's
/// counters. Cheap to clone, usable from any thread.
pub struct Control<S> {
    inboxes: Arc<[mpsc::UnboundedSender<Operation<S>>]>,
    stats: Arc<[WorkerStats]>,
    telemetry: Arc<Telemetry>,
    outbound: Outbound,
}

impl<S> Clone for Control<S> {
    fn clone(&self) -> Self {
        Control {
            inboxes: self.inboxes.clone(),
            stats: self.stats.clone(),
            telemetry: self.telemetry.clone(),
            outbound: self.outbound.clone(),
        }
    }
}

/// The shard's event loop is gone (the server is stopping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("shard {0} is not running")]
pub struct Stopped(pub usize);

impl<S> Control<S> {
    /// How many shards there are.
    pub fn shards(&self) -> usize {
        self.inboxes.len()
    }

    /// Hands `op` to shard `shard`'s event loop.
    pub fn send(&self, shard: usize, op: Operation<S>) -> Result<(), Stopped> {
        self.inboxes
            .get(shard)
            .ok_or(Stopped(shard))?
            .send(op)
            .map_err(|_| Stopped(shard))
    }

    /// Each worker's counters.
    pub fn worker_stats(&self) -> &[WorkerStats] {
        &self.stats
    }

    /// Answer latency, requests in flight and the Diameter peers.
    pub fn telemetry(&self) -> &Telemetry {
        &self.telemetry
    }

    /// Sends requests the server starts (RAR, ASR) to sessions' peers.
    pub fn outbound(&self) -> &Outbound {
        &self.outbound
    }
}

/// The receiving sides, one per event loop, each taken once by its loop.
pub(crate) struct Inboxes<S> {
    receivers: Vec<Mutex<Option<mpsc::UnboundedReceiver<Operation<S>>>>>,
}

/// A channel per shard.
pub(crate) fn channels<S>(
    shards: usize,
    stats: Arc<[WorkerStats]>,
    telemetry: Arc<Telemetry>,
    outbound: Outbound,
) -> (Control<S>, Inboxes<S>) {
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..shards)
        .map(|_| {
            let (tx, rx) = mpsc::unbounded_channel();
            (tx, Mutex::new(Some(rx)))
        })
        .unzip();
    (
        Control {
            inboxes: senders.into(),
            stats,
            telemetry,
            outbound,
        },
        Inboxes { receivers },
    )
}

/// Applies the operations sent to this event loop's shard, each once,
/// in order, and queues each reply behind the next group commit.
pub(crate) async fn serve<F: Application>(worker: Rc<Worker<F>>) {
    let rx = worker
        .shared
        .control
        .receivers
        .get(worker.index)
        .and_then(|m| m.lock().ok()?.take());
    let Some(mut rx) = rx else { return };
    while let Some(op) = rx.recv().await {
        let now = worker.shared.unix_ms();
        let reply = op(&mut worker.shard.borrow_mut(), now);
        worker.commit.reply_after_commit(reply);
    }
}
