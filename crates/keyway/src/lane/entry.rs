//! A closure lane's entry: 32 bytes, one vtable pointer and three words of place.
//!
//! An entry is a task of this lane alone (a closure, with or without a handle), a future of
//! this lane alone (rule 7), or a multi-key task standing in the lanes of all its keys (rule 6).
//! What it is and whether it coalesces are constants of its vtable, one vtable instance per
//! stored type and flag, so the entry has no variant tag and no flag field: four words in all,
//! against six for a tagged union of a five-word task and a flag (the lane queue of a burst holds
//! most of a run, so the entry's size is its memory and its cache misses).
//!
//! What fits in place: a value of up to three words ([`ENTRY_WORDS`]) — a closure capturing up
//! to 24 bytes (an `Arc` and two integers, a `String` alone), or, with a task handle, a closure
//! capturing 16 bytes that include a reference, `Arc`, `Box` or `String` (the handle's shared
//! state takes a word, and the closure's `Option` one more when it has no such niche: two plain
//! integers). A larger one, up to 64 bytes, goes to a recycled cell (`task/spill.rs`: cells
//! freed by the workers come back to the submitters, so a warm path allocates none), and a
//! value beyond 64 bytes is boxed, one allocation per task: an `Arc` plus a `String` (32 bytes)
//! takes a cell, as does a closure with a handle that captures two plain integers. `a_closure_entry_is_four_words_and_what_fits_is_stated`
//! checks each of these shapes.
//!
//! The store is the task module's `InlineBox` (its rules 1–4 are what the `SAFETY` comments
//! here cite), with three words of place instead of a task's four.

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, Weak};

use super::closures::Closures;
use super::runner::Chunk;
use super::table::Barrier;
use super::turn::Turn;
use crate::future::Launcher;
use crate::task::Task;
use crate::task::{
    abandon_contained, drop_contained, run_contained, Abandon, InlineBox, LiveValue, PanicReport,
    Runnable, VTable, VTableFor,
};

/// Words of a closure entry's value kept in place (the entry is these and its vtable pointer).
pub(crate) const ENTRY_WORDS: usize = 3;

/// What an entry is (a constant of its vtable).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    One,
    Async,
    Many,
    /// A batch of tasks of one closure type (`batch.rs`).
    Batch,
}

/// What only a batch entry can do (`batch.rs`).
pub(super) struct BatchFns {
    /// Runs the tasks of the batch at the head of a turn's chunk while the turn lasts.
    pub(super) run_head: fn(&Turn<'_, Chunk<Closures>>),
    /// Each task not started, as a task of its own, in order (`shutdown_now` hands them back).
    pub(super) tasks: fn(LiveValue<'_, ENTRY_WORDS>) -> Vec<Task>,
}

/// An entry's operations, made for one stored type and one coalescing flag.
pub(crate) struct EntryVTable {
    pub(super) kind: Kind,
    pub(super) coalescing: bool,
    pub(super) run: fn(LiveValue<'_, ENTRY_WORDS>) -> Result<(), PanicReport>,
    pub(super) abandon: fn(LiveValue<'_, ENTRY_WORDS>, Abandon),
    pub(super) parts: fn(LiveValue<'_, ENTRY_WORDS>) -> Parts,
    pub(super) drop: fn(LiveValue<'_, ENTRY_WORDS>),
    /// A batch's own operations (`None` for every other kind).
    pub(super) batch: Option<BatchFns>,
}

impl VTable<ENTRY_WORDS> for EntryVTable {
    #[inline]
    fn drop_value(&self, slot: LiveValue<'_, ENTRY_WORDS>) {
        (self.drop)(slot)
    }
}

/// A task of this lane alone (`C`: it coalesces).
struct One<R, const C: bool>(R);

/// A future of this lane alone (`C`: it coalesces).
struct Fut<const C: bool>(Launcher);

/// A multi-key task's entry in one of its lanes.
struct Many(Arc<dyn Barrier>);

impl<R: Runnable + 'static, const C: bool> VTableFor<One<R, C>, ENTRY_WORDS> for EntryVTable {
    const VTABLE: &'static EntryVTable = &EntryVTable {
        kind: Kind::One,
        coalescing: C,
        // SAFETY: rule 2 — this is `VTableFor<One<R, C>>::VTABLE`, given the slot of one.
        run: |slot| unsafe { slot.take::<One<R, C>>() }.0.run(),
        // SAFETY: rule 2, as for `run`.
        abandon: |slot, why| unsafe { slot.take::<One<R, C>>() }.0.abandon(why),
        // SAFETY: rule 2, as for `run`.
        parts: |slot| Parts::Task(Task::new(unsafe { slot.take::<One<R, C>>() }.0)),
        // SAFETY: rule 2, as for `run`.
        drop: |slot| drop_contained(|| unsafe { slot.drop_value::<One<R, C>>() }),
        batch: None,
    };
}

impl<const C: bool> VTableFor<Fut<C>, ENTRY_WORDS> for EntryVTable {
    const VTABLE: &'static EntryVTable = &EntryVTable {
        kind: Kind::Async,
        coalescing: C,
        // Never taken as a chunk entry (rule 7); run here if it ever were: it blocks on the
        // future (no lane to hold).
        // SAFETY: rule 2 — this is `VTableFor<Fut<C>>::VTABLE`, given the slot of one.
        run: |slot| {
            Task::new(
                unsafe { slot.take::<Fut<C>>() }
                    .0
                    .into_runnable(Weak::new()),
            )
            .run()
        },
        // SAFETY: rule 2, as for `run`.
        abandon: |slot, why| unsafe { slot.take::<Fut<C>>() }.0.abandon(why),
        // SAFETY: rule 2, as for `run`.
        parts: |slot| Parts::Launch(unsafe { slot.take::<Fut<C>>() }.0),
        // SAFETY: rule 2, as for `run`.
        drop: |slot| drop_contained(|| unsafe { slot.drop_value::<Fut<C>>() }),
        batch: None,
    };
}

impl VTableFor<Many, ENTRY_WORDS> for EntryVTable {
    const VTABLE: &'static EntryVTable = &EntryVTable {
        kind: Kind::Many,
        coalescing: false,
        // Never taken as a chunk entry: a runner stops at barriers (rule 6). The task itself
        // runs when its last lane arrives, not through this entry.
        // SAFETY: rule 2 — this is `VTableFor<Many>::VTABLE`, given the slot of one.
        run: |slot| {
            drop(unsafe { slot.take::<Many>() });
            Ok(())
        },
        // SAFETY: rule 2, as for `run`.
        abandon: |slot, _why| drop(unsafe { slot.take::<Many>() }),
        // SAFETY: rule 2, as for `run`.
        parts: |slot| Parts::Many(unsafe { slot.take::<Many>() }.0),
        // SAFETY: rule 2, as for `run`.
        drop: |slot| drop_contained(|| unsafe { slot.drop_value::<Many>() }),
        batch: None,
    };
}

/// The report of a panic that unwound out of an entry's run (the cold path of
/// [`ClosureEntry::run`]): `run_contained` makes it, as for any task.
#[cold]
#[inline(never)]
fn unwound(payload: Box<dyn Any + Send>) -> Result<(), PanicReport> {
    run_contained(move || resume_unwind(payload))
}

/// What an entry holds, unpacked (for the paths that are not a runner's: `shutdown_now`'s
/// hand-back, a multi-key task's body, a future's launch).
pub(crate) enum Parts {
    Task(Task),
    Launch(Launcher),
    Many(Arc<dyn Barrier>),
}

/// One entry of a closure lane (see the module documentation).
pub(crate) struct ClosureEntry(InlineBox<EntryVTable, ENTRY_WORDS>);

impl ClosureEntry {
    /// A task of this lane alone.
    #[inline]
    pub(crate) fn task<R: Runnable + 'static>(task: R, coalescing: bool) -> Self {
        if coalescing {
            ClosureEntry(InlineBox::new(One::<R, true>(task)))
        } else {
            ClosureEntry(InlineBox::new(One::<R, false>(task)))
        }
    }

    /// A future of this lane alone (rule 7).
    pub(crate) fn future(fut: Launcher, coalescing: bool) -> Self {
        if coalescing {
            ClosureEntry(InlineBox::new(Fut::<true>(fut)))
        } else {
            ClosureEntry(InlineBox::new(Fut::<false>(fut)))
        }
    }

    /// A multi-key task's entry in one of its lanes (rule 6).
    pub(crate) fn many(multi: Arc<dyn Barrier>) -> Self {
        ClosureEntry(InlineBox::new(Many(multi)))
    }

    /// A batch of tasks of one closure type (`batch.rs`): `B` is its value, whose vtable says
    /// it is a batch.
    #[inline]
    pub(super) fn batch<B: Send + 'static>(batch: B) -> Self
    where
        EntryVTable: VTableFor<B, ENTRY_WORDS>,
    {
        ClosureEntry(InlineBox::new(batch))
    }

    /// Whether it is a batch (`batch.rs`).
    #[inline]
    pub(crate) fn is_batch(&self) -> bool {
        self.0.vtable().kind == Kind::Batch
    }

    /// A batch: what runs its tasks at the head of a turn's chunk, where it must be, while the
    /// turn lasts (`batch.rs`). Any other entry: `None`.
    #[inline]
    pub(super) fn batch_runner(&self) -> Option<fn(&Turn<'_, Chunk<Closures>>)> {
        self.0.vtable().batch.as_ref().map(|fns| fns.run_head)
    }

    /// The value of a batch entry, borrowed.
    ///
    /// # Safety
    /// The entry was made by [`batch`](Self::batch) with a value of type `B` (rule 2).
    #[inline]
    pub(super) unsafe fn batch_value<B>(&self) -> &B {
        // SAFETY: the caller's promise (rule 2); rule 3 — the box is live while borrowed.
        unsafe { self.0.slot_ref().get::<B>() }
    }

    /// Every task it holds, each as a task of its own, in order: a batch's tasks not started,
    /// or the one task of any other entry (for `shutdown_now`'s hand-back).
    pub(crate) fn into_tasks(self) -> Result<Vec<Task>, Self> {
        match self.0.vtable().batch.as_ref() {
            Some(fns) => {
                let tasks = fns.tasks;
                Ok(self.0.consume(|_, slot| tasks(slot)))
            }
            None => Err(self),
        }
    }

    /// Whether a later coalescing push may replace it while it is pending.
    #[inline]
    pub(crate) fn is_coalescing(&self) -> bool {
        self.0.vtable().coalescing
    }

    /// Rule 7: whether it runs as a future.
    #[inline]
    pub(crate) fn is_async(&self) -> bool {
        self.0.vtable().kind == Kind::Async
    }

    /// Rule 6: the multi-key task it stands for, if it is one.
    #[inline]
    pub(crate) fn barrier(&self) -> Option<&Arc<dyn Barrier>> {
        if self.0.vtable().kind != Kind::Many {
            return None;
        }
        // SAFETY: rule 2 — only `VTableFor<Many>::VTABLE` has the kind `Many`, so the box
        // holds a `Many`; rule 3 — the box is live while `self` is borrowed.
        Some(&unsafe { self.0.slot_ref().get::<Many>() }.0)
    }

    /// Runs it. Never unwinds: a panic of the closure or of a drop comes back as a report.
    ///
    /// What crosses the unwind boundary is a unit, and the report-sized result is moved only
    /// when it is a report: handing it back through the boundary copied it three times at every
    /// entry (callgrind: about 20 instructions per task). A panic that unwinds (a drop outside
    /// the task's own containment) is turned into its report by `run_contained`, off this path.
    #[inline]
    pub(crate) fn run(self) -> Result<(), PanicReport> {
        let mut failed = None;
        let ran = catch_unwind(AssertUnwindSafe(|| {
            if let Err(report) = self.0.consume(|vtable, slot| (vtable.run)(slot)) {
                failed = Some(report);
            }
        }));
        match (ran, failed) {
            (Ok(()), None) => Ok(()),
            (Ok(()), Some(report)) => Err(report),
            (Err(payload), _) => unwound(payload),
        }
    }

    /// Drops it unrun, telling its handle why. Never unwinds: a panicking drop comes back as
    /// its report.
    pub(crate) fn abandon(self, why: Abandon) -> Result<(), PanicReport> {
        abandon_contained(|| self.0.consume(|vtable, slot| (vtable.abandon)(slot, why)))
    }

    /// What it holds, unpacked.
    pub(crate) fn into_parts(self) -> Parts {
        self.0.consume(|vtable, slot| (vtable.parts)(slot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{Plain, TaskHandle};
    use std::mem::size_of;

    fn inline<R: Runnable + 'static>(_: &R) -> bool {
        crate::task::fits::<One<R, false>, ENTRY_WORDS>()
    }

    fn plain<F: FnOnce() + Send + 'static>(f: F) -> Plain<F> {
        Plain(f)
    }

    #[test]
    fn a_closure_entry_is_four_words_and_what_fits_is_stated() {
        let word = size_of::<usize>();
        assert_eq!(size_of::<ClosureEntry>(), 4 * word);
        assert_eq!(size_of::<Option<ClosureEntry>>(), 4 * word);
        let arc = Arc::new(7u64);
        let (a, b) = (arc.clone(), arc.clone());
        let (x, y) = (1u64, 2u64);
        assert!(
            inline(&plain(move || drop((a, x, y)))),
            "an Arc and two integers"
        );
        let s = String::from("key");
        assert!(inline(&plain(move || drop(s))), "a String alone");
        let s = String::from("key");
        assert!(!inline(&plain(move || drop((b, s)))), "an Arc and a String");
        let c = arc.clone();
        let (_, one) = TaskHandle::pair(move || *c);
        assert!(inline(&one), "a handle and one word");
        let (c, z) = (arc.clone(), 3u64);
        let (_, two) = TaskHandle::pair(move || *c + z);
        assert!(
            inline(&two),
            "a handle, an Arc and an integer (the Arc's niche)"
        );
        let (_, plain_two) = TaskHandle::pair(move || x + y);
        assert!(!inline(&plain_two), "a handle and two integers");
    }

    #[test]
    fn each_kind_of_entry_says_what_it_is_and_runs_or_abandons_once() {
        let log = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for coalescing in [false, true] {
            let l = log.clone();
            let e = ClosureEntry::task(
                plain(move || {
                    l.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }),
                coalescing,
            );
            assert_eq!(e.is_coalescing(), coalescing);
            assert!(!e.is_async() && e.barrier().is_none());
            e.run().unwrap();
            let (handle, task) = TaskHandle::pair(|| 5);
            ClosureEntry::task(task, coalescing)
                .abandon(Abandon::Coalesced)
                .unwrap();
            assert!(handle.join().unwrap_err().is_coalesced());
        }
        assert_eq!(log.load(std::sync::atomic::Ordering::SeqCst), 2);
        let panics = ClosureEntry::task(plain(|| panic!("boom")), false);
        assert_eq!(panics.run().unwrap_err().message(), "boom");
        assert_eq!(Arc::strong_count(&log), 1, "a capture leaked");
    }

    /// A task whose run unwinds instead of reporting (what a panicking drop outside the task's
    /// own containment does) still comes back as its report: the entry's run never unwinds.
    #[test]
    fn a_panic_that_unwinds_out_of_a_run_comes_back_as_its_report() {
        struct Wild;
        impl Runnable for Wild {
            fn run(self) -> Result<(), PanicReport> {
                panic!("wild")
            }
            fn abandon(self, _why: Abandon) {}
        }
        let report = ClosureEntry::task(Wild, false).run().unwrap_err();
        assert_eq!(report.message(), "wild");
        ClosureEntry::task(plain(|| ()), true).run().unwrap();
    }
}
