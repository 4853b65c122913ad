//! Counters of the Nchf service for `/metrics`: requests by operation and
//! HTTP status, and answer latency by operation.
//!
//! Like the Diameter side's telemetry, the request path pays with relaxed
//! atomic adds into fixed arrays (no lock, no allocation, no label
//! formatting); the admin API reads them at scrape time. Latency runs from
//! a request's headers being handed to the service to its answer being
//! ready, which for a charging answer is after its group commit is
//! durable.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use gyro_server::telemetry::{Histogram, LATENCY_BOUNDS_NS};
use gyro_server::HistogramSnapshot;

use crate::mapping::Operation;

/// The operation label of each row: the three operations, then `other`
/// for requests that name none (an unknown path or API version).
pub const OPERATIONS: [&str; 4] = ["create", "update", "release", "other"];

/// The HTTP statuses counted one by one; any other is counted as
/// `other`.
pub const STATUSES: [u16; 12] = [200, 201, 204, 400, 403, 404, 405, 408, 413, 415, 500, 503];

const COLUMNS: usize = STATUSES.len() + 1;

fn row(op: Option<Operation>) -> usize {
    match op {
        Some(Operation::Create) => 0,
        Some(Operation::Update) => 1,
        Some(Operation::Release) => 2,
        None => 3,
    }
}

fn column(status: u16) -> usize {
    STATUSES
        .iter()
        .position(|&s| s == status)
        .unwrap_or(STATUSES.len())
}

/// Requests answered, by operation and status, and their latency.
#[derive(Debug)]
pub struct Metrics {
    answers: [[AtomicU64; COLUMNS]; OPERATIONS.len()],
    latency: [Histogram<16>; OPERATIONS.len()],
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            answers: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            latency: std::array::from_fn(|_| Histogram::new(&LATENCY_BOUNDS_NS)),
        }
    }
}

impl Metrics {
    /// Counts one answer with `status` to a request for `op` (`None`: its
    /// path names no operation) that took `elapsed`.
    #[inline]
    pub fn record(&self, op: Option<Operation>, status: u16, elapsed: Duration) {
        let r = row(op);
        self.answers[r][column(status)].fetch_add(1, Relaxed);
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.latency[r].record(ns);
    }

    /// The counts that are not zero: (operation, status, answers), the
    /// status as a number or `other`.
    pub fn answers(&self) -> Vec<(&'static str, String, u64)> {
        let mut out = Vec::new();
        for (r, counts) in self.answers.iter().enumerate() {
            for (c, n) in counts.iter().enumerate() {
                let n = n.load(Relaxed);
                if n == 0 {
                    continue;
                }
                let status = STATUSES
                    .get(c)
                    .map_or_else(|| "other".to_string(), u16::to_string);
                out.push((OPERATIONS[r], status, n));
            }
        }
        out
    }

    /// Answer latency of the operations that had requests, in
    /// nanoseconds: (operation, histogram).
    pub fn latency(&self) -> Vec<(&'static str, HistogramSnapshot)> {
        self.latency
            .iter()
            .enumerate()
            .map(|(r, h)| (OPERATIONS[r], h.snapshot()))
            .filter(|(_, h)| h.count() > 0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_counted_by_operation_and_status() {
        let m = Metrics::default();
        m.record(Some(Operation::Create), 201, Duration::from_micros(300));
        m.record(Some(Operation::Create), 201, Duration::from_millis(3));
        m.record(Some(Operation::Update), 200, Duration::from_micros(80));
        m.record(Some(Operation::Release), 404, Duration::from_micros(80));
        m.record(None, 400, Duration::from_micros(10));
        m.record(Some(Operation::Update), 418, Duration::from_micros(10));
        let mut a = m.answers();
        a.sort();
        assert_eq!(
            a,
            vec![
                ("create", "201".to_string(), 2),
                ("other", "400".to_string(), 1),
                ("release", "404".to_string(), 1),
                ("update", "200".to_string(), 1),
                ("update", "other".to_string(), 1),
            ]
        );
        let l = m.latency();
        assert_eq!(l.len(), 4);
        let (op, create) = &l[0];
        assert_eq!(*op, "create");
        assert_eq!(create.count(), 2);
        assert_eq!(create.sum, 3_300_000);
        // 300 us falls in the 500 us bucket, 3 ms in the 5 ms one.
        let bucket = |ns: u64| create.bounds.iter().position(|&b| b == ns).unwrap();
        assert_eq!(create.counts[bucket(500_000)], 1);
        assert_eq!(create.counts[bucket(5_000_000)], 1);
    }
}
