//! A striped counter: many threads add to it without sharing a cache line; reads sum the stripes.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

const STRIPES: usize = 16;

/// Monotonic-ish counter (adds may be undone by a matching `sub`) read as a sum.
pub(crate) struct Striped {
    cells: [CachePadded<AtomicU64>; STRIPES],
}

fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    STRIPE.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES);
        }
        s.get()
    })
}

impl Striped {
    pub(crate) fn new() -> Self {
        Striped {
            cells: std::array::from_fn(|_| CachePadded::new(AtomicU64::new(0))),
        }
    }

    /// Adds one. `SeqCst` so that admission can pair it with the `closed` flag (see `Registry`).
    pub(crate) fn incr(&self) {
        self.cells[stripe()].fetch_add(1, Ordering::SeqCst);
    }

    /// [`incr`](Self::incr), answering this thread's stripe's count before it (the same one
    /// read-modify-write: admission samples its timed tasks from it, `meter.rs`).
    #[inline]
    pub(crate) fn incr_get(&self) -> u64 {
        self.cells[stripe()].fetch_add(1, Ordering::SeqCst)
    }

    /// Adds `n`.
    pub(crate) fn add(&self, n: u64) {
        self.cells[stripe()].fetch_add(n, Ordering::SeqCst);
    }

    /// Takes back `n` of an `add` made by this thread.
    pub(crate) fn sub(&self, n: u64) {
        self.cells[stripe()].fetch_sub(n, Ordering::SeqCst);
    }

    /// Takes back one `incr` made by this thread.
    pub(crate) fn decr(&self) {
        self.cells[stripe()].fetch_sub(1, Ordering::SeqCst);
    }

    pub(crate) fn sum(&self) -> u64 {
        self.cells
            .iter()
            .fold(0u64, |acc, c| acc.wrapping_add(c.load(Ordering::SeqCst)))
    }
}
