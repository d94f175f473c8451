//! `pool_mixed`'s calls mixed with batches on the same lanes: closure batches
//! (`Contexts::execute_all`, `Lane::execute_all`, all or none) of every closure shape and size,
//! with tasks that panic or whose drop panics and iterators that panic; `execute_async_sequential`
//! futures; typed `send_all`; then `pool_mixed`'s account and each batched task's: ran at most
//! once (exactly once if accepted), dropped once, in its lane's order, refusals handed back in
//! order. The parts are in `fuzz/src`; `fuzz/README.md` says how to run it.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: keyway_fuzz::BatchInput| {
    keyway_fuzz::install_panic_hook();
    keyway_fuzz::run_batches(input);
});
