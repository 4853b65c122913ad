//! [`BufferPool`]: byte buffers handed from the commit job to a writer
//! thread (the CDR writer, the compactor) and back, so that steady state
//! copies a batch's section without allocating.

use std::sync::{Mutex, MutexGuard};

/// Buffers kept for reuse.
const KEEP: usize = 64;

/// A pool of byte buffers shared by the threads that pass them around.
#[derive(Debug, Default)]
pub(super) struct BufferPool(Mutex<Vec<Vec<u8>>>);

impl BufferPool {
    fn lock(&self) -> MutexGuard<'_, Vec<Vec<u8>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A buffer holding a copy of `bytes` (reused when one is free).
    pub(super) fn copy_of(&self, bytes: &[u8]) -> Vec<u8> {
        let mut b = self.lock().pop().unwrap_or_default();
        b.extend_from_slice(bytes);
        b
    }

    /// Takes a buffer back for reuse (up to a few; the rest are freed).
    pub(super) fn give_back(&self, mut b: Vec<u8>) {
        b.clear();
        let mut pool = self.lock();
        if pool.len() < KEEP {
            pool.push(b);
        }
    }
}
