//! Lanes of closures (the kind behind `Pool::execute_sequential`, `Pool::execute_coalescing`,
//! `Pool::lane`, and futures on lanes), and how a task is admitted and queued in them.

use std::any::Any;
use std::hash::Hash;
use std::sync::Arc;

use super::entry::Parts;
use super::key::KeyPanicked;
use super::runner::Chunk;
use super::table::{Barrier, LaneCore, LaneKind, LaneTable, Ran};
use super::turn::Turn;
use crate::engine::{refused, NotPlain, Registry};
use crate::error::SubmitError;
use crate::future::Runtime;
use crate::task::{
    drop_quietly, Abandon, ContextOf, PanicReport, PendingTask, Plain, Runnable, Task, TaskHandle,
    WithHandle,
};

/// The kind of the pool's own lanes: each entry is a boxed task.
#[derive(Default)]
pub(crate) struct Closures {
    /// The runtime the pool is bound to, if any: a future handed back by `shutdown_now` runs
    /// inside it when its taker runs it (`Launcher::handed_back`).
    pub(super) bound: Option<Runtime>,
}

impl Closures {
    /// The kind of the lanes of the pool of `registry`.
    pub(crate) fn of(registry: &Registry) -> Self {
        Closures {
            bound: Runtime::bound_of(registry),
        }
    }
}

pub(crate) use super::entry::ClosureEntry;

impl LaneKind for Closures {
    type Entry = ClosureEntry;

    #[inline]
    fn is_coalescing(entry: &ClosureEntry) -> bool {
        entry.is_coalescing()
    }

    #[inline]
    fn is_async(&self, entry: &ClosureEntry) -> bool {
        entry.is_async()
    }

    fn launch(
        &self,
        lane: &Arc<LaneCore<Self>>,
        _key: &(dyn Any + Send + Sync),
        registry: &Arc<Registry>,
        entry: ClosureEntry,
    ) -> Ran {
        match entry.into_parts() {
            Parts::Launch(fut) => super::spawn::launch(lane, registry, fut),
            Parts::Task(task) => Ran::Done(task.run()),
            // Never launched: a runner stops at barriers (rule 6).
            Parts::Many(_) => Ran::Done(Ok(())),
        }
    }

    #[inline]
    fn run(&self, _key: &(dyn Any + Send + Sync), entry: ClosureEntry) -> Result<(), PanicReport> {
        entry.run()
    }

    fn abandon(&self, entry: ClosureEntry, why: Abandon) -> Result<(), PanicReport> {
        entry.abandon(why)
    }

    fn hand_back(lane: &Arc<LaneCore<Self>>, entry: ClosureEntry, out: &mut Vec<PendingTask>) {
        match entry.into_tasks() {
            // A batch: each task not started on its own (`batch.rs`).
            Ok(tasks) => out.extend(tasks.into_iter().map(|task| {
                let context = lane.clone() as Arc<dyn ContextOf>;
                PendingTask::in_contexts(task, smallvec::smallvec![context])
            })),
            Err(entry) => out.extend(Self::pending(lane, entry)),
        }
    }

    #[inline]
    fn is_batch(entry: &ClosureEntry) -> bool {
        entry.is_batch()
    }

    fn run_batch(turn: &Turn<'_, Chunk<Self>>) {
        let head = turn.held.entries.borrow();
        let Some(front) = head.front() else { return };
        let batch = front.batch_runner();
        drop(head);
        if let Some(run_head) = batch {
            run_head(turn);
        }
    }

    fn pending(lane: &Arc<LaneCore<Self>>, entry: ClosureEntry) -> Option<PendingTask> {
        let task = match entry.into_parts() {
            Parts::Task(task) => task,
            Parts::Many(multi) => return multi.hand_back(),
            // Handed back unstarted: run, it blocks on the future (no lane to hold any more),
            // inside the pool's bound runtime if it has one.
            Parts::Launch(fut) => Task::new(fut.handed_back(lane.kind.bound.clone())),
        };
        let context = lane.clone() as Arc<dyn ContextOf>;
        Some(PendingTask::in_contexts(task, smallvec::smallvec![context]))
    }

    #[inline]
    fn barrier(entry: &ClosureEntry) -> Option<&Arc<dyn Barrier>> {
        entry.barrier()
    }
}

/// Builds a task's lane entry, once (see [`admit_then`]).
pub(crate) type MakeEntry<'a, T> = &'a mut dyn FnMut() -> (T, ClosureEntry);

// How the submission path stays what it was before the pool could time tasks. Admission's one
// test sends a timed (or refused) task to `not_plain_entry`, out of line; the plain path must
// compile to the same code with or without that branch. Two things made it differ (callgrind,
// function by function, against a build with the branch removed):
//
// 1. The timed path calls the same generic pieces as the plain path (`place`, the entry
//    maker, `wrap` and the closure that makes the entry). With two call sites the compiler
//    stopped inlining some of them into the plain path: the entry's closure stood out of line
//    in the caller of `Lane::execute` (3 instructions per task). Every such piece is
//    `#[inline(always)]` (closures included), so a second call site changes nothing.
// 2. A `place` closure of three words (table, registry, key) is handed to the cold function
//    through memory, and the compiler wrote it there before admission, on the plain path too
//    (6 to 8 instructions per `execute_sequential`). `place` is given the registry as an
//    argument instead of capturing it: two words, passed in registers.

/// Admits a task, then lets `place` find its lane(s) and queue it, or hands it back refused.
///
/// `place` is given the registry and a maker; it calls the maker once it has found the lanes
/// (under their shard locks) and queues the entry. When a key's `Hash`, `Eq` or `Drop` panics first, `place` answers
/// `KeyPanicked` without calling it: the admission is taken back and the task handed back.
pub(crate) fn admit_then<F, T, R, W>(
    registry: &Arc<Registry>,
    f: F,
    coalescing: bool,
    wrap: W,
    place: impl FnOnce(&Arc<Registry>, MakeEntry<'_, T>) -> Result<T, KeyPanicked>,
) -> Result<T, SubmitError<F>>
where
    R: Runnable + 'static,
    W: FnOnce(F) -> (T, R),
{
    admit_entry_then(
        registry,
        f,
        #[inline(always)]
        move |f| {
            let (out, task) = wrap(f);
            (out, ClosureEntry::task(task, coalescing))
        },
        place,
    )
}

/// [`admit_then`] for any kind of entry (`wrap` makes the entry itself: a future's, say).
///
/// Always inlined (see the note above `admit_then`): left to itself the compiler kept it out
/// of line in `execute_sequential` once the call to the cold path was in it (callgrind,
/// `throughput --keys 1`, 44 instructions per task).
#[inline(always)]
pub(crate) fn admit_entry_then<F, T, W>(
    registry: &Arc<Registry>,
    f: F,
    wrap: W,
    place: impl FnOnce(&Arc<Registry>, MakeEntry<'_, T>) -> Result<T, KeyPanicked>,
) -> Result<T, SubmitError<F>>
where
    W: FnOnce(F) -> (T, ClosureEntry),
{
    if let Err(not_plain) = registry.admit_timing() {
        return not_plain_entry(registry, not_plain, f, wrap, place);
    }
    place_admitted(registry, f, wrap, place)
}

/// [`admit_entry_then`] off its plain path, out of line so that the plain path stays as it
/// was: refused, or accepted and timed (the pool's meter samples it, `engine::meter`).
#[cold]
#[inline(never)]
fn not_plain_entry<F, T, W>(
    registry: &Arc<Registry>,
    not_plain: NotPlain,
    f: F,
    wrap: W,
    place: impl FnOnce(&Arc<Registry>, MakeEntry<'_, T>) -> Result<T, KeyPanicked>,
) -> Result<T, SubmitError<F>>
where
    W: FnOnce(F) -> (T, ClosureEntry),
{
    match not_plain {
        NotPlain::Timed => {
            // The entry is made by the very maker the plain path uses, then timed (the maker
            // and what it calls are always inlined: the note above `admit_then`).
            let mut parts = Some((f, wrap));
            let placed = {
                let mut make = entry_maker(&mut parts);
                place(registry, &mut || {
                    let (out, entry) = make();
                    (out, timed_entry(registry, entry))
                })
            };
            settle(registry, placed, parts)
        }
        NotPlain::Refused(why) => {
            // `place` owns the task's keys. A key whose `Drop` panics must not unwind through
            // this return: the refused task in the return value would leak with it (a panic
            // while a local is dropped does not drop the value being returned).
            drop_quietly(place);
            Err(refused(why, f))
        }
    }
}

/// `entry`, timed by the pool's meter when it is a task of its lane alone; a future or a
/// multi-key task's stand-in is counted, not timed, and comes back as it was.
fn timed_entry(registry: &Registry, entry: ClosureEntry) -> ClosureEntry {
    let coalescing = entry.is_coalescing();
    match entry.into_parts() {
        // One box for the timed task and its marks (not a boxed `Task` boxed again).
        Parts::Task(task) => match registry.timed(task) {
            Ok(timed) => ClosureEntry::task(timed, coalescing),
            Err(task) => ClosureEntry::task(task, coalescing),
        },
        Parts::Launch(fut) => ClosureEntry::future(fut, coalescing),
        Parts::Many(multi) => ClosureEntry::many(multi),
    }
}

/// [`admit_entry_then`] once the task is admitted (inlined there).
#[inline(always)]
fn place_admitted<F, T, W>(
    registry: &Arc<Registry>,
    f: F,
    wrap: W,
    place: impl FnOnce(&Arc<Registry>, MakeEntry<'_, T>) -> Result<T, KeyPanicked>,
) -> Result<T, SubmitError<F>>
where
    W: FnOnce(F) -> (T, ClosureEntry),
{
    let mut parts = Some((f, wrap));
    let placed = place(registry, &mut entry_maker(&mut parts));
    settle(registry, placed, parts)
}

/// The maker of a task's entry from `parts` (once). Its type depends on the task and `wrap`
/// alone, so the plain and the timed path share it, and `wrap` is called in one place; it is
/// inlined into both.
#[inline(always)]
fn entry_maker<F, T, W>(parts: &mut Option<(F, W)>) -> impl FnMut() -> (T, ClosureEntry) + '_
where
    W: FnOnce(F) -> (T, ClosureEntry),
{
    #[inline(always)]
    move || match parts.take() {
        Some((f, wrap)) => wrap(f),
        None => unreachable!("a task's entry is made once"),
    }
}

/// What `place` did with an admitted task: queued it, or a key panicked first (the admission
/// is taken back and the task, never made an entry, handed back).
#[inline(always)]
pub(crate) fn settle<F, T, W>(
    registry: &Registry,
    placed: Result<T, KeyPanicked>,
    parts: Option<(F, W)>,
) -> Result<T, SubmitError<F>> {
    match placed {
        Ok(out) => Ok(out),
        Err(KeyPanicked) => {
            registry.unadmit();
            match parts {
                Some((f, _)) => Err(SubmitError::KeyPanicked(f)),
                None => unreachable!("a key panicked after the task was queued"),
            }
        }
    }
}

#[inline(always)]
pub(crate) fn plain<F: FnOnce() + Send + 'static>(f: F) -> ((), Plain<F>) {
    ((), Plain(f))
}

#[inline(always)]
pub(crate) fn with_handle<F, T>(f: F) -> (TaskHandle<T>, WithHandle<F, T>)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    TaskHandle::pair(f)
}

/// Queues `f` (made a task by `wrap`) in the lane of `ctx`, admitted first; refused, it comes
/// back in the error.
pub(crate) fn submit<K, F, T, R>(
    registry: &Arc<Registry>,
    lanes: &Arc<LaneTable<Closures>>,
    ctx: K,
    f: F,
    coalescing: bool,
    wrap: impl FnOnce(F) -> (T, R),
) -> Result<T, SubmitError<F>>
where
    K: Hash + Eq + Send + Sync + 'static,
    R: Runnable + 'static,
{
    admit_then(
        registry,
        f,
        coalescing,
        wrap,
        #[inline(always)]
        |registry, make| lanes.submit(registry, ctx, make),
    )
}

/// [`submit`] for any kind of entry (`wrap` makes the entry itself: a future's, say).
pub(crate) fn submit_entry<K, F, T>(
    registry: &Arc<Registry>,
    lanes: &Arc<LaneTable<Closures>>,
    ctx: K,
    f: F,
    wrap: impl FnOnce(F) -> (T, ClosureEntry),
) -> Result<T, SubmitError<F>>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    admit_entry_then(registry, f, wrap, |registry, make| {
        lanes.submit(registry, ctx, make)
    })
}

/// Queues the entry `wrap` makes of `f` (a closure's or a future's) in the pinned lane `lane`.
pub(crate) fn push_entry<F, T>(
    registry: &Arc<Registry>,
    lanes: &Arc<LaneTable<Closures>>,
    lane: &Arc<LaneCore<Closures>>,
    f: F,
    wrap: impl FnOnce(F) -> (T, ClosureEntry),
) -> Result<T, SubmitError<F>> {
    admit_entry_then(
        registry,
        f,
        wrap,
        #[inline(always)]
        |registry, make| {
            let (out, entry) = make();
            lane.push_pinned(lanes, registry, entry);
            Ok(out)
        },
    )
}

/// [`push_entry`] for a closure task (`wrap` makes the task).
pub(crate) fn push<F, T, R: Runnable + 'static>(
    registry: &Arc<Registry>,
    lanes: &Arc<LaneTable<Closures>>,
    lane: &Arc<LaneCore<Closures>>,
    f: F,
    coalescing: bool,
    wrap: impl FnOnce(F) -> (T, R),
) -> Result<T, SubmitError<F>> {
    push_entry(
        registry,
        lanes,
        lane,
        f,
        #[inline(always)]
        move |f| {
            let (out, task) = wrap(f);
            (out, ClosureEntry::task(task, coalescing))
        },
    )
}
