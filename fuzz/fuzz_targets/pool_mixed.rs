//! `pool_api`'s calls on closures mixed with futures spawned every way, handles and room
//! waiters polled with a waker whose `wake` panics, and a scheduler on the pool (a coordinator
//! whose hooks may panic, keys whose `Clone`/`Drop` may panic, delays and timeouts from zero to
//! never); then an exact account of every task, future and scheduled task. The parts are in
//! `fuzz/src`; `fuzz/README.md` says how to run it.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: keyway_fuzz::MixedInput| {
    keyway_fuzz::install_panic_hook();
    keyway_fuzz::run_mixed(input);
});
