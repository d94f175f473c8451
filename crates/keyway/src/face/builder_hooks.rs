//! `PoolBuilder`'s names and hooks: the threads' name prefix and stack size, the pool's name
//! in its tracing events, the hooks called on panics and on each thread's start and stop, and
//! the tokio runtime the threads live inside (the `tokio` feature).

use std::sync::Arc;

use super::builder::PoolBuilder;
use crate::task::PanicReport;

impl PoolBuilder {
    /// Prefix of the worker threads' names. Default: `"keyway"`. Must not contain a NUL byte.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().thread_name("ingest").build().unwrap();
    /// let name = pool.submit(|| std::thread::current().name().map(str::to_owned)).unwrap();
    /// assert!(name.join().unwrap().unwrap().starts_with("ingest-"));
    /// assert!(keyway::Pool::builder().thread_name("a\0b").build().is_err());
    /// # pool.shutdown();
    /// ```
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Self {
        self.thread_name = Some(prefix.into());
        self
    }

    /// The pool's name: the `pool` field of its tracing events and of the `keyway_pool` span
    /// its threads run in, so that a subscriber can tell pools apart and filter on one (see the
    /// crate docs' "Observability" section). Default: the [`thread_name`](Self::thread_name)
    /// prefix. Any string, empty included.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().name("orders").build().unwrap();
    /// assert_eq!(pool.name(), "orders");
    /// let unnamed = keyway::Pool::builder().thread_name("io").build().unwrap();
    /// assert_eq!(unnamed.name(), "io");
    /// # pool.shutdown(); unnamed.shutdown();
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Called on the worker thread with each panic a task raises (after the task's handle, if
    /// any, has it), and with each panic of an [`on_thread_start`](Self::on_thread_start) or
    /// [`on_thread_stop`](Self::on_thread_stop) hook (its message then starts with the hook's
    /// name). A panic in the hook itself is caught and logged.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let panics = Arc::new(AtomicUsize::new(0));
    /// let count = panics.clone();
    /// let pool = keyway::Pool::builder()
    ///     .panic_hook(move |_report| { count.fetch_add(1, Ordering::Relaxed); })
    ///     .build()
    ///     .unwrap();
    /// pool.execute(|| panic!("oops")).unwrap();
    /// pool.shutdown();
    /// assert_eq!(panics.load(Ordering::Relaxed), 1);
    /// ```
    ///
    /// [`PanicReport`]'s example reads the context, thread and payload of a report.
    #[doc(alias = "panic_handler")]
    pub fn panic_hook(mut self, hook: impl Fn(&PanicReport) + Send + Sync + 'static) -> Self {
        self.panic_hook = Some(Arc::new(hook));
        self
    }

    /// The stack size, in bytes, of every thread the pool starts. Default: the standard
    /// library's (2 MiB unless the `RUST_MIN_STACK` environment variable says otherwise). Must be
    /// at least 64 KiB and at most 1 GiB: outside that range [`build`](Self::build) returns a
    /// [`BuildError`](crate::BuildError).
    ///
    /// ```
    /// let pool = keyway::Pool::builder().stack_size(64 << 20).build().unwrap();
    /// // Deep recursion that would overflow a default 2 MiB stack.
    /// fn depth(n: u64) -> u64 {
    ///     let frame = std::hint::black_box([0u8; 512]);
    ///     if n == 0 { frame[0] as u64 } else { 1 + depth(n - 1) + frame[1] as u64 }
    /// }
    /// assert_eq!(pool.submit(|| depth(10_000)).unwrap().join().unwrap(), 10_000);
    /// assert!(keyway::Pool::builder().stack_size(usize::MAX).build().is_err());
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Called on each thread that runs tasks — core and auxiliary workers, reserved threads —
    /// as it starts, before its first task. The monitor thread runs no task and does not call
    /// it. Use it to set up thread-local state (a logging context, CPU affinity, a per-thread
    /// connection); its pair is [`on_thread_stop`](Self::on_thread_stop).
    ///
    /// A panic in the hook is caught and reported to the [`panic_hook`](Self::panic_hook) (and
    /// logged); the thread goes on and still calls `on_thread_stop` when it exits.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let started = Arc::new(AtomicUsize::new(0));
    /// let count = started.clone();
    /// let pool = keyway::Pool::builder()
    ///     .core_threads(2)
    ///     .on_thread_start(move || {
    ///         count.fetch_add(1, Ordering::SeqCst);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// pool.shutdown();
    /// assert!(started.load(Ordering::SeqCst) >= 2);
    /// ```
    #[doc(alias = "start_handler")]
    pub fn on_thread_start(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_thread_start = Some(Arc::new(hook));
        self
    }

    /// Called on each thread that runs tasks as it exits — at shutdown, or when an idle
    /// auxiliary or reserved thread retires — after its last task. Every thread that called
    /// [`on_thread_start`](Self::on_thread_start) calls this once;
    /// [`Pool::shutdown`](crate::Pool::shutdown) returns after every call made by the threads it
    /// waited for. A panic in the hook is caught and
    /// reported as in `on_thread_start`.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let live = Arc::new(AtomicUsize::new(0));
    /// let (up, down) = (live.clone(), live.clone());
    /// let pool = keyway::Pool::builder()
    ///     .on_thread_start(move || {
    ///         up.fetch_add(1, Ordering::SeqCst);
    ///     })
    ///     .on_thread_stop(move || {
    ///         down.fetch_sub(1, Ordering::SeqCst);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// pool.submit(|| ()).unwrap().join().unwrap();
    /// pool.shutdown();
    /// assert_eq!(live.load(Ordering::SeqCst), 0); // each start was matched by a stop
    /// ```
    #[doc(alias = "exit_handler")]
    pub fn on_thread_stop(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_thread_stop = Some(Arc::new(hook));
        self
    }

    /// Binds the pool to a tokio runtime (the `tokio` feature). Each thread of the pool that
    /// runs tasks enters `runtime` as it starts, before
    /// [`on_thread_start`](Self::on_thread_start), and leaves it as it exits, after
    /// [`on_thread_stop`](Self::on_thread_stop): its hooks, tasks and futures all run inside
    /// it, so `tokio::spawn`, `Handle::current` and the runtime's timers and sockets work there
    /// with no wrapper. Every future of the pool (`spawn*`, `execute_async*`,
    /// [`Lane::spawn`](crate::Lane::spawn), async typed lanes) is polled in this runtime,
    /// whichever runtime (or none) it was submitted from. A future handed back by
    /// [`shutdown_now`](crate::Pool::shutdown_now) and run by the caller is polled on the
    /// caller's thread: inside this runtime if it came from `spawn` or `execute_async` and the
    /// pool still exists; else (a future of a lane) inside the runtime the caller is in.
    ///
    /// It is the cheaper way to run futures under tokio: a future submitted to a bound pool
    /// keeps no runtime handle, and a poll on the pool's threads enters nothing. An unbound pool
    /// keeps, in each future, a clone of the handle of the runtime it was spawned from and
    /// enters it around each poll: a reference count that the submitting thread and the
    /// workers all write, for each future and each poll (see [`actors`](crate::actors),
    /// "Under tokio", for what that costs).
    ///
    /// Unbound is the default, also for a pool built inside a runtime: binding it changes
    /// which runtime every future is polled in, and a pool may outlive the runtime it was
    /// built in (a test's, say). If the bound runtime shuts down first, what uses it fails as
    /// tokio makes it fail (a timer panics, contained by the pool: the future's handle reports
    /// the panic, or the [`panic_hook`](Self::panic_hook) gets it), and everything else goes on.
    ///
    /// ```
    /// use std::time::Duration;
    /// let runtime = tokio::runtime::Runtime::new().unwrap();
    /// let pool = keyway::Pool::builder()
    ///     .tokio_runtime(runtime.handle().clone())
    ///     .build()
    ///     .unwrap();
    /// // A future submitted from outside any runtime awaits the bound runtime's timer.
    /// let slept = pool.spawn(async {
    ///     tokio::time::sleep(Duration::from_millis(1)).await;
    ///     7
    /// });
    /// assert_eq!(slept.unwrap().join().unwrap(), 7);
    /// // A plain task spawns onto the runtime.
    /// let task = pool.submit(|| tokio::spawn(async { 6 * 7 })).unwrap();
    /// assert_eq!(runtime.block_on(task.join().unwrap()).unwrap(), 42);
    /// # pool.shutdown();
    /// ```
    #[cfg(feature = "tokio")]
    pub fn tokio_runtime(mut self, runtime: tokio::runtime::Handle) -> Self {
        self.runtime = Some(runtime);
        self
    }
}
