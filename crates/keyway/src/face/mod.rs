//! The public face: the types a user holds and every one of their methods, each a doc and a call
//! down into the layers below (lanes, futures, engine). Nothing below imports this layer.
//!
//! * `pool` — [`Pool`]: construction, plain tasks, shutdown, statistics; its other methods by
//!   topic in `pool_lanes`, `pool_keyed`, `pool_futures`, `pool_typed` and `pool_room`
//!   ([`WaitForRoom`]);
//! * `builder` — [`PoolBuilder`]; its settings and their defaults by topic in
//!   `builder_threads`, `builder_lanes` and `builder_hooks`, and the checks `build` makes in
//!   `builder_check`;
//! * `contexts`, `lane` — [`Contexts`], the keyed entry point (the key type fixed once; its
//!   methods carry the rules of per-key work, which the pool's untyped keyed methods link to),
//!   and [`Lane`] (one context's lane held open);
//! * `typed_lanes`, `typed_lane` — [`TypedLanes`] and one key's [`TypedLane`];
//! * `shutdown_async` — [`Pool::shutdown_async`] and its [`ShutdownFuture`], a graceful
//!   shutdown awaited from async code;
//! * `users` — the handles the user holds, counted apart from a scheduler's own, and what is
//!   shut down before the pool (`Attached`: a scheduler).

mod builder;
mod builder_check;
mod builder_hooks;
mod builder_lanes;
mod builder_threads;
mod contexts;
mod lane;
mod pool;
mod pool_futures;
mod pool_keyed;
mod pool_lanes;
mod pool_metrics;
mod pool_room;
mod pool_typed;
mod shutdown_async;
mod typed_lane;
mod typed_lanes;
mod users;

#[cfg(test)]
mod test;

pub use builder::PoolBuilder;
pub use contexts::Contexts;
pub use lane::Lane;
pub use pool::Pool;
pub use pool_room::WaitForRoom;
pub use shutdown_async::ShutdownFuture;
pub use typed_lane::TypedLane;
pub use typed_lanes::TypedLanes;
pub(crate) use users::Attached;
