//! A key's state that could not be loaded or saved ([`StateError`]).

use std::fmt;

/// Why a message of lanes with an [`AsyncKeyState`](crate::AsyncKeyState) got no state: the
/// key's load failed, or the save of its previous state did. The message is still handled,
/// with this as its state's `Err`; the key's next message loads again.
///
/// ```
/// let pool = keyway::Pool::new().unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// let state = keyway::AsyncKeyState::new(|id: &u32| {
///     let id = *id;
///     async move { Err::<u64, String>(format!("no account {id}")) }
/// });
/// let accounts = pool.typed_lanes_async_loaded(state, move |_, balance, _deposit: u64| {
///     tx.send(balance.map_err(|e| e.to_string())).unwrap();
///     async { None }
/// });
/// accounts.send(9, 50).unwrap();
/// assert_eq!(rx.recv().unwrap(), Err("loading the key's state failed: no account 9".into()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateError<E> {
    /// The load of the key's state failed.
    Load(E),
    /// The save of the key's previous state failed (the message's load was skipped).
    Save(E),
}

impl<E> StateError<E> {
    /// The load's or the save's own error.
    ///
    /// ```
    /// let err = keyway::StateError::Load("timeout");
    /// assert_eq!(err.into_inner(), "timeout");
    /// ```
    pub fn into_inner(self) -> E {
        match self {
            StateError::Load(e) | StateError::Save(e) => e,
        }
    }
}

impl<E: fmt::Display> fmt::Display for StateError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Load(e) => write!(f, "loading the key's state failed: {e}"),
            StateError::Save(e) => write!(f, "saving the key's previous state failed: {e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display + 'static> std::error::Error for StateError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        None
    }
}
