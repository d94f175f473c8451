//! Recycled cells for the values an [`InlineBox`](super::InlineBox) cannot keep in place: a
//! value of up to [`CELL_MAX`] bytes (alignment at most 16) goes to a cell of its size class
//! (32 or 64 bytes), and a cell freed is kept for the next value instead of going back to the
//! allocator.
//!
//! Why: a task is made on the submitter's thread and run (so its value freed) on a worker, so
//! the allocator's per-thread caches never help: the worker's fill up and its frees go to the
//! allocator's shared lists, which the submitter's next allocations then take from, and any
//! allocation of 1 KiB or more walks and merges those lists first. A closure of 32 bytes (an
//! `Arc` and a `String`, or a reference, an integer and a key) boxed per task cost ~450
//! instructions of `malloc` and `free` per task in a burst of keyed tasks (callgrind,
//! `throughput --keys 1`), against ~20 here.
//!
//! The cells go round as in a magazine allocator. Each thread holds two lists of a class's
//! cells, each of at most [`BATCH`]: it allocates from the first and frees onto it; when the
//! first is full, the second (if full too) goes to the process-wide depot and the first takes
//! its place; when the first is empty, it takes the second, or a list from the depot, or
//! allocates. Moving a list moves its head: the depot's lock is taken at most once per `BATCH`
//! cells on each side, and no cell is read but the one allocated or freed.
//!
//! A cell is always one allocation of its class's layout of its own, so any cell may be freed
//! to the allocator alone (a thread that exits, a depot over its bound). What is kept is bounded:
//! `2 * BATCH` cells per thread and class (freed when the thread exits, or given to the depot)
//! and [`DEPOT_MAX`] lists per class in the depot, emptied when the last thread that filled it
//! exits (pool workers: a process that dropped its pools holds none), and given back to the
//! allocator by a pool's monitor once no list has gone in or out of it for [`DEPOT_IDLE`]
//! (`trim_idle`): a burst's cells do not outlive the burst by much more than that, even while
//! the threads that filled the depot live on (a program's main thread, say).
//!
//! Why not a crate: the pools on the registry (`object-pool`, `lockfree-object-pool`) and the
//! slabs (`sharded-slab`) hand out values of one type, with a guard or a key to reach them, and
//! the simplest take a lock per value; a lane entry needs a bare cell, of any type of its size
//! class, given back on another thread, for a few instructions.
//!
//! # Rules
//!
//! The `SAFETY` comments cite these:
//!
//! * **S1.** Every cell in a thread's lists or the depot was allocated with its class's
//!   `layout()`, holds no value, and is in exactly one list; a list's cells are linked by their
//!   first word, and a list in the depot by the second word of its first cell to the next list.
//! * **S2.** A value's cell is the caller's alone from `alloc` until it hands it to `free` of the
//!   same class.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::UnsafeCell;
use std::mem::{align_of, size_of};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The largest value kept in a recycled cell (a larger one is boxed by the allocator).
pub(crate) const CELL_MAX: usize = 64;
/// Cells moved between a thread and the depot at once.
const BATCH: usize = 32;
/// Lists of cells the depot keeps per class: as many as a burst of tasks in flight needs. A
/// submitter that runs ahead of the workers puts up to its whole burst in flight, and the cells
/// come back as the workers catch up; with a depot smaller than the burst, those beyond went
/// back to the allocator and the next burst allocated them again (callgrind, `throughput --keys
/// 1`, a depot of 1,024 cells: two thirds of the tasks allocated their cell; a warm lane given
/// 100,000 tasks at once, a depot of 16,384: half of them). At most 4 MiB of 32-byte cells and
/// 8 MiB of 64-byte ones, what the burst itself held, and only while a thread that filled the
/// depot lives (the allocator keeps freed memory in its own lists the same way).
const DEPOT_MAX: usize = 4_096;
/// The cells' alignment.
const ALIGN: usize = 16;
/// How long a depot must see no list go in or out before a pool's monitor frees its cells.
pub(crate) const DEPOT_IDLE: Duration = Duration::from_millis(500);

/// True if a `T` goes to a recycled cell when it does not fit in place.
pub(crate) const fn fits<T>() -> bool {
    size_of::<T>() <= CELL_MAX && align_of::<T>() <= ALIGN && size_of::<T>() > 0
}

/// The class of a `T` (0: 32 bytes, 1: 64 bytes).
const fn class_of<T>() -> usize {
    if size_of::<T>() <= 32 {
        0
    } else {
        1
    }
}

const fn layout(class: usize) -> Layout {
    match Layout::from_size_align(32 << class, ALIGN) {
        Ok(layout) => layout,
        Err(_) => panic!("a cell's layout is valid"),
    }
}

/// A free cell's first two words (S1).
struct Free {
    next: *mut Free,
    next_list: *mut Free,
}

/// A list of free cells and its length.
#[derive(Clone, Copy)]
struct List {
    head: *mut Free,
    len: usize,
}

const EMPTY: List = List {
    head: ptr::null_mut(),
    len: 0,
};

/// A thread's two lists of each class.
struct Local {
    cur: [List; 2],
    full: [List; 2],
    /// This thread gave lists to the depot (it counts in `SUPPLIERS` until it exits).
    supplier: bool,
}

/// The depot of one class: a stack of full lists.
struct Depot {
    top: *mut Free,
    lists: usize,
    /// Lists that went in or out so far.
    moves: u64,
    /// `moves` when `trim_idle` last looked, and since when it has stayed so.
    seen: (u64, Option<Instant>),
}

// SAFETY: S1 — the depot's cells hold no value and belong to no thread.
unsafe impl Send for Depot {}

static DEPOTS: [Mutex<Depot>; 2] = [
    parking_lot::const_mutex(Depot {
        top: ptr::null_mut(),
        lists: 0,
        moves: 0,
        seen: (0, None),
    }),
    parking_lot::const_mutex(Depot {
        top: ptr::null_mut(),
        lists: 0,
        moves: 0,
        seen: (0, None),
    }),
];

/// Lists in each depot (written under its lock): a thread with no cell looks here first, so it
/// does not take the lock while the depot is empty.
static DEPOT_LISTS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// Threads that gave lists to a depot and have not exited; the last one empties the depots.
static SUPPLIERS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static LOCAL: UnsafeCell<Local> = const {
        UnsafeCell::new(Local { cur: [EMPTY; 2], full: [EMPTY; 2], supplier: false })
    };
}

/// A cell for a `T` (`fits::<T>()`), uninitialised.
#[inline]
pub(crate) fn alloc_cell<T>() -> *mut T {
    let class = class_of::<T>();
    let got = LOCAL
        .try_with(|local| {
            // SAFETY: the thread's own lists, borrowed only here and in `free_cell`, neither
            // of which calls out while holding them.
            let local = unsafe { &mut *local.get() };
            let cur = &mut local.cur[class];
            if cur.len == 0 && !refill(local, class) {
                return ptr::null_mut();
            }
            let cur = &mut local.cur[class];
            let cell = cur.head;
            // SAFETY: S1 — a listed cell's first word links the rest.
            cur.head = unsafe { (*cell).next };
            cur.len -= 1;
            cell
        })
        .unwrap_or(ptr::null_mut());
    if !got.is_null() {
        return got.cast();
    }
    fresh(class).cast()
}

/// An empty first list of `class` takes the second, or a list from the depot. False if none.
#[cold]
fn refill(local: &mut Local, class: usize) -> bool {
    if local.full[class].len > 0 {
        local.cur[class] = std::mem::replace(&mut local.full[class], EMPTY);
        return true;
    }
    if DEPOT_LISTS[class].load(Ordering::Relaxed) == 0 {
        return false;
    }
    let mut depot = DEPOTS[class].lock();
    let top = depot.top;
    if top.is_null() {
        return false;
    }
    // SAFETY: S1 — a depot list's first cell links the next list by its second word.
    depot.top = unsafe { (*top).next_list };
    depot.lists -= 1;
    depot.moves += 1;
    DEPOT_LISTS[class].store(depot.lists, Ordering::Relaxed);
    local.cur[class] = List {
        head: top,
        len: BATCH,
    };
    true
}

#[cold]
fn fresh(class: usize) -> *mut Free {
    #[cfg(test)]
    FRESH.with(|n| n.set(n.get() + 1));
    // SAFETY: the layout is not zero-sized.
    let cell = unsafe { alloc(layout(class)) }.cast::<Free>();
    if cell.is_null() {
        handle_alloc_error(layout(class));
    }
    cell
}

/// Gives back the cell of a `T` (its value already moved out or dropped).
///
/// # Safety
/// S2 — `cell` came from `alloc_cell::<T>()` and holds no value.
#[inline]
pub(crate) unsafe fn free_cell<T>(cell: *mut T) {
    let class = class_of::<T>();
    let cell = cell.cast::<Free>();
    let kept = LOCAL.try_with(|local| {
        // SAFETY: as in `alloc_cell`.
        let local = unsafe { &mut *local.get() };
        if local.cur[class].len == BATCH {
            spill(local, class);
        }
        let cur = &mut local.cur[class];
        // SAFETY: S1, S2 — the cell is ours and holds no value: it joins the list.
        unsafe { (*cell).next = cur.head };
        cur.head = cell;
        cur.len += 1;
    });
    if kept.is_err() {
        // SAFETY: S1 — a cell is one allocation of its class's layout.
        unsafe { dealloc(cell.cast(), layout(class)) };
    }
}

/// A full first list of `class` becomes the second; a full second goes to the depot first (or
/// is freed if the depot is full).
#[cold]
fn spill(local: &mut Local, class: usize) {
    let full = std::mem::replace(&mut local.full[class], local.cur[class]);
    local.cur[class] = EMPTY;
    if full.len == 0 {
        return;
    }
    if !local.supplier {
        // Counted under the first depot's lock, as the last supplier's exit checks it.
        let _first = DEPOTS[0].lock();
        local.supplier = true;
        SUPPLIERS.fetch_add(1, Ordering::AcqRel);
    }
    let mut depot = DEPOTS[class].lock();
    if depot.lists < DEPOT_MAX {
        // SAFETY: S1 — the list's first cell links the depot's stack by its second word.
        unsafe { (*full.head).next_list = depot.top };
        depot.top = full.head;
        depot.lists += 1;
        depot.moves += 1;
        DEPOT_LISTS[class].store(depot.lists, Ordering::Relaxed);
    } else {
        drop(depot);
        release(full.head, class);
    }
}

/// Frees the cells of every depot that saw no list go in or out for [`DEPOT_IDLE`] (as of
/// `now`): a pool's monitor calls it each period, so a burst's cells go back to the allocator
/// once the burst is over. The cells are freed after the depot's lock is let go.
pub(crate) fn trim_idle(now: Instant) {
    for class in 0..2 {
        let lists = {
            let mut depot = DEPOTS[class].lock();
            let moves = depot.moves;
            match depot.seen {
                (seen, Some(since)) if seen == moves => {
                    if depot.lists == 0 || now.saturating_duration_since(since) < DEPOT_IDLE {
                        continue;
                    }
                }
                _ => {
                    depot.seen = (moves, Some(now));
                    continue;
                }
            }
            depot.lists = 0;
            DEPOT_LISTS[class].store(0, Ordering::Relaxed);
            std::mem::replace(&mut depot.top, ptr::null_mut())
        };
        release_lists(lists, class);
    }
}

/// Frees every cell of the depot lists linked from `list` (S1: by their first cells' second
/// word).
fn release_lists(mut list: *mut Free, class: usize) {
    while !list.is_null() {
        // SAFETY: S1 — the depot's lists are linked by their first cells' second word.
        let next = unsafe { (*list).next_list };
        release(list, class);
        list = next;
    }
}

/// Frees every cell of the list at `head`.
fn release(mut head: *mut Free, class: usize) {
    while !head.is_null() {
        let cell = head;
        // SAFETY: S1 — a listed cell links the rest by its first word; freed once, after.
        unsafe {
            head = (*cell).next;
            dealloc(cell.cast(), layout(class));
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        for class in 0..2 {
            release(self.cur[class].head, class);
            release(self.full[class].head, class);
        }
        if !self.supplier {
            return;
        }
        // Suppliers are counted under the depots' first lock, so none joins between the count
        // and the emptying.
        let mut first = DEPOTS[0].lock();
        if SUPPLIERS.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let mut second = DEPOTS[1].lock();
        for (class, depot) in [&mut *first, &mut *second].into_iter().enumerate() {
            let list = std::mem::replace(&mut depot.top, ptr::null_mut());
            depot.lists = 0;
            DEPOT_LISTS[class].store(0, Ordering::Relaxed);
            release_lists(list, class);
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Cells this thread allocated (none was at hand).
    static FRESH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many cells this thread allocated so far.
#[cfg(test)]
pub(crate) fn fresh_cells() -> usize {
    FRESH.with(|n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_freed_is_the_next_one_allocated_on_its_thread() {
        let before = fresh_cells();
        let a = alloc_cell::<[u64; 4]>();
        // SAFETY: S2 — our cell, holding nothing.
        unsafe { free_cell(a) };
        let b = alloc_cell::<[u64; 4]>();
        assert_eq!(a, b, "the cell freed last is the next one");
        assert_eq!(fresh_cells(), before + 1);
        // SAFETY: S2.
        unsafe { free_cell(b) };
        // Past two lists' worth, cells go to the depot (or the allocator) and none is lost:
        // the thread's lists then hold at most two lists.
        let cells: Vec<_> = (0..5 * BATCH).map(|_| alloc_cell::<[u64; 8]>()).collect();
        for c in cells {
            // SAFETY: S2 — each cell is handed back once.
            unsafe { free_cell(c) };
        }
        LOCAL.with(|local| {
            // SAFETY: this thread's lists, not borrowed elsewhere now.
            let local = unsafe { &*local.get() };
            assert!(local.cur[1].len + local.full[1].len <= 2 * BATCH);
            assert!(local.supplier, "full lists went to the depot");
        });
    }
}
