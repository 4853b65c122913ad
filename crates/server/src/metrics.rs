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
        }
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
        }
    }
}
