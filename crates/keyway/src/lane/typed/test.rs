//! Unit tests of a pinned typed lane's send: its admission, inlined into the send, refuses as
//! every other submission does and hands the message back.

use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

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
