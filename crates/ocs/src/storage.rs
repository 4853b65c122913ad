//! Where and how shards keep their data, and the counters they keep.

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64};

use gyro_store::StoreOptions;

use crate::telemetry::ShardTelemetry;

/// Counters of one shard, for reports (`gyro demo`) and measurements.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ShardTotals {
    /// CDRs produced.
    pub cdrs: AtomicU64,
    /// Money debited minus refunded, minor units.
    pub amount: AtomicI64,
    /// Group commits made durable.
    pub commits: AtomicU64,
    /// fsync/fdatasync calls.
    pub syncs: AtomicU64,
    /// Effects and CDRs made durable.
    pub records: AtomicU64,
    /// Commits that failed (their answers became 3004).
    pub failed_commits: AtomicU64,
    /// Answers by kind and Result-Code, money moved, commit and snapshot
    /// timings.
    pub telemetry: ShardTelemetry,
}

/// Where and how shards keep their data.
#[derive(Debug, Clone)]
pub struct Storage {
    /// The data directory; `None` keeps everything in memory.
    pub data_dir: Option<PathBuf>,
    /// Store settings.
    pub options: StoreOptions,
}

impl Storage {
    /// Nothing written anywhere.
    pub fn in_memory() -> Storage {
        Storage {
            data_dir: None,
            options: StoreOptions::default(),
        }
    }

    /// Everything under `data_dir` with these store settings.
    pub fn on_disk(data_dir: impl Into<PathBuf>, options: StoreOptions) -> Storage {
        Storage {
            data_dir: Some(data_dir.into()),
            options,
        }
    }
}
