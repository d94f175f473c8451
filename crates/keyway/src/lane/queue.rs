//! A lane's queue (`README.md` beside this file, rule 9): growing it never copies an entry.
//!
//! The oldest entry of a lane whose queue holds nothing else lives in the queue itself (its
//! *home*, inside the lane's state, beside the lock): a lane activated for one entry touches no
//! other memory, and an idle lane needs no heap block. Past the home, entries go to heap blocks
//! linked as a burst needs them, each twice the size of the one before (from [`MIN_BLOCK`]
//! entries up to 64 KiB of entries): a burst of `n` entries costs about `log n` blocks and moves
//! nothing (a `VecDeque` doubled and copied its whole buffer). A runner's take (rule 5) moves
//! the queue's fields, not its entries: the whole queue in O(1) when it is short, and when a
//! backlog fills blocks before the tail, only the whole blocks from the front that hold the
//! runner's batch (a few headers read: the blocks double), so the tail, where the producer
//! writes, stays with the queue and a backlog stays one doubling chain across the runner's turns
//! (rule 9). Giving a runner's remainder back in front of the queue moves at most the home's
//! entry and links the chains: O(1) too.
//!
//! The two cursors live in the queue, not in the blocks: a push writes the slot `wr` points at
//! and bumps it (the tail block's header is written only when the tail is full), and a pop reads
//! the slot `rd` points at and bumps it, checking the head's end (`rd_end`, refreshed from the
//! block only when reached). A runner thus walks its chunk a block at a time.
//!
//! Blocks are recycled within the lane, never through another thread: a block a pop empties
//! goes to its queue's spare stack (at most [`SPARE_MAX`] entries of blocks, or one largest
//! block, the rest freed), and a runner hands its chunk's spares to the lane at its next take and
//! at its end ([`Queue::reclaim`]), where the producer's next block comes from. So a lane kept
//! busy allocates nothing once warm but the largest blocks of a backlog deeper than its spares
//! (one per 2,048 closure entries), and a block is either kept by its lane or freed at once:
//! nothing outlives its lane.
//!
//! # Rules
//!
//! The `SAFETY` comments cite these:
//!
//! * **Q1, blocks.** Every block a queue holds (the chain from `head` to `tail` by `next`, and the
//!   `spare` stack by `next`) was allocated by [`Queue::new_block`] with `layout(cap)` for its own
//!   `cap`, its header `shift` bytes into the allocation, and is held by this queue alone. `head` is null iff `tail` is; then `rd`, `rd_end`,
//!   `wr` and `wr_end` are null. `tail.next` is null.
//! * **Q2, live slots.** A chain block's live slots are `lo..hi`, where `lo` is `rd` for the
//!   head and the block's `start` otherwise, and `hi` is `wr` for the tail and the block's `end`
//!   otherwise; `wr_end` is the end of the tail's slots, and `rd <= rd_end <= hi(head)`. Every
//!   chain block but the head holds at least one entry (the head may be empty after a pop).
//!   The live entries, oldest first, are the home's (if `home_full`), then each chain block's.
//!   `len` counts them all.
//! * **Q3, home first.** The home holds an entry only while it is the oldest: a push to the back
//!   uses it only when the queue is empty (an emptied head may still be linked; it holds none).

use std::alloc::{handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::mem::{size_of, MaybeUninit};
use std::ptr;

use crate::future::prefetch;

/// The first heap block's entries.
#[cfg(not(loom))]
pub(crate) const MIN_BLOCK: u32 = 4;
/// The most bytes of entries in one block: 2,048 closure entries, 64 KiB (below the allocator's
/// threshold for mapping pages of its own). A burst of 100,000 entries costs about 60 blocks.
#[cfg(not(loom))]
const MAX_BLOCK_BYTES: usize = 64 * 1024;
/// The most entries of spare blocks a queue keeps (the `VecDeque` spare it replaces kept a
/// buffer of up to 1,024 entries), or one largest block when that is more (`Queue::SPARE_KEEP`).
#[cfg(not(loom))]
pub(crate) const SPARE_MAX: usize = 1024;

// Under loom, tiny sizes, so that a model of a few entries crosses from the home to blocks and
// between blocks, recycles blocks and frees some.
#[cfg(loom)]
pub(crate) const MIN_BLOCK: u32 = 1;
#[cfg(loom)]
const MAX_BLOCK_BYTES: usize = 16;
#[cfg(loom)]
pub(crate) const SPARE_MAX: usize = 2;

/// A heap block's header; its `cap` slots follow it.
///
/// Aligned to 32 bytes, so that a 32-byte entry never straddles two cache lines; the allocation
/// asks the allocator for its plain 16-byte alignment and 16 bytes more, and the header goes at
/// the first 32-byte boundary in it (an alignment above 16 sent every block through
/// `posix_memalign`, which bypasses the allocator's per-thread cache and splits a larger chunk:
/// callgrind, `throughput --keys 1`, 26,409 `_int_memalign` calls and as many frees of the
/// split-off rest per 800,000 tasks).
#[repr(C, align(32))]
struct Block {
    next: *mut Block,
    cap: u32,
    /// Its first live slot, while it is not the head (Q2).
    start: u32,
    /// One past its last live slot, while it is not the tail (Q2).
    end: u32,
    /// Bytes from the allocation's start to the header (Q1).
    shift: u32,
}

/// A lane's queue of entries (see the module documentation).
///
/// `repr(C)`: what a one-entry activation reads and writes (the count, the home) comes first, so
/// that the lane's state can keep it in the lock's cache line.
#[repr(C)]
pub(crate) struct Queue<E> {
    len: u32,
    home_full: bool,
    home: MaybeUninit<E>,
    wr: *mut E,
    wr_end: *mut E,
    rd: *mut E,
    rd_end: *mut E,
    head: *mut Block,
    tail: *mut Block,
    spare: *mut Block,
    /// The entries the spare blocks hold room for.
    spare_cap: u32,
    _owns: PhantomData<E>,
}

// SAFETY: a queue owns its blocks and the entries in them alone (Q1); sending it sends them.
unsafe impl<E: Send> Send for Queue<E> {}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Queue::new()
    }
}

impl<E> Queue<E> {
    /// Where a block's slots start, after its header.
    const SLOTS: usize = {
        assert!(size_of::<E>() > 0, "a lane entry is never zero-sized");
        size_of::<Block>().next_multiple_of(std::mem::align_of::<E>())
    };

    /// Where the home entry ends in the queue, in bytes (for the layout test).
    #[cfg(test)]
    pub(crate) const HOME_END: usize = std::mem::offset_of!(Self, home) + size_of::<E>();

    /// The largest block, in entries.
    const MAX_BLOCK: u32 = {
        let n = MAX_BLOCK_BYTES / size_of::<E>();
        if n < MIN_BLOCK as usize {
            MIN_BLOCK
        } else if n > u32::MAX as usize {
            u32::MAX
        } else {
            n as u32
        }
    };

    /// The most entries of spare blocks a queue keeps: [`SPARE_MAX`], or one largest block when
    /// that is more. A lane with a backlog of largest blocks keeps the one its runner emptied last
    /// for its producer's next (freeing each allocated one per `MAX_BLOCK` tasks, measured:
    /// 26–58 allocations per 100,000 tasks on one warm lane).
    pub(crate) const SPARE_KEEP: usize = if SPARE_MAX > Self::MAX_BLOCK as usize {
        SPARE_MAX
    } else {
        Self::MAX_BLOCK as usize
    };

    /// An empty queue: no block.
    pub(crate) const fn new() -> Self {
        Queue {
            len: 0,
            home_full: false,
            home: MaybeUninit::uninit(),
            wr: ptr::null_mut(),
            wr_end: ptr::null_mut(),
            rd: ptr::null_mut(),
            rd_end: ptr::null_mut(),
            head: ptr::null_mut(),
            tail: ptr::null_mut(),
            spare: ptr::null_mut(),
            spare_cap: 0,
            _owns: PhantomData,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the queue holds no entry and no block: dropping it does nothing.
    #[inline]
    fn is_bare(&self) -> bool {
        self.len == 0 && self.head.is_null() && self.spare.is_null()
    }

    /// The alignment a block's allocation asks for: the allocator's plain 16 bytes, unless an
    /// entry needs more than a block header's 32.
    const ALLOC_ALIGN: usize = if std::mem::align_of::<E>() > std::mem::align_of::<Block>() {
        std::mem::align_of::<E>()
    } else {
        16
    };

    /// The layout of the allocation of a block of `cap` entries (with room to place the header
    /// at a 32-byte boundary).
    fn layout(cap: u32) -> Layout {
        let pad = std::mem::align_of::<Block>().saturating_sub(Self::ALLOC_ALIGN);
        let size = (cap as usize)
            .checked_mul(size_of::<E>())
            .and_then(|s| s.checked_add(Self::SLOTS + pad));
        match size.map(|s| Layout::from_size_align(s, Self::ALLOC_ALIGN)) {
            Some(Ok(layout)) => layout,
            _ => handle_alloc_error(Layout::new::<Block>()),
        }
    }

    /// Slot `i` of `block`.
    ///
    /// # Safety
    /// `block` is one of this queue's (Q1) and `i <= block.cap` (`cap`: one past the end).
    #[inline]
    unsafe fn slot(block: *mut Block, i: u32) -> *mut E {
        // SAFETY: the caller's contract: the slot is inside (or one past) the block's
        // allocation (Q1).
        unsafe {
            block
                .cast::<u8>()
                .add(Self::SLOTS)
                .cast::<E>()
                .add(i as usize)
        }
    }

    /// The index in `block` of `slot`, a slot of it.
    ///
    /// # Safety
    /// `block` is one of this queue's (Q1) and `slot` points into (or one past) its slots.
    #[inline]
    unsafe fn index(block: *mut Block, slot: *mut E) -> u32 {
        // SAFETY: the caller's contract: both are in one allocation.
        unsafe { slot.offset_from(Self::slot(block, 0)) as u32 }
    }

    /// One past the head's last live slot (Q2).
    ///
    /// # Safety
    /// The chain is not empty.
    #[inline]
    unsafe fn head_hi(&self) -> *mut E {
        if self.head == self.tail {
            self.wr
        } else {
            // SAFETY: Q1, Q2 — the head is not the tail: its `end` is its live end.
            unsafe { Self::slot(self.head, (*self.head).end) }
        }
    }

    /// The oldest entry.
    #[inline]
    pub(crate) fn front(&self) -> Option<&E> {
        if self.home_full {
            // SAFETY: Q2 — the home is live while `home_full`.
            return Some(unsafe { self.home.assume_init_ref() });
        }
        if self.len == 0 {
            return None;
        }
        // SAFETY: Q1, Q2 — the chain holds every entry: the head's `rd` if the head holds one,
        // else the next block's first (every block but the head holds one).
        unsafe {
            if self.rd != self.head_hi() {
                return Some(&*self.rd);
            }
            let next = (*self.head).next;
            Some(&*Self::slot(next, (*next).start))
        }
    }

    /// The newest entry.
    #[inline]
    pub(crate) fn back(&self) -> Option<&E> {
        if self.len > u32::from(self.home_full) {
            // SAFETY: Q1, Q2 — the chain holds an entry, so the tail does (if it is the head,
            // the head's; otherwise the tail is not empty): the newest is just before `wr`.
            return Some(unsafe { &*self.wr.sub(1) });
        }
        if self.home_full {
            // SAFETY: Q2 — the home is live.
            return Some(unsafe { self.home.assume_init_ref() });
        }
        None
    }

    /// Appends `entry`: in the home when the queue is empty (Q3: it is then the oldest; the home
    /// is looked at first, so a one-entry activation reads nothing else), at the tail's cursor
    /// when it has room, else in a new block.
    #[inline]
    pub(crate) fn push_back(&mut self, entry: E) {
        if self.len == 0 {
            self.home.write(entry);
            self.home_full = true;
            self.len = 1;
        } else if self.wr != self.wr_end {
            // SAFETY: Q1, Q2 — `wr` is a free slot of the tail.
            unsafe {
                self.wr.write(entry);
                self.wr = self.wr.add(1);
            }
            self.len += 1;
            if self.wr != self.wr_end {
                // The next push to this lane writes the tail's next free slot; that line was last
                // read by a runner on another core (blocks are recycled within the lane), and
                // without the hint the store missed and the lane lock's release waited for it,
                // under the lock (perf, `contexts --contexts 16 --work 10`: 64% of `push`'s
                // samples on the unlock). Rule 9 of the lane README.
                prefetch(self.wr.cast::<u8>(), size_of::<E>());
            }
        } else {
            self.push_new_block(entry);
        }
    }

    #[cold]
    #[inline(never)]
    fn push_new_block(&mut self, entry: E) {
        let tail = self.tail;
        let cap = if tail.is_null() {
            MIN_BLOCK
        } else {
            // SAFETY: Q1 — the tail is this queue's.
            unsafe { (*tail).cap }
                .saturating_mul(2)
                .min(Self::MAX_BLOCK)
        };
        let block = self.block(cap);
        // SAFETY: Q1, Q2 — `block` is this queue's, empty, and becomes the tail; the old tail
        // (if any) becomes a middle block, its live end written to its header.
        unsafe {
            (*block).start = 0;
            if tail.is_null() {
                self.head = block;
                self.rd = Self::slot(block, 0);
                self.rd_end = self.rd;
            } else {
                (*tail).end = Self::index(tail, self.wr);
                (*tail).next = block;
            }
            self.tail = block;
            self.wr = Self::slot(block, 0);
            self.wr_end = Self::slot(block, (*block).cap);
            self.wr.write(entry);
            self.wr = self.wr.add(1);
        }
        self.len += 1;
    }

    /// Takes the oldest entry out; a block it empties goes to the spares.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<E> {
        if self.home_full {
            self.home_full = false;
            self.len -= 1;
            // SAFETY: Q2 — the home was live; read out once (no longer live).
            return Some(unsafe { self.home.assume_init_read() });
        }
        if self.rd == self.rd_end && !self.refresh() {
            return None;
        }
        // SAFETY: Q2 — `rd < rd_end <= hi(head)`: a live slot of the head; read out once.
        unsafe {
            let entry = self.rd.read();
            self.rd = self.rd.add(1);
            self.len -= 1;
            Some(entry)
        }
    }

    /// `rd` reached `rd_end`: refreshes `rd_end` from the head, moving past an emptied head
    /// (to the spares). False if the chain holds no entry.
    #[inline(never)]
    fn refresh(&mut self) -> bool {
        if self.head.is_null() {
            return false;
        }
        // SAFETY: Q1, Q2 — the chain is not empty; an emptied head that is not the tail is
        // unlinked (its `next`, which holds an entry, becomes the head).
        unsafe {
            let hi = self.head_hi();
            if self.rd != hi {
                self.rd_end = hi;
                return true;
            }
            if self.head == self.tail {
                return false;
            }
            let old = self.head;
            let next = (*old).next;
            self.head = next;
            self.rd = Self::slot(next, (*next).start);
            self.rd_end = self.head_hi();
            self.recycle(old);
        }
        true
    }

    /// Takes the newest entry out.
    pub(crate) fn pop_back(&mut self) -> Option<E> {
        if self.len == u32::from(self.home_full) {
            if !self.home_full {
                return None;
            }
            self.home_full = false;
            self.len -= 1;
            // SAFETY: Q2 — the home was live; read out once.
            return Some(unsafe { self.home.assume_init_read() });
        }
        // SAFETY: Q1, Q2 — the chain holds an entry, so `wr - 1` is the tail's newest; read
        // out once. A tail (not the head) it empties is unlinked: its predecessor, found from
        // the head, becomes the tail (rare: a coalescing entry alone in its block).
        unsafe {
            self.wr = self.wr.sub(1);
            let entry = self.wr.read();
            self.len -= 1;
            let tail = self.tail;
            if tail != self.head && self.wr == Self::slot(tail, (*tail).start) {
                let mut prev = self.head;
                while (*prev).next != tail {
                    prev = (*prev).next;
                }
                (*prev).next = ptr::null_mut();
                self.tail = prev;
                self.wr = Self::slot(prev, (*prev).end);
                self.wr_end = Self::slot(prev, (*prev).cap);
                self.recycle(tail);
            }
            if self.head == self.tail && self.rd_end > self.wr {
                self.rd_end = self.wr;
            }
            Some(entry)
        }
    }

    /// Puts `entry` before every other (a runner giving back an entry it took). When the home
    /// is full, its entry moves to the chain's front first.
    pub(crate) fn push_front(&mut self, entry: E) {
        if self.home_full {
            // SAFETY: Q2 — the home is live; read out once (moved to the chain).
            let moved = unsafe { self.home.assume_init_read() };
            self.home_full = false;
            self.len -= 1;
            self.chain_push_front(moved);
        }
        self.home.write(entry);
        self.home_full = true;
        self.len += 1;
    }

    fn chain_push_front(&mut self, entry: E) {
        let head = self.head;
        // SAFETY: Q1, Q2 — a slot before `rd` in the head is free; else a new block, filled
        // from its last slot down, becomes the head, and the old head a middle block (its `rd`
        // written to its header as its `start`).
        unsafe {
            if head.is_null() || self.rd == Self::slot(head, 0) {
                let block = self.block(MIN_BLOCK);
                let cap = (*block).cap;
                (*block).end = cap;
                (*block).next = head;
                if head.is_null() {
                    self.tail = block;
                    self.wr = Self::slot(block, cap);
                    self.wr_end = self.wr;
                } else if self.rd == self.head_hi() {
                    // An emptied head: let it go rather than keep an empty middle block.
                    self.drop_empty_head();
                    (*block).next = self.head;
                    if self.head.is_null() {
                        self.tail = block;
                        self.wr = Self::slot(block, cap);
                        self.wr_end = self.wr;
                    }
                } else {
                    (*head).start = Self::index(head, self.rd);
                }
                self.head = block;
                self.rd = Self::slot(block, cap);
            }
            self.rd = self.rd.sub(1);
            self.rd.write(entry);
            self.rd_end = self.head_hi();
        }
        self.len += 1;
    }

    /// The head holds no entry: it goes to the spares (and the chain is empty if it was the
    /// tail).
    ///
    /// No chain any more (its blocks were freed or handed elsewhere): every cursor and end null.
    fn forget_chain(&mut self) {
        self.head = ptr::null_mut();
        self.tail = ptr::null_mut();
        self.rd = ptr::null_mut();
        self.rd_end = ptr::null_mut();
        self.wr = ptr::null_mut();
        self.wr_end = ptr::null_mut();
    }

    /// # Safety
    /// The chain is not empty and its head holds no entry.
    unsafe fn drop_empty_head(&mut self) {
        let old = self.head;
        // SAFETY: Q1, Q2 — the caller's contract; the next block (if any) holds an entry.
        unsafe {
            if old == self.tail {
                self.forget_chain();
            } else {
                let next = (*old).next;
                self.head = next;
                self.rd = Self::slot(next, (*next).start);
                self.rd_end = self.head_hi();
            }
        }
        self.recycle(old);
    }

    /// Drops an emptied head, so every chain block holds an entry (before linking chains).
    fn trim_head(&mut self) {
        // SAFETY: Q1, Q2 — the chain is not empty when `head` is not null.
        if !self.head.is_null() && unsafe { self.rd == self.head_hi() } {
            // SAFETY: the head holds no entry.
            unsafe { self.drop_empty_head() };
        }
    }

    /// Drops every entry and frees every block (the body of `Drop`). If an entry's drop
    /// unwinds, the guard still drops the rest and frees the blocks.
    #[inline(never)]
    fn clear(&mut self) {
        struct Rest<'a, E>(&'a mut Queue<E>);
        impl<E> Drop for Rest<'_, E> {
            fn drop(&mut self) {
                while self.0.pop_front().is_some() {}
                if !self.0.head.is_null() {
                    // SAFETY: the chain holds no entry: it is one emptied head.
                    unsafe { self.0.drop_empty_head() };
                }
                self.0.trim_spare(0);
            }
        }
        let rest = Rest(self);
        while let Some(entry) = rest.0.pop_front() {
            drop(entry);
        }
        drop(rest);
    }
}

impl<E> Drop for Queue<E> {
    #[inline]
    fn drop(&mut self) {
        // A runner's chunk is dropped empty at every turn: skip the out-of-line call then.
        if !self.is_bare() {
            self.clear();
        }
    }
}

mod spares;
mod take;
#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, not(loom)))]
thread_local! {
    /// The blocks this thread's queues allocated (for tests).
    static NEW_BLOCKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}
