//! An actor per key: which API to use, state that lasts between messages, futures under tokio,
//! and what the memory of many keys costs.
//!
//! # Which API for an actor per key
//!
//! Every way below handles one key's messages one at a time, in send order, while other keys go
//! on in parallel. Measured by the `actor_per_key_tokio` example (10,000 accounts x 20
//! deposits, each awaiting a tokio timeout; every pool bound to the runtime; medians of 40
//! rounds, each round running every way once, on a 2-core machine with a load average of
//! 1.3-1.7, so compare the ratios, not the milliseconds; the ratio is the median of the rounds'
//! ratios, with their interquartile range). Every way does the same work the way its users
//! would write it: the account's state lives as long as the account (in the handler's state,
//! in a tokio task, or in a cell per account made up front for the ways with a future per
//! message), and the tokio way, like the held-lane row, sends through a handle it keeps per
//! account.
//!
//! | way | time | tokio's time over it | what a message costs |
//! |---|---|---|---|
//! | [`Pool::typed_lanes_with_state`](crate::Pool::typed_lanes_with_state) (sync handler) | 53.0 ms | 1.42× (1.11-1.64) | the message queued as itself; no future |
//! | [`Pool::typed_lanes_async_with_state`](crate::Pool::typed_lanes_async_with_state), a [`TypedLane`](crate::TypedLane) kept per account | 55.5 ms | 1.26× (1.03-1.62) | a future polled in place by the key's driver, the state handed from one message's future to the next: no allocation per message |
//! | [`Pool::typed_lanes_async_with_state`](crate::Pool::typed_lanes_async_with_state), sent by key | 63.2 ms | 1.10× (0.95-1.60) | as above, and the key's look-up in the lane table per message |
//! | [`Pool::execute_async_sequential`](crate::Pool::execute_async_sequential) | 107.0 ms | 0.65× (0.55-0.88) | a future per message, stored in a recycled cell of its size (no allocation once the cells are warm) and polled in place by the key's driver while the key's futures follow one another |
//! | [`Pool::spawn_sequential`](crate::Pool::spawn_sequential), handle dropped | 173.8 ms | 0.40× (0.34-0.50) | as above, and its [`TaskHandle`](crate::TaskHandle) |
//! | tokio: a task and an mpsc channel per account (for reference) | 70.6 ms | 1.00× | a channel send; the task and channel live as long as the account |
//!
//! The ratios move between measuring windows on such a machine: in two other windows of 20 and
//! 24 rounds the same code measured 1.10×-1.20× sent by key, 1.24×-1.37× with a lane held per
//! account and 0.64×-0.75× for `execute_async_sequential`; with another benchmark running beside
//! it, a build of a few days earlier measured 0.96×-1.00× by key and 0.48×-0.52× for
//! `execute_async_sequential`. So on this machine the async typed lanes are about as fast as
//! tokio's way or faster, and a future per message takes about one and a half times tokio's
//! time.
//!
//! Where the difference goes (callgrind, 1,000 accounts, 10 against 20 deposits each):
//! tokio's way costs ~500 instructions per message, ~400 of them the timeout the handler
//! awaits. An async typed lane with a lane kept per account costs ~600 per message (~260 of
//! them the handler and its timeout), plus ~900 per lane activation (the lane's job, its
//! driver, and the lane let go when idle), of which a run's interleaving makes 0.1-0.3 per
//! message; sending by key adds the look-up (~170) and more activations. A driver is polled
//! first in the turn that found its lane's work, with no task: it becomes a task only when a
//! future really waits. `execute_async_sequential` costs ~1,650 per message: ~610 on the
//! sending thread (the future written once into its cell, the key's look-up and the push),
//! ~860 on the workers (the future's own poll ~390, its timeout ~260 of that; the key's driver
//! and turn ~475) and ~160 freeing cells. A reused cell costs ~55 where a box's `malloc` and
//! `free` cost ~390, but a burst that puts most of its futures in flight at once finds few
//! cells to reuse: in this run two futures in three took a fresh cell (~215, and its free
//! later).
//!
//! So: a handler that does not await → typed lanes; one that awaits → async typed lanes, with
//! the key's state owned by the handler (taken by value, given back by its future); a
//! one-off future in a key's order whose result nobody waits for →
//! `execute_async_sequential`; one whose result you want → `spawn_sequential` and its handle.
//! Unlike a task per key, an idle key costs nothing once its lane is freed, and a key needs no
//! set-up or tear-down.
//!
//! A request that wants an answer needs no channel of its own:
//! [`TypedLanes::ask`](crate::TypedLanes::ask) builds the message around a
//! [`Reply`](crate::Reply), the handler answers through it, and
//! the asker awaits (or joins) the returned handle. An answer counts every message sent to
//! the key before the request; a request whose reply is dropped unanswered (the handler
//! panicked, say) completes its handle with an error instead of leaving the asker waiting.
//!
//! # State that lasts
//!
//! A typed lane's state lives as long as the key's lane. By default an idle lane is kept only
//! briefly (at most 4,096 idle lanes, freed at the monitor's next look), so a key touched again
//! later starts from a new state: 1,000,000 keys touched three times make 3,000,000 states. Set
//! [`PoolBuilder::keep_idle`](crate::PoolBuilder::keep_idle) to keep each idle key's lane, and
//! its state, for that long after its last message (the same keys then make 1,000,000 states),
//! and [`PoolBuilder::idle_lanes`](crate::PoolBuilder::idle_lanes) to bound how many are kept.
//! [`KeyState::on_idle`](crate::KeyState::on_idle) sees each state when its lane is freed.
//!
//! ```
//! use std::time::Duration;
//! let pool = keyway::Pool::builder().keep_idle(Duration::from_secs(600)).build()?;
//! let totals = pool.typed_lanes_with_state(
//!     keyway::KeyState::new(|_: &u64| 0u64),
//!     |_: &u64, total: &mut u64, amount: u64| *total += amount,
//! );
//! totals.send(7, 10)?;
//! pool.wait_idle(); // key 7 is idle now, and its total stays for 10 minutes
//! totals.send(7, 5)?; // 15
//! # pool.shutdown();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! When the state lives in a database, let the lanes load and save it:
//! [`Pool::typed_lanes_async_loaded`](crate::Pool::typed_lanes_async_loaded) takes an
//! [`AsyncKeyState`](crate::AsyncKeyState) whose load (a future) runs before the key's first
//! message and whose save (a future) runs when the key's lane is freed, in the key's order: no
//! message starts before its key's load finished, and a load waits for a save of the same key
//! still under way. A failed load or save reaches the key's next message as a
//! [`StateError`](crate::StateError), so no message is dropped for it, and the handler no
//! longer keeps an `Option` of state loaded by hand.
//!
//! # Under tokio
//!
//! With keyway's `tokio` cargo feature (off by default), a future spawned onto keyway from
//! inside a tokio runtime (`spawn*`, `execute_async*`, [`Lane::spawn`](crate::Lane::spawn)),
//! and the futures of async typed lanes made there, are polled inside that runtime: they await
//! its timers and sockets as they would on tokio itself, with no wrapper. Without the feature,
//! or spawned from outside any runtime, such a future panics as tokio does ("must be called
//! from the context of a Tokio 1.x runtime"); keyway contains the panic, and its report (the
//! task's error, or the panic hook's report for a typed lane's message) says to turn the
//! feature on and spawn from inside a runtime.
//!
//! ```toml
//! keyway = { version = "0.1", features = ["tokio"] }
//! ```
//!
//! The cost: none without the feature (the captured runtime is a zero-sized type); with it,
//! capturing the runtime at spawn and entering it around each poll, which is what a
//! hand-written wrapper does. Measured with 200,000 futures of 1,000 keys, each yielding once
//! (medians of 7 rounds, repeated 3 times; load average ~10 on 2 cores): 1,223 → 2,025 ns per
//! `execute_async_sequential` future spawned inside a runtime, and 270 → 341 ns per
//! `typed_lanes_async` message (whose driver enters once per batch of messages).
//!
//! A program that runs its futures under one runtime does better to bind the pool to it,
//! with `PoolBuilder::tokio_runtime` (the `tokio` feature): the pool's threads
//! then live inside the runtime (their tasks and hooks too: `tokio::spawn` works from a task),
//! every future of the pool is polled in it wherever it was submitted from, and that costs
//! nothing per future: a future keeps no handle, and a poll on the pool's threads enters
//! nothing. Unbound, each future keeps a clone of its runtime's handle and enters it around
//! each poll: a reference count that the submitting thread and the workers all write, for
//! each future and each poll. Measured by the `actor_per_key_tokio` example (which binds its
//! pools), 1,000 accounts x 20 deposits under callgrind: `execute_async_sequential` costs
//! ~1,380 instructions per message bound against ~1,590 unbound; its wall clock (10,000 x 20,
//! 15 interleaved rounds on a loaded 2-core machine) 68.6 ms against 73.3 ms, and the async
//! typed lanes' held-lane way 29.5 ms against 31.3 ms.
//!
//! From async code, shut the pool down with
//! [`Pool::shutdown_async`](crate::Pool::shutdown_async): its future completes once every
//! accepted message has been handled (and every save finished), holding no runtime thread
//! meanwhile.
//!
//! # Memory
//!
//! An idle typed lane with a `u32` key and state costs about 280 bytes while it is kept
//! (measured: 1,000,000 idle keys, 282 MB allocated); a queued message costs its own size in
//! its key's buffer. Lanes freed give their memory back to the allocator, but the allocator
//! may keep it: glibc's `malloc` kept the resident size at 98-100% of its 330-350 MB peak after
//! the 1,000,000 lanes were freed, and `malloc_trim(0)` brought it back to 3 MB. A program
//! with bursts of many keys can call `malloc_trim(0)` (glibc, through the `libc` crate) after
//! a burst, or use an allocator that returns memory to the system on its own (such as
//! jemalloc with its decay settings, or mimalloc); a pool's [`Stats::live_lanes`](crate::Stats)
//! says how many lanes it holds now.
