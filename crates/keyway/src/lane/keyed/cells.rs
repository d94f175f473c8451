//! Recycled multi-key task cells: a finished [`MultiTask`] whose last reference is the worker's
//! goes back to a stash instead of to the allocator, and the next submission reuses it.
//!
//! Submitters and workers are different threads, so a cell is freed on one thread and allocated
//! on another: the allocator's per-thread caches do not help (measured: malloc and free of the
//! `Arc` were ~330 instructions of the ~1,900 a two-key task cost). The cells go round as in a
//! magazine allocator: each thread keeps a stash of up to `2 * BATCH` cells; a full stash moves
//! `BATCH` of them to the process-wide depot, an empty one takes up to `BATCH` from it. The
//! depot's lock is thus taken once per `BATCH` tasks, and moving cells copies pointers only.
//!
//! A cell is recycled only when it is provably unused: `Arc::get_mut` succeeds (no other
//! reference, no weak one) and its task was taken. Its lanes are let go first (they may be
//! freed), so a stashed cell holds nothing of any pool: only memory, at most `DEPOT_MAX` cells
//! in the depot and `2 * BATCH` per thread (a thread's stash is freed when the thread exits, and
//! the depot when the last thread that filled it does).

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::run::{Body, MultiTask};
use crate::lane::closures::Closures;
use crate::lane::table::LaneCore;

/// Cells moved between a thread's stash and the depot at once.
const BATCH: usize = 32;
/// Cells the depot keeps at most (beyond that, recycled cells are freed): as many as a burst of
/// tasks in flight needs. A submitter that runs ahead of the workers for one scheduler time
/// slice (3 threads on 2 cores: a few milliseconds) puts thousands of tasks in flight; with a
/// depot of 1,024 cells the cells beyond went back to the allocator at the end of the burst, so
/// the next burst allocated them again (measured with callgrind, `throughput --keys 2`: 61% of
/// the tasks allocated their cell, ~200 instructions and ~3 D1 misses each). A cell is about
/// 120 bytes: the depot holds at most ~2 MB, only after such a burst, and only while a thread
/// that filled it lives (`SUPPLIERS`).
const DEPOT_MAX: usize = 512 * BATCH;

thread_local! {
    static STASH: RefCell<Stash> = const {
        RefCell::new(Stash {
            cells: Vec::new(),
            supplier: false,
        })
    };
}

/// A thread's cells; freed when the thread exits.
struct Stash {
    cells: Vec<Arc<MultiTask>>,
    /// This thread moved cells to the depot (it counts in `SUPPLIERS` until it exits).
    supplier: bool,
}

/// Threads that moved cells to the depot and have not exited: pool workers, as cells are
/// recycled where tasks run. The last one to exit empties the depot, so the cells go back to the
/// allocator once no pool runs multi-key tasks (a process that dropped its pools holds none).
static SUPPLIERS: AtomicUsize = AtomicUsize::new(0);

impl Drop for Stash {
    fn drop(&mut self) {
        if !self.supplier {
            return;
        }
        // Suppliers are counted under the depot's lock, so none joins between the count and
        // the emptying.
        let cells = {
            let mut depot = DEPOT.lock();
            if SUPPLIERS.fetch_sub(1, Ordering::AcqRel) != 1 {
                return;
            }
            DEPOT_LEN.store(0, Ordering::Relaxed);
            std::mem::take(&mut *depot)
        };
        drop(cells);
    }
}

static DEPOT: Mutex<Vec<Arc<MultiTask>>> = parking_lot::const_mutex(Vec::new());

/// How many cells the depot holds (written under its lock): a thread with an empty stash
/// looks here first, so it does not take the lock while the depot is empty.
static DEPOT_LEN: AtomicUsize = AtomicUsize::new(0);

/// A multi-key task standing in `lanes` (none of which has it yet), in a recycled cell if one
/// is at hand. The lanes go straight into the cell's own (empty) list: no list is built first
/// and moved in.
pub(super) fn new_task(
    body: Body,
    lanes: impl IntoIterator<Item = Arc<LaneCore<Closures>>>,
) -> Arc<MultiTask> {
    // A stashed cell has no other reference (`recycle`), so `get_mut` always succeeds.
    if let Some(mut cell) = take() {
        if let Some(m) = Arc::get_mut(&mut cell) {
            *m.task.get_mut() = Some(body);
            m.lanes.extend(lanes);
            *m.waiting.get_mut() = m.lanes.len();
            return cell;
        }
    }
    #[cfg(test)]
    FRESH.with(|n| n.set(n.get() + 1));
    let lanes: smallvec::SmallVec<_> = lanes.into_iter().collect();
    Arc::new(MultiTask {
        task: parking_lot::Mutex::new(Some(body)),
        waiting: AtomicUsize::new(lanes.len()),
        lanes,
    })
}

/// The task in `cell` is over and popped from its lanes: keep the cell for a later task if
/// nothing else refers to it, else just let it go.
pub(super) fn recycle(mut cell: Arc<MultiTask>) {
    let Some(m) = Arc::get_mut(&mut cell) else {
        return;
    };
    if m.task.get_mut().is_some() {
        return; // never ran (`shutdown_now`): dropped with its task
    }
    // Lanes go first: an idle lane whose last reference this was is freed here, as before.
    m.lanes.clear();
    let _ = STASH.try_with(|stash| {
        let stash = &mut *stash.borrow_mut();
        if stash.cells.len() >= 2 * BATCH {
            let mut depot = DEPOT.lock();
            if !stash.supplier {
                stash.supplier = true;
                SUPPLIERS.fetch_add(1, Ordering::AcqRel);
            }
            if depot.len() + BATCH <= DEPOT_MAX {
                depot.extend(stash.cells.drain(BATCH..));
                DEPOT_LEN.store(depot.len(), Ordering::Relaxed);
            } else {
                drop(depot);
                stash.cells.truncate(BATCH);
            }
        }
        stash.cells.push(cell);
    });
}

/// A cell from this thread's stash, refilled from the depot when empty.
fn take() -> Option<Arc<MultiTask>> {
    STASH
        .try_with(|stash| {
            let cells = &mut stash.borrow_mut().cells;
            if cells.is_empty() && DEPOT_LEN.load(Ordering::Relaxed) > 0 {
                let mut depot = DEPOT.lock();
                let from = depot.len().saturating_sub(BATCH);
                cells.extend(depot.drain(from..));
                DEPOT_LEN.store(depot.len(), Ordering::Relaxed);
            }
            cells.pop()
        })
        .ok()
        .flatten()
}

#[cfg(test)]
thread_local! {
    /// Cells this thread allocated (none was at hand).
    static FRESH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many cells this thread allocated so far.
#[cfg(test)]
pub(crate) fn fresh() -> usize {
    FRESH.with(|n| n.get())
}

/// How many cells this thread's stash holds.
#[cfg(test)]
pub(crate) fn stashed() -> usize {
    STASH.with(|stash| stash.borrow().cells.len())
}
