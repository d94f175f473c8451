//! The tokio runtime a future was spawned from (the `tokio` feature): captured at spawn, entered
//! around each of the future's polls, so its timers and sockets find their reactor with no
//! wrapper. Without the feature a [`Runtime`] is a zero-sized type and `enter` is a plain call.

/// The runtime current where a future was spawned, if any (always none without the `tokio`
/// feature).
#[derive(Clone, Default)]
pub(crate) struct Runtime {
    #[cfg(feature = "tokio")]
    handle: Option<tokio::runtime::Handle>,
}

impl Runtime {
    /// The runtime the calling thread is inside of (`tokio::runtime::Handle::try_current`).
    #[inline]
    pub(crate) fn current() -> Self {
        Runtime {
            #[cfg(feature = "tokio")]
            handle: tokio::runtime::Handle::try_current().ok(),
        }
    }

    /// Runs `f` (a poll, or a handler making its future) inside the captured runtime.
    #[inline]
    pub(crate) fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        #[cfg(feature = "tokio")]
        let _entered = self.handle.as_ref().map(tokio::runtime::Handle::enter);
        f()
    }
}
