//! Seeing what a pool is doing: statistics, panic reports, and the `tracing` events and span.
//!
//! # Statistics
//!
//! [`Pool::stats`](crate::Pool::stats) returns a [`Stats`](crate::Stats) snapshot: threads by
//! kind (core, auxiliary, reserved, idle, blocked), tasks waiting, running, completed and
//! panicked, jobs moved off blocked threads, live lanes, and the deepest lanes. `{}` prints it on
//! one line. A [`LaneDepth`](crate::LaneDepth) names its lane by
//! [`context_hash`](crate::LaneDepth::context_hash): compare it with
//! [`Pool::context_hash`](crate::Pool::context_hash) of your keys to find the backed-up one.
//!
//! # Panics
//!
//! [`PoolBuilder::panic_hook`](crate::PoolBuilder::panic_hook) sees every panic a task raises as
//! a [`PanicReport`](crate::PanicReport): the message, the context hash (for lane tasks), the
//! thread's name, and the payload when no task handle took it. The pool counts them in
//! [`Stats::panicked_tasks`](crate::Stats::panicked_tasks) and logs each one (below).
//!
//! # Tracing
//!
//! keyway emits [`tracing`](https://docs.rs/tracing) events (nothing is printed unless the
//! application installs a subscriber, such as `tracing-subscriber`'s `fmt`). Every thread of a
//! pool — workers, reserved threads, the monitor — runs inside a span named `keyway_pool` whose
//! field `pool` is the pool's [name](crate::PoolBuilder::name) (by default its thread-name prefix,
//! `"keyway"`), so a filter can select one pool, e.g. with `tracing-subscriber`'s `EnvFilter`:
//! `RUST_LOG='keyway[keyway_pool{pool=orders}]=debug'`. Events about a pool also carry the `pool`
//! field themselves, so they name their pool when raised on a caller's thread.
//!
//! The pool's events (target `keyway::…`; the message is the event's text):
//!
//! | level | message | fields |
//! |---|---|---|
//! | ERROR | `keyway task panicked` | `pool`; `context_hash` (lane tasks; as [`Pool::context_hash`](crate::Pool::context_hash) gives); `thread` (its name); `panic` (the panic's message) |
//! | ERROR | `keyway panic hook panicked` | `pool` |
//! | ERROR | `keyway: dropping an idle lane's key panicked` | `pool` |
//! | ERROR | `keyway: a context key's Hash, Eq or Drop panicked; task handed back` | none: raised on the submitting thread, whose call also returns [`SubmitError::KeyPanicked`](crate::SubmitError::KeyPanicked) |
//! | ERROR | `keyway: a context key's Drop panicked (contained)` | none (in the pool's span when on a pool thread) |
//! | ERROR | `keyway: dropping a task that did not run panicked` | `panic` (in the pool's span when on a pool thread) |
//! | WARN | `keyway could not add an auxiliary thread` | `pool`, `error` (the OS's) |
//! | WARN | `keyway could not start a reserved thread` | `pool`, `error` |
//! | INFO | `keyway grew its core threads` | `pool`, `core` (the new core size) |
//! | DEBUG | `keyway worker blocked in one task` | `pool`, `slot` (the thread's position) |
//! | DEBUG | `keyway moved work away from a blocked worker` | `pool`, `slot`, `moved` (jobs moved; see [`Stats::jobs_moved_off_blocked`](crate::Stats::jobs_moved_off_blocked)) |
//! | DEBUG | `keyway added an auxiliary thread` | `pool`, `live` (threads now) |
//! | DEBUG | `keyway auxiliary thread retired` | `pool`, `slot` |
//! | DEBUG | `keyway reserved thread retired` | `pool` |
//! | DEBUG | `keyway shutdown_now` | `pool`, `handed_back` (tasks returned to the caller) |
//!
//! The other parts name what they belong to:
//!
//! | level | message | fields |
//! |---|---|---|
//! | ERROR | `keyway sequencer: a turn panicked; the turns after it go on` | `ticket`, `panic` |
//! | ERROR | `keyway sequencer: the panic hook panicked` | `ticket` |
//! | ERROR | `keyway strategy: the producer panicked; production released` | `panic` |
//! | ERROR | `keyway strategy: a task run in place panicked` | `mode` (`"PC"`, `"EPC"`, `"PIC"`), `panic` |
//! | ERROR | `keyway scheduler: user code panicked` | `executor` (its name) |
//! | ERROR | `keyway scheduler: a step failed; going on` | none |
//! | ERROR | `keyway scheduler: a dropped task panicked` | none |
//! | DEBUG | `keyway scheduler: driver exited` | none |
//! | TRACE | `keyway scheduler: released` (a task handed to the pool, when its executor's limit allowed it) | `executor` |
//!
//! # Example
//!
//! Two pools; the subscriber keeps only the events of the one named `orders`:
//!
//! ```
//! use std::io::Write;
//! use std::sync::{Arc, Mutex};
//!
//! #[derive(Clone, Default)]
//! struct Log(Arc<Mutex<Vec<u8>>>);
//! impl Write for Log {
//!     fn write(&mut self, b: &[u8]) -> std::io::Result<usize> { self.0.lock().unwrap().write(b) }
//!     fn flush(&mut self) -> std::io::Result<()> { Ok(()) }
//! }
//!
//! let log = Log::default();
//! let writer = log.clone();
//! tracing_subscriber::fmt()
//!     .with_env_filter("keyway[keyway_pool{pool=orders}]=error")
//!     .with_writer(move || writer.clone())
//!     .with_ansi(false)
//!     .init();
//!
//! let orders = keyway::Pool::builder().name("orders").build()?;
//! let audit = keyway::Pool::builder().name("audit").build()?;
//! orders.execute_sequential("acct-7", || panic!("insufficient funds"))?;
//! audit.execute(|| panic!("not shown"))?;
//! orders.shutdown();
//! audit.shutdown();
//! println!("{}", orders.stats()); // threads: 0 core, ...; tasks: 0 waiting, 0 running, ...
//!
//! let text = String::from_utf8(log.0.lock().unwrap().clone())?;
//! assert!(text.contains("keyway task panicked"), "{text}");
//! assert!(text.contains("insufficient funds"), "{text}");
//! assert!(text.contains(&orders.context_hash(&"acct-7").to_string()), "{text}");
//! assert!(!text.contains("not shown"), "{text}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
