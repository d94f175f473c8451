//! Where a future's wake-up goes: its task is queued on its own pool as a poll job, or dropped
//! (cancelling the future at its await point) once that pool is stopping or gone.
//!
//! A future's task holds its pool weakly (a stopped pool drops it): see the engine's `on_pool`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Wake, Waker};

use crate::loom::sync::Mutex;

use crate::engine::holding::launching;
use crate::engine::{schedule_woken, PollTask, Registry};
use crate::task::drop_quietly;

/// Makes `fut` a task of the pool of `registry` (detached: it runs until done or cancelled) and
/// returns its first poll. The pool is the task's metadata, so the schedule function is a plain
/// function: `async-task` then wakes and schedules without taking a reference on the task for
/// the schedule call (it does so for a schedule closure with captures: two read-modify-writes
/// per wake-up).
pub(crate) fn spawn_on<F>(registry: &Arc<Registry>, fut: F) -> PollTask
where
    F: Future<Output = ()> + Send + 'static,
{
    let (runnable, task) = async_task::Builder::new()
        .metadata(Arc::downgrade(registry))
        .spawn(move |_| fut, schedule_poll);
    task.detach();
    runnable
}

/// A future task's schedule function: its woken `runnable` is queued on its pool as a poll job
/// (run next on this worker when it can), or dropped, cancelling the future at its await point,
/// once the pool is stopping or gone.
fn schedule_poll(runnable: PollTask) {
    if let Some(runnable) = schedule_woken(runnable) {
        drop_quietly(runnable);
    }
}

/// Where the wakes of a driver polled inline go (`poll_inline`): made at the first clone of the
/// inline waker, that is only by a future that keeps its waker (a real wait). Until the driver's
/// task exists a wake is noted here; the task's first poll installs its waker ([`Slot::install`])
/// and learns whether a wake came first, and every later wake goes to that waker. A wake is thus
/// never lost, whichever of the wake and the task comes first (loom model below).
pub(crate) struct Slot(Mutex<Target>);

enum Target {
    /// No wake yet, no task yet.
    Waiting,
    /// Woken before the task existed.
    Woken,
    /// The driver's task: wakes go to it.
    Task(Waker),
}

impl Slot {
    fn new() -> Self {
        Slot(Mutex::new(Target::Waiting))
    }

    /// A wake: noted while there is no task, else passed on to the task (outside the lock).
    pub(crate) fn wake(&self) {
        let task = {
            let mut target = self.0.lock();
            match &*target {
                Target::Waiting => {
                    *target = Target::Woken;
                    return;
                }
                Target::Woken => return,
                Target::Task(waker) => waker.clone(),
            }
        };
        task.wake();
    }

    /// The driver's task now exists: later wakes go to `waker`. True if a wake came before it
    /// (the task must poll the future now, not wait).
    pub(crate) fn install(&self, waker: &Waker) -> bool {
        let mut target = self.0.lock();
        let woken = matches!(*target, Target::Woken);
        *target = Target::Task(waker.clone());
        woken
    }
}

impl Wake for Slot {
    fn wake(self: Arc<Self>) {
        Slot::wake(&self);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        Slot::wake(self);
    }
}

/// What a poll made inline, with no task, left for the task its driver is promoted to when it
/// did not finish (`promote`).
#[derive(Default)]
pub(crate) struct Left {
    /// It woke itself during the poll (a yield past the worker's streak, or its batch used up):
    /// the task is queued at once.
    woken: bool,
    /// It kept its waker (a real wait): where the wakes went meanwhile.
    slot: Option<Arc<Slot>>,
}

/// The inline poll's waker: a self-wake is noted, a clone is a waker of the [`Slot`] (made at
/// the first clone). It lives on the poll's stack frame and is reached only through the poll's
/// `&Waker`, which cannot outlive it; `&Waker` is `Sync`, so both fields take concurrent use.
struct Inline {
    woken: AtomicBool,
    slot: OnceLock<Arc<Slot>>,
}

static INLINE: RawWakerVTable =
    RawWakerVTable::new(inline_clone, inline_wake, inline_wake, inline_drop);

/// # Safety
/// `data` is the `&Inline` of a poll in progress (see [`Inline`]).
unsafe fn inline<'a>(data: *const ()) -> &'a Inline {
    // SAFETY: the caller's contract.
    unsafe { &*(data as *const Inline) }
}

unsafe fn inline_clone(data: *const ()) -> RawWaker {
    // SAFETY: an inline waker is only used during its poll.
    let slot = unsafe { inline(data) }
        .slot
        .get_or_init(|| Arc::new(Slot::new()));
    let waker = Waker::from(slot.clone());
    let raw = RawWaker::new(waker.data(), waker.vtable());
    std::mem::forget(waker);
    raw
}

unsafe fn inline_wake(data: *const ()) {
    // SAFETY: as `inline_clone`.
    unsafe { inline(data) }.woken.store(true, Ordering::Relaxed);
}

unsafe fn inline_drop(_: *const ()) {}

/// Runs `poll` (a driver's first poll, in the turn that found its future at the lane's head)
/// with no task: a future that completes at once never has one. Returns its result and what
/// [`promote`] needs if it did not finish.
#[inline]
pub(crate) fn poll_inline<R>(poll: impl FnOnce(&mut Context<'_>) -> R) -> (R, Left) {
    let state = Inline {
        woken: AtomicBool::new(false),
        slot: OnceLock::new(),
    };
    let raw = RawWaker::new(&state as *const Inline as *const (), &INLINE);
    // SAFETY: the vtable upholds `RawWaker`'s contract while the waker is used: the waker and
    // every `&Waker` to it live only within this call, while `state` does, and a clone is a
    // waker of the slot, which owns what it refers to.
    let waker = unsafe { Waker::from_raw(raw) };
    let out = poll(&mut Context::from_waker(&waker));
    drop(waker);
    let Inline { woken, slot } = state;
    let left = Left {
        woken: woken.into_inner(),
        slot: slot.into_inner(),
    };
    (out, left)
}

/// A driver that can be polled inline first and promoted to a task when it did not finish.
pub(crate) trait Parks: Future<Output = ()> + Unpin + Send + 'static {
    /// Its inline poll did not finish: from now on it is a task's (a wait joins the waiting
    /// set with the task's waker).
    fn promoted(&mut self);
    /// The task's first poll when no wake came since the inline poll: the driver waits, now
    /// with a real waker (`cx`'s), so it joins the pool's waiting set (and checks what may have
    /// ended it meanwhile: its handle's cancel, `shutdown_now`).
    fn park(&mut self, cx: &mut Context<'_>) -> Poll<()>;
}

/// A promoted driver: its first poll takes over the inline poll's wakes.
struct Promoted<D> {
    driver: D,
    /// What the inline poll left; taken by the first poll.
    left: Option<Left>,
}

impl<D: Parks> Future for Promoted<D> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if let Some(Left { woken, slot }) = this.left.take() {
            // The slot is told of the task in every case (not short-circuited).
            let woken = woken | slot.is_some_and(|slot| slot.install(cx.waker()));
            if !woken {
                return this.driver.park(cx);
            }
        }
        Pin::new(&mut this.driver).poll(cx)
    }
}

/// Starts `driver` (whose thread holds its admission: `launching`): its first poll here, with
/// no task ([`poll_inline`]); a task only if it did not finish ([`promote`]).
pub(crate) fn run_inline<D: Parks>(registry: &Arc<Registry>, driver: D) {
    run_inline_with(
        registry,
        driver,
        |driver, cx| Pin::new(driver).poll(cx),
        |d| d,
    );
}

/// [`run_inline`] of a driver that is made only if its first poll does not finish: `poll`
/// polls `start` (what the driver needs besides what the caller lends it), and `driver` makes
/// the driver of it, to be promoted. So an activation that is done at once takes no reference
/// on what it only borrowed meanwhile.
#[inline]
pub(crate) fn run_inline_with<A, D: Parks>(
    registry: &Arc<Registry>,
    mut start: A,
    poll: impl FnOnce(&mut A, &mut Context<'_>) -> Poll<()>,
    driver: impl FnOnce(A) -> D,
) {
    launching(|| {
        if let (Poll::Pending, left) = poll_inline(|cx| poll(&mut start, cx)) {
            let mut driver = driver(start);
            driver.promoted();
            promote(registry, driver, left);
        }
    });
}

/// `driver`, polled inline and not finished, becomes a task of the pool of `registry`: queued
/// at once if it woke itself, else parked (its first poll joins the waiting set), woken
/// through its slot from then on.
pub(crate) fn promote<D: Parks>(registry: &Arc<Registry>, driver: D, left: Left) {
    let woken = left.woken;
    let first = spawn_on(
        registry,
        Promoted {
            driver,
            left: Some(left),
        },
    );
    if woken {
        first.schedule();
    } else {
        first.run();
    }
}

#[cfg(all(test, loom))]
mod loom_slot {
    use super::*;
    use loom::sync::atomic::AtomicUsize;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A wake racing the task's install is seen exactly once: by the install (the task polls
    /// at once) or by the task's waker.
    #[test]
    fn loom_a_wake_before_or_after_the_task_is_never_lost() {
        loom::model(|| {
            let slot = std::sync::Arc::new(Slot::new());
            let count = std::sync::Arc::new(Count(AtomicUsize::new(0)));
            let waker = Waker::from(slot.clone());
            let waking = loom::thread::spawn(move || waker.wake());
            let task = Waker::from(count.clone());
            let woken = slot.install(&task);
            waking.join().unwrap();
            let seen = usize::from(woken) + count.0.load(Ordering::SeqCst);
            assert_eq!(seen, 1, "the wake reached the driver once");
        });
    }
}
