//! Why a task's handle has no value ([`TaskError`], [`PanicPayload`]), and how keyway words a
//! panic.

use std::any::Any;
use std::fmt;

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
    /// A request made with [`TypedLanes::ask`](crate::TypedLanes::ask) got no answer: its
    /// [`Reply`](crate::Reply) was dropped unused — by the handler, by the handler's panic, or
    /// with its message when the message was dropped unhandled.
    Unanswered,
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

    /// True if a request made with [`TypedLanes::ask`](crate::TypedLanes::ask) got no answer
    /// ([`TaskError::Unanswered`]).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let lanes = pool.typed_lanes(|_: &u8, reply: keyway::Reply<u32>| drop(reply));
    /// let err = lanes.ask(1, |reply| reply).unwrap().join().unwrap_err();
    /// assert!(err.is_unanswered());
    /// ```
    pub fn is_unanswered(&self) -> bool {
        matches!(self, TaskError::Unanswered)
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
            TaskError::Unanswered => f.write_str("Unanswered"),
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
     tokio runtime, so that keyway polls it inside that runtime, or bind the pool to a runtime \
     (`PoolBuilder::tokio_runtime`)";

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
            TaskError::Unanswered => {
                f.write_str("the request's reply was dropped without an answer")
            }
        }
    }
}

impl std::error::Error for TaskError {}
