//! Batches of closures (`Lane::execute_all`, `Contexts::execute_all`) as one lane entry.
//!
//! A batch of up to [`BATCH_RUN`] tasks of one closure type `F` is gathered into one `Vec<F>`
//! (the batch's one allocation, or none: the buffer of the last batch the lane finished, kept
//! by the lane, [`Spare`]), admitted with one count ([`Registry::admit_many`]) and queued
//! as one entry of the lane (`entry.rs`, kind `Batch`), kept in place in the entry: no box per
//! task, no entry per task, one push. The entry is the buffer, in the caller's order, and the
//! index of the next task (three words): the runner reads the buffer front to back, the order
//! the producer wrote it in, and the producer writes each task once (a buffer kept in reverse
//! order, to take the next task with a `pop`, cost the producer a second pass over every batch
//! and the runner a move of the vector in and out of the entry per task). A batch shorter than
//! its buffer sits at the buffer's end, the slots before it counted as taken.
//!
//! A runner that meets a batch entry leaves it at the head of its chunk and runs its tasks from
//! there, one by one ([`run_head`]), each through the turn's `Turn::run` as any entry: its own
//! start and finish for the monitor, its panic contained and reported in the lane's context, and
//! counted finished with the rest of the turn in one count. The turn's budget counts tasks, not
//! entries, so a batch longer than the lane batch is run over several turns (fairness), the rest
//! of it staying at the head of the lane. Because the batch stays in the chunk while its tasks
//! run, a `shutdown_now` called from one of them puts the rest of the batch back with the chunk
//! (rule 5), and the drain hands back each task not started on its own. A panicking drop of a
//! task that never runs is contained task by task: the others are still dropped (or handed
//! back).

use std::alloc::{dealloc, Layout};
use std::cell::Cell;
use std::mem::{align_of, size_of, ManuallyDrop};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;

use super::closures::Closures;
use super::entry::{BatchFns, ClosureEntry, EntryVTable, Kind, Parts, ENTRY_WORDS};
use super::runner::Chunk;
use super::table::{LaneCore, LaneTable};
use super::turn::Turn;
use crate::engine::{refused, Refusal, Registry};
use crate::error::SubmitError;
use crate::task::{drop_contained, run_contained, Plain, Task, VTableFor};

/// The most tasks one batch entry holds: a longer batch is queued as several entries, in order
/// (bounds what the caller's iterator gathers before the lane sees any of it).
pub(crate) const BATCH_RUN: usize = 1_024;

/// A batch entry's value: the batch's tasks in order at the end of one buffer of `cap` slots,
/// and the index of the next to start. The slots before `next` hold no task (never filled, or
/// moved out: started, handed back or dropped); those from `next` on are live and owned here.
/// Three words: the entry keeps it in place.
pub(super) struct Batch<F> {
    /// The buffer: an allocation of `Layout::array::<F>(cap)` (none when that is zero-sized).
    buf: NonNull<F>,
    /// Its slots; zero once the buffer was handed on ([`take_spare`](Self::take_spare)).
    cap: Cell<usize>,
    next: Cell<usize>,
}

// SAFETY: a batch owns its tasks (`F: Send`) and its buffer; the cells are touched only by the
// thread that holds the entry.
unsafe impl<F: Send> Send for Batch<F> {}

impl<F> Batch<F> {
    /// The tasks of `tasks`, in order. When the vector has spare room (a lane's spare buffer
    /// larger than the batch, or a size hint short of the iterator), the tasks are moved to the
    /// end of the buffer, so the whole buffer is kept for the next batch: nothing is reallocated.
    fn new(tasks: Vec<F>) -> Self {
        let mut tasks = ManuallyDrop::new(tasks);
        let (len, cap) = (tasks.len(), tasks.capacity());
        // SAFETY: a vector's pointer is never null (dangling when it allocated nothing).
        let buf = unsafe { NonNull::new_unchecked(tasks.as_mut_ptr()) };
        if len < cap {
            // SAFETY: both ranges lie in the vector's buffer of `cap` slots; `copy` allows them
            // to overlap. The slots left behind are forgotten (rule of the type: before `next`).
            unsafe { ptr::copy(buf.as_ptr(), buf.as_ptr().add(cap - len), len) };
        }
        Batch {
            buf,
            cap: Cell::new(cap),
            next: Cell::new(cap - len),
        }
    }

    /// Takes the next task out of the batch (it is no longer owned here), if one is left.
    #[inline]
    fn take_next(&self) -> Option<F> {
        let next = self.next.get();
        if next >= self.cap.get() {
            return None;
        }
        self.next.set(next + 1);
        // SAFETY: slots from `next` on are live (the type's invariant), and `next` moved past
        // this one before it is read, so it is read once and never dropped here.
        Some(unsafe { self.buf.as_ptr().add(next).read() })
    }

    /// Whether every task has been taken.
    #[inline]
    fn is_empty(&self) -> bool {
        self.next.get() >= self.cap.get()
    }

    /// The buffer of a batch whose every task was taken, handed on (the batch then holds
    /// none); `None` if one is left, or if the buffer is too small to keep.
    fn take_spare(&self) -> Option<SpareBuf> {
        if !self.is_empty() {
            return None;
        }
        let layout = Layout::array::<F>(self.cap.get()).ok()?;
        if layout.size() < size_of::<[usize; 2]>() {
            return None;
        }
        self.cap.set(0);
        self.next.set(0);
        Some(SpareBuf {
            ptr: self.buf.cast::<u8>(),
            layout,
        })
    }
}

impl<F> Drop for Batch<F> {
    /// Drops every task not taken, in order, each drop contained (one panicking drop stops no
    /// other); the buffer is freed after.
    fn drop(&mut self) {
        while let Some(f) = self.take_next() {
            drop_contained(|| drop(f));
        }
        if let Ok(layout) = Layout::array::<F>(self.cap.get()) {
            if layout.size() > 0 {
                // SAFETY: the buffer is an allocation of this layout (the type's invariant),
                // holding no task any more.
                unsafe { dealloc(self.buf.as_ptr().cast(), layout) };
            }
        }
    }
}

/// A batch buffer holding no task, and its layout.
struct SpareBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl SpareBuf {
    /// A vector with this buffer, if it is a buffer of `F`s with room for `want` (else it is
    /// freed).
    fn into_vec<F>(self, want: usize) -> Option<Vec<F>> {
        let (size, align) = (self.layout.size(), self.layout.align());
        let item = size_of::<F>();
        if align == align_of::<F>() && item > 0 && size % item == 0 && size / item >= want {
            let this = ManuallyDrop::new(self);
            // SAFETY: the buffer was allocated with `Layout::array::<F>(size / item)`: same
            // size and alignment (checked), no live value in it.
            return Some(unsafe { Vec::from_raw_parts(this.ptr.as_ptr().cast(), 0, size / item) });
        }
        None
    }
}

impl Drop for SpareBuf {
    fn drop(&mut self) {
        // SAFETY: an allocation of this layout holding no value (how a `SpareBuf` is made).
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// A lane's spare batch buffer: the buffer of the last batch its runner finished, kept for the
/// next batch a producer gathers for the lane. A busy lane's batches then reuse one another's
/// buffers, and a worker frees none of the buffers the producer allocates: a buffer made on one
/// thread and freed on another took the allocator's shared lock against the producer's next
/// allocation, and the producer's thread waited on it (perf, `contexts --batch 64` at 1,024
/// contexts). One buffer per lane at most, freed with the lane. The buffer's first two words
/// hold its size and alignment while it is kept here.
pub(crate) struct Spare(AtomicPtr<u8>);

impl Spare {
    /// No buffer.
    pub(crate) const fn new() -> Self {
        Spare(AtomicPtr::new(ptr::null_mut()))
    }

    /// Keeps `buf` (freed if a buffer is kept already).
    fn put(&self, buf: SpareBuf) {
        let header = [buf.layout.size(), buf.layout.align()];
        let ptr = buf.ptr.as_ptr();
        // SAFETY: the buffer holds no value and has room for two words (`take_spare`);
        // unaligned, as a buffer of bytes may be.
        unsafe { ptr.cast::<[usize; 2]>().write_unaligned(header) };
        if self
            .0
            .compare_exchange(ptr::null_mut(), ptr, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            std::mem::forget(buf);
        }
    }

    /// The buffer kept, if any (it is no longer kept).
    fn take(&self) -> Option<SpareBuf> {
        if self.0.load(Ordering::Relaxed).is_null() {
            return None;
        }
        let ptr = NonNull::new(self.0.swap(ptr::null_mut(), Ordering::AcqRel))?;
        // SAFETY: `put` wrote the header of the buffer it kept; the swap made it ours alone.
        let [size, align] = unsafe { ptr.as_ptr().cast::<[usize; 2]>().read_unaligned() };
        // SAFETY: the size and alignment of a `Layout` (`put`).
        let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
        Some(SpareBuf { ptr, layout })
    }

    /// A vector for a batch of about `want` tasks: the spare buffer if it fits, else a new one.
    fn vec_for<F>(&self, want: usize) -> Vec<F> {
        match self.take().and_then(|buf| buf.into_vec(want)) {
            Some(vec) => vec,
            None => Vec::with_capacity(want),
        }
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        drop(self.take());
    }
}

impl<F: FnOnce() + Send + 'static> VTableFor<Batch<F>, ENTRY_WORDS> for EntryVTable {
    const VTABLE: &'static EntryVTable = &EntryVTable {
        kind: Kind::Batch,
        coalescing: false,
        // Run whole (a batch handed to code that runs one entry as one task).
        // SAFETY: rule 2 — this is `VTableFor<Batch<F>>::VTABLE`, given the slot of one.
        run: |slot| run_all(unsafe { slot.take::<Batch<F>>() }),
        // A batch never coalesces, so it is never replaced; dropped unrun if it ever were.
        // SAFETY: rule 2, as for `run`.
        abandon: |slot, _why| drop(unsafe { slot.take::<Batch<F>>() }),
        // Never asked of a batch (only of single, future and multi-key entries): one task that
        // runs them all if it ever were.
        // SAFETY: rule 2, as for `run`.
        parts: |slot| {
            let batch = unsafe { slot.take::<Batch<F>>() };
            Parts::Task(Task::new(Plain(move || drop(run_all(batch)))))
        },
        // SAFETY: rule 2, as for `run`.
        drop: |slot| drop(unsafe { slot.take::<Batch<F>>() }),
        batch: Some(BatchFns {
            run_head: run_head::<F>,
            // SAFETY: rule 2, as for `run`.
            tasks: |slot| into_tasks(unsafe { slot.take::<Batch<F>>() }),
        }),
    };
}

/// Every task of `batch` not taken, as a task of its own, in order (`shutdown_now` hands them
/// back).
fn into_tasks<F: FnOnce() + Send + 'static>(batch: Batch<F>) -> Vec<Task> {
    let mut tasks = Vec::with_capacity(batch.cap.get() - batch.next.get());
    while let Some(f) = batch.take_next() {
        tasks.push(Task::new(Plain(f)));
    }
    tasks
}

/// Runs every task of `batch` in order, each contained; the first panic is the answer.
fn run_all<F: FnOnce() + Send + 'static>(batch: Batch<F>) -> Result<(), crate::task::PanicReport> {
    let mut outcome = Ok(());
    while let Some(f) = batch.take_next() {
        let ran = run_contained(|| {
            f();
            Ok(())
        });
        if outcome.is_ok() {
            outcome = ran;
        }
    }
    outcome
}

/// Runs the tasks of the batch at the head of `turn`'s chunk, in order, while the turn's budget
/// lasts and the pool is not stopping; the batch leaves the chunk with its last task, and this
/// returns after running it (the entry after it, a batch of other closures maybe, is the
/// runner's). No borrow of the chunk is held while a task runs, and the task is out of the batch
/// before it starts: a `shutdown_now` called from it puts back the rest.
fn run_head<F: FnOnce() + Send + 'static>(turn: &Turn<'_, Chunk<Closures>>) {
    let hash = turn.held.lane.hash;
    loop {
        let (next, last) = {
            let mut chunk = turn.held.entries.borrow_mut();
            let Some(front) = chunk.front() else { return };
            if !front.is_batch() {
                return;
            }
            // SAFETY: the head is the batch this function was chosen for (its vtable's
            // `run_head`): only this turn changes its chunk, and it left the batch at the head;
            // the loop stops after the batch's last task (the head is then another entry), and
            // `shutdown_now` may empty the chunk while a task runs, but the loop stops after
            // any task once the pool is stopping, before it looks again.
            let batch = unsafe { front.batch_value::<Batch<F>>() };
            let next = batch.take_next();
            let last = batch.is_empty();
            if last {
                // Its last task: the batch leaves the chunk, its buffer kept by the lane for
                // the next batch.
                if let Some(buf) = batch.take_spare() {
                    turn.held.lane.spare.put(buf);
                }
                drop(chunk.pop_front());
            }
            match next {
                Some(f) => (f, last),
                None => return,
            }
        };
        turn.run(Some(hash), || {
            run_contained(|| {
                next();
                Ok(())
            })
        });
        if last || turn.used_up() || turn.stopping() {
            return;
        }
    }
}

/// Queues every task of `tasks` in the pinned lane `lane`, in order, as one entry per run of up
/// to [`BATCH_RUN`] tasks, each run admitted with one count. With `whole`, the whole batch is
/// gathered first and admitted all or none. Refused, the tasks not admitted come back in the
/// error, in order; those before them are queued and run.
pub(crate) fn push_all<I, F>(
    registry: &Arc<Registry>,
    lanes: &Arc<LaneTable<Closures>>,
    lane: &Arc<LaneCore<Closures>>,
    tasks: I,
    whole: bool,
) -> Result<(), SubmitError<Vec<F>>>
where
    I: IntoIterator<Item = F>,
    F: FnOnce() + Send + 'static,
{
    let mut tasks = tasks.into_iter();
    let run = if whole { usize::MAX } else { BATCH_RUN };
    loop {
        let mut gathered = Gathered {
            registry,
            lanes,
            lane,
            tasks: lane.spare.vec_for(tasks.size_hint().0.min(run)),
            whole,
        };
        gathered.tasks.extend(tasks.by_ref().take(run));
        let more = gathered.tasks.len() == run;
        if let Err(back) = gathered.queue() {
            // Refused: the rest of the caller's batch comes back too, in order.
            let (why, mut back) = (back.0, back.1);
            back.extend(tasks);
            return Err(refused(why, back));
        }
        if !more {
            return Ok(());
        }
    }
}

/// A run of a batch gathered from the caller's iterator and not yet admitted. Admitted and
/// queued as the run ends, however it ends: if the caller's iterator (or its `Drop`) panics
/// after giving some tasks, those are admitted and queued as the panic unwinds (unless `whole`,
/// or refused: then they are dropped, never accepted).
struct Gathered<'a, F: FnOnce() + Send + 'static> {
    registry: &'a Arc<Registry>,
    lanes: &'a Arc<LaneTable<Closures>>,
    lane: &'a Arc<LaneCore<Closures>>,
    tasks: Vec<F>,
    whole: bool,
}

impl<F: FnOnce() + Send + 'static> Gathered<'_, F> {
    /// Admits the run (as many as fit, or all or none if `whole`) and queues the admitted head
    /// as one entry; the tasks refused come back, in order, with the reason.
    fn queue(&mut self) -> Result<(), (Refusal, Vec<F>)> {
        let mut tasks = std::mem::take(&mut self.tasks);
        if tasks.is_empty() {
            return Ok(());
        }
        let taken = match self.registry.admit_many(tasks.len(), self.whole) {
            Ok(taken) => taken,
            Err(why) => return Err((why, tasks)),
        };
        let back = tasks.split_off(taken);
        let entry = ClosureEntry::batch(Batch::new(tasks));
        self.lane.push_pinned(self.lanes, self.registry, entry);
        if back.is_empty() {
            Ok(())
        } else {
            Err((Refusal::Full, back))
        }
    }
}

impl<F: FnOnce() + Send + 'static> Drop for Gathered<'_, F> {
    fn drop(&mut self) {
        if self.tasks.is_empty() {
            return;
        }
        // Unwinding from the caller's iterator: what it gave is admitted and queued (not with
        // `whole`: the batch was not whole). What is not is dropped, each drop contained (a
        // second panic would abort).
        let left = if self.whole {
            std::mem::take(&mut self.tasks)
        } else {
            match self.queue() {
                Ok(()) => return,
                Err((_, back)) => back,
            }
        };
        drop(Batch::new(left));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::channel;

    use crate::Pool;

    /// The buffer of the batch a lane finished is kept by the lane, taken by the lane's next
    /// batch (not allocated anew) and kept again once that batch is done.
    #[test]
    fn a_lane_reuses_the_buffer_of_the_last_batch_it_finished() {
        let pool = Pool::builder()
            .core_threads(1)
            .max_threads(1)
            .build()
            .unwrap();
        let lane = pool.lane(7u8);
        // The lane's core, pinned a second time to look at its spare buffer.
        let table = pool.handle.lanes.clone();
        let Ok(core) = table.pin(7u8) else {
            unreachable!("a u8 key does not panic")
        };
        let spare = |_: &crate::Lane<u8>| core.spare.0.load(std::sync::atomic::Ordering::Acquire);
        let (tx, rx) = channel();
        let batch = |range: std::ops::Range<u64>| {
            let tx = tx.clone();
            range.map(move |i| {
                let tx = tx.clone();
                move || tx.send(i).unwrap()
            })
        };
        lane.execute_all(batch(0..64)).unwrap();
        assert_eq!(
            rx.iter().take(64).collect::<Vec<_>>(),
            (0..64).collect::<Vec<_>>()
        );
        lane.flush().unwrap().join().unwrap();
        let kept = spare(&lane);
        assert!(!kept.is_null(), "the finished batch's buffer was not kept");
        // The lane busy: the next batch takes the buffer and waits with it.
        let (release, gate) = channel::<()>();
        let (started_tx, started) = channel();
        lane.execute(move || {
            started_tx.send(()).unwrap();
            gate.recv().unwrap();
        })
        .unwrap();
        started.recv().unwrap();
        lane.execute_all(batch(64..67)).unwrap();
        assert!(
            spare(&lane).is_null(),
            "the next batch did not take the buffer"
        );
        release.send(()).unwrap();
        assert_eq!(rx.iter().take(3).collect::<Vec<_>>(), [64, 65, 66]);
        lane.flush().unwrap().join().unwrap();
        assert_eq!(
            spare(&lane),
            kept,
            "the buffer did not come back to the lane"
        );
        core.unpin(&table);
        drop(lane);
        pool.shutdown();
    }
}
