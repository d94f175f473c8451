//! A global allocator that counts allocations (and reallocations) and forwards them to the
//! system allocator: a test binary installs it with
//! `#[global_allocator] static ALLOC: Counting = Counting;` and reads [`allocations`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// The counting allocator (install it as the binary's `#[global_allocator]`).
pub struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);

thread_local! {
    /// This thread's allocations (a `const` thread-local with no destructor: reading or
    /// bumping it allocates nothing).
    static MINE: Cell<u64> = const { Cell::new(0) };
}

/// Counts one allocation of the calling thread (none once its thread-locals are gone).
fn count_mine() {
    let _ = MINE.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        count_mine();
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
        count_mine();
        LIVE_BYTES.fetch_add(new as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

/// Allocations made in this process so far (by every thread).
pub fn allocations() -> u64 {
    ALLOCS.load(Ordering::SeqCst)
}

/// Allocations made so far by the calling thread alone (what another thread allocates
/// meanwhile, say a pool left by an earlier test, does not count).
pub fn thread_allocations() -> u64 {
    MINE.with(Cell::get)
}

/// Bytes allocated and not yet freed in this process (by every thread).
pub fn live_bytes() -> i64 {
    LIVE_BYTES.load(Ordering::SeqCst)
}
