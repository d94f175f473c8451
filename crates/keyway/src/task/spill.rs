//! Recycled cells for the values a task or a lane entry cannot keep in place, and for futures:
//! a value of up to [`LARGEST`] bytes (alignment at most 16) goes to a cell of its size class
//! (32, 64, 128, 256 or 512 bytes), and a cell freed is kept for the next value instead of going
//! back to the allocator. An [`InlineBox`](super::InlineBox) puts a closure of up to
//! [`CELL_MAX`] bytes in a cell (a larger one is boxed); a submitted future is stored whole in a
//! cell up to [`LARGEST`] bytes (`future::launch`: its state, its handle and its runtime; the
//! actor example's future with a tokio timeout takes 232 bytes, one holding an `Arc`, a
//! `String` and a tokio `sleep` 184, with a timeout around a `sleep` 296).
//!
//! Why: a task is made on the submitter's thread and run (so its value freed) on a worker, so
//! the allocator's per-thread caches never help: the worker's fill up and its frees go to the
//! allocator's shared lists, which the submitter's next allocations then take from, and any
//! allocation of 1 KiB or more walks and merges those lists first. A closure of 32 bytes (an
//! `Arc` and a `String`, or a reference, an integer and a key) boxed per task cost ~450
//! instructions of `malloc` and `free` per task in a burst of keyed tasks (callgrind,
//! `throughput --keys 1`), against ~20 here; a future's box of 232 bytes ~390 per future
//! (the `actor_per_key_tokio` example, 1,000 accounts), against ~55 here.
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
//! `2 * BATCH` cells per thread and class (freed when the thread exits, or given to the depot:
//! at most 2 KiB of 32-byte cells and 32 KiB of 512-byte ones, 62 KiB for all five classes) and
//! [`DEPOT_MAX`] lists per class in the depot, fewer for the large classes so that no depot
//! holds more than [`DEPOT_BYTES`] (4 MiB of 32-byte cells, 8 MiB of each larger class), emptied
//! when the last thread that filled it
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
use std::mem::size_of;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The largest value an [`InlineBox`](super::InlineBox) keeps in a recycled cell (a larger one is
/// boxed by the allocator).
pub(crate) const CELL_MAX: usize = 64;
/// Size classes: a class `c` holds cells of `32 << c` bytes.
const CLASSES: usize = 5;
/// The largest value kept in any cell (the last class's size).
pub(crate) const LARGEST: usize = 32 << (CLASSES - 1);
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
/// The most a depot of the larger classes keeps: 8 MiB (2,048 lists of 128-byte cells, 1,024 of
/// 256 bytes, 512 of 512 bytes: 16,384 futures of the actor example in flight).
const DEPOT_BYTES: usize = 8 << 20;
/// The cells' alignment.
const ALIGN: usize = 16;
/// How long a depot must see no list go in or out before a pool's monitor frees its cells.
pub(crate) const DEPOT_IDLE: Duration = Duration::from_millis(500);

/// True if an [`InlineBox`](super::InlineBox) puts a `T` in a recycled cell when it does not fit
/// in place.
pub(crate) const fn fits<T>() -> bool {
    size_of::<T>() <= CELL_MAX && class_for(Layout::new::<T>()).is_some()
}

/// The class of the cells that hold a value of `layout`, if any does (its size from 1 to
/// [`LARGEST`] bytes, its alignment at most 16).
pub(crate) const fn class_for(layout: Layout) -> Option<usize> {
    let size = layout.size();
    if size == 0 || size > LARGEST || layout.align() > ALIGN {
        return None;
    }
    if size <= 32 {
        return Some(0);
    }
    // The smallest `c` with `32 << c >= size`: `size - 1` has `5 + c` significant bits.
    Some((usize::BITS - (size - 1).leading_zeros()) as usize - 5)
}

/// The class of a `T` (`fits::<T>()`).
const fn class_of<T>() -> usize {
    match class_for(Layout::new::<T>()) {
        Some(class) => class,
        None => panic!("a value kept in a cell has a class"),
    }
}

/// Lists the depot of `class` keeps at most.
const fn depot_max(class: usize) -> usize {
    let by_bytes = DEPOT_BYTES / (BATCH * (32 << class));
    if by_bytes < DEPOT_MAX {
        by_bytes
    } else {
        DEPOT_MAX
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
    cur: [List; CLASSES],
    full: [List; CLASSES],
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

static DEPOTS: [Mutex<Depot>; CLASSES] = [const {
    parking_lot::const_mutex(Depot {
        top: ptr::null_mut(),
        lists: 0,
        moves: 0,
        seen: (0, None),
    })
}; CLASSES];

/// Lists in each depot (written under its lock): a thread with no cell looks here first, so it
/// does not take the lock while the depot is empty.
static DEPOT_LISTS: [AtomicUsize; CLASSES] = [const { AtomicUsize::new(0) }; CLASSES];

/// Threads that gave lists to a depot and have not exited; the last one empties the depots.
static SUPPLIERS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static LOCAL: UnsafeCell<Local> = const {
        UnsafeCell::new(Local { cur: [EMPTY; CLASSES], full: [EMPTY; CLASSES], supplier: false })
    };
}

/// A cell for a `T` (`fits::<T>()`), uninitialised.
#[inline]
pub(crate) fn alloc_cell<T>() -> *mut T {
    alloc_class(class_of::<T>()).cast()
}

/// Gives back the cell of a `T` (its value already moved out or dropped).
///
/// # Safety
/// S2 — `cell` came from `alloc_cell::<T>()` and holds no value.
#[inline]
pub(crate) unsafe fn free_cell<T>(cell: *mut T) {
    // SAFETY: S2, passed on: a cell of `T`'s class.
    unsafe { free_class(cell.cast(), class_of::<T>()) }
}

/// Storage for a value of `layout`: a cell of its class if it has one ([`class_for`]), else an
/// allocation of the allocator's own, or, for a zero-sized layout, no allocation (a dangling,
/// aligned pointer). Uninitialised.
#[inline]
pub(crate) fn alloc_for(layout: Layout) -> *mut u8 {
    match class_for(layout) {
        Some(class) => alloc_class(class),
        None if layout.size() == 0 => ptr::without_provenance_mut(layout.align()),
        None => {
            // SAFETY: the layout is not zero-sized (checked above).
            let at = unsafe { alloc(layout) };
            if at.is_null() {
                handle_alloc_error(layout);
            }
            at
        }
    }
}

/// Gives back the storage of a value of `layout` (the value already moved out or dropped).
///
/// # Safety
/// S2 — `at` came from `alloc_for(layout)`, with this very `layout`, and holds no value.
#[inline]
pub(crate) unsafe fn free_for(at: *mut u8, layout: Layout) {
    match class_for(layout) {
        // SAFETY: S2, passed on: a cell of `layout`'s class (as `alloc_for` chose).
        Some(class) => unsafe { free_class(at, class) },
        // Zero-sized: `alloc_for` allocated nothing.
        None if layout.size() == 0 => {}
        // SAFETY: the allocator's own allocation of `layout` (as `alloc_for` chose).
        None => unsafe { dealloc(at, layout) },
    }
}

/// A cell of `class`, uninitialised.
#[inline]
fn alloc_class(class: usize) -> *mut u8 {
    let got = LOCAL
        .try_with(|local| {
            // SAFETY: the thread's own lists, borrowed only here and in `free_class`, neither
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

/// Gives back a cell of `class`.
///
/// # Safety
/// S2 — `cell` came from `alloc_class(class)` and holds no value.
#[inline]
unsafe fn free_class(cell: *mut u8, class: usize) {
    let cell = cell.cast::<Free>();
    let kept = LOCAL.try_with(|local| {
        // SAFETY: as in `alloc_class`.
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
    if depot.lists < depot_max(class) {
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
    for class in 0..CLASSES {
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
        for class in 0..CLASSES {
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
        empty_depot(&mut first, 0);
        for (class, depot) in DEPOTS.iter().enumerate().skip(1) {
            empty_depot(&mut depot.lock(), class);
        }
    }
}

/// Frees every cell of `depot` (of `class`), its lock held.
fn empty_depot(depot: &mut Depot, class: usize) {
    let list = std::mem::replace(&mut depot.top, ptr::null_mut());
    depot.lists = 0;
    DEPOT_LISTS[class].store(0, Ordering::Relaxed);
    release_lists(list, class);
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

    /// Storage of any layout is sound to take and give back: a zero-sized one is an aligned,
    /// dangling pointer (no allocation), one too large or too aligned for a cell the
    /// allocator's own, the rest a cell.
    #[test]
    fn storage_of_every_layout_goes_and_comes_back() {
        for layout in [
            Layout::new::<()>(),
            Layout::from_size_align(0, 64).unwrap(),
            Layout::new::<u8>(),
            Layout::from_size_align(LARGEST, ALIGN).unwrap(),
            Layout::from_size_align(LARGEST + 1, 8).unwrap(),
            Layout::from_size_align(32, 64).unwrap(),
        ] {
            let at = alloc_for(layout);
            assert!(!at.is_null(), "{layout:?}");
            assert_eq!(at as usize % layout.align(), 0, "{layout:?}");
            // SAFETY: storage of this layout from `alloc_for`, holding no value.
            unsafe { free_for(at, layout) };
        }
    }
}
