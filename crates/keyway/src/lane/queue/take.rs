//! A runner's take of its lane's queue and its give-back (`queue.rs`, rules 5 and 9): entries
//! change hands by moving the queue's fields and linking chains, never by copying entries.

use std::ptr;

use super::{Block, Queue};

impl<E> Queue<E> {
    /// Rule 5: moves the oldest entries into `chunk` (which holds none, and keeps its spares):
    /// whole blocks from the front, the fewest that hold `want` entries, if the blocks before the
    /// tail hold that many; else every entry. The tail, where the producer writes, thus stays with
    /// the queue while it holds a backlog, so its chain keeps doubling across the runner's turns
    /// (rule 9). The walk reads the headers of the blocks taken (a few: they double), no entry.
    #[inline]
    pub(crate) fn take_into(&mut self, chunk: &mut Self, want: usize) {
        debug_assert!(chunk.is_empty() && chunk.head.is_null());
        if self.head != self.tail {
            if let Some((cut, n)) = self.cut(want) {
                return self.take_front(chunk, cut, n);
            }
        }
        self.take_all(chunk);
    }

    /// The last block before the tail that `take_into` takes to hand over `want` entries, and how
    /// many entries it hands over with it (the home's included); `None` if the blocks before the
    /// tail hold fewer.
    fn cut(&self, want: usize) -> Option<(*mut Block, u32)> {
        let mut n = usize::from(self.home_full);
        let (mut block, mut lo) = (self.head, self.rd);
        // SAFETY: Q1, Q2 — the chain has a block after its head: every block before the tail has
        // its live end in its header, and every block after the head its live start.
        unsafe {
            while block != self.tail {
                n += Self::slot(block, (*block).end).offset_from(lo) as usize;
                if n >= want {
                    return Some((block, n as u32));
                }
                block = (*block).next;
                lo = Self::slot(block, (*block).start);
            }
        }
        None
    }

    /// Moves the home's entry and the chain's blocks up to `cut` (not the tail), `n` entries in
    /// all, into `chunk`.
    fn take_front(&mut self, chunk: &mut Self, cut: *mut Block, n: u32) {
        chunk.len = n;
        self.len -= n;
        self.move_home(chunk);
        // SAFETY: Q1, Q2 — `cut` is a block of the chain before its tail: its live end is in its
        // header, and its successor holds an entry (it becomes this queue's head, at its live
        // start); `cut` becomes the chunk's tail (its `next` cleared), its free slots past its
        // live end the chunk's to write.
        unsafe {
            let rest = (*cut).next;
            (*cut).next = ptr::null_mut();
            chunk.head = self.head;
            chunk.rd = self.rd;
            chunk.rd_end = self.rd_end;
            chunk.tail = cut;
            chunk.wr = Self::slot(cut, (*cut).end);
            chunk.wr_end = Self::slot(cut, (*cut).cap);
            self.head = rest;
            self.rd = Self::slot(rest, (*rest).start);
            self.rd_end = self.head_hi();
        }
    }

    /// The home's entry (if any) moves to `chunk`'s home, which holds none.
    #[inline]
    fn move_home(&mut self, chunk: &mut Self) {
        if std::mem::replace(&mut self.home_full, false) {
            // SAFETY: Q2 — the home's entry moves to `chunk`'s home (which holds none) and is
            // no longer live here: one owner.
            chunk.home.write(unsafe { self.home.assume_init_read() });
            chunk.home_full = true;
        }
    }

    /// Moves every entry into `chunk` (which holds none) in O(1): the home's entry and the
    /// chain's cursors; the blocks move with their entries.
    #[inline]
    fn take_all(&mut self, chunk: &mut Self) {
        chunk.len = std::mem::replace(&mut self.len, 0);
        self.move_home(chunk);
        if chunk.len > u32::from(chunk.home_full) {
            // The chain holds entries (else it is at most an emptied head, which stays here).
            chunk.wr = std::mem::replace(&mut self.wr, ptr::null_mut());
            chunk.wr_end = std::mem::replace(&mut self.wr_end, ptr::null_mut());
            chunk.rd = std::mem::replace(&mut self.rd, ptr::null_mut());
            chunk.rd_end = std::mem::replace(&mut self.rd_end, ptr::null_mut());
            chunk.head = std::mem::replace(&mut self.head, ptr::null_mut());
            chunk.tail = std::mem::replace(&mut self.tail, ptr::null_mut());
        }
    }

    /// Rule 5: the entries of `chunk` go back in front of this queue's, in order; `chunk` is
    /// left empty (with its spares). At most the home's entry moves; the chains are linked, so
    /// it is O(1) whatever either holds.
    pub(crate) fn give_back(&mut self, chunk: &mut Self) {
        if chunk.is_empty() {
            return;
        }
        if self.home_full {
            self.home_full = false;
            self.len -= 1;
            // SAFETY: Q2 — the home's entry moves to the back of `chunk` (it is older than
            // this queue's chain, Q3, and newer than everything in `chunk`).
            chunk.push_back(unsafe { self.home.assume_init_read() });
        }
        self.trim_head();
        chunk.trim_head();
        if !self.head.is_null() {
            if chunk.head.is_null() {
                chunk.head = self.head;
                chunk.rd = self.rd;
                chunk.rd_end = self.rd_end;
            } else {
                // SAFETY: Q1, Q2 — both chains hold entries in every block: `chunk`'s tail and
                // this queue's head become middle blocks (their live bounds written to their
                // headers) and are linked; the blocks change owner with the entries.
                unsafe {
                    (*chunk.tail).end = Self::index(chunk.tail, chunk.wr);
                    (*self.head).start = Self::index(self.head, self.rd);
                    (*chunk.tail).next = self.head;
                }
            }
            chunk.tail = self.tail;
            chunk.wr = self.wr;
            chunk.wr_end = self.wr_end;
            chunk.len += self.len;
            self.len = 0;
            self.forget_chain();
        }
        chunk.take_all(self);
    }
}
