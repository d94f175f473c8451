//! A worker thread: where it looks for work, how it runs it, when it sleeps, retires or exits.
//!
//! Order of search (`find_job`): its own deque (FIFO, so a lane that yields goes behind the work
//! already there), then the global injector (a batch at a time), then the other workers' deques.
//! Every 61st search, and right after a lane yielded, the injector comes first, so work from
//! outside cannot be starved by work the workers keep making for themselves.

use std::cell::Cell;
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_deque::{Steal, Worker};
use crossbeam_utils::sync::Parker;
use crossbeam_utils::Backoff;

use super::progress::Progress;
use super::registry::{Registry, WorkerSlot};
pub(crate) use super::stoppers::OwnThread;
#[cfg(feature = "tokio")]
pub(crate) use super::threads::lives_in_runtime_of;
use super::work::{PollTask, Work};
use crate::task::{PanicReport, Task};

thread_local! {
    /// The worker running on this thread, for `with_current` (null: none). A
    /// const-initialised `Cell` with no destructor: reading it is one load, never a failed
    /// `try_with`, and no `RefCell` borrow (callgrind: ~100 instructions per self-woken future
    /// through the `RefCell`, ~5 through this).
    static CURRENT_PTR: Cell<*const WorkerCtx> = const { Cell::new(std::ptr::null()) };
    /// The registry of the worker on this thread, for a cheap "is this my pool?" test (compared,
    /// never dereferenced).
    static CURRENT_REGISTRY: Cell<*const Registry> = const { Cell::new(std::ptr::null()) };
}

/// Calls `f` with the worker running on this thread, if this is a keyway worker thread. `f` may
/// call `with_current` again.
#[inline]
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&WorkerCtx>) -> R) -> R {
    let cx = CURRENT_PTR.with(Cell::get);
    // SAFETY: `CURRENT_PTR` is non-null only while `run` runs (its guard clears it however `run`
    // leaves), and `run` holds the `Rc` it points to (`cx`) all that time, on this very thread;
    // so is every call of `f` while it is non-null (`f` runs on this thread, within this call).
    // `WorkerCtx` is only ever shared (`&`), never mutably borrowed.
    f(unsafe { cx.as_ref() })
}

/// True if this thread is a worker of `registry`.
pub(crate) fn is_worker_of(registry: &Registry) -> bool {
    CURRENT_REGISTRY
        .try_with(|r| std::ptr::eq(r.get(), registry))
        .unwrap_or(false)
}

thread_local! {
    static RESERVED_OF: Cell<*const Registry> = const { Cell::new(std::ptr::null()) };
}

/// Marks this thread as a reserved thread of `registry` (null: none).
pub(crate) fn set_reserved_of(registry: *const Registry) {
    RESERVED_OF.with(|r| r.set(registry));
}

pub(crate) fn own_thread(registry: &Registry) -> OwnThread {
    if is_worker_of(registry) {
        OwnThread::Worker
    } else if RESERVED_OF
        .try_with(|r| std::ptr::eq(r.get(), registry))
        .unwrap_or(false)
    {
        OwnThread::Reserved
    } else {
        OwnThread::None
    }
}

/// What a worker thread knows about itself.
pub(crate) struct WorkerCtx {
    pub(crate) registry: Arc<Registry>,
    pub(crate) index: usize,
    /// `registry.slots[index]`, resolved once: every task reads its slot's progress counter,
    /// and the look-up through the registry (its slice, the bounds check, the index) cost
    /// about 7 instructions per task (callgrind). Only read through [`slot`](Self::slot).
    slot: NonNull<WorkerSlot>,
    deque: Worker<Work>,
    tick: Cell<u32>,
    /// The continuation of the job this worker just ran (a woken future's poll, a lane its
    /// future resumed), run next without a queue or a wake-up; `streak` bounds how many run in a
    /// row before the queues are looked at again (fairness). Held in two slots, at most one of
    /// them full: a poll (the common case, one pointer) in `next_poll`, any other job in `next`;
    /// `has_next` says whether one is full, so that the test moves no job (callgrind: moving the
    /// whole `Work` in and out of a `Cell<Option<Work>>` to test it cost tens of instructions per
    /// self-woken future).
    next: Cell<Option<Work>>,
    next_poll: Cell<Option<PollTask>>,
    has_next: Cell<bool>,
    streak: Cell<u32>,
    prefer_global: Cell<bool>,
    rng: Cell<u64>,
}

impl WorkerCtx {
    pub(crate) fn new(registry: Arc<Registry>, index: usize, deque: Worker<Work>) -> Rc<Self> {
        let slot = NonNull::from(&registry.slots[index]);
        Rc::new(WorkerCtx {
            registry,
            index,
            slot,
            deque,
            tick: Cell::new(0),
            next: Cell::new(None),
            next_poll: Cell::new(None),
            has_next: Cell::new(false),
            streak: Cell::new(0),
            prefer_global: Cell::new(false),
            rng: Cell::new(0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1)),
        })
    }

    pub(crate) fn into_deque(self: Rc<Self>) -> Option<Worker<Work>> {
        Rc::try_unwrap(self).ok().map(|cx| cx.deque)
    }

    #[inline]
    fn slot(&self) -> &WorkerSlot {
        // SAFETY: `slot` points into `self.registry.slots`, a boxed slice the registry never
        // replaces or resizes (it is only ever shared, behind the `Arc` this context holds), so
        // the slot lives at that address for as long as `self.registry`, which outlives `&self`;
        // it is only ever read through this shared reference.
        unsafe { self.slot.as_ref() }
    }

    /// This worker's `run_seq` (odd while inside a task).
    pub(crate) fn run_seq(&self) -> u64 {
        self.slot().progress.seq()
    }

    /// Queues `job` on this worker's own deque — unless the worker is inside `blocking`, where
    /// work queued behind it would wait for the blocking call.
    pub(crate) fn push_local(&self, job: Work) {
        if self.slot().blocking.load(Ordering::Relaxed) {
            self.registry.injector.push(job);
        } else {
            self.deque.push(job);
        }
    }

    /// Queues `job` on this worker (`push_local`), then wakes an idle worker if there is one:
    /// `Registry::schedule` on a worker of the pool.
    #[inline]
    pub(crate) fn schedule(&self, job: Work) {
        self.push_local(job);
        self.registry.notify_one();
    }

    /// Runs `job` right after the current one on this worker (see `next`); false, with the job
    /// given back, when the slot is taken or the streak is used up.
    #[inline]
    pub(crate) fn try_next(&self, job: Work) -> Result<(), Work> {
        if !self.take_turn() {
            return Err(job);
        }
        self.has_next.set(true);
        // Both slots are empty (`has_next` was false): what `replace` gives back is `None`,
        // forgotten rather than dropped so that no drop code (and its register spills) is here.
        let old = match job {
            Work::Poll(runnable) => self.next_poll.replace(Some(runnable)).map(Work::Poll),
            job => self.next.replace(Some(job)),
        };
        debug_assert!(old.is_none());
        std::mem::forget(old);
        Ok(())
    }

    /// One more continuation in this worker's streak, if the streak allows it: it is not used
    /// up, no other continuation waits in the slot, and the worker is not inside `blocking`.
    /// Shared by `try_next` and by a self-woken future resumed in place (`future::probe`), so
    /// both kinds of continuation count against one fairness bound.
    #[inline]
    pub(crate) fn take_turn(&self) -> bool {
        const STREAK: u32 = 32;
        let streak = self.streak.get();
        if streak >= STREAK || self.has_next.get() || self.slot().blocking.load(Ordering::Relaxed) {
            return false;
        }
        self.streak.set(streak + 1);
        true
    }

    /// `take_turn` for a self-woken future that this worker polls again in place, inside the
    /// job that polled it: that counts as progress for the monitor, as the poll job it replaces
    /// would have (a future that yields often is never taken for a blocked worker).
    #[inline]
    pub(crate) fn take_turn_in_place(&self) -> bool {
        if !self.take_turn() {
            return false;
        }
        self.slot().progress.task_continued();
        true
    }

    /// Takes the job `try_next` left for this worker, if any.
    #[inline]
    fn take_next(&self) -> Option<Work> {
        if !self.has_next.replace(false) {
            return None;
        }
        match self.next_poll.take() {
            Some(runnable) => Some(Work::Poll(runnable)),
            None => self.next.take(),
        }
    }

    /// A lane used up its batch: it goes behind the work already queued here, and the next
    /// search looks at the injector first.
    pub(crate) fn requeue_lane(&self, job: Work) {
        self.push_local(job);
        self.prefer_global.set(true);
        if self.deque.len() > 1 {
            self.registry.notify_one();
        }
    }

    /// Runs one task with the bookkeeping every task gets: progress for the monitor and the
    /// panic report. The caller then counts it with `Registry::count_finished`.
    #[inline(always)]
    pub(crate) fn run_one(
        &self,
        context: Option<u64>,
        task: impl FnOnce() -> Result<(), PanicReport>,
    ) {
        /// Ends the task in the worker's progress however `task` returns: a panic that unwinds
        /// out of it (user code in bookkeeping) must not leave the worker "inside a task" for
        /// good. A plain call on the normal path.
        struct Ends<'a>(&'a Progress);
        impl Drop for Ends<'_> {
            #[inline]
            fn drop(&mut self) {
                self.0.task_finished();
            }
        }
        let progress = &self.slot().progress;
        progress.task_started();
        let ends = Ends(progress);
        let outcome = task();
        drop(ends);
        if let Err(report) = outcome {
            self.registry.report_panic_in(context, report);
        }
    }

    fn run_task(&self, task: Task) {
        self.run_one(None, || task.run());
        self.registry.count_finished(1, Some(self));
    }

    fn run_job(&self, job: Work) {
        match job {
            Work::Task(task) => self.run_task(task),
            Work::Lane(lane) => lane.run_batch(self),
            Work::Poll(runnable) => self.run_poll(runnable),
        }
    }

    /// A poll contains its future's panics (`future::driver`).
    #[inline]
    fn run_poll(&self, runnable: PollTask) {
        self.run_one(None, || {
            runnable.run();
            Ok(())
        });
    }

    /// Runs `f` (a job) inside the backstop of the containment boundary: tasks contain their own
    /// panics (`Task::run`); anything else that unwinds out of a job is reported here, and the
    /// worker lives on.
    #[inline]
    fn run_caught(&self, f: impl FnOnce()) {
        if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            self.registry
                .report_panic(PanicReport::from_payload(payload));
        }
    }

    fn find_job(&self) -> Option<Work> {
        let tick = self.tick.get().wrapping_add(1);
        self.tick.set(tick);
        if self.prefer_global.replace(false) || tick % 61 == 0 {
            if let Some(job) = self.steal_global() {
                return Some(job);
            }
        }
        self.deque
            .pop()
            .or_else(|| self.steal_global())
            .or_else(|| self.steal_others())
    }

    fn steal_global(&self) -> Option<Work> {
        loop {
            match self.registry.injector.steal_batch_and_pop(&self.deque) {
                Steal::Success(job) => return Some(job),
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }

    fn steal_others(&self) -> Option<Work> {
        let slots = &self.registry.slots[..self.registry.high_water()];
        if slots.len() < 2 {
            return None;
        }
        // xorshift: a cheap, per-worker random starting point.
        let mut x = self.rng.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.set(x);
        let start = (x % slots.len() as u64) as usize;
        for _round in 0..4 {
            let mut retry = false;
            for i in (start..slots.len()).chain(0..start) {
                if i == self.index {
                    continue;
                }
                match slots[i].stealer.steal_batch_and_pop(&self.deque) {
                    Steal::Success(job) => return Some(job),
                    Steal::Empty => {}
                    Steal::Retry => retry = true,
                }
            }
            if !retry {
                break;
            }
        }
        None
    }

    /// No work was found. Spins briefly, then sleeps (see `sleep.rs` for the protocol).
    fn idle(&self, parker: &Parker) -> Idle {
        let registry = &self.registry;
        // Whatever this worker finished may have left nothing pending.
        registry.finishes_published();
        // `snooze` yields (`sched_yield`) after its spins, and that is load-bearing: measured
        // with the latency scenario, one core busy, an idle worker that spins and never yields
        // parks sooner, the producer must wake it, and the woken worker preempts the producer
        // (its involuntary switches ~350 -> ~17,000 a run, p99 start delay about doubled); one
        // that yields stays runnable behind the producer and finds the next job unwoken.
        let backoff = Backoff::new();
        while !backoff.is_completed() {
            if registry.has_work() {
                return Idle::Work;
            }
            backoff.snooze();
        }
        // Shutdown steps 2 and 3 (engine README): stopped, the worker leaves at once; closed,
        // once nothing accepted is pending.
        if registry.is_stopping() {
            return Idle::Exit;
        }
        if registry.is_drained() {
            registry.notify_all();
            return Idle::Exit;
        }
        if let Some(job) = self.spin(registry) {
            return Idle::Job(job);
        }
        registry.sleep.announce(self.index);
        if registry.has_work() || registry.is_stopping() || registry.is_drained() {
            registry.sleep.withdraw(self.index);
            return Idle::Work;
        }
        let expired = park_idle(parker, registry.config.keep_alive, || {
            !registry.sleep.is_idle(self.index)
                || registry.has_work()
                || registry.is_stopping()
                || registry.is_drained()
        });
        if registry.sleep.withdraw(self.index) && expired {
            // Nobody woke us: `keep_alive` passed without work.
            if !registry.is_closed() && !registry.has_work() && registry.try_retire() {
                tracing::debug!(
                    pool = self.registry.name(),
                    slot = self.index,
                    "keyway auxiliary thread retired"
                );
                return Idle::Retired;
            }
        }
        Idle::Work
    }
}

/// How long the spinner looks for work before it sleeps: about a wake-up's round trip through
/// another thread (a tokio task's reply, a timer), so that such a wake-up finds a worker awake
/// rather than paying a sleeping worker's wake-up on its way back.
const SPIN: Duration = Duration::from_micros(100);

impl WorkerCtx {
    /// While work is in flight (accepted, not finished: a future waits, a task runs), one idle
    /// worker at most spins for [`SPIN`] before it sleeps; producers wake nobody meanwhile.
    /// The job it finds, if any; with more work queued behind it, it wakes a sleeper first (the
    /// producers woke none).
    fn spin(&self, registry: &Registry) -> Option<Work> {
        if registry.pending() == 0 || !registry.sleep.try_spin() {
            return None;
        }
        let start = Instant::now();
        let mut job = None;
        'spin: while !registry.is_stopping() {
            for _ in 0..64 {
                job = self.find_job();
                if job.is_some() {
                    break 'spin;
                }
                std::hint::spin_loop();
            }
            if start.elapsed() >= SPIN {
                break;
            }
        }
        registry.sleep.stop_spinning();
        let job = job.or_else(|| self.find_job())?;
        if registry.has_work() {
            registry.notify_one();
        }
        Some(job)
    }
}

enum Idle {
    /// The spinner found this job.
    Job(Work),
    Work,
    Exit,
    Retired,
}

/// Parks an idle, announced worker until `stop_waiting` says it was woken (popped from the idle
/// stack) or has something to do, or until `keep_alive` passed; true if it passed. Checked: a
/// `keep_alive` too long to add to `now` never passes.
///
/// `park` also returns at once for an unpark token left over from a wake-up this worker had
/// already answered (a producer popped it while it was withdrawing to take work it had found
/// itself). Read as "`keep_alive` passed", that stale token would retire an auxiliary thread at
/// once; so a wake-up that finds the worker still idle with nothing to do parks again for the
/// time left.
pub(crate) fn park_idle(
    parker: &Parker,
    keep_alive: Duration,
    mut stop_waiting: impl FnMut() -> bool,
) -> bool {
    let deadline = Instant::now().checked_add(keep_alive);
    loop {
        match deadline {
            Some(deadline) => parker.park_deadline(deadline),
            None => parker.park(),
        }
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            return true;
        }
        if stop_waiting() {
            return false;
        }
    }
}

/// The worker thread's body. Returns true if the thread retired (already left `live`).
pub(crate) fn run(cx: &Rc<WorkerCtx>, parker: &Parker) -> bool {
    CURRENT_PTR.with(|c| c.set(Rc::as_ptr(cx)));
    /// Clears `CURRENT_PTR` however `run` leaves (while `cx` still lives).
    struct ClearPtr;
    impl Drop for ClearPtr {
        fn drop(&mut self) {
            CURRENT_PTR.with(|c| c.set(std::ptr::null()));
        }
    }
    let _clear = ClearPtr;
    CURRENT_REGISTRY.with(|r| r.set(Arc::as_ptr(&cx.registry)));
    let hooks = super::threads::Hooks::start(&cx.registry);
    let retired = loop {
        // The common continuation, a woken future's poll, taken without moving a whole `Work`.
        if cx.has_next.get() {
            if let Some(runnable) = cx.next_poll.take() {
                cx.has_next.set(false);
                if cx.registry.is_stopping() {
                    // Shutdown step 2 (engine README): `shutdown_now` collects it from the deque.
                    cx.deque.push(Work::Poll(runnable));
                    break false;
                }
                cx.run_caught(|| cx.run_poll(runnable));
                continue;
            }
        }
        let next = match cx.take_next() {
            Some(job) => Some(job),
            None => {
                cx.streak.set(0);
                cx.find_job()
            }
        };
        let job = match next {
            Some(job) => job,
            None => match cx.idle(parker) {
                // The spinner's find (`WorkerCtx::spin`).
                Idle::Job(job) => job,
                Idle::Work => continue,
                Idle::Exit => break false,
                Idle::Retired => break true,
            },
        };
        if cx.registry.is_stopping() {
            // Shutdown step 2 (engine README): `shutdown_now` collects it from the deque.
            cx.deque.push(job);
            break false;
        }
        cx.run_caught(|| cx.run_job(job));
    };
    // A worker leaving after `shutdown_now` found it with a job did not go through `idle`.
    cx.registry.finishes_published();
    drop(hooks);
    CURRENT_REGISTRY.with(|r| r.set(std::ptr::null()));
    retired
}

/// Runs `f`, telling the pool that it will block.
///
/// On a keyway worker thread, the work queued behind this worker is handed to other workers at
/// once (and an auxiliary thread is added if no worker is free), instead of waiting for the
/// monitor to notice a blocked worker. Elsewhere it just runs `f`.
///
/// ```
/// let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// let slow = pool.submit(move || keyway::blocking(|| rx.recv().unwrap())).unwrap();
/// // The only core thread is blocked, yet other work still runs.
/// let fast = pool.submit(|| 7).unwrap();
/// assert_eq!(fast.join().unwrap(), 7);
/// tx.send(1).unwrap();
/// assert_eq!(slow.join().unwrap(), 1);
/// ```
#[doc(alias = "block_in_place")]
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    // `f` runs inside `with_current`, which it may call again (a task it runs, a nested
    // `blocking`).
    with_current(|cx| {
        let Some(cx) = cx else {
            return f();
        };
        let slot = &cx.registry.slots[cx.index];
        if slot.blocking.swap(true, Ordering::AcqRel) {
            return f(); // already inside `blocking`
        }
        struct Reset<'a>(&'a AtomicBool);
        impl Drop for Reset<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _reset = Reset(&slot.blocking);
        if let Some(job) = cx.take_next() {
            // Not behind a blocked worker: another one takes it.
            cx.registry.injector.push(job);
        }
        cx.registry.transfer_from(cx.index);
        cx.registry.ensure_threads();
        f()
    })
}
