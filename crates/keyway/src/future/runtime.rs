//! The tokio runtime a future is polled in (the `tokio` feature), so that its timers and sockets
//! find their reactor with no wrapper. Without the feature a [`Runtime`] is a zero-sized type and
//! entering it is a plain call.
//!
//! * A pool bound to a runtime (`PoolBuilder::tokio_runtime`): its futures are polled in that
//!   one. Its threads live inside it (`engine::threads`), so a poll there enters nothing, and a
//!   future submitted to it keeps nothing; a poll on any other thread enters the pool's runtime.
//! * Any other pool: a future keeps the runtime current where it was spawned (a handle, that is
//!   an `Arc` clone), entered around each of its polls.

#[cfg(feature = "tokio")]
use crate::engine::worker::lives_in_runtime_of;
use crate::engine::Registry;

/// The runtime a future was spawned from, if it keeps one (always none without the `tokio`
/// feature, and for a future of a bound pool).
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

    /// What a future submitted from here to the pool of `pool` keeps: nothing if the pool is
    /// bound to a runtime (its polls enter that one), else the runtime current here.
    #[inline]
    pub(crate) fn for_pool(pool: &Registry) -> Self {
        #[cfg(feature = "tokio")]
        if pool.config.runtime.is_some() {
            return Runtime::default();
        }
        #[cfg(not(feature = "tokio"))]
        let _ = pool;
        Runtime::current()
    }

    /// The runtime the pool of `pool` is bound to, if any (a clone): a future of that pool run
    /// to completion on the calling thread runs inside it, not in the one it kept.
    pub(crate) fn bound_of(pool: &Registry) -> Option<Self> {
        #[cfg(feature = "tokio")]
        return pool.config.runtime.as_ref().map(|bound| Runtime {
            handle: Some(bound.clone()),
        });
        #[cfg(not(feature = "tokio"))]
        {
            let _ = pool;
            None
        }
    }

    /// What lanes made here, on the pool of `pool`, keep for their futures run or dropped off
    /// the pool's threads with no pool to ask (a message `shutdown_now` handed back, run by its
    /// taker; a future the pool refused, run by its submitter; a driver dropped once the pool
    /// is gone): the pool's bound runtime, else the one current here.
    pub(crate) fn for_lanes(pool: &Registry) -> Self {
        Self::bound_of(pool).unwrap_or_else(Self::current)
    }

    /// Runs `f` (a poll made for the pool of `pool`, or a handler making its future) inside the
    /// runtime it belongs in: the pool's bound runtime (nothing to enter on the pool's own
    /// threads), else the one kept.
    #[inline]
    pub(crate) fn enter_in<R>(&self, pool: &Registry, f: impl FnOnce() -> R) -> R {
        #[cfg(feature = "tokio")]
        if let Some(bound) = &pool.config.runtime {
            if lives_in_runtime_of(pool) {
                return f();
            }
            let _entered = bound.enter();
            return f();
        }
        #[cfg(not(feature = "tokio"))]
        let _ = pool;
        self.enter(f)
    }

    /// Runs `f` inside the runtime it belongs in when the pool may be gone: the pool's
    /// (`enter_in`) while it lives, else the one kept (a gone pool's bound runtime is out of
    /// reach).
    #[inline]
    pub(crate) fn enter_for<R>(&self, pool: Option<&Registry>, f: impl FnOnce() -> R) -> R {
        match pool {
            Some(pool) => self.enter_in(pool, f),
            None => self.enter(f),
        }
    }

    /// Runs `f` inside the runtime kept, with no pool to ask (a poll on the calling thread).
    #[inline]
    pub(crate) fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        #[cfg(feature = "tokio")]
        let _entered = self.handle.as_ref().map(tokio::runtime::Handle::enter);
        f()
    }
}

#[cfg(all(test, feature = "tokio", not(loom)))]
mod tests {
    use super::*;

    /// The runtime the calling thread is inside of, if any.
    fn current() -> Option<tokio::runtime::Id> {
        tokio::runtime::Handle::try_current().ok().map(|h| h.id())
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    /// A poll for a bound pool made on a thread that is not one of the pool's (this test's, in
    /// no runtime) enters the pool's runtime, whatever the future kept, and leaves it after;
    /// on the pool's own thread it is inside that runtime already. For a pool bound to none,
    /// the runtime kept is entered.
    #[test]
    fn a_poll_for_a_bound_pool_off_its_threads_enters_the_pool_runtime() {
        let (bound, other) = (runtime(), runtime());
        let pool = crate::Pool::builder()
            .core_threads(1)
            .tokio_runtime(bound.handle().clone())
            .build()
            .unwrap();
        let kept = other.block_on(async { Runtime::current() });
        assert_eq!(current(), None, "this test's thread is in no runtime");
        let want = Some(bound.handle().id());
        assert_eq!(kept.enter_in(pool.registry(), current), want);
        assert_eq!(Runtime::default().enter_in(pool.registry(), current), want);
        assert_eq!(current(), None, "left once the poll is done");
        let registry = pool.registry().clone();
        let on_pool = pool
            .submit(move || kept.enter_in(&registry, current))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(on_pool, want, "a pool thread lives inside the runtime");
        pool.shutdown();

        let unbound = crate::Pool::builder().core_threads(1).build().unwrap();
        let kept = other.block_on(async { Runtime::current() });
        assert_eq!(
            kept.enter_in(unbound.registry(), current),
            Some(other.handle().id())
        );
        unbound.shutdown();
    }
}
