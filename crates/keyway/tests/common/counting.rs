//! A global allocator that counts allocations (and reallocations) and forwards them to the
//! system allocator: a test binary installs it with
//! `#[global_allocator] static ALLOC: Counting = Counting;` and reads [`allocations`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// The counting allocator (install it as the binary's `#[global_allocator]`).
pub struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(new as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

/// Allocations made in this process so far (by every thread).
pub fn allocations() -> u64 {
    ALLOCS.load(Ordering::SeqCst)
}

/// Bytes allocated and not yet freed in this process (by every thread).
pub fn live_bytes() -> i64 {
    LIVE_BYTES.load(Ordering::SeqCst)
}
