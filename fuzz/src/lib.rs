//! The fuzz targets' parts (`pool_api`: closures; `pool_mixed`: closures, futures, wakers, a
//! scheduler; `pool_batches`: `pool_mixed`'s and batches) (fuzz/README.md says what it does and how to run it):
//!
//! * `input` — what an input decodes to;
//! * `probes` — what goes into the pool with each task to witness its fate, and the user code
//!   that panics on purpose (keys, payloads, results, wakers, a coordinator);
//! * `closures` — the pool from random settings, closures submitted every way;
//! * `futures` — futures spawned every way, handles and room waiters polled with panicking
//!   wakers;
//! * `handles` — the handles a run keeps, and the calls on one an input picks;
//! * `schedule` — a scheduler on the pool, its tasks and their account;
//! * `batches` — `pool_batches`' calls: closure batches, typed `send_all`, async sequential
//!   futures and single lane tasks beside them;
//! * `typed` — `pool_batches`' typed lanes and their calls;
//! * `witness` — what each of those carries, and their account (runs, drops, lane order,
//!   refusals);
//! * `run` — one run: the calls in order, the end, the account.

pub mod batches;
pub mod closures;
pub mod futures;
pub mod handles;
pub mod input;
pub mod probes;
pub mod run;
pub mod schedule;
pub mod typed;
pub mod witness;

pub use input::{BatchInput, Input, MixedInput};
pub use probes::install_panic_hook;
pub use run::{run, run_batches, run_mixed};
