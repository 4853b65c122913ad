//! Runtime telemetry for an operator interface (Prometheus `/metrics`,
//! `/v1/peers`): how long answers take, how many requests are in flight,
//! the Diameter peers by state.
//!
//! The request path pays for it with plain relaxed atomics that only the
//! owning event loop writes, on that loop's own cache lines (as
//! [`WorkerStats`](crate::WorkerStats)): no lock, no allocation, no
//! formatting. The answer latency is recorded once per group of answers
//! released together (one connection's share of a group commit), not per
//! answer. Readers sum the workers' values when asked ([`Telemetry`]).
//!
//! Answer latency runs from the request being read (for a request handled
//! by another worker's shard: from that worker taking it from its queue)
//! to its answer being queued for writing, which for a charging answer is
//! after its group commit is durable. Answers refused by overload control
//! (3004, never queued behind a commit) are not in it; they are counted
//! by reason in [`WorkerStats`](crate::WorkerStats).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use crate::overload::QueueDepth;
use crate::peers::PeerQueries;

/// Upper bounds of the answer-latency buckets, in nanoseconds (the last
/// one is `+Inf`).
pub const LATENCY_BOUNDS_NS: [u64; 16] = [
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    u64::MAX,
];

pub use gyro_telemetry::{Histogram, HistogramSnapshot};

/// Diameter connection states, as counted in [`Telemetry::peers_by_state`].
pub const PEER_STATES: [&str; 4] = ["handshake", "open", "closing", "closed"];

/// One event loop's telemetry, alone on its cache lines.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct WorkerTelemetry {
    /// Answer latency, nanoseconds.
    pub answer_latency: Histogram<16>,
    /// Answers produced and waiting for their group commit.
    pub awaiting_commit: AtomicU64,
    /// This loop's connections by state ([`PEER_STATES`]).
    pub peers: [AtomicU64; 4],
    /// Requests this loop's queue handed to its shard that it refused
    /// for having waited too long (they count in
    /// `WorkerStats::too_busy_waited` with the refusals made by its
    /// connections).
    pub inbox_waited: AtomicU64,
}

impl Default for WorkerTelemetry {
    fn default() -> Self {
        WorkerTelemetry {
            answer_latency: Histogram::new(&LATENCY_BOUNDS_NS),
            awaiting_commit: AtomicU64::new(0),
            peers: Default::default(),
            inbox_waited: AtomicU64::new(0),
        }
    }
}

/// The runtime's telemetry, all workers: read it at any time from any
/// thread (from [`Control::telemetry`](crate::Control::telemetry)).
pub struct Telemetry {
    clock: Instant,
    pub(crate) workers: Box<[WorkerTelemetry]>,
    queues: Arc<[QueueDepth]>,
    pub(crate) peer_queries: PeerQueries,
}

impl Telemetry {
    pub(crate) fn new(clock: Instant, queues: Arc<[QueueDepth]>) -> Telemetry {
        let n = queues.len();
        Telemetry {
            clock,
            workers: (0..n).map(|_| WorkerTelemetry::default()).collect(),
            queues,
            peer_queries: PeerQueries::new(n),
        }
    }

    /// Nanoseconds since the server started (the clock of every latency).
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        self.clock.elapsed().as_nanos() as u64
    }

    /// Answer latency in nanoseconds, all workers.
    pub fn answer_latency(&self) -> HistogramSnapshot {
        self.workers.iter().fold(
            HistogramSnapshot::empty(&LATENCY_BOUNDS_NS),
            |mut all, w| {
                all.merge(&w.answer_latency.snapshot());
                all
            },
        )
    }

    /// Requests read and not yet answered: waiting in a shard's queue, or
    /// answered and waiting for their group commit.
    pub fn in_flight(&self) -> u64 {
        let queued: u64 = self.queues.iter().map(|q| q.get() as u64).sum();
        let committing: u64 = self
            .workers
            .iter()
            .map(|w| w.awaiting_commit.load(Relaxed))
            .sum();
        queued + committing
    }

    /// Diameter connections by state, all workers, as
    /// ([`PEER_STATES`] name, count).
    pub fn peers_by_state(&self) -> [(&'static str, u64); 4] {
        std::array::from_fn(|i| {
            let n = self.workers.iter().map(|w| w.peers[i].load(Relaxed)).sum();
            (PEER_STATES[i], n)
        })
    }
}
