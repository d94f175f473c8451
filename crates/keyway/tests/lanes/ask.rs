//! Requests with replies on typed lanes (`ask`): an answer reflects every message its key was
//! sent before the request, whatever else runs meanwhile; a request never leaves its asker
//! waiting for an answer that cannot come (handler panic, reply dropped, message handed back by
//! `shutdown_now` and dropped, request refused); a queued request cannot be cancelled.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{fixed_pool, shutdown_now_while_held, Gate, Latch};
use keyway::{KeyState, Reply, TaskError};

enum Msg {
    Add(u64),
    Total(Reply<u64>),
    Hold(Gate, Latch),
    Panic(Reply<u64>),
    Ignore(Reply<u64>),
}

fn counters(pool: &keyway::Pool) -> keyway::TypedLanes<u32, Msg, u64> {
    pool.typed_lanes_with_state(
        KeyState::new(|_: &u32| 0u64),
        |_: &u32, total: &mut u64, msg: Msg| match msg {
            Msg::Add(n) => *total += n,
            Msg::Total(reply) => reply.send(*total),
            Msg::Hold(gate, started) => {
                started.count_down();
                gate.wait();
            }
            Msg::Panic(_reply) => panic!("the handler panics holding the reply"),
            Msg::Ignore(reply) => drop(reply),
        },
    )
}

/// Holds `key`'s lane with a running handler until the returned gate opens.
fn hold(lanes: &keyway::TypedLanes<u32, Msg, u64>, key: u32) -> Gate {
    let (gate, started) = (Gate::new(), Latch::new(1));
    lanes
        .send(key, Msg::Hold(gate.clone(), started.clone()))
        .unwrap();
    started.wait();
    gate
}

/// Four threads send adds to eight keys and ask for the totals as they go: every answer
/// counts at least the adds its asker sent the key before asking (and at most all adds sent),
/// and the last answers count every add.
#[test]
fn an_answer_counts_every_message_sent_before_its_request() {
    const THREADS: u32 = 4;
    const KEYS: u32 = 8;
    const ADDS: u64 = 2_000;
    let pool = fixed_pool(2);
    let lanes = counters(&pool);
    let senders: Vec<_> = (0..THREADS)
        .map(|t| {
            let lanes = lanes.clone();
            std::thread::spawn(move || {
                let mut sent = [0u64; KEYS as usize];
                for i in 0..ADDS {
                    let key = (i as u32 * 7 + t) % KEYS;
                    lanes.send(key, Msg::Add(1)).unwrap();
                    sent[key as usize] += 1;
                    if i % 16 == t as u64 {
                        let total = lanes.ask(key, Msg::Total).unwrap().join().unwrap();
                        assert!(total >= sent[key as usize], "answer {total} misses adds");
                        assert!(total <= ADDS * u64::from(THREADS));
                    }
                }
                sent
            })
        })
        .collect();
    let mut expected = [0u64; KEYS as usize];
    for s in senders {
        for (e, n) in expected.iter_mut().zip(s.join().unwrap()) {
            *e += n;
        }
    }
    for key in 0..KEYS {
        let total = lanes.ask(key, Msg::Total).unwrap().join().unwrap();
        assert_eq!(total, expected[key as usize], "key {key}");
    }
}

/// A handler that panics holding the reply, or drops it, leaves the request unanswered: its
/// handle says so, the panic is reported once, and the key's next request is answered.
#[test]
fn a_reply_dropped_or_lost_to_a_panic_is_unanswered() {
    let panics = Arc::new(AtomicUsize::new(0));
    let seen = panics.clone();
    let pool = keyway::Pool::builder()
        .core_threads(2)
        .panic_hook(move |_| {
            seen.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let lanes = counters(&pool);
    lanes.send(1, Msg::Add(5)).unwrap();
    let lost = lanes.ask(1, Msg::Panic).unwrap();
    let ignored = lanes.ask(1, Msg::Ignore).unwrap();
    let answered = lanes.ask(1, Msg::Total).unwrap();
    assert!(matches!(lost.join(), Err(TaskError::Unanswered)));
    assert!(ignored.join().unwrap_err().is_unanswered());
    // The panic dropped the key's state: a new one counts from zero.
    assert_eq!(answered.join().unwrap(), 0);
    assert_eq!(panics.load(Ordering::SeqCst), 1);
}

/// Requests queued behind a running handler when `shutdown_now` stops the pool are handed
/// back; dropping them completes their handles as unanswered, so no asker hangs.
#[test]
fn requests_handed_back_and_dropped_are_unanswered() {
    let pool = fixed_pool(2);
    let lanes = counters(&pool);
    let gate = hold(&lanes, 3);
    let waiting: Vec<_> = (0..5).map(|_| lanes.ask(3, Msg::Total).unwrap()).collect();
    let handed_back = shutdown_now_while_held(&pool, &gate);
    assert_eq!(handed_back.len(), 5);
    assert!(waiting.iter().all(|h| !h.is_finished()));
    drop(handed_back);
    for handle in waiting {
        assert!(handle.join().unwrap_err().is_unanswered());
    }
}

/// A request the pool refuses comes back in the error with its reply, which nobody waits for.
#[test]
fn a_refused_request_is_handed_back_with_its_reply() {
    let pool = fixed_pool(1);
    let lanes = counters(&pool);
    pool.shutdown();
    let refused = lanes.ask(9, Msg::Total).unwrap_err();
    assert!(matches!(refused, keyway::SubmitError::Shutdown(_)));
    match refused.into_inner() {
        Msg::Total(reply) => assert!(!reply.is_wanted()),
        _ => panic!("another message came back"),
    }
    let lane_refused = lanes.lane(9).ask(Msg::Total).unwrap_err();
    assert!(matches!(lane_refused.into_inner(), Msg::Total(_)));
}

/// Once queued, a request cannot be cancelled: `cancel` says so and the answer still comes.
#[test]
fn a_queued_request_cannot_be_cancelled() {
    let pool = fixed_pool(2);
    let lanes = counters(&pool);
    let gate = hold(&lanes, 4);
    lanes.send(4, Msg::Add(2)).unwrap();
    let answer = lanes.ask(4, Msg::Total).unwrap();
    assert!(!answer.cancel());
    assert!(!answer.abort_handle().abort());
    gate.open();
    assert_eq!(answer.join().unwrap(), 2);
}

/// An async handler answers after an await; the answer is awaited from another runtime, and
/// through a pinned lane handle.
#[test]
fn an_async_handler_answers_and_the_answer_is_awaited() {
    let pool = fixed_pool(2);
    let lanes = pool.typed_lanes_async(|key: &u32, reply: Reply<u32>| {
        let key = *key;
        async move {
            keyway::yield_now().await;
            reply.send(key * 2);
        }
    });
    let by_key = lanes.ask(21, |reply| reply).unwrap();
    let by_lane = lanes.lane(5).ask(|reply| reply).unwrap();
    let answers = futures::executor::block_on(async { (by_key.await, by_lane.await) });
    assert_eq!((answers.0.unwrap(), answers.1.unwrap()), (42, 10));
}
