//! The unit of work the pool moves around, and what it tells its submitter.
//!
//! The bottom layer that runs anything (only `error` and the `loom` shim are below it): the
//! engine, futures and lanes above all move tasks of this module.
//!
//! Every accepted task is a [`Runnable`]: it is either run exactly once, or abandoned exactly once
//! with a reason (its handle then says why). Nothing else happens to a task, which is what makes
//! "no accepted task is ever lost" checkable.
//!
//! * `raw` — [`Task`], a type-erased `Runnable` as the pool queues it;
//! * `inline` — the store under it (and under the scheduler's waiting jobs): a value kept in
//!   place when small and boxed otherwise, with the numbered rules its `unsafe` code cites;
//! * `spill` — the recycled cells the store keeps a value of up to 64 bytes in when it does not
//!   fit in place, and a submitted future up to 512 bytes (`future::launch`);
//! * `handle`, `abort` — what the submitter holds: the task's handle and its abort switch;
//! * `pending` — what a task handed back by `shutdown_now` knows (its contexts, its message).

mod abort;
mod contain;
mod handle;
mod inline;
mod pending;
mod raw;
mod spill;

pub use abort::AbortHandle;
pub(crate) use contain::{contain, drop_quietly, wake_quietly};
pub use handle::TaskHandle;
pub(crate) use handle::{Completer, WithHandle};
#[cfg(test)]
pub(crate) use inline::{fits, WORDS};
pub(crate) use inline::{InlineBox, LiveValue, LiveValueRef, VTable, VTableFor};
pub(crate) use pending::{ContextOf, LaneRefs, PendingMessage, Unstarted};
pub(crate) use raw::{abandon_contained, drop_contained, run_contained, Task};
#[cfg(test)]
pub(crate) use spill::fresh_cells;
pub(crate) use spill::trim_idle as trim_spilled_cells;
pub(crate) use spill::{alloc_for as alloc_recycled, free_for as free_recycled};

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::panic_text;

/// A panic caught while running a task, reported to the pool's panic hook (and returned by
/// [`PendingTask::run`]).
///
/// It says what panicked ([`message`](PanicReport::message)), where
/// ([`thread_name`](PanicReport::thread_name)), in which context
/// ([`context_hash`](PanicReport::context_hash), comparable with
/// [`Pool::context_hash`](crate::Pool::context_hash)), and carries the panic's payload when no
/// task handle took it ([`with_payload`](PanicReport::with_payload),
/// [`take_payload`](PanicReport::take_payload)).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let pool = keyway::Pool::builder()
///     .thread_name("orders")
///     .panic_hook(move |report: &keyway::PanicReport| {
///         let code = report.with_payload(|p| p.downcast_ref::<u32>().copied()).flatten();
///         log.lock().unwrap().push((
///             report.message().to_owned(),
///             report.context_hash(),
///             report.thread_name().map(str::to_owned),
///             code,
///         ));
///     })
///     .build()
///     .unwrap();
/// // A task with a handle: the handle gets the payload, the hook the rest.
/// let handle = pool.submit_sequential("client-7", || -> () { panic!("boom") }).unwrap();
/// assert!(handle.join().unwrap_err().is_panic());
/// // A task without a handle: the payload (here a `u32`) is the hook's.
/// pool.execute(|| std::panic::panic_any(7u32)).unwrap();
/// pool.shutdown();
/// let mut seen = seen.lock().unwrap().clone();
/// seen.sort_by_key(|s| s.3);
/// let (message, context, thread, code) = &seen[0];
/// assert_eq!(message, "boom");
/// assert_eq!(*context, Some(pool.context_hash(&"client-7")));
/// assert!(thread.as_deref().unwrap().starts_with("orders-"));
/// assert_eq!(*code, None);
/// assert_eq!(seen[1].1, None); // a plain task has no context
/// assert_eq!(seen[1].3, Some(7));
/// ```
#[derive(Clone)]
pub struct PanicReport {
    message: String,
    context_hash: Option<u64>,
    thread_name: Option<String>,
    /// Shared by clones; behind a mutex so that the report stays `Sync` (a payload need not be).
    payload: Option<Arc<Mutex<Option<Payload>>>>,
}

type Payload = Box<dyn Any + Send + 'static>;

impl PanicReport {
    /// A report without the payload (a handle has it, or there is none), made on the thread
    /// that caught the panic.
    pub(crate) fn new(message: String) -> Self {
        PanicReport {
            message,
            context_hash: None,
            thread_name: std::thread::current().name().map(str::to_owned),
            payload: None,
        }
    }

    /// A report that keeps the panic's payload (nobody else will see it).
    pub(crate) fn from_payload(payload: Payload) -> Self {
        let mut report = PanicReport::new(panic_text(&*payload));
        report.payload = Some(Arc::new(Mutex::new(Some(payload))));
        report
    }

    /// The report of a task that ran in the lane of the context hashing to `hash`.
    pub(crate) fn in_context(mut self, hash: u64) -> Self {
        self.set_context(hash);
        self
    }

    /// [`in_context`](Self::in_context) in place (a report is moved by value at every call).
    pub(crate) fn set_context(&mut self, hash: u64) {
        self.context_hash.get_or_insert(hash);
    }

    /// The panic's message (`"<non-string panic payload>"` when the payload is not a string).
    ///
    /// See the [type's example](PanicReport#example).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The hash of the context whose lane ran the task, as
    /// [`Pool::context_hash`](crate::Pool::context_hash) computes it; `None` for a task outside
    /// any lane (`execute`, `submit`, `try_execute`, a multi-key task) or one run by the caller
    /// of [`PendingTask::run`].
    ///
    /// See the [type's example](PanicReport#example).
    pub fn context_hash(&self) -> Option<u64> {
        self.context_hash
    }

    /// The name of the thread the panic happened on (pool threads are named after
    /// [`PoolBuilder::thread_name`](crate::PoolBuilder::thread_name)); `None` for an unnamed
    /// thread.
    ///
    /// See the [type's example](PanicReport#example).
    pub fn thread_name(&self) -> Option<&str> {
        self.thread_name.as_deref()
    }

    /// Calls `f` with the panic's payload (the value given to `panic!` or
    /// [`panic_any`](std::panic::panic_any)) and returns its result; `None` when the report has
    /// no payload: the task's [`TaskHandle`] took it (join the handle to get it), or
    /// [`take_payload`](PanicReport::take_payload) already did.
    ///
    /// See the [type's example](PanicReport#example).
    pub fn with_payload<R>(&self, f: impl FnOnce(&(dyn Any + Send)) -> R) -> Option<R> {
        let slot = self.payload.as_ref()?.lock();
        slot.as_deref().map(f)
    }

    /// Takes the panic's payload out of the report (and out of its clones), for
    /// [`resume_unwind`](std::panic::resume_unwind) or to keep it; `None` as for
    /// [`with_payload`](PanicReport::with_payload).
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
    /// let (started_tx, started) = std::sync::mpsc::channel();
    /// let (release, gate) = std::sync::mpsc::channel::<()>();
    /// pool.execute(move || { started_tx.send(()).unwrap(); gate.recv().unwrap(); }).unwrap();
    /// started.recv().unwrap(); // the only worker is busy: the next task waits
    /// pool.execute(|| std::panic::panic_any(404u16)).unwrap();
    /// let stopper = { let pool = pool.clone(); std::thread::spawn(move || pool.shutdown_now()) };
    /// while !pool.is_shutdown() { std::thread::yield_now(); }
    /// release.send(()).unwrap();
    /// let pending = stopper.join().unwrap();
    /// let report = pending.into_iter().next().unwrap().run().unwrap_err();
    /// let payload = report.take_payload().unwrap();
    /// assert_eq!(payload.downcast_ref::<u16>(), Some(&404));
    /// assert!(report.take_payload().is_none());
    /// ```
    pub fn take_payload(&self) -> Option<Box<dyn Any + Send + 'static>> {
        self.payload.as_ref()?.lock().take()
    }
}

impl std::fmt::Debug for PanicReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PanicReport")
            .field("message", &self.message)
            .field("context_hash", &self.context_hash)
            .field("thread_name", &self.thread_name)
            .field("has_payload", &self.with_payload(|_| ()).is_some())
            .finish()
    }
}

impl std::fmt::Display for PanicReport {
    /// `task panicked on thread 'NAME' in context 0x…: MESSAGE`.
    ///
    /// ```
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let pool = keyway::Pool::builder()
    ///     .thread_name("w")
    ///     .panic_hook(move |r: &keyway::PanicReport| tx.send(r.to_string()).unwrap())
    ///     .build()
    ///     .unwrap();
    /// pool.execute(|| panic!("oops")).unwrap();
    /// let line = rx.recv().unwrap();
    /// assert!(line.starts_with("task panicked on thread 'w-"), "{line}");
    /// assert!(line.ends_with(": oops"), "{line}");
    /// # pool.shutdown();
    /// ```
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("task panicked")?;
        if let Some(name) = &self.thread_name {
            write!(f, " on thread '{name}'")?;
        }
        if let Some(hash) = self.context_hash {
            write!(f, " in context {hash:#018x}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Why an accepted task is dropped without running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Abandon {
    /// A newer coalescing task of its lane replaced it.
    Coalesced,
    /// It was handed back at `shutdown_now` and the caller dropped it.
    Rejected,
    /// Its timeout passed before it could start (the scheduler's executors).
    TimedOut,
}

/// A task the pool holds: run once, or abandoned once. Stored type-erased as a [`Task`].
pub(crate) trait Runnable: Send + Sized {
    /// Runs the task, catching a panic; a panic comes back as its report.
    fn run(self) -> Result<(), PanicReport>;
    /// Drops the task without running it, telling its handle (if any) why.
    fn abandon(self, why: Abandon);
}

/// A closure submitted without a handle.
pub(crate) struct Plain<F>(pub(crate) F);

impl<F: FnOnce() + Send> Runnable for Plain<F> {
    fn run(self) -> Result<(), PanicReport> {
        let f = self.0;
        catch_unwind(AssertUnwindSafe(f)).map_err(PanicReport::from_payload)
    }

    fn abandon(self, _why: Abandon) {}
}

/// A task that was accepted but had not started when the pool was stopped with
/// [`Pool::shutdown_now`](crate::Pool::shutdown_now).
///
/// The caller may [`run`](PendingTask::run) it (on its own thread) or drop it; dropping tells the
/// task's handle, if it has one, [`TaskError::Rejected`](crate::TaskError::Rejected).
///
/// ```
/// use std::sync::mpsc::channel;
/// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
/// let (started_tx, started) = channel();
/// let (release, release_rx) = channel::<()>();
/// pool.execute(move || {
///     started_tx.send(()).unwrap();
///     release_rx.recv().unwrap();
/// })
/// .unwrap();
/// started.recv().unwrap(); // the only worker is now busy
/// let handle = pool.submit_sequential("ctx", || 42).unwrap();
/// let stopper = { let pool = pool.clone(); std::thread::spawn(move || pool.shutdown_now()) };
/// while !pool.is_shutdown() { std::thread::yield_now(); }
/// release.send(()).unwrap(); // let the running task finish
/// let pending = stopper.join().unwrap();
/// assert_eq!(pending.len(), 1);
/// for task in pending { task.run().unwrap(); }
/// assert_eq!(handle.join().unwrap(), 42);
/// ```
pub struct PendingTask {
    task: Option<Unstarted>,
    /// The lane(s) the task was queued in (none for a plain task); see `pending.rs`.
    contexts: LaneRefs,
}

impl PendingTask {
    pub(crate) fn new(task: Task) -> Self {
        PendingTask {
            task: Some(Unstarted::Task(task)),
            contexts: LaneRefs::new(),
        }
    }

    /// Runs the task on the calling thread. A panic is caught: it goes to the task's handle, if
    /// it has one, and comes back here as its report.
    ///
    /// See [`PendingTask`]'s example (and [`PanicReport::take_payload`]'s, for a task that panics).
    pub fn run(mut self) -> Result<(), PanicReport> {
        match self.task.take() {
            Some(work) => work.run(),
            None => Ok(()),
        }
    }
}

impl Drop for PendingTask {
    fn drop(&mut self) {
        if let Some(work) = self.task.take() {
            work.abandon(Abandon::Rejected);
        }
    }
}

impl std::fmt::Debug for PendingTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingTask")
            .field("context_hashes", &self.context_hashes().collect::<Vec<_>>())
            .field("message", &matches!(self.task, Some(Unstarted::Message(_))))
            .finish_non_exhaustive()
    }
}
