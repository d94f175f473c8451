//! The execution strategy: Jetty's adaptive "eat what you kill".
//!
//! The top layer, beside `schedule` and `sequencer`: the pool is one [`Executor`] among others,
//! used through its public face.
//!
//! A [`Producer`] yields tasks (a selector's ready connections, a connection's frames, …); an
//! [`AdaptiveStrategy`] consumes them. A task consumed by the thread that produced it runs with
//! a hot cache, but a thread busy consuming is not producing, and if every thread consumes a task
//! that waits for something only a later produced task delivers, nothing is ever produced again:
//! Jetty's HTTP/2 flow-control deadlock. So each [`Invocable`] task declares an
//! [`InvocationType`], and the strategy picks one of four [`ConsumeMode`]s per task (the table is in
//! [`AdaptiveStrategy`]'s docs, so that users see it).
//!
//! Only one thread produces at a time, and production never stops while work is waiting for
//! it: `README.md` beside this file gives the protocol as numbered rules, which comments in the
//! code cite as *Rule N*. In short, a lock-free state word (`IDLE`, `PRODUCING`, `HANDOVER`, plus
//! `REPRODUCE` and `QUEUED` flags) says who owns the producer; a thread that wants production
//! while someone owns it never waits: it sets `REPRODUCE`, and the owner calls the producer again
//! before it may go idle.
//!
//! # Files
//! - `adaptive.rs` — the production loop and the mode choice (the Jetty algorithm);
//! - `state.rs` — the state word and its transitions;
//! - `invocation.rs` — [`InvocationType`], [`Invocable`], [`DeclaredTask`], non-blocking mode;
//! - `producer.rs` — [`Producer`];
//! - `counters.rs` — [`ConsumeMode`], [`ModeCounts`];
//! - `test.rs`, `loom_strategy.rs` — the tests and the loom models.
//!
//! # Example
//!
//! ```
//! use keyway::{AdaptiveStrategy, DeclaredTask, InvocationType};
//! use std::sync::mpsc;
//! // keyway's pool is an `Executor`; with no reserved threads it never hands production off.
//! let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
//!
//! let (done_tx, done) = mpsc::channel();
//! let mut frames = vec!["DATA", "WINDOW_UPDATE", "HEADERS"];
//! let producer = move || {
//!     let frame = frames.pop()?;
//!     let done_tx = done_tx.clone();
//!     let handle = move || done_tx.send(frame).unwrap();
//!     // Control frames never block; requests may.
//!     Some(match frame {
//!         "WINDOW_UPDATE" => DeclaredTask::boxed(InvocationType::NonBlocking, handle),
//!         _ => DeclaredTask::boxed(InvocationType::Blocking, handle),
//!     })
//! };
//! let strategy = AdaptiveStrategy::new(producer, pool);
//! strategy.produce(); // produce on this thread until the producer is empty
//! let mut seen: Vec<_> = done.iter().take(3).collect();
//! seen.sort();
//! assert_eq!(seen, ["DATA", "HEADERS", "WINDOW_UPDATE"]);
//! let counts = strategy.counts();
//! assert_eq!((counts.produce_consume, counts.produce_execute_consume), (1, 2));
//! ```

mod adaptive;
mod counters;
mod invocation;
mod on_pool;
mod producer;
mod state;

#[cfg(all(test, not(loom)))]
mod test;

#[cfg(all(test, loom))]
mod loom_strategy;

pub use self::counters::{ConsumeMode, ModeCounts};
pub use self::invocation::{
    invoke_non_blocking, is_non_blocking_invocation, DeclaredTask, Invocable, InvocationType,
};
pub use self::producer::Producer;

use std::fmt;

use self::adaptive::Inner;
use crate::loom::sync::Arc;

/// What the strategy needs from a pool: `keyway::Pool` implements it.
///
/// ```
/// use keyway::Executor;
/// /// Runs each task on a new thread; has no reserved threads.
/// struct Threads;
/// impl Executor for Threads {
///     fn execute(&self, task: Box<dyn FnOnce() + Send>) -> Result<(), Box<dyn FnOnce() + Send>> {
///         std::thread::spawn(task);
///         Ok(())
///     }
///     fn try_execute(&self, task: Box<dyn FnOnce() + Send>) -> Result<(), Box<dyn FnOnce() + Send>> {
///         Err(task) // never queues: no idle reserved thread, so the task comes back at once
///     }
/// }
/// let (tx, rx) = std::sync::mpsc::channel();
/// assert!(Threads.try_execute(Box::new(|| ())).is_err());
/// assert!(Threads.execute(Box::new(move || tx.send(1).unwrap())).is_ok());
/// assert_eq!(rx.recv().unwrap(), 1);
/// ```
pub trait Executor: Send + Sync + 'static {
    /// Queue `task` to run on a pool thread. Err gives the task back (pool shut down or full).
    ///
    /// See [`Executor`]'s example.
    #[allow(clippy::type_complexity)]
    fn execute(
        &self,
        task: Box<dyn FnOnce() + Send + 'static>,
    ) -> Result<(), Box<dyn FnOnce() + Send + 'static>>;

    /// Hand `task` to an idle *reserved* thread that starts it now; never queues. Err gives it
    /// back at once.
    ///
    /// The strategy relies on "starts it now": requests for production made while it hands
    /// production over this way are left to the thread that takes it, so that thread must not
    /// wait in a queue: a queued hand-off would leave those requests unserved until it starts.
    /// An `Err` must mean the task will never run.
    ///
    /// See [`Executor`]'s example.
    #[allow(clippy::type_complexity)]
    fn try_execute(
        &self,
        task: Box<dyn FnOnce() + Send + 'static>,
    ) -> Result<(), Box<dyn FnOnce() + Send + 'static>>;

    /// Runs `task` (once) on the calling thread, knowing that it may block: the strategy calls
    /// this for a task it consumes in place after handing production off (EPC).
    ///
    /// The default just calls `task`. `keyway::Pool` runs it inside `keyway::blocking`, so that
    /// tasks the producing thread queued on its own worker just before (PEC) move to other
    /// workers at once instead of waiting behind the blocked one.
    ///
    /// ```
    /// use keyway::Executor;
    /// // keyway's pool is an `Executor`; with no reserved threads it never hands production off.
    /// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
    /// let mut ran = 0;
    /// pool.run_blocking(&mut || ran += 1);
    /// assert_eq!(ran, 1);
    /// ```
    fn run_blocking(&self, task: &mut dyn FnMut()) {
        task()
    }
}

/// A shared executor is an executor.
///
/// ```
/// use keyway::Executor;
/// // keyway's pool is an `Executor`; with no reserved threads it never hands production off.
/// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
/// let shared = std::sync::Arc::new(pool);
/// assert!(shared.try_execute(Box::new(|| ())).is_err());
/// ```
impl<E: Executor> Executor for std::sync::Arc<E> {
    fn execute(
        &self,
        task: Box<dyn FnOnce() + Send + 'static>,
    ) -> Result<(), Box<dyn FnOnce() + Send + 'static>> {
        (**self).execute(task)
    }

    fn try_execute(
        &self,
        task: Box<dyn FnOnce() + Send + 'static>,
    ) -> Result<(), Box<dyn FnOnce() + Send + 'static>> {
        (**self).try_execute(task)
    }

    fn run_blocking(&self, task: &mut dyn FnMut()) {
        (**self).run_blocking(task)
    }
}

/// Jetty's adaptive execution strategy over a [`Producer`] and an [`Executor`].
///
/// Each produced task is consumed in the [`ConsumeMode`] its [`InvocationType`] and the executor's
/// reserved threads allow: in place on the producing thread when that cannot stop production,
/// on the pool otherwise. Only one thread calls the producer at a time, and with every pool
/// thread blocked in consumed tasks, production still goes on.
///
/// | task | mode | what happens |
/// |---|---|---|
/// | `NonBlocking` | PC, produce-consume | run in place, keep producing |
/// | `Blocking` or `Either`, a reserved thread idle | EPC, execute-produce-consume | production handed to the reserved thread ([`Executor::try_execute`]); the task runs in place |
/// | `Either`, no reserved thread idle | PIC, produce-invoke-consume | run in place in non-blocking mode ([`is_non_blocking_invocation`]), keep producing |
/// | `Blocking`, no reserved thread idle | PEC, produce-execute-consume | given to the pool ([`Executor::execute`]), keep producing |
///
/// On a thread that is itself in non-blocking mode (a strategy run by an `Either` task of
/// another), `Blocking` goes PEC and `Either` PIC: such a thread never blocks and never hands
/// production off.
///
/// **Pacing is the producer's.** The strategy never stops producing to wait for the executor:
/// a thread waiting there could be the one whose production the blocked tasks wait for. So
/// when tasks go PEC faster than the pool runs them, they queue on the pool (or, refused by a
/// pool with a [`capacity`](crate::PoolBuilder::capacity), are held by the producing thread,
/// which offers them again as it goes and runs the rest itself once it has released
/// production), and memory grows with that backlog. A producer whose source
/// can outrun the pool bounds it itself: it returns `None` while enough of its tasks are in
/// flight, and the last of them to finish calls [`dispatch`](AdaptiveStrategy::dispatch).
///
/// Cloning is cheap and gives another handle to the same strategy, for example so that an I/O
/// thread can [`dispatch`](AdaptiveStrategy::dispatch) when data arrives. Runs queued on the
/// executor hold a handle too, so the producer is dropped when the last handle and the last
/// queued run are gone.
///
/// ```
/// use keyway::{AdaptiveStrategy, DeclaredTask};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// // keyway's pool is an `Executor`; with no reserved threads it never hands production off.
/// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
///
/// let eaten = Arc::new(AtomicUsize::new(0));
/// let counter = eaten.clone();
/// let mut left = 1000;
/// let strategy = AdaptiveStrategy::new(
///     move || {
///         left -= 1;
///         let counter = counter.clone();
///         (left >= 0).then(|| DeclaredTask::non_blocking(move || {
///             counter.fetch_add(1, Ordering::Relaxed);
///         }))
///     },
///     pool,
/// );
/// strategy.produce();
/// // Non-blocking tasks are eaten by the thread that killed them.
/// assert_eq!(eaten.load(Ordering::Relaxed), 1000);
/// assert_eq!(strategy.counts().produce_consume, 1000);
/// ```
pub struct AdaptiveStrategy<P, E> {
    inner: Arc<Inner<P, E>>,
}

impl<P, E> AdaptiveStrategy<P, E>
where
    P: Producer,
    E: Executor,
{
    /// A strategy consuming `producer`'s tasks on `executor`. Nothing is produced until
    /// [`produce`](AdaptiveStrategy::produce) or [`dispatch`](AdaptiveStrategy::dispatch).
    ///
    /// ```
    /// // keyway's pool is an `Executor`; with no reserved threads it never hands production off.
    /// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
    /// let strategy = keyway::AdaptiveStrategy::new(|| None::<fn()>, pool);
    /// assert_eq!(strategy.counts(), keyway::ModeCounts::default());
    /// ```
    pub fn new(producer: P, executor: E) -> Self {
        AdaptiveStrategy {
            inner: Arc::new(Inner::new(producer, executor)),
        }
    }

    /// Produces on the calling thread, consuming each task in its [`ConsumeMode`], until the producer
    /// returns `None` with no request pending, or until production is handed to a reserved
    /// thread and this thread has consumed the task it produced (and found production busy).
    ///
    /// If another thread is producing, returns [`ProduceOutcome::Signalled`] at once: that thread
    /// calls the producer at least once more after this call. `produce` never waits for another
    /// producer, so it is the way for a thread that must not rely on the pool (an I/O thread
    /// that just read data) to make sure production happens.
    ///
    /// If the producer panics, production is released and the panic propagates from here;
    /// panics in tasks run in place are caught and counted ([`ModeCounts::panicked`]).
    ///
    /// ```
    /// use keyway::{AdaptiveStrategy, DeclaredTask, ProduceOutcome};
    /// // keyway's pool is an `Executor`; with no reserved threads it never hands production off.
    /// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
    /// let me = std::thread::current().id();
    /// let mut once = Some(DeclaredTask::non_blocking(move || assert_eq!(std::thread::current().id(), me)));
    /// let strategy = AdaptiveStrategy::new(move || once.take(), pool);
    /// assert_eq!(strategy.produce(), ProduceOutcome::Exhausted);
    /// assert_eq!(strategy.counts().produce_consume, 1); // ran here, on the producing thread
    /// ```
    pub fn produce(&self) -> ProduceOutcome {
        Inner::produce(&self.inner)
    }

    /// Wakes production without running it on the calling thread ("new data arrived").
    ///
    /// If a thread is producing, it is told to call the producer once more before it stops
    /// ([`DispatchOutcome::Signalled`]); no second producer runs. If nobody is, a production run is handed
    /// to an idle reserved thread ([`DispatchOutcome::Started`]) or else queued on the executor
    /// ([`DispatchOutcome::Queued`]); if such a run is already queued, it will do ([`DispatchOutcome::Pending`]).
    ///
    /// A queued run waits for a free pool thread; [`produce`](AdaptiveStrategy::produce) does
    /// not. Err if the executor refused the run (shut down or full): nothing was queued, and
    /// the wake-up (with any that `dispatch` calls merged into it meanwhile) is not served;
    /// call `produce` instead.
    ///
    /// ```
    /// use keyway::{AdaptiveStrategy, DeclaredTask, DispatchOutcome};
    /// // keyway's pool is an `Executor`; with no reserved threads it never hands production off.
    /// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let mut once = Some(DeclaredTask::non_blocking(move || tx.send(std::thread::current().id()).unwrap()));
    /// let strategy = AdaptiveStrategy::new(move || once.take(), pool);
    /// assert_eq!(strategy.dispatch().unwrap(), DispatchOutcome::Queued); // the pool has no reserved thread
    /// assert_ne!(rx.recv().unwrap(), std::thread::current().id()); // produced and eaten elsewhere
    /// ```
    pub fn dispatch(&self) -> Result<DispatchOutcome, DispatchError> {
        Inner::dispatch(&self.inner)
    }

    /// How many tasks went each way so far.
    ///
    /// ```
    /// use keyway::{AdaptiveStrategy, DeclaredTask};
    /// use keyway::InvocationType::{Blocking, Either};
    /// // keyway's pool is an `Executor`; with no reserved threads it never hands production off.
    /// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
    /// let mut tasks = vec![DeclaredTask::boxed(Blocking, || ()), DeclaredTask::boxed(Either, || ())];
    /// let strategy = AdaptiveStrategy::new(move || tasks.pop(), pool);
    /// strategy.produce();
    /// let counts = strategy.counts();
    /// // No reserved thread: the Either task ran here in non-blocking mode, the blocking one went
    /// // to the executor.
    /// assert_eq!((counts.produce_invoke_consume, counts.produce_execute_consume), (1, 1));
    /// ```
    pub fn counts(&self) -> ModeCounts {
        self.inner.counters.snapshot()
    }
}

impl<P, E> Clone for AdaptiveStrategy<P, E> {
    /// Another handle to the same strategy.
    fn clone(&self) -> Self {
        AdaptiveStrategy {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<P, E> fmt::Debug for AdaptiveStrategy<P, E>
where
    P: Producer,
    E: Executor,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveStrategy")
            .field("state", &self.inner.describe_state())
            .field("counts", &self.counts())
            .finish()
    }
}

/// How a call to [`AdaptiveStrategy::produce`] ended.
///
/// ```
/// use keyway::{AdaptiveStrategy, ProduceOutcome};
/// // keyway's pool is an `Executor`; with no reserved threads it never hands production off.
/// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
/// let strategy = AdaptiveStrategy::new(|| None::<fn()>, pool);
/// assert_eq!(strategy.produce(), ProduceOutcome::Exhausted);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProduceOutcome {
    /// This thread produced until the producer returned `None` with no request pending;
    /// production is idle (or was taken since by someone else).
    Exhausted,
    /// This thread handed production to a reserved thread, consumed the task it had produced
    /// (EPC), and found production busy afterwards: another thread produces now.
    HandedOff,
    /// Another thread was producing; it will call the producer again after this call. This
    /// thread did nothing else.
    Signalled,
}

/// What [`AdaptiveStrategy::dispatch`] did.
///
/// ```
/// use keyway::{AdaptiveStrategy, DispatchOutcome};
/// // keyway's pool is an `Executor`; with no reserved threads it never hands production off.
/// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
/// let (go_tx, go) = std::sync::mpsc::channel::<()>();
/// let mut first = true;
/// let strategy = AdaptiveStrategy::new(
///     move || {
///         if std::mem::take(&mut first) {
///             go.recv().unwrap(); // hold production until the test has dispatched twice
///         }
///         None::<fn()>
///     },
///     pool,
/// );
/// assert_eq!(strategy.dispatch().unwrap(), DispatchOutcome::Queued);
/// // Queued and not started yet, or already producing: either way no second run is queued.
/// assert!(matches!(strategy.dispatch().unwrap(), DispatchOutcome::Pending | DispatchOutcome::Signalled));
/// go_tx.send(()).unwrap();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DispatchOutcome {
    /// Nobody was producing: a production run was handed to an idle reserved thread, which
    /// started it at once.
    Started,
    /// Nobody was producing and no reserved thread was idle: a production run was queued on the
    /// executor.
    Queued,
    /// A production run was already queued and had not started: it will call the producer after
    /// this call.
    Pending,
    /// A thread was producing: it will call the producer again after this call before it stops.
    Signalled,
}

/// The executor refused the production run [`AdaptiveStrategy::dispatch`] tried to queue (it is
/// shut down or full). Nothing is queued; call [`AdaptiveStrategy::produce`] to produce on the
/// calling thread instead.
///
/// ```
/// struct ShutDown;
/// impl keyway::Executor for ShutDown {
///     fn execute(&self, t: Box<dyn FnOnce() + Send>) -> Result<(), Box<dyn FnOnce() + Send>> {
///         Err(t)
///     }
///     fn try_execute(&self, t: Box<dyn FnOnce() + Send>) -> Result<(), Box<dyn FnOnce() + Send>> {
///         Err(t)
///     }
/// }
/// let strategy = keyway::AdaptiveStrategy::new(|| None::<fn()>, ShutDown);
/// let err = strategy.dispatch().unwrap_err();
/// assert!(err.to_string().contains("refused"));
/// // Production is not stuck: the caller can still produce.
/// assert_eq!(strategy.produce(), keyway::ProduceOutcome::Exhausted);
/// ```
#[derive(Debug)]
pub struct DispatchError {
    _private: (),
}

impl DispatchError {
    fn new() -> Self {
        DispatchError { _private: () }
    }
}

impl fmt::Display for DispatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the executor refused the production run (shut down or full)")
    }
}

impl std::error::Error for DispatchError {}
