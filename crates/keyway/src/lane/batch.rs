//! Batches of closures (`Lane::execute_all`, `Contexts::execute_all`) as one lane entry.
//!
//! A batch of up to [`BATCH_RUN`] tasks of one closure type `F` is gathered into one `Vec<F>`
//! (the batch's one allocation), admitted with one count ([`Registry::admit_many`]) and queued
//! as one entry of the lane (`entry.rs`, kind `Batch`), kept in place in the entry: no box per
//! task, no entry per task, one push. The entry is the buffer, in the caller's order, and the
//! index of the next task (three words): the runner reads the buffer front to back, the order
//! the producer wrote it in, and the producer writes each task once (a buffer kept in reverse
//! order, to take the next task with a `pop`, cost the producer a second pass over every batch
//! and the runner a move of the vector in and out of the entry per task).
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

use std::cell::Cell;
use std::mem::MaybeUninit;
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

/// A batch entry's value: the batch's tasks in order in one buffer, and the index of the next
/// to start. The tasks before `next` have been moved out (started, handed back or dropped); those
/// from `next` on are live and owned here. Three words: the entry keeps it in place.
pub(super) struct Batch<F> {
    tasks: Box<[MaybeUninit<F>]>,
    next: Cell<usize>,
}

impl<F> Batch<F> {
    /// The tasks of `tasks`, in order. A vector with spare room is shrunk to its length first
    /// (in place for the allocators we know; an iterator with an exact size hint leaves none).
    fn new(tasks: Vec<F>) -> Self {
        let tasks: Box<[F]> = tasks.into_boxed_slice();
        // SAFETY: `MaybeUninit<F>` has the layout of `F`, so the slice's allocation is the same;
        // every element is initialised, which `next == 0` records.
        let tasks = unsafe { Box::from_raw(Box::into_raw(tasks) as *mut [MaybeUninit<F>]) };
        Batch {
            tasks,
            next: Cell::new(0),
        }
    }

    /// Takes the next task out of the batch (it is no longer owned here), if one is left.
    #[inline]
    fn take_next(&self) -> Option<F> {
        let next = self.next.get();
        let slot = self.tasks.get(next)?;
        self.next.set(next + 1);
        // SAFETY: slots from `next` on are live (the type's invariant), and `next` moved past
        // this one before it is read, so it is read once and never dropped here.
        Some(unsafe { slot.assume_init_read() })
    }

    /// Whether every task has been taken.
    #[inline]
    fn is_empty(&self) -> bool {
        self.next.get() >= self.tasks.len()
    }
}

impl<F> Drop for Batch<F> {
    /// Drops every task not taken, in order, each drop contained (one panicking drop stops no
    /// other); the buffer is freed after.
    fn drop(&mut self) {
        while let Some(f) = self.take_next() {
            drop_contained(|| drop(f));
        }
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
    let mut tasks = Vec::with_capacity(batch.tasks.len() - batch.next.get());
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
/// lasts and the pool is not stopping; the batch leaves the chunk with its last task. No borrow
/// of the chunk is held while a task runs, and the task is out of the batch before it starts:
/// a `shutdown_now` called from it puts back the rest.
fn run_head<F: FnOnce() + Send + 'static>(turn: &Turn<'_, Chunk<Closures>>) {
    let hash = turn.held.lane.hash;
    loop {
        let next = {
            let mut chunk = turn.held.entries.borrow_mut();
            let Some(front) = chunk.front() else { return };
            if !front.is_batch() {
                return;
            }
            // SAFETY: the head is the batch this function was chosen for (its vtable's
            // `run_head`): only this turn changes its chunk, and it left the batch at the head;
            // `shutdown_now` may empty the chunk while a task runs, but the loop stops after
            // any task once the pool is stopping, before it looks again.
            let batch = unsafe { front.batch_value::<Batch<F>>() };
            let next = batch.take_next();
            if batch.is_empty() {
                // Its last task: the batch leaves the chunk (its buffer is freed here).
                drop(chunk.pop_front());
            }
            match next {
                Some(f) => f,
                None => return,
            }
        };
        turn.run(Some(hash), || {
            run_contained(|| {
                next();
                Ok(())
            })
        });
        if turn.used_up() || turn.stopping() {
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
            tasks: Vec::with_capacity(tasks.size_hint().0.min(run)),
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
