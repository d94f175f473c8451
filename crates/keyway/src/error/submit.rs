//! Refused submissions: the task handed back with why ([`SubmitError`], [`SubmitErrorKind`],
//! [`TryExecuteError`]).

use std::fmt;

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
