//! What must not compile: tasks that cannot cross threads.
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
