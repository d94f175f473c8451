//! Loom shim: the synchronization primitives the lock-free code uses, from `std` in normal builds
//! and from [loom](https://docs.rs/loom) under `--cfg loom`, so that the same source can be
//! model-checked (same shape as tokio's `src/loom`).
//!
//! Lock-free code imports atomics, `Arc`, `Mutex` and `UnsafeCell` **only** from here. The
//! `UnsafeCell` wrapper has loom's closure API (`with`, `with_mut`) so that loom can check every
//! access to the cell for data races.
//!
//! Run the models with
//! `RUSTFLAGS="--cfg loom" cargo test --release -p keyway --lib loom`.

#![allow(dead_code, unused_imports)]

#[cfg(not(loom))]
pub(crate) mod sync {
    //! `std` (and `parking_lot`) primitives.
    pub(crate) use std::sync::Arc;

    pub(crate) mod atomic {
        //! `std::sync::atomic`.
        pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
    }

    /// A mutex whose `lock` returns the guard directly (no poisoning), as `parking_lot`'s does.
    pub(crate) type Mutex<T> = parking_lot::Mutex<T>;

    /// The guard [`Mutex::lock`] returns.
    pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

    /// `parking_lot`'s condition variable, taking and giving back the guard by value (as loom's
    /// does).
    #[derive(Debug, Default)]
    pub(crate) struct Condvar(parking_lot::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(parking_lot::Condvar::new())
        }

        pub(crate) fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(&mut guard);
            guard
        }

        /// Waits until notified or `deadline`; true if the deadline passed.
        pub(crate) fn wait_until<'a, T>(
            &self,
            mut guard: MutexGuard<'a, T>,
            deadline: std::time::Instant,
        ) -> (MutexGuard<'a, T>, bool) {
            let timed_out = self.0.wait_until(&mut guard, deadline).timed_out();
            (guard, timed_out)
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}

#[cfg(loom)]
pub(crate) mod sync {
    //! loom's mocked primitives.
    pub(crate) use loom::sync::Arc;

    pub(crate) mod atomic {
        //! `loom::sync::atomic`.
        pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
    }

    /// loom's mutex with `parking_lot`'s interface: `lock` returns the guard directly.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
            // A poisoned lock only means a model thread panicked, which fails the model anyway.
            match self.0.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            }
        }
    }

    /// The guard [`Mutex::lock`] returns.
    pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

    /// loom's condition variable with the `std` facade's interface.
    #[derive(Debug)]
    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(loom::sync::Condvar::new())
        }

        pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            match self.0.wait(guard) {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            }
        }

        /// loom has no clock: a deadline never passes (models wait without one).
        pub(crate) fn wait_until<'a, T>(
            &self,
            guard: MutexGuard<'a, T>,
            _deadline: std::time::Instant,
        ) -> (MutexGuard<'a, T>, bool) {
            (self.wait(guard), false)
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}

#[cfg(not(loom))]
pub(crate) mod cell {
    //! A `std::cell::UnsafeCell` with loom's closure-based API.

    /// `std::cell::UnsafeCell` with loom's `with` / `with_mut` interface.
    #[derive(Debug, Default)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }

        /// Gives `f` a shared raw pointer to the contents.
        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Gives `f` a unique raw pointer to the contents.
        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
        /// The contents, by value.
        pub(crate) fn into_inner(self) -> T {
            self.0.into_inner()
        }
    }
}

#[cfg(loom)]
pub(crate) mod cell {
    //! loom's checked `UnsafeCell`.
    pub(crate) use loom::cell::UnsafeCell;
}

/// A thread handle to unpark, and `current`: `std`'s, or loom's under `--cfg loom`.
pub(crate) mod thread_handle {
    #[cfg(not(loom))]
    pub(crate) use std::thread::{current, Thread};

    #[cfg(loom)]
    pub(crate) use loom::thread::{current, Thread};
}

#[cfg(all(test, not(loom)))]
pub(crate) use std::thread;

#[cfg(all(test, loom))]
pub(crate) use loom::thread;

#[cfg(all(test, loom))]
pub(crate) use loom::model;
