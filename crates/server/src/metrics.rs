//! Per-worker counters: each worker writes only its own (cache-line
//! padded, relaxed atomics); readers sum them when asked.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counters of one worker, alone on their cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct WorkerStats {
    /// Application requests this worker's shard processed.
    pub requests: AtomicU64,
    /// Of those, requests that arrived from another worker's connection.
    pub from_other_workers: AtomicU64,
    /// Requests this worker's connections handed to another worker.
    pub forwarded: AtomicU64,
    /// Requests answered with a protocol error by validation.
    pub rejected: AtomicU64,
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections open now.
    pub open_connections: AtomicU64,
    /// Connections closed for a framing error, a size limit or a timeout.
    pub aborted_connections: AtomicU64,
    /// Requests answered DIAMETER_TOO_BUSY (3004) because their shard's
    /// queue was full.
    pub too_busy_queue_full: AtomicU64,
    /// Requests answered 3004 because their connection had more than its
    /// share of a busy queue.
    pub too_busy_peer_share: AtomicU64,
    /// Requests answered 3004 because they waited too long for their
    /// shard.
    pub too_busy_waited: AtomicU64,
    /// Connections closed at accept: the connection limit, or no file
    /// descriptor left.
    pub refused_connections: AtomicU64,
    /// CERs refused (5012) by the per-peer connection limit.
    pub refused_peers: AtomicU64,
}

/// A point-in-time copy of one worker's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// See [`WorkerStats::requests`].
    pub requests: u64,
    /// See [`WorkerStats::from_other_workers`].
    pub from_other_workers: u64,
    /// See [`WorkerStats::forwarded`].
    pub forwarded: u64,
    /// See [`WorkerStats::rejected`].
    pub rejected: u64,
    /// See [`WorkerStats::connections`].
    pub connections: u64,
    /// See [`WorkerStats::open_connections`].
    pub open_connections: u64,
    /// See [`WorkerStats::aborted_connections`].
    pub aborted_connections: u64,
    /// See [`WorkerStats::too_busy_queue_full`].
    pub too_busy_queue_full: u64,
    /// See [`WorkerStats::too_busy_peer_share`].
    pub too_busy_peer_share: u64,
    /// See [`WorkerStats::too_busy_waited`].
    pub too_busy_waited: u64,
    /// See [`WorkerStats::refused_connections`].
    pub refused_connections: u64,
    /// See [`WorkerStats::refused_peers`].
    pub refused_peers: u64,
}

impl WorkerStats {
    /// Adds one to a counter (only the owning worker calls this).
    #[inline]
    pub fn bump(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    /// Subtracts one from a gauge (only the owning worker calls this).
    #[inline]
    pub fn bump_down(c: &AtomicU64) {
        c.fetch_sub(1, Relaxed);
    }

    /// Copies the counters.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.requests.load(Relaxed),
            from_other_workers: self.from_other_workers.load(Relaxed),
            forwarded: self.forwarded.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            connections: self.connections.load(Relaxed),
            open_connections: self.open_connections.load(Relaxed),
            aborted_connections: self.aborted_connections.load(Relaxed),
            too_busy_queue_full: self.too_busy_queue_full.load(Relaxed),
            too_busy_peer_share: self.too_busy_peer_share.load(Relaxed),
            too_busy_waited: self.too_busy_waited.load(Relaxed),
            refused_connections: self.refused_connections.load(Relaxed),
            refused_peers: self.refused_peers.load(Relaxed),
        }
    }
}

impl StatsSnapshot {
    /// Requests answered DIAMETER_TOO_BUSY by overload control, for any
    /// reason.
    pub fn too_busy(&self) -> u64 {
        self.too_busy_queue_full + self.too_busy_peer_share + self.too_busy_waited
    }
}

impl std::ops::Add for StatsSnapshot {
    type Output = StatsSnapshot;
    fn add(self, o: StatsSnapshot) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.requests + o.requests,
            from_other_workers: self.from_other_workers + o.from_other_workers,
            forwarded: self.forwarded + o.forwarded,
            rejected: self.rejected + o.rejected,
            connections: self.connections + o.connections,
            open_connections: self.open_connections + o.open_connections,
            aborted_connections: self.aborted_connections + o.aborted_connections,
            too_busy_queue_full: self.too_busy_queue_full + o.too_busy_queue_full,
            too_busy_peer_share: self.too_busy_peer_share + o.too_busy_peer_share,
            too_busy_waited: self.too_busy_waited + o.too_busy_waited,
            refused_connections: self.refused_connections + o.refused_connections,
            refused_peers: self.refused_peers + o.refused_peers,
        }
    }
}
