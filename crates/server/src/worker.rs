//! What an event loop owns and what all event loops share.

use std::cell::RefCell;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use gyro_diameter::app::Application;
use gyro_diameter::connection;
use tokio::sync::mpsc;

use crate::commit::{GroupCommit, Outgoing};
use crate::config::Config;
use crate::conn_limit::ConnectionLimits;
use crate::directory::{Directory, Pinner};
use crate::metrics::WorkerStats;
use crate::overload::{Admission, QueueDepth};
use crate::peers::Registry;
use crate::telemetry::Telemetry;
use crate::warnings::Warnings;

/// A request handed from the event loop that read it to the one that owns
/// its shard. It was framed, validated and routed by the reader; the owner
/// only handles it.
pub(crate) struct Job {
    /// The whole request, sharing the reader's receive buffer.
    pub frame: Bytes,
    /// Where its answer goes: the writer of the connection it came from.
    pub reply: mpsc::UnboundedSender<Outgoing>,
    /// When it arrived ([`Shared::now_ms`]; see `overload::arrival`),
    /// for the wait bound.
    pub arrived_ms: u64,
    /// The event loop that read it (and writes its answer).
    pub from: usize,
}

/// What all event loops share, read-only or lock-free.
pub(crate) struct Shared<F: Application> {
    pub factory: F,
    pub config: Config,
    /// What every connection is configured with (peer identity, timers,
    /// dictionary, validation, limits).
    pub connection: Arc<connection::Config>,
    pub stats: Arc<[WorkerStats]>,
    pub inboxes: Vec<mpsc::UnboundedSender<Vec<Job>>>,
    pub directory: Directory,
    pub clock: Instant,
    pub control: crate::control::Inboxes<F::Shard>,
    /// The sending side of `control`: the runtime's own operations on
    /// every shard (a peer's restart).
    pub operations: crate::control::Control<F::Shard>,
    /// The last Origin-State-Id of each peer.
    pub peer_states: crate::restarts::PeerStates,
    /// Overload limits of every shard.
    pub admission: Admission,
    /// Each shard's queue of requests handed over and not yet taken.
    pub queues: Arc<[QueueDepth]>,
    /// Connection limits, global and per peer.
    pub limits: Arc<ConnectionLimits>,
    /// Rate-limited WARN lines.
    pub warnings: Warnings,
    /// Latency, requests in flight, peers by state.
    pub telemetry: Arc<Telemetry>,
    /// Connections and session owners for requests the server starts.
    pub outbound: Arc<crate::outbound::Registry>,
    /// Each event loop's nap, for the others to cut short when they send
    /// it work.
    pub naps: Arc<[crate::nap::Nap]>,
}

impl<F: Application> Shared<F> {
    /// Monotonic milliseconds since the server started.
    pub fn now_ms(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    /// Unix time in milliseconds.
    pub fn unix_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }

    /// Whether requests are routed between shards and sessions followed
    /// through the directory: not with a single shard, where every request
    /// is the one shard's and the directory stays empty.
    pub fn routes(&self) -> bool {
        self.inboxes.len() > 1
    }

    /// Connections open on every event loop.
    pub fn open_connections(&self) -> u64 {
        self.stats
            .iter()
            .map(|s| s.open_connections.load(Relaxed))
            .sum()
    }
}

/// One event loop: its index, the shared state, its own shard, its group
/// commit and its side of the session directory.
pub(crate) struct Worker<F: Application> {
    pub index: usize,
    pub shared: Arc<Shared<F>>,
    pub shard: RefCell<F::Shard>,
    pub commit: GroupCommit,
    pub pinner: RefCell<Pinner>,
    /// How late this event loop's timers fire, smoothed (ms): about how
    /// long a request waits to be read (see `overload`).
    pub lag_ms: std::cell::Cell<u64>,
    /// This event loop's Diameter connections.
    pub peers: Registry,
    /// Until when (ms, [`Shared::now_ms`]) its connections shed every
    /// request: one of them fell behind its peer (`overload::Arrivals::
    /// behind`), and on one thread that means the loop has no time to
    /// spare for anyone.
    pub shedding_until: std::cell::Cell<u64>,
}

impl<F: Application> Worker<F> {
    /// This event loop's counters.
    pub fn stats(&self) -> &WorkerStats {
        &self.shared.stats[self.index]
    }

    /// Whether this event loop's answers are late for want of CPU
    /// (`overload::Admission::answers_late`): its connections are held to
    /// a few requests unanswered meanwhile, the heavy ones shed.
    pub fn answers_late(&self) -> bool {
        let (age, last) = self.commit.lateness();
        let ms = |d: std::time::Duration| d.as_millis() as u64;
        self.shared.admission.answers_late(
            self.lag_ms.get(),
            ms(age),
            last.map(|(since, sojourn)| (ms(since), ms(sojourn))),
        )
    }
}
