//! What must not compile: tasks that cannot cross threads, and keys of the wrong type.
//!
//! A task that is not `Send` is refused at compile time:
//!
//! ```compile_fail,E0277
//! let pool = keyway::Pool::new().unwrap();
//! let shared = std::rc::Rc::new(1);
//! pool.execute(move || drop(shared)).unwrap();
//! ```
//!
//! A context key must be shareable between threads:
//!
//! ```compile_fail,E0277
//! let pool = keyway::Pool::new().unwrap();
//! let key = std::cell::Cell::new(1);
//! pool.execute_sequential(key, || ()).unwrap();
//! ```
//!
//! A result that is not `Send` cannot come back through a handle:
//!
//! ```compile_fail,E0277
//! let pool = keyway::Pool::new().unwrap();
//! let handle = pool.submit(|| std::rc::Rc::new(1)).unwrap();
//! ```
//!
//! A typed lane's messages must be `Send`:
//!
//! ```compile_fail,E0277
//! let pool = keyway::Pool::new().unwrap();
//! let lanes = pool.typed_lanes(|_k: &u8, _m: std::rc::Rc<u8>| ());
//! ```
//!
//! A builder whose result is dropped configures nothing: `#[must_use]` says so (the same lines
//! compile once the builder is used).
//!
//! ```compile_fail
//! #![deny(unused_must_use)]
//! keyway::Pool::builder().core_threads(2).stack_size(1 << 20);
//! ```
//!
//! ```
//! #![deny(unused_must_use)]
//! let pool = keyway::Pool::builder().core_threads(2).stack_size(1 << 20).build().unwrap();
//! # pool.shutdown();
//! ```
//!
//! An abort handle that is asked for and dropped at once is a mistake:
//!
//! ```compile_fail
//! #![deny(unused_must_use)]
//! let pool = keyway::Pool::new().unwrap();
//! let handle = pool.submit(|| 1).unwrap();
//! handle.abort_handle();
//! # handle.join().unwrap();
//! ```
//!
//! An abort handle can be moved to other threads and shared (`Clone + Send + Sync`):
//!
//! ```
//! fn shareable<T: Clone + Send + Sync + 'static>(_: &T) {}
//! let pool = keyway::Pool::new().unwrap();
//! let handle = pool.submit(|| 1).unwrap();
//! shareable(&handle.abort_handle());
//! # handle.join().unwrap();
//! ```
//!
//! A bank whose audits hold every account as a `u64` cannot key a transfer by `usize` accounts
//! once its contexts are typed (with the untyped API, the two would be different lanes and the
//! audits would see transfers half done):
//!
//! ```compile_fail,E0271
//! let pool = keyway::Pool::new().unwrap();
//! let accounts = pool.contexts::<u64>();
//! accounts.execute_keyed(0..100u64, || { /* audit: sum every balance */ }).unwrap();
//! let (from, to): (usize, usize) = (3, 4);
//! accounts.execute_keyed([from, to], || { /* move money */ }).unwrap();
//! ```
