//! What a pool thread holds outside any queue, in one per-thread record, so that a
//! `shutdown_now` called on that very thread (from inside a task or a future's first poll) can
//! see it (step 4 of the "Shutdown" section of `README.md`):
//!
//! * **what its lane turn holds.** A lane's turn takes a chunk of entries from its lane and runs
//!   them one by one, and counts them finished in batches. While one of them runs, the others
//!   are in no queue, and those that ran are not yet counted: a `shutdown_now` called from that
//!   very task would never see them. So the turn registers itself ([`holding`]) for the time it
//!   runs user code, and `shutdown_now`, on the same thread, puts the registered chunk back at
//!   the front of its lane and counts what ran ([`put_back_held`]; lane rule 5) before it counts
//!   itself inside, so no other caller drains that lane before the chunk is back. Turns nest (a
//!   multi-key task's completion may go on with a lane inline): every registered turn is put
//!   back.
//! * **the futures it is launching.** In a future's first poll the thread holds two admissions:
//!   the launched entry's (counted finished by its launcher once the first poll returns) and the
//!   future's own. A `shutdown_now` called inside it allows for the first ([`launching`],
//!   [`launching_here`]), or it would wait for itself.

use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::Weak;

use super::watch::Watched;
use super::worker;

/// What a lane's turn holds outside every queue: entries it took and has not started, and
/// entries it ran and has not yet counted finished.
pub(crate) trait Held {
    /// Puts every entry not yet started back at the front of its lane, in order, and returns
    /// how many entries already ran without being counted finished yet (then counted here).
    fn put_back(&self) -> usize;

    /// The hash of the lane whose turn this is, when the turn runs one lane's entries.
    fn context_hash(&self) -> Option<u64> {
        None
    }

    /// The lane whose turn this is, when the turn runs one lane's entries (a timed task keeps
    /// it, weakly, so that a snapshot can label it).
    fn lane(&self) -> Option<Weak<dyn Watched>> {
        None
    }
}

/// One registration: what a turn holds, and the registration it covers (turns nest: a
/// multi-key task's completion may go on with one of its lanes inline). Lives on the frame of
/// [`holding`], which unlinks it before it goes.
struct Node {
    held: NonNull<dyn Held>,
    outer: Option<NonNull<Node>>,
}

/// The record: one per thread, const-initialised, no destructor.
struct Holding {
    /// The innermost registration of this thread, while its turn runs user code.
    innermost: Cell<Option<NonNull<Node>>>,
    /// How many futures this thread is in the first poll of.
    launching: Cell<u64>,
}

thread_local! {
    static HOLDING: Holding = const {
        Holding {
            innermost: Cell::new(None),
            launching: Cell::new(0),
        }
    };
}

/// Runs `f` with `held` registered, so that a `shutdown_now` called on this thread inside `f`
/// puts back what it holds ([`put_back_held`]). Unregistered however `f` ends, unwinding
/// included: the registration cannot outlive `held`.
pub(crate) fn holding<R>(held: &dyn Held, f: impl FnOnce() -> R) -> R {
    // SAFETY: only the lifetime is erased. The pointer is read only while this registration is
    // linked (by `put_back_held`, on this thread, inside `f`), and `Unlink` unlinks it before
    // this frame, and so `held`'s borrow, ends.
    let held: &'static dyn Held =
        unsafe { std::mem::transmute::<&dyn Held, &'static dyn Held>(held) };
    let node = Node {
        held: NonNull::from(held),
        outer: HOLDING.with(|h| h.innermost.get()),
    };
    HOLDING.with(|h| h.innermost.set(Some(NonNull::from(&node))));
    /// Restores the outer registration however `f` ends.
    struct Unlink(Option<NonNull<Node>>);
    impl Drop for Unlink {
        fn drop(&mut self) {
            let _ = HOLDING.try_with(|h| h.innermost.set(self.0));
        }
    }
    let _unlink = Unlink(node.outer);
    f()
}

/// Puts back what every turn on this thread holds (innermost first) into its lane.
pub(crate) fn put_back_held() {
    let mut next = HOLDING.try_with(|h| h.innermost.get()).ok().flatten();
    let mut ran = 0;
    while let Some(node) = next {
        // SAFETY: a linked node lives on the frame of a `holding` call below this one on this
        // thread's stack (it unlinks itself before that frame ends), and so does what its `held`
        // points to (see `holding`). `put_back` only takes `RefCell` borrows a turn never holds
        // while user code runs, so no `&mut` aliases it.
        let node = unsafe { node.as_ref() };
        // SAFETY: as above.
        ran += unsafe { node.held.as_ref() }.put_back();
        next = node.outer;
    }
    // Turns count finished tasks in batches; `shutdown_now` waits for the count, so those that
    // already ran are counted now (their turns will not count them again).
    if ran > 0 {
        worker::with_current(|cx| {
            if let Some(cx) = cx {
                cx.registry.count_finished(ran, Some(cx));
            }
        });
    }
}

/// The lane of the innermost turn registered on this thread, if it names one (a timed task
/// asks, as it starts, which lane it runs in).
pub(crate) fn context_hash() -> Option<u64> {
    let node = HOLDING.try_with(|h| h.innermost.get()).ok().flatten()?;
    // SAFETY: as in `put_back_held`: a linked node and what it points to live on a frame below
    // this one on this thread's stack; `context_hash` only reads.
    let node = unsafe { node.as_ref() };
    // SAFETY: as above.
    unsafe { node.held.as_ref() }.context_hash()
}

/// The lane of the innermost turn registered on this thread, if it names one, weakly.
pub(crate) fn lane() -> Option<Weak<dyn Watched>> {
    let node = HOLDING.try_with(|h| h.innermost.get()).ok().flatten()?;
    // SAFETY: as in `context_hash`.
    let node = unsafe { node.as_ref() };
    // SAFETY: as above.
    unsafe { node.held.as_ref() }.lane()
}

/// Runs `first_poll`, the first poll of a future whose task was just extended (`extend_task`)
/// while its launcher still counts the entry running. A `shutdown_now` called from inside it
/// (from the future, or from a future it resumed in place) thus knows that this thread holds one
/// admission more than the job it runs, and does not wait for it.
pub(crate) fn launching<R>(first_poll: impl FnOnce() -> R) -> R {
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            let _ = HOLDING.try_with(|h| h.launching.set(h.launching.get() - 1));
        }
    }
    HOLDING.with(|h| h.launching.set(h.launching.get() + 1));
    let _leave = Leave;
    first_poll()
}

/// Admissions this thread holds beyond the one of the job it runs (see [`launching`]).
pub(crate) fn launching_here() -> u64 {
    HOLDING.try_with(|h| h.launching.get()).unwrap_or(0)
}
