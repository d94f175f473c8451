//! Errors: bad configuration, refused submissions, and the outcomes of a task that did not run.

use std::any::Any;
use std::fmt;
use std::time::Duration;

/// A [`PoolBuilder`](crate::PoolBuilder) was given a configuration that cannot work.
///
/// The message says which setting is wrong and why.
///
/// ```
/// let err = keyway::Pool::builder().core_threads(0).build().unwrap_err();
/// assert!(err.to_string().contains("core_threads"));
/// ```
#[derive(Debug)]
pub struct BuildError(BuildErrorKind);

impl BuildError {
    pub(crate) fn new(kind: BuildErrorKind) -> Self {
        BuildError(kind)
    }
}

#[derive(Debug)]
pub(crate) enum BuildErrorKind {
    ZeroCoreThreads,
    ZeroMaxThreads,
    CoreAboveMax {
        core: usize,
        max: usize,
    },
    ZeroDuration {
        setting: &'static str,
        value: Duration,
    },
    MinReservedAboveMax {
        min: usize,
        max: usize,
    },
    ZeroCount {
        setting: &'static str,
    },
    TooManyThreads {
        setting: &'static str,
        value: usize,
        limit: usize,
    },
    NulInThreadName,
    Spawn(std::io::Error),
    StackSize {
        value: usize,
        min: usize,
        max: usize,
    },
}

/// A task the pool refused. The task is handed back, so nothing is lost.
///
/// ```
/// let pool = keyway::Pool::new().unwrap();
/// pool.shutdown();
/// let err = pool.execute(|| ()).unwrap_err();
/// assert!(matches!(err, keyway::SubmitError::Shutdown(_)));
/// let task = err.into_inner();
/// task(); // still ours to run
/// ```
#[non_exhaustive]
pub enum SubmitError<T> {
    /// The pool was shut down; the task is handed back.
    Shutdown(T),
    /// The pool holds as many queued tasks as its configured capacity; the task is handed back.
    Full(T),
    /// The context key's `Hash`, `Eq` or `Drop` panicked while the pool looked its lane up; the
    /// task is handed back, and the pool is unharmed.
    ///
    /// ```
    /// use std::hash::{Hash, Hasher};
    /// #[derive(PartialEq, Eq)]
    /// struct Bad;
    /// impl Hash for Bad {
    ///     fn hash<H: Hasher>(&self, _: &mut H) {
    ///         panic!("no hash for you")
    ///     }
    /// }
    /// let pool = keyway::Pool::new().unwrap();
    /// let err = pool.execute_sequential(Bad, || ()).unwrap_err();
    /// assert!(matches!(err, keyway::SubmitError::KeyPanicked(_)));
    /// pool.shutdown(); // nothing was left half-admitted
    /// ```
    KeyPanicked(T),
}

impl<T> SubmitError<T> {
    /// Gives back the refused task (or message).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// pool.shutdown();
    /// let task = pool.submit(|| 7).unwrap_err().into_inner();
    /// assert_eq!(task(), 7);
    /// ```
    pub fn into_inner(self) -> T {
        match self {
            SubmitError::Shutdown(t) | SubmitError::Full(t) | SubmitError::KeyPanicked(t) => t,
        }
    }

    /// The same refusal with the task replaced by `f(task)` (e.g. `drop` for a flush, whose
    /// no-op task is of no use to the caller).
    pub(crate) fn map_task<U>(self, f: impl FnOnce(T) -> U) -> SubmitError<U> {
        match self {
            SubmitError::Shutdown(t) => SubmitError::Shutdown(f(t)),
            SubmitError::Full(t) => SubmitError::Full(f(t)),
            SubmitError::KeyPanicked(t) => SubmitError::KeyPanicked(f(t)),
        }
    }

    /// Why the task was refused, without the task.
    ///
    /// ```
    /// use keyway::SubmitErrorKind;
    /// let pool = keyway::Pool::new().unwrap();
    /// pool.shutdown();
    /// let err = pool.execute(|| ()).unwrap_err();
    /// assert_eq!(err.kind(), SubmitErrorKind::Shutdown);
    /// ```
    pub fn kind(&self) -> SubmitErrorKind {
        match self {
            SubmitError::Shutdown(_) => SubmitErrorKind::Shutdown,
            SubmitError::Full(_) => SubmitErrorKind::Full,
            SubmitError::KeyPanicked(_) => SubmitErrorKind::KeyPanicked,
        }
    }

    /// Drops the task and keeps why it was refused: a `Send + Sync + 'static` error whatever the
    /// task is, so it converts with `?` into `anyhow::Error` or `Box<dyn Error + Send + Sync>`.
    /// The [`From`] conversion does the same, so `?` works in a function returning
    /// `Result<_, SubmitErrorKind>`.
    ///
    /// ```
    /// fn start(pool: &keyway::Pool) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    ///     let not_sync = std::cell::Cell::new(1); // the task is Send but not Sync
    ///     pool.execute(move || not_sync.set(2)).map_err(keyway::SubmitError::into_kind)?;
    ///     Ok(())
    /// }
    /// let pool = keyway::Pool::new().unwrap();
    /// start(&pool).unwrap();
    /// pool.shutdown();
    /// assert!(start(&pool).unwrap_err().to_string().contains("shut down"));
    /// ```
    pub fn into_kind(self) -> SubmitErrorKind {
        self.kind()
    }
}

/// Why a task was refused, without the task: what [`SubmitError::into_kind`] keeps.
///
/// It is `Copy`, `Send + Sync` and an [`Error`](std::error::Error), for `?` into any error type.
///
/// ```
/// use keyway::SubmitErrorKind;
/// fn start(pool: &keyway::Pool) -> Result<u32, SubmitErrorKind> {
///     let handle = pool.submit(|| 1)?; // `From<SubmitError<F>>` drops the task
///     Ok(handle.join().unwrap())
/// }
/// let pool = keyway::Pool::new().unwrap();
/// assert_eq!(start(&pool), Ok(1));
/// pool.shutdown();
/// assert_eq!(start(&pool), Err(SubmitErrorKind::Shutdown));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SubmitErrorKind {
    /// See [`SubmitError::Shutdown`].
    Shutdown,
    /// See [`SubmitError::Full`].
    Full,
    /// See [`SubmitError::KeyPanicked`].
    KeyPanicked,
}

impl<T> From<SubmitError<T>> for SubmitErrorKind {
    fn from(err: SubmitError<T>) -> Self {
        err.kind()
    }
}

impl<T> fmt::Debug for SubmitError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::Shutdown(_) => f.write_str("Shutdown(..)"),
            SubmitError::Full(_) => f.write_str("Full(..)"),
            SubmitError::KeyPanicked(_) => f.write_str("KeyPanicked(..)"),
        }
    }
}

/// A task [`Pool::try_execute`](crate::Pool::try_execute) did not start. The task is handed
/// back.
///
/// ```
/// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
/// let err = pool.try_execute(|| ()).unwrap_err();
/// assert!(matches!(err, keyway::TryExecuteError::Busy(_)));
/// ```
#[non_exhaustive]
pub enum TryExecuteError<T> {
    /// No reserved thread was idle to take the task now; the task is handed back (nothing was
    /// queued).
    Busy(T),
    /// The pool was shut down; the task is handed back.
    Shutdown(T),
}

impl<T> TryExecuteError<T> {
    /// Gives back the task.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
    /// let task = pool.try_execute(|| ()).unwrap_err().into_inner();
    /// pool.execute(task).unwrap(); // queue it instead
    /// # pool.shutdown();
    /// ```
    pub fn into_inner(self) -> T {
        match self {
            TryExecuteError::Busy(t) | TryExecuteError::Shutdown(t) => t,
        }
    }
}

impl<T> fmt::Debug for TryExecuteError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryExecuteError::Busy(_) => f.write_str("Busy(..)"),
            TryExecuteError::Shutdown(_) => f.write_str("Shutdown(..)"),
        }
    }
}

/// Why a [`TaskHandle`](crate::TaskHandle) has no value: the task did not run to completion.
///
/// `Ok(value)` from a handle means the task *ran*; each variant here is one of the other outcomes.
/// The error is `Send + Sync + 'static` (the panic payload is kept in a [`PanicPayload`]), so
/// `handle.join()?` works in a function returning `anyhow::Result` or
/// `Result<_, Box<dyn Error + Send + Sync>>`. The `is_*` methods and
/// [`into_panic`](TaskError::into_panic) / [`try_into_panic`](TaskError::try_into_panic) match
/// tokio's `JoinError`.
///
/// ```
/// fn total(pool: &keyway::Pool) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
///     let a = pool.submit(|| 40)?;
///     let b = pool.submit(|| 2)?;
///     Ok(a.join()? + b.join()?)
/// }
/// let pool = keyway::Pool::new().unwrap();
/// assert_eq!(total(&pool).unwrap(), 42);
///
/// let err = pool.submit(|| -> u32 { panic!("oops") }).unwrap().join().unwrap_err();
/// assert!(err.is_panic() && !err.is_cancelled());
/// assert_eq!(err.into_panic().downcast_ref::<&str>(), Some(&"oops"));
/// ```
#[doc(alias = "JoinError")]
#[non_exhaustive]
pub enum TaskError {
    /// The task panicked; the payload is the one `panic!` was given.
    Panicked(PanicPayload),
    /// The task was cancelled through its handle before it started.
    Cancelled,
    /// A newer coalescing task of the same context replaced this one before it started.
    Coalesced,
    /// The task was accepted but never ran: it was handed back by
    /// [`Pool::shutdown_now`](crate::Pool::shutdown_now) and then dropped.
    Rejected,
    /// A scheduled task's timeout passed before it could start, so it was not run.
    TimedOut,
}

impl TaskError {
    pub(crate) fn panicked(payload: Box<dyn Any + Send + 'static>) -> Self {
        TaskError::Panicked(PanicPayload::new(payload))
    }

    /// True if the task panicked.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let err = pool.submit(|| -> () { panic!("boom") }).unwrap().join().unwrap_err();
    /// assert!(err.is_panic());
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self, TaskError::Panicked(_))
    }

    /// True if the task was cancelled through its handle ([`TaskError::Cancelled`]).
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// pool.execute_sequential(1, move || { rx.recv().unwrap(); }).unwrap();
    /// let queued = pool.submit_sequential(1, || ()).unwrap();
    /// assert!(queued.cancel());
    /// tx.send(()).unwrap();
    /// assert!(queued.join().unwrap_err().is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self, TaskError::Cancelled)
    }

    /// True if a newer coalescing task replaced this one ([`TaskError::Coalesced`]).
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// pool.execute_sequential("k", move || { rx.recv().unwrap(); }).unwrap();
    /// let old = pool.submit_coalescing("k", || 1).unwrap();
    /// let new = pool.submit_coalescing("k", || 2).unwrap();
    /// tx.send(()).unwrap();
    /// assert!(old.join().unwrap_err().is_coalesced());
    /// assert_eq!(new.join().unwrap(), 2);
    /// ```
    pub fn is_coalesced(&self) -> bool {
        matches!(self, TaskError::Coalesced)
    }

    /// True if the task was handed back by `shutdown_now` and dropped ([`TaskError::Rejected`]).
    ///
    /// ```
    /// let err = keyway::TaskError::Rejected;
    /// assert!(err.is_rejected());
    /// ```
    pub fn is_rejected(&self) -> bool {
        matches!(self, TaskError::Rejected)
    }

    /// True if a scheduled task's timeout passed before it could start
    /// ([`TaskError::TimedOut`]).
    ///
    /// ```
    /// assert!(keyway::TaskError::TimedOut.is_timed_out());
    /// ```
    pub fn is_timed_out(&self) -> bool {
        matches!(self, TaskError::TimedOut)
    }

    /// The panic payload, if the task panicked; otherwise the error itself, handed back.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let err = pool.submit(|| -> () { std::panic::panic_any(17u8) }).unwrap().join().unwrap_err();
    /// let payload = err.try_into_panic().unwrap();
    /// assert_eq!(payload.downcast_ref::<u8>(), Some(&17));
    /// assert!(keyway::TaskError::Cancelled.try_into_panic().is_err());
    /// ```
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, TaskError> {
        match self {
            TaskError::Panicked(p) => Ok(p.into_inner()),
            other => Err(other),
        }
    }

    /// The panic payload, for [`std::panic::resume_unwind`].
    ///
    /// # Panics
    /// If the task did not panic (check [`is_panic`](TaskError::is_panic) first, or use
    /// [`try_into_panic`](TaskError::try_into_panic)).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let err = pool.submit(|| -> () { panic!("boom") }).unwrap().join().unwrap_err();
    /// assert_eq!(err.into_panic().downcast_ref::<&str>(), Some(&"boom"));
    /// ```
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        match self.try_into_panic() {
            Ok(payload) => payload,
            Err(other) => panic!("TaskError::into_panic on a task that did not panic: {other}"),
        }
    }

    /// Resumes the task's panic on this thread if it panicked; otherwise returns `self`.
    ///
    /// ```
    /// let err = keyway::TaskError::Cancelled.resume_panic(); // not a panic: handed back
    /// assert!(err.is_cancelled());
    /// ```
    pub fn resume_panic(self) -> Self {
        match self.try_into_panic() {
            Ok(payload) => std::panic::resume_unwind(payload),
            Err(other) => other,
        }
    }
}

impl fmt::Debug for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::Panicked(p) => f.debug_tuple("Panicked").field(&p.message()).finish(),
            TaskError::Cancelled => f.write_str("Cancelled"),
            TaskError::Coalesced => f.write_str("Coalesced"),
            TaskError::Rejected => f.write_str("Rejected"),
            TaskError::TimedOut => f.write_str("TimedOut"),
        }
    }
}

/// The payload of a task's panic, as [`TaskError::Panicked`] holds it.
///
/// It keeps the payload so that it can be taken out ([`into_inner`](PanicPayload::into_inner))
/// and resumed, and keeps the panic's text ([`message`](PanicPayload::message)); unlike a bare
/// `Box<dyn Any + Send>`, it is `Sync`, so a [`TaskError`] can cross into `anyhow::Error` or
/// `Box<dyn Error + Send + Sync>`.
///
/// ```
/// let pool = keyway::Pool::new().unwrap();
/// let task = || -> () { std::panic::panic_any(String::from("bad input 17")) };
/// match pool.submit(task).unwrap().join() {
///     Err(keyway::TaskError::Panicked(mut payload)) => {
///         assert_eq!(payload.message(), "bad input 17");
///         assert!(payload.get_mut().is::<String>());
///         assert_eq!(*payload.into_inner().downcast::<String>().unwrap(), "bad input 17");
///     }
///     other => panic!("expected a panic, got {other:?}"),
/// }
/// ```
pub struct PanicPayload {
    message: String,
    // A mutex only to make the payload `Sync`: it is reached through `&mut self` or by value.
    payload: parking_lot::Mutex<Box<dyn Any + Send + 'static>>,
}

impl PanicPayload {
    fn new(payload: Box<dyn Any + Send + 'static>) -> Self {
        PanicPayload {
            message: panic_text(&*payload),
            payload: parking_lot::Mutex::new(payload),
        }
    }

    /// The panic's text (`"<non-string panic payload>"` when the payload is not a string).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let err = pool.submit(|| -> () { panic!("boom") }).unwrap().join().unwrap_err();
    /// assert!(matches!(err, keyway::TaskError::Panicked(ref p) if p.message() == "boom"));
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The payload, to inspect with `downcast_ref`/`is` (see the type's example).
    pub fn get_mut(&mut self) -> &mut (dyn Any + Send + 'static) {
        &mut **self.payload.get_mut()
    }

    /// The payload itself, as `panic!` gave it (for `downcast` or
    /// [`std::panic::resume_unwind`]; see the type's example).
    pub fn into_inner(self) -> Box<dyn Any + Send + 'static> {
        self.payload.into_inner()
    }
}

impl fmt::Debug for PanicPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PanicPayload").field(&self.message).finish()
    }
}

/// [`Pool::shutdown_timeout`](crate::Pool::shutdown_timeout) ran out of time: some accepted
/// tasks were not done yet. They still run, in the background; intake stays stopped.
///
/// ```
/// use std::time::Duration;
/// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
/// let (release, wait) = std::sync::mpsc::channel::<()>();
/// pool.execute(move || wait.recv().unwrap()).unwrap();
/// let err = pool.shutdown_timeout(Duration::ZERO).unwrap_err();
/// assert_eq!(err.pending_tasks(), 1);
/// assert!(err.to_string().contains("1 accepted task"));
/// release.send(()).unwrap();
/// pool.shutdown();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownTimedOut {
    pending: u64,
}

impl ShutdownTimedOut {
    pub(crate) fn new(pending: u64) -> Self {
        ShutdownTimedOut { pending }
    }

    /// How many accepted tasks were queued or running when the wait ended (see the type's
    /// example).
    pub fn pending_tasks(&self) -> u64 {
        self.pending
    }
}

/// The text of a panic payload, when it has one.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "<non-string panic payload>"
    }
}

/// A panic's text as keyway reports it: its message, followed by what to do when the panic is
/// tokio's for a future polled outside any tokio runtime.
pub(crate) fn panic_text(payload: &(dyn Any + Send)) -> String {
    let message = panic_message(payload);
    if is_no_runtime(message) {
        format!("{message} ({NO_RUNTIME_HINT})")
    } else {
        message.to_owned()
    }
}

/// Whether a panic message is tokio's "no runtime here" (a timer, socket or `tokio::spawn` used
/// outside a runtime's context).
fn is_no_runtime(message: &str) -> bool {
    message.contains("must be called from the context of a Tokio")
        || message.contains("there is no reactor running")
}

/// What a future that panicked for want of a tokio runtime should do.
pub(crate) const NO_RUNTIME_HINT: &str = "keyway: this future used tokio outside a tokio runtime; \
     turn on keyway's `tokio` cargo feature and spawn it (or make the typed lanes) from inside a \
     tokio runtime, so that keyway polls it inside that runtime";

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.0)
    }
}

impl From<BuildErrorKind> for BuildError {
    fn from(kind: BuildErrorKind) -> Self {
        BuildError(kind)
    }
}

impl fmt::Display for BuildErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroCoreThreads => f.write_str("core_threads must be at least 1"),
            Self::ZeroMaxThreads => f.write_str("max_threads must be at least 1"),
            Self::CoreAboveMax { core, max } => {
                write!(
                    f,
                    "core_threads ({core}) is greater than max_threads ({max})"
                )
            }
            Self::ZeroDuration { setting, value } => {
                write!(f, "{setting} must be longer than zero (got {value:?})")
            }
            Self::MinReservedAboveMax { min, max } => write!(
                f,
                "min_reserved_threads ({min}) is greater than reserved_threads ({max})"
            ),
            Self::ZeroCount { setting } => write!(f, "{setting} must be at least 1"),
            Self::TooManyThreads {
                setting,
                value,
                limit,
            } => write!(
                f,
                "{setting} ({value}) is more than the {limit} threads a pool may have"
            ),
            Self::NulInThreadName => f.write_str("thread_name must not contain a NUL byte"),
            Self::Spawn(_) => f.write_str("could not start a worker thread"),
            Self::StackSize { value, min, max } => write!(
                f,
                "stack_size ({value} bytes) must be between {min} and {max} bytes"
            ),
        }
    }
}

impl std::error::Error for BuildErrorKind {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

impl<T> fmt::Display for SubmitError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SubmitError::Shutdown(_) => "the pool is shut down and accepts no more tasks",
            SubmitError::Full(_) => "the pool is full: its capacity of queued tasks is reached",
            SubmitError::KeyPanicked(_) => {
                "the context key's Hash, Eq or Drop panicked; the task is handed back"
            }
        })
    }
}

impl<T> std::error::Error for SubmitError<T> {}

impl<T> fmt::Display for TryExecuteError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TryExecuteError::Busy(_) => "no reserved thread is idle to take the task now",
            TryExecuteError::Shutdown(_) => "the pool is shut down and accepts no more tasks",
        })
    }
}

impl<T> std::error::Error for TryExecuteError<T> {}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::Panicked(p) => {
                write!(f, "the task panicked: {}", p.message())
            }
            TaskError::Cancelled => f.write_str("the task was cancelled before it started"),
            TaskError::Coalesced => {
                f.write_str("the task was replaced by a newer coalescing task of its context")
            }
            TaskError::Rejected => {
                f.write_str("the task was handed back at shutdown and dropped without running")
            }
            TaskError::TimedOut => {
                f.write_str("the task's timeout passed before it could start; it was not run")
            }
        }
    }
}

impl std::error::Error for TaskError {}

impl fmt::Display for SubmitErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SubmitErrorKind::Shutdown => "the pool is shut down and accepts no more tasks",
            SubmitErrorKind::Full => "the pool is full: its capacity of queued tasks is reached",
            SubmitErrorKind::KeyPanicked => {
                "the context key's Hash, Eq or Drop panicked; the task was dropped"
            }
        })
    }
}

impl std::error::Error for SubmitErrorKind {}

impl fmt::Display for ShutdownTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the pool did not finish shutting down in time: {} accepted task(s) not done yet",
            self.pending
        )
    }
}

impl std::error::Error for ShutdownTimedOut {}
