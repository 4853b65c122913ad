//! Histograms for gyro's operator interface (Prometheus `/metrics`).
//!
//! The runtime, the credit-control application and the Nchf service each
//! keep histograms on their hot paths (answer latency, records per group
//! commit, fdatasync and snapshot times, Redis round trips). They share
//! this one type: fixed upper bounds chosen at compile time, counts in
//! relaxed atomics written by the one thread that owns the histogram (on
//! its own cache lines, next to its other counters), read by any thread as
//! a [`HistogramSnapshot`] that can be merged with others of the same
//! bounds. Recording is a binary search over the bounds and two relaxed
//! adds: no lock, no allocation.
//!
//! Values are integers in a unit the owner chooses (nanoseconds, records,
//! steps); the metrics renderer scales them to Prometheus' base units.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A histogram of `N` buckets with fixed upper bounds (inclusive, ascending;
/// the last is `u64::MAX`, Prometheus' `+Inf`), written by one thread with
/// relaxed atomics and read by any.
#[derive(Debug)]
pub struct Histogram<const N: usize> {
    bounds: &'static [u64; N],
    counts: [AtomicU64; N],
    sum: AtomicU64,
}

impl<const N: usize> Histogram<N> {
    /// An empty histogram with these bucket bounds (ascending, the last
    /// `u64::MAX`).
    pub fn new(bounds: &'static [u64; N]) -> Self {
        Histogram {
            bounds,
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum: AtomicU64::new(0),
        }
    }

    /// Counts one observation of `value`.
    #[inline]
    pub fn record(&self, value: u64) {
        self.record_n(value, 1);
    }

    /// Counts `n` observations of `value` (a group of answers released
    /// together, say).
    #[inline]
    pub fn record_n(&self, value: u64, n: u64) {
        let i = self.bounds.partition_point(|&b| b < value).min(N - 1);
        self.counts[i].fetch_add(n, Relaxed);
        self.sum.fetch_add(value.saturating_mul(n), Relaxed);
    }

    /// The bucket bounds.
    pub fn bounds(&self) -> &'static [u64] {
        self.bounds
    }

    /// The counts now.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds: self.bounds,
            counts: self.counts.iter().map(|c| c.load(Relaxed)).collect(),
            sum: self.sum.load(Relaxed),
        }
    }
}

/// A copy of a [`Histogram`], in its own integer unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Upper bound of each bucket (the last `u64::MAX`: `+Inf`).
    pub bounds: &'static [u64],
    /// Observations per bucket (not cumulative).
    pub counts: Vec<u64>,
    /// Sum of the observed values.
    pub sum: u64,
}

impl HistogramSnapshot {
    /// An empty histogram with these bounds.
    pub fn empty(bounds: &'static [u64]) -> Self {
        HistogramSnapshot {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0,
        }
    }

    /// Observations in all.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds `other` (same bounds) to this one.
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        debug_assert_eq!(
            self.bounds, other.bounds,
            "merging histograms of other bounds"
        );
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.sum += other.sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: [u64; 4] = [10, 100, 1_000, u64::MAX];

    #[test]
    fn a_value_lands_in_the_first_bucket_whose_bound_it_does_not_exceed() {
        let h = Histogram::new(&BOUNDS);
        h.record(10);
        h.record_n(11, 2);
        h.record(5_000);
        h.record(0);
        let s = h.snapshot();
        assert_eq!(s.counts, vec![2, 2, 0, 1]);
        assert_eq!(s.sum, 10 + 22 + 5_000);
        assert_eq!(s.count(), 5);
    }

    #[test]
    fn snapshots_of_several_writers_add_up() {
        let (a, b) = (Histogram::new(&BOUNDS), Histogram::new(&BOUNDS));
        a.record_n(1, 3);
        b.record(2_000);
        let mut all = HistogramSnapshot::empty(&BOUNDS);
        all.merge(&a.snapshot());
        all.merge(&b.snapshot());
        assert_eq!(all.counts, vec![3, 0, 0, 1]);
        assert_eq!(all.sum, 2_003);
    }

    #[test]
    fn a_huge_value_times_its_count_saturates_instead_of_wrapping() {
        let h = Histogram::new(&BOUNDS);
        h.record_n(u64::MAX / 2, 4);
        assert_eq!(h.snapshot().sum, u64::MAX);
    }
}
