//! A counting global allocator: every allocation of the process (and every reallocation, which
//! may move a block) counts one, with its size in bytes, so a timed region can report what each
//! system allocates per task.
//!
//! The counts are striped over cache-padded counters, a thread picking its stripe once, so
//! threads of a system rarely write the same line; a reading sums the stripes. Counting costs
//! each allocation one uncontended relaxed add, the same for every system.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Stripes of the counters.
const STRIPES: usize = 32;

/// One stripe: allocations and bytes, on its own cache lines.
#[repr(align(128))]
struct Stripe {
    count: AtomicU64,
    bytes: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)] // only used to build the array below
const STRIPE: Stripe = Stripe {
    count: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
};

static COUNTS: [Stripe; STRIPES] = [STRIPE; STRIPES];
/// The next stripe handed to a thread.
static NEXT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's stripe (`usize::MAX`: not picked yet). A const-initialised `Cell` needs
    /// no lazy set-up and no destructor, so the allocator may use it at any time.
    static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The system allocator, counting.
#[derive(Debug)]
pub struct Counting;

#[inline]
fn count(size: usize) {
    let stripe = MINE
        .try_with(|m| {
            let s = m.get();
            if s != usize::MAX {
                return s;
            }
            let s = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
            m.set(s);
            s
        })
        // A thread being torn down: any stripe will do.
        .unwrap_or(0);
    COUNTS[stripe].count.fetch_add(1, Ordering::Relaxed);
    COUNTS[stripe]
        .bytes
        .fetch_add(size as u64, Ordering::Relaxed);
}

// SAFETY: every call is passed on unchanged to the system allocator, which upholds
// `GlobalAlloc`'s contract; counting touches only atomics and a const thread-local.
unsafe impl GlobalAlloc for Counting {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's layout contract is passed on as it is.
        unsafe { System.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (every block goes through it).
        unsafe { System.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: as in `dealloc`; the caller guarantees `new_size`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations and bytes allocated by the whole process so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Allocated {
    /// Allocations (and reallocations).
    pub count: u64,
    /// Bytes they asked for.
    pub bytes: u64,
}

impl Allocated {
    /// The process's totals now (zero where [`Counting`] is not the global allocator).
    pub fn now() -> Self {
        COUNTS.iter().fold(Self::default(), |a, s| Self {
            count: a.count + s.count.load(Ordering::Relaxed),
            bytes: a.bytes + s.bytes.load(Ordering::Relaxed),
        })
    }

    /// What was allocated between `earlier` and `self`.
    pub fn since(self, earlier: Self) -> Self {
        Self {
            count: self.count.saturating_sub(earlier.count),
            bytes: self.bytes.saturating_sub(earlier.bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_counted_with_their_bytes() {
        // Other tests allocate at the same time: only lower bounds hold.
        let before = Allocated::now();
        let blocks: Vec<Box<[u8; 1000]>> = (0..100).map(|_| Box::new([7u8; 1000])).collect();
        std::hint::black_box(&blocks);
        let spent = Allocated::now().since(before);
        assert!(spent.count >= 101, "{spent:?}");
        assert!(spent.bytes >= 100_000, "{spent:?}");
    }
}
