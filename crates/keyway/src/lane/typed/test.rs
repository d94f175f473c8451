//! Unit tests of a pinned typed lane's send: its admission, inlined into the send, refuses as
//! every other submission does and hands the message back; and of a key's state slot: the
//! `on_idle` hook's count is taken once per lane, not per message.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use super::state::{KeyState, Keyed};
use crate::{Pool, SubmitError};

/// A full pool refuses a pinned send with `Full`, a shut-down pool with `Shutdown`, the message
/// handed back both times and never handled.
#[test]
fn a_pinned_send_is_refused_and_handed_back_when_full_or_shut_down() {
    let pool = Pool::builder().core_threads(1).capacity(1).build().unwrap();
    let (started_tx, started) = channel();
    let (release, gate) = channel::<()>();
    let (started_tx, gate) = (Mutex::new(started_tx), Mutex::new(gate));
    let handled = Arc::new(Mutex::new(Vec::new()));
    let seen = handled.clone();
    let lanes = pool.typed_lanes(move |_key: &u8, msg: u32| {
        seen.lock().unwrap().push(msg);
        if msg == 0 {
            started_tx.lock().unwrap().send(()).unwrap();
            gate.lock().unwrap().recv().unwrap();
        }
    });
    let lane = lanes.lane(7);
    lane.send(0).unwrap();
    started.recv().unwrap();
    assert!(matches!(lane.send(1), Err(SubmitError::Full(1))));
    release.send(()).unwrap();
    pool.shutdown();
    assert!(matches!(lane.send(2), Err(SubmitError::Shutdown(2))));
    assert_eq!(*handled.lock().unwrap(), [0]);
}

/// An async handler's state goes from the key's slot to its future and back with every
/// message: the slot keeps the `on_idle` hook meanwhile (one count, taken with the lane's first
/// state), and the lane's release hands the last state to it.
#[test]
fn a_key_slot_keeps_its_hook_while_the_state_comes_and_goes() {
    let saved = Arc::new(AtomicU32::new(0));
    let s = saved.clone();
    let spec = KeyState::new(|_: &u8| 0u32).on_idle(move |_: &u8, n: u32| {
        s.store(n, Ordering::SeqCst);
    });
    let hook = spec.on_idle.clone().unwrap();
    let keyed = Keyed::new(7u8);
    let first = keyed.take_state(&spec).unwrap(); // made by `init`
    keyed.place_state(&spec, first).drop_contained();
    for _ in 0..3 {
        let n = keyed.take_state(&spec).unwrap();
        // The spec's, the slot's and this test's, the state out of the slot or in it.
        assert_eq!(Arc::strong_count(&hook), 3);
        keyed.place_state(&spec, n + 1).drop_contained();
        assert_eq!(Arc::strong_count(&hook), 3);
    }
    drop(keyed);
    assert_eq!(saved.load(Ordering::SeqCst), 3);
    assert_eq!(Arc::strong_count(&hook), 2);
}
