//! Lanes of closures (the kind behind `Pool::execute_sequential`, `Pool::execute_coalescing`,
//! `Pool::lane`, and futures on lanes), and how a task is admitted and queued in them.

use std::any::Any;
use std::hash::Hash;
use std::sync::Arc;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Weak;

use super::key::KeyPanicked;
use super::table::{Barrier, LaneCore, LaneKind, LaneTable, Ran};
use crate::engine::{refused, NotPlain, Registry};
use crate::error::{panic_message, SubmitError};
use crate::future::{Launcher, Release};
use crate::task::{
    drop_quietly, Abandon, ContextOf, PanicReport, PendingTask, Plain, Task, TaskHandle,
};

/// The most entries a batch ([`push_all`]) gathers before it queues them: bounds its buffer
/// whatever the batch's length (a longer batch is queued in runs of this many, in order).
const BATCH_RUN: usize = 1_024;

/// The kind of the pool's own lanes: each entry is a boxed task.
pub(crate) struct Closures;

pub(crate) enum ClosureEntry {
    /// A task of this lane alone.
    One { task: Task, coalescing: bool },
    /// A multi-key task, standing in every lane of its keys (rule 6).
    Many(Arc<dyn Barrier>),
    /// A future of this lane alone (rule 7): it holds the lane until it is done.
    Async { fut: Launcher, coalescing: bool },
}

impl LaneKind for Closures {
    type Entry = ClosureEntry;

    fn is_coalescing(entry: &ClosureEntry) -> bool {
        matches!(
            entry,
            ClosureEntry::One {
                coalescing: true,
                ..
            } | ClosureEntry::Async {
                coalescing: true,
                ..
            }
        )
    }

    fn is_async(&self, entry: &ClosureEntry) -> bool {
        matches!(entry, ClosureEntry::Async { .. })
    }

    fn launch(
        &self,
        lane: &Arc<LaneCore<Self>>,
        key: &(dyn Any + Send + Sync),
        registry: &Arc<Registry>,
        entry: ClosureEntry,
    ) -> Ran {
        match entry {
            ClosureEntry::Async { fut, .. } => {
                fut.launch(registry, Release::Resume(lane.clone()));
                Ran::Suspended
            }
            other => Ran::Done(self.run(key, other)),
        }
    }

    fn run(&self, _key: &(dyn Any + Send + Sync), entry: ClosureEntry) -> Result<(), PanicReport> {
        match entry {
            ClosureEntry::One { task, .. } => task.run(),
            // Never taken as a chunk entry: `take_chunk` stops at barriers.
            ClosureEntry::Many(_) => Ok(()),
            // Never taken as a chunk entry either (rule 7); run here if it ever were.
            ClosureEntry::Async { fut, .. } => Task::new(fut.into_runnable(Weak::new())).run(),
        }
    }

    fn abandon(&self, entry: ClosureEntry, why: Abandon) -> Result<(), PanicReport> {
        match entry {
            ClosureEntry::One { task, .. } => task.abandon_reporting(why),
            ClosureEntry::Many(_) => Ok(()),
            ClosureEntry::Async { fut, .. } => catch_unwind(AssertUnwindSafe(|| fut.abandon(why)))
                .map_err(|p| PanicReport::new(panic_message(&*p).to_owned())),
        }
    }

    fn pending(lane: &Arc<LaneCore<Self>>, entry: ClosureEntry) -> Option<PendingTask> {
        match entry {
            ClosureEntry::One { task, .. } => {
                let context = lane.clone() as Arc<dyn ContextOf>;
                Some(PendingTask::in_contexts(task, smallvec::smallvec![context]))
            }
            ClosureEntry::Many(multi) => multi.hand_back(),
            // Handed back unstarted: run, it blocks on the future (no lane to hold any more).
            ClosureEntry::Async { fut, .. } => {
                let context = lane.clone() as Arc<dyn ContextOf>;
                let task = Task::new(fut.into_runnable(Weak::new()));
                Some(PendingTask::in_contexts(task, smallvec::smallvec![context]))
            }
        }
    }

    fn barrier(entry: &ClosureEntry) -> Option<&Arc<dyn Barrier>> {
        match entry {
            ClosureEntry::Many(multi) => Some(multi),
            ClosureEntry::One { .. } | ClosureEntry::Async { .. } => None,
        }
    }
}

/// Builds a task's lane entry, once (see [`admit_then`]).
pub(crate) type MakeEntry<'a, T> = &'a mut dyn FnMut() -> (T, ClosureEntry);

/// Admits a task, then lets `place` find its lane(s) and queue it, or hands it back refused.
///
/// `place` calls the maker it is given once it has found the lanes (under their shard locks) and
/// queues the entry. When a key's `Hash`, `Eq` or `Drop` panics first, `place` answers
/// `KeyPanicked` without calling it: the admission is taken back and the task handed back.
pub(crate) fn admit_then<F, T, W>(
    registry: &Registry,
    f: F,
    coalescing: bool,
    wrap: W,
    place: impl FnOnce(MakeEntry<'_, T>) -> Result<T, KeyPanicked>,
) -> Result<T, SubmitError<F>>
where
    W: FnOnce(F) -> (T, Task),
{
    let wrap = move |f| {
        let (out, task) = wrap(f);
        (out, ClosureEntry::One { task, coalescing })
    };
    admit_entry_then(registry, f, wrap, place)
}

/// [`admit_then`] for any kind of entry (`wrap` makes the entry itself: a future's, say).
pub(crate) fn admit_entry_then<F, T, W>(
    registry: &Registry,
    f: F,
    wrap: W,
    place: impl FnOnce(MakeEntry<'_, T>) -> Result<T, KeyPanicked>,
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
    registry: &Registry,
    not_plain: NotPlain,
    f: F,
    wrap: W,
    place: impl FnOnce(MakeEntry<'_, T>) -> Result<T, KeyPanicked>,
) -> Result<T, SubmitError<F>>
where
    W: FnOnce(F) -> (T, ClosureEntry),
{
    match not_plain {
        NotPlain::Timed => {
            let timed = move |f| match wrap(f) {
                (out, ClosureEntry::One { task, coalescing }) => (
                    out,
                    ClosureEntry::One {
                        task: registry.timed(task),
                        coalescing,
                    },
                ),
                other => other,
            };
            place_admitted(registry, f, timed, place)
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

/// [`admit_entry_then`] once the task is admitted (inlined in both of its callers).
#[inline(always)]
fn place_admitted<F, T, W>(
    registry: &Registry,
    f: F,
    wrap: W,
    place: impl FnOnce(MakeEntry<'_, T>) -> Result<T, KeyPanicked>,
) -> Result<T, SubmitError<F>>
where
    W: FnOnce(F) -> (T, ClosureEntry),
{
    let mut parts = Some((f, wrap));
    let mut make = || match parts.take() {
        Some((f, wrap)) => wrap(f),
        None => unreachable!("a task's entry is made once"),
    };
    match place(&mut make) {
        Ok(out) => Ok(out),
        Err(KeyPanicked) => {
            registry.unadmit();
            match parts {
                Some((f, _)) => Err(SubmitError::KeyPanicked(f)),
                None => unreachable!("a key panicked after the entry was queued"),
            }
        }
    }
}

pub(crate) fn plain<F: FnOnce() + Send + 'static>(f: F) -> ((), Task) {
    ((), Task::new(Plain(f)))
}

pub(crate) fn with_handle<F, T>(f: F) -> (TaskHandle<T>, Task)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (handle, task) = TaskHandle::pair(f);
    (handle, Task::new(task))
}

/// Queues `f` (made a task by `wrap`) in the lane of `ctx`, admitted first; refused, it comes
/// back in the error.
pub(crate) fn submit<K, F, T>(
    registry: &Arc<Registry>,
    lanes: &Arc<LaneTable<Closures>>,
    ctx: K,
    f: F,
    coalescing: bool,
    wrap: impl FnOnce(F) -> (T, Task),
) -> Result<T, SubmitError<F>>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    admit_then(registry, f, coalescing, wrap, |make| {
        lanes.submit(registry, ctx, make)
    })
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
    admit_entry_then(registry, f, wrap, |make| lanes.submit(registry, ctx, make))
}

/// Queues the entry `wrap` makes of `f` (a closure's or a future's) in the pinned lane `lane`.
pub(crate) fn push_entry<F, T>(
    registry: &Arc<Registry>,
    lanes: &Arc<LaneTable<Closures>>,
    lane: &Arc<LaneCore<Closures>>,
    f: F,
    wrap: impl FnOnce(F) -> (T, ClosureEntry),
) -> Result<T, SubmitError<F>> {
    admit_entry_then(registry, f, wrap, |make| {
        let (out, entry) = make();
        lane.push_pinned(lanes, registry, entry);
        Ok(out)
    })
}

/// [`push_entry`] for a closure task (`wrap` makes the task).
pub(crate) fn push<F, T>(
    registry: &Arc<Registry>,
    lanes: &Arc<LaneTable<Closures>>,
    lane: &Arc<LaneCore<Closures>>,
    f: F,
    coalescing: bool,
    wrap: impl FnOnce(F) -> (T, Task),
) -> Result<T, SubmitError<F>> {
    push_entry(registry, lanes, lane, f, move |f| {
        let (out, task) = wrap(f);
        (out, ClosureEntry::One { task, coalescing })
    })
}

/// Queues every task of `tasks` in the pinned lane `lane`, in order, each admitted on its own,
/// under one lane lock per run of up to [`BATCH_RUN`] tasks and with at most one schedule. At
/// the first refusal the refused task and every later one come back in the error, in order;
/// those before it are queued and run.
pub(crate) fn push_all<I, F>(
    registry: &Arc<Registry>,
    lanes: &Arc<LaneTable<Closures>>,
    lane: &Arc<LaneCore<Closures>>,
    tasks: I,
) -> Result<(), SubmitError<Vec<F>>>
where
    I: IntoIterator<Item = F>,
    F: FnOnce() + Send + 'static,
{
    let mut tasks = tasks.into_iter();
    let mut batch = Batch {
        registry,
        lanes,
        lane,
        entries: Vec::with_capacity(tasks.size_hint().0.min(BATCH_RUN)),
    };
    while let Some(f) = tasks.next() {
        if let Err(why) = registry.admit() {
            // The accepted ones are queued before the caller's iterator runs again.
            batch.queue();
            let mut back = vec![f];
            back.extend(tasks);
            return Err(refused(why, back));
        }
        batch.entries.push(ClosureEntry::One {
            task: Task::new(Plain(f)),
            coalescing: false,
        });
        if batch.entries.len() == BATCH_RUN {
            batch.queue();
        }
    }
    Ok(())
}

/// The accepted entries of a batch not yet queued. Queued when the batch ends, however it ends:
/// a panic of the caller's iterator (or of its `Drop`) leaves no accepted task behind.
struct Batch<'a> {
    registry: &'a Arc<Registry>,
    lanes: &'a Arc<LaneTable<Closures>>,
    lane: &'a Arc<LaneCore<Closures>>,
    entries: Vec<ClosureEntry>,
}

impl Batch<'_> {
    fn queue(&mut self) {
        self.lane
            .push_all(self.lanes, self.registry, &mut self.entries);
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        self.queue();
    }
}
