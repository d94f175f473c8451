//! Random builder settings and random sequences of public API calls on closures on one pool,
//! then an exact account of every task. The parts are in `fuzz/src`; `fuzz/README.md` says how
//! to run it and which input classes an environment variable turns off.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: keyway_fuzz::Input| {
    keyway_fuzz::install_panic_hook();
    keyway_fuzz::run(input);
});
