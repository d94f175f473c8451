//! The adaptive strategy's production loop: Jetty's `AdaptiveExecutionStrategy` ("eat what you
//! kill"), on the lock-free state word of `state.rs`.
//!
//! ```text
//! loop {
//!     task = producer.produce()            // only the owner calls this (Rules 1-2)
//!     None    => go round if asked, else go idle (Rule 4)
//!     Some(t) => match mode(t) {           // Rule 7 (Rule 8 on a non-blocking thread)
//!         PC  => t.run(), keep producing
//!         PIC => invoke_non_blocking(t.run()), keep producing
//!         PEC => executor.execute(t), keep producing; if refused, hold t and run it only
//!                after production is released (Rule 7d)
//!         EPC => production handed to a reserved thread (Rule 5);
//!                t.run(); produce again only if production went idle (Rule 3)
//!     }
//! }
//! ```

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};

use super::counters::{ConsumeMode, Counters};
use super::invocation::{
    invoke_non_blocking, is_non_blocking_invocation, Invocable, InvocationType,
};
use super::producer::Producer;
use super::state::{self, Dispatched, Exhausted, QueuedStart, State};
use super::{DispatchError, DispatchOutcome, Executor, ProduceOutcome};
use crate::loom::cell::UnsafeCell;
use crate::loom::sync::Arc;

/// A task as the [`Executor`] takes it.
pub(super) type Job = Box<dyn FnOnce() + Send + 'static>;

/// PEC tasks the executor refused, held by the owner (Rule 7d).
type Refused = std::collections::VecDeque<Job>;

/// What the strategy handles, their runs and the executor's threads share.
pub(super) struct Inner<P, E> {
    /// Who owns production (Rules 1–6).
    pub(super) state: State,
    /// Per-mode counts (Rule 10).
    pub(super) counters: Counters,
    pub(super) executor: E,
    /// Touched only by the owner of production (Rule 1).
    producer: UnsafeCell<P>,
}

// SAFETY: the only field that is not `Sync` by itself is `producer`, and only the thread that owns
// production touches it (Rule 1), the owners one after the other in happens-before order (Rule 2).
// So `P` only ever moves between threads, which `P: Send` allows.
unsafe impl<P: Send, E: Sync> Sync for Inner<P, E> {}

impl<P, E> Inner<P, E>
where
    P: Producer,
    E: Executor,
{
    pub(super) fn new(producer: P, executor: E) -> Self {
        Inner {
            state: State::new(),
            counters: Counters::default(),
            executor,
            producer: UnsafeCell::new(producer),
        }
    }

    /// `produce()` on the calling thread.
    pub(super) fn produce(this: &Arc<Self>) -> ProduceOutcome {
        match this.state.request() {
            state::Requested::Acquired => Self::run_owned(this),
            state::Requested::Signalled => ProduceOutcome::Signalled,
        }
    }

    /// `dispatch()`: wake production without running it here (Rule 6).
    pub(super) fn dispatch(this: &Arc<Self>) -> Result<DispatchOutcome, DispatchError> {
        match this.state.dispatch() {
            Dispatched::Pending => Ok(DispatchOutcome::Pending),
            Dispatched::Signalled => Ok(DispatchOutcome::Signalled),
            Dispatched::Launch => {
                let queued = QueuedRun(Some(Arc::clone(this)));
                let run: Job = Box::new(move || queued.start());
                // An idle reserved thread starts now; otherwise the run waits in the queue, and
                // a produce() or an EPC retake may take production before it (Rule 6).
                let run = match this.executor.try_execute(run) {
                    Ok(()) => return Ok(DispatchOutcome::Started),
                    Err(run) => run,
                };
                match this.executor.execute(run) {
                    Ok(()) => Ok(DispatchOutcome::Queued),
                    Err(run) => {
                        drop(run); // clears `QUEUED` (`QueuedRun`'s drop)
                        Err(DispatchError::new())
                    }
                }
            }
        }
    }

    /// A run launched by `dispatch` starts (Rule 6).
    fn run_queued(this: &Arc<Self>) {
        if this.state.start_queued() == QueuedStart::Acquired {
            Self::run_owned(this);
        }
    }

    /// A run handed to a reserved thread by an EPC hand-off starts: it takes production (Rule 5).
    fn run_handover(this: &Arc<Self>) {
        this.state.take_handover();
        Self::run_owned(this);
    }

    /// The production loop. The calling thread owns production on entry (Rule 1); on return it
    /// no longer does.
    fn run_owned(this: &Arc<Self>) -> ProduceOutcome {
        // Rule 8: a thread in non-blocking mode stays so; read once, it cannot change under us.
        let non_blocking = is_non_blocking_invocation();
        // Rule 7d: tasks the executor refused, held until the executor takes them or this
        // thread has released production (empty, and not allocated, unless a pool is full).
        let mut refused = Refused::new();
        loop {
            this.retry_refused(&mut refused);
            let task = match Self::produce_one(this, &mut refused) {
                Some(task) => task,
                None => match this.state.exhausted() {
                    Exhausted::GoRound => continue,
                    Exhausted::Released if refused.is_empty() => return ProduceOutcome::Exhausted,
                    Exhausted::Released => {
                        // Production is released: now the refused tasks may block here.
                        this.run_refused(&mut refused);
                        if this.state.try_retake() {
                            continue;
                        }
                        return ProduceOutcome::Exhausted;
                    }
                },
            };
            match task.invocation_type() {
                InvocationType::NonBlocking => {
                    this.counters.count(ConsumeMode::ProduceConsume);
                    this.run_in_place(task, ConsumeMode::ProduceConsume);
                }
                // Rule 8: never block in place on a non-blocking thread, never hand off from it.
                InvocationType::Blocking if non_blocking => this.execute(task, &mut refused),
                InvocationType::Either if non_blocking => this.invoke(task),
                invocation_type => {
                    if Self::hand_off(this) {
                        // Rule 7b: someone else produces now; this thread eats what it killed.
                        this.counters.count(ConsumeMode::ExecuteProduceConsume);
                        let mut task = Some(task);
                        this.executor.run_blocking(&mut || {
                            if let Some(task) = task.take() {
                                this.run_in_place(task, ConsumeMode::ExecuteProduceConsume);
                            }
                        });
                        if !this.state.try_retake() {
                            return ProduceOutcome::HandedOff;
                        }
                    } else if invocation_type == InvocationType::Either {
                        this.invoke(task);
                    } else {
                        this.execute(task, &mut refused);
                    }
                }
            }
        }
    }

    /// One call to the producer, by the owner. If it panics, production is released first
    /// (Rule 9), so the strategy stays usable, and the panic goes on to the caller.
    /// The refused tasks held by the owner are run once production is released, before the
    /// panic goes on: they were accepted from the producer and must not be lost.
    #[inline(always)]
    fn produce_one(this: &Arc<Self>, refused: &mut Refused) -> Option<P::Task> {
        let produced = panic::catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the calling thread owns production (Rule 1): no other thread touches the
            // producer until this thread gives production up, and the previous owner's accesses
            // happen-before ours (Rule 2).
            this.producer
                .with_mut(|producer| unsafe { (*producer).produce() })
        }));
        match produced {
            Ok(task) => task,
            Err(payload) => {
                tracing::error!(
                    panic = panic_message(&*payload),
                    "keyway strategy: the producer panicked; production released"
                );
                if this.state.release_after_panic() {
                    // A request arrived while we produced: pass it on, or it would be lost.
                    let _ = Self::dispatch(this);
                }
                this.run_refused(refused);
                panic::resume_unwind(payload)
            }
        }
    }

    /// Rule 5: offers production to an idle reserved thread. True if one took it: the calling
    /// thread no longer owns production. False if none was idle: it still does.
    fn hand_off(this: &Arc<Self>) -> bool {
        let inner = Arc::clone(this);
        let run: Job = Box::new(move || Self::run_handover(&inner));
        this.state.begin_handover();
        match this.executor.try_execute(run) {
            Ok(()) => true,
            Err(run) => {
                this.state.take_handover();
                drop(run);
                false
            }
        }
    }

    /// PEC: the task goes to the executor. If refused, it is held (Rule 7d): it may block, so
    /// it must not run here while this thread owns production.
    fn execute(&self, task: P::Task, refused: &mut Refused) {
        self.counters.count(ConsumeMode::ProduceExecuteConsume);
        let job: Job = Box::new(move || task.run());
        if let Err(job) = self.executor.execute(job) {
            self.counters.count_refused();
            refused.push_back(job);
        }
    }

    /// Offers the held refused tasks to the executor again, oldest first, until it refuses.
    fn retry_refused(&self, refused: &mut Refused) {
        while let Some(job) = refused.pop_front() {
            if let Err(job) = self.executor.execute(job) {
                refused.push_front(job);
                return;
            }
        }
    }

    /// Runs the held refused tasks here. Only after production was released (Rule 7d).
    #[cold]
    fn run_refused(&self, refused: &mut Refused) {
        for job in refused.drain(..) {
            self.run_in_place(job, ConsumeMode::ProduceExecuteConsume);
        }
    }

    /// PIC: runs an `Either` task here in non-blocking mode.
    fn invoke(&self, task: P::Task) {
        self.counters.count(ConsumeMode::ProduceInvokeConsume);
        invoke_non_blocking(|| self.run_in_place(task, ConsumeMode::ProduceInvokeConsume));
    }

    /// Runs a task on this thread; a panic is caught, counted and reported (Rule 9).
    #[inline(always)]
    fn run_in_place<T: Invocable>(&self, task: T, mode: ConsumeMode) {
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| task.run())) {
            self.counters.count_panic();
            tracing::error!(
                mode = mode.abbreviation(),
                panic = panic_message(&*payload),
                "keyway strategy: a task run in place panicked"
            );
        }
    }

    /// The state word, named (for `Debug`).
    pub(super) fn describe_state(&self) -> String {
        state::describe(self.state.load())
    }
}

/// The production run `dispatch` launches (Rule 6). `QUEUED` belongs to it until it starts: if
/// it is dropped unrun instead — refused by the executor, or handed back by a pool's
/// `shutdown_now` and dropped — its drop clears `QUEUED`, so later `dispatch` calls launch (and
/// learn of a refusal) instead of answering `Pending` for a run that will never come.
struct QueuedRun<P: Producer, E: Executor>(Option<Arc<Inner<P, E>>>);

impl<P: Producer, E: Executor> QueuedRun<P, E> {
    fn start(mut self) {
        if let Some(inner) = self.0.take() {
            Inner::run_queued(&inner);
        }
    }
}

impl<P: Producer, E: Executor> Drop for QueuedRun<P, E> {
    fn drop(&mut self) {
        if let Some(inner) = self.0.take() {
            inner.state.abandon_queued();
        }
    }
}

/// The message of a panic payload, if it is a string.
fn panic_message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("<non-string panic payload>")
}
