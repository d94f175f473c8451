//! A queue's blocks (`queue.rs`, rule Q1): where a block comes from (the spares, else the
//! allocator) and where an emptied one goes (the spares within their bound, else the allocator),
//! and the runner's hand-back of its chunk's spares to the lane.

use std::alloc::{alloc, dealloc, handle_alloc_error};
use std::mem::size_of;
use std::ptr;

#[cfg(all(test, not(loom)))]
use super::NEW_BLOCKS;
use super::{Block, Queue};

impl<E> Queue<E> {
    /// Rule 5: `chunk`'s spare blocks (those its runner emptied, and an emptied head it holds
    /// when it holds no entry) come back to this queue, up to `SPARE_KEEP` entries of them;
    /// the rest are freed.
    #[inline]
    pub(crate) fn reclaim(&mut self, chunk: &mut Self) {
        if chunk.len == 0 && !chunk.head.is_null() {
            // SAFETY: Q1, Q2 — a chain holding no entry is one emptied head.
            unsafe { chunk.drop_empty_head() };
        }
        while !chunk.spare.is_null() {
            let block = chunk.pop_spare();
            self.recycle(block);
        }
    }

    /// Keeps at most `keep` entries of spare blocks (an idle lane in the cache), freeing the
    /// others; an empty queue's emptied head (left by pops from the lane itself: an async entry
    /// launched, a multi-key task passed) counts as a spare.
    pub(crate) fn trim_spare(&mut self, keep: usize) {
        if self.len == 0 && !self.head.is_null() {
            // SAFETY: Q1, Q2 — a chain holding no entry is one emptied head.
            unsafe { self.drop_empty_head() };
        }
        if self.spare_cap as usize <= keep {
            // Within the bound already: no block is read (a lane that goes idle after every
            // entry comes here at each activation, and its spare blocks are cold by then).
            return;
        }
        let mut stack = std::mem::replace(&mut self.spare, ptr::null_mut());
        self.spare_cap = 0;
        while !stack.is_null() {
            let block = stack;
            // SAFETY: Q1 — a spare block is this queue's; its `next` links the rest.
            let cap = unsafe {
                stack = (*block).next;
                (*block).cap
            };
            if self.spare_cap as usize + cap as usize <= keep {
                self.push_spare(block, cap);
            } else {
                // SAFETY: Q1 — held by nothing else now.
                unsafe { Self::free_block(block) };
            }
        }
    }

    /// The entries the spare blocks have room for (for tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn spare_entries(&self) -> usize {
        self.spare_cap as usize
    }

    /// The blocks holding entries (for tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn chain_blocks(&self) -> usize {
        let (mut n, mut b) = (0, self.head);
        while !b.is_null() {
            n += 1;
            // SAFETY: Q1 — each block of the chain is this queue's.
            b = unsafe { (*b).next };
        }
        n
    }

    /// A block for the chain, of `cap` entries if it must be allocated: the top spare (the
    /// block emptied last, likely still in cache), else a new one. Its `next` is null.
    pub(super) fn block(&mut self, cap: u32) -> *mut Block {
        let block = if !self.spare.is_null() {
            self.pop_spare()
        } else {
            Self::new_block(cap)
        };
        // SAFETY: Q1 — the block is this queue's; its link is written before any read.
        unsafe { ptr::addr_of_mut!((*block).next).write(ptr::null_mut()) };
        block
    }

    fn new_block(cap: u32) -> *mut Block {
        #[cfg(all(test, not(loom)))]
        NEW_BLOCKS.with(|n| n.set(n.get() + 1));
        let layout = Self::layout(cap);
        // SAFETY: the layout is not zero-sized (it holds a header).
        let raw = unsafe { alloc(layout) };
        if raw.is_null() {
            handle_alloc_error(layout);
        }
        // The allocation is aligned to `ALLOC_ALIGN` and padded by the rest of a header's
        // alignment: the first boundary of that is within the padding.
        let shift = raw.align_offset(std::mem::align_of::<Block>());
        debug_assert!(shift <= layout.size() - Self::SLOTS - cap as usize * size_of::<E>());
        // SAFETY: a fresh allocation of a block's layout; the header and `cap` slots after it
        // fit past `shift` (the padding); its header is written.
        unsafe {
            let block = raw.add(shift).cast::<Block>();
            block.write(Block {
                next: ptr::null_mut(),
                cap,
                start: 0,
                end: 0,
                shift: shift as u32,
            });
            block
        }
    }

    /// Frees a block.
    ///
    /// # Safety
    /// Q1 — `block` is this queue's, held by nothing now.
    unsafe fn free_block(block: *mut Block) {
        // SAFETY: Q1 — allocated with `layout(cap)`, its header `shift` bytes in.
        unsafe {
            let cap = (*block).cap;
            let raw = block.cast::<u8>().sub((*block).shift as usize);
            dealloc(raw, Self::layout(cap));
        }
    }

    /// The top spare block, unlinked (the stack is not empty).
    #[inline]
    fn pop_spare(&mut self) -> *mut Block {
        let block = self.spare;
        // SAFETY: Q1 — a spare is this queue's; its `next` links the rest of the stack.
        unsafe {
            self.spare = (*block).next;
            self.spare_cap -= (*block).cap;
        }
        block
    }

    #[inline]
    fn push_spare(&mut self, block: *mut Block, cap: u32) {
        // SAFETY: Q1 — the block is this queue's, holds nothing, and is in no chain.
        unsafe { (*block).next = self.spare };
        self.spare = block;
        self.spare_cap += cap;
    }

    /// A block that holds nothing and is in no chain: kept as a spare within `SPARE_KEEP`,
    /// else freed.
    #[inline]
    pub(super) fn recycle(&mut self, block: *mut Block) {
        // SAFETY: Q1 — the block is this queue's.
        let cap = unsafe { (*block).cap };
        if self.spare_cap as usize + cap as usize <= Self::SPARE_KEEP {
            self.push_spare(block, cap);
        } else {
            // SAFETY: Q1 — held by nothing now.
            unsafe { Self::free_block(block) };
        }
    }
}
