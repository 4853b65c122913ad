//! A counting global allocator, compiled in only with the
//! `count-allocations` feature: it measures heap allocations per request in
//! steady state (`bench/` scripts), at the price of one relaxed atomic add
//! per allocation. It counts on top of the allocator the build chose (the
//! system's, or mimalloc / jemalloc with the feature of that name).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Allocations made since the process started.
pub static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

#[cfg(feature = "mimalloc")]
use mimalloc::MiMalloc as Inner;
#[cfg(not(any(feature = "mimalloc", feature = "jemalloc")))]
use std::alloc::System as Inner;
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
use tikv_jemallocator::Jemalloc as Inner;

/// The allocator the build chose, counting.
pub struct Counting;

// SAFETY: every call is forwarded unchanged to the inner allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { Inner.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { Inner.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { Inner.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;
