//! Async typed lanes of a pool bound to a runtime, off the pool's threads: a message handed back
//! by `shutdown_now` and run by its taker, and a key's save run by the thread that freed its
//! lane once the pool stopped, run inside the pool's runtime, wherever the lanes were made (in
//! no runtime, or in another one).

use std::sync::mpsc::{channel, Sender};
use std::time::Duration;

use keyway::{AsyncKeyState, KeyState, Pool, TypedLanes};
use tokio::runtime::Id;

use super::{
    bound_pool_of_one, bound_pool_with_busy_worker, current_runtime, hold_the_worker,
    shutdown_now_while_busy,
};

/// What a handler says of one message: the message, the runtime its handler (or its key's
/// load) was called in, and the one its future was polled in.
type Said = (u32, Option<Id>, Option<Id>);

/// Sleeps on tokio's timer (which panics outside a runtime that has one).
async fn tokio_sleep() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

/// Async typed lanes whose handler tells `said` where it was called and polled, then sleeps.
fn stateless(pool: &Pool, said: &Sender<Said>) -> TypedLanes<u32, u32> {
    let said = said.clone();
    pool.typed_lanes_async(move |_: &u32, n: u32| {
        let (said, called) = (said.clone(), current_runtime());
        async move {
            said.send((n, called, current_runtime())).unwrap();
            tokio_sleep().await;
        }
    })
}

/// As `stateless`, with a count per key as the handler's state.
fn with_state(pool: &Pool, said: &Sender<Said>) -> TypedLanes<u32, u32, u32> {
    let said = said.clone();
    let state = KeyState::new(|_: &u32| 0u32);
    pool.typed_lanes_async_with_state(state, move |_: &u32, count: u32, n: u32| {
        let (said, called) = (said.clone(), current_runtime());
        async move {
            said.send((n, called, current_runtime())).unwrap();
            tokio_sleep().await;
            count + 1
        }
    })
}

/// Lanes whose state is loaded by a future that sleeps and keeps the runtime it was called in;
/// the handler tells `said` that runtime and the one its future was polled in.
fn loaded(pool: &Pool, said: &Sender<Said>) -> TypedLanes<u32, u32, keyway::Loaded<Option<Id>>> {
    let said = said.clone();
    let state = AsyncKeyState::new(|_: &u32| {
        let called = current_runtime();
        async move {
            tokio_sleep().await;
            Ok::<_, String>(called)
        }
    });
    pool.typed_lanes_async_loaded(state, move |_: &u32, loaded_in, n: u32| {
        let said = said.clone();
        async move {
            let loaded_in = loaded_in.unwrap();
            said.send((n, loaded_in, current_runtime())).unwrap();
            tokio_sleep().await;
            Some(loaded_in)
        }
    })
}

/// Messages of async typed lanes (plain, with state, with state loaded by a future) handed back
/// by `shutdown_now` and run on a thread in no runtime: each handler (each load) is called, and
/// each future polled, inside the pool's runtime, whether the lanes were made in no runtime or
/// inside another one; each future's tokio timer works.
#[test]
fn async_typed_messages_handed_back_run_in_the_bound_runtime() {
    let (runtime, pool, release) = bound_pool_with_busy_worker();
    let other = tokio::runtime::Runtime::new().unwrap();
    let (said, heard) = channel();
    // The only worker is busy: each message waits in its lane.
    let plain = stateless(&pool, &said);
    plain.send(1, 1).unwrap();
    let in_other = {
        let _other = other.enter();
        (
            stateless(&pool, &said),
            with_state(&pool, &said),
            loaded(&pool, &said),
        )
    };
    in_other.0.send(1, 2).unwrap();
    in_other.1.send(1, 3).unwrap();
    in_other.2.send(1, 4).unwrap();
    let pending = shutdown_now_while_busy(&pool, release);
    assert_eq!(pending.len(), 4);
    assert_eq!(
        current_runtime(),
        None,
        "this test's thread is in no runtime"
    );
    let ran: Vec<_> = pending.into_iter().map(|task| task.run()).collect();
    let mut heard: Vec<Said> = heard.try_iter().collect();
    heard.sort_by_key(|(n, _, _)| *n);
    let bound = Some(runtime.handle().id());
    assert_eq!(
        heard,
        (1..=4).map(|n| (n, bound, bound)).collect::<Vec<_>>(),
        "(message, called in, polled in)"
    );
    for run in ran {
        assert!(
            run.is_ok(),
            "{:?}",
            run.err().map(|r| r.message().to_owned())
        );
    }
}

/// A key's save started once the pool has stopped (its lane, pinned through the shutdown, freed
/// with its table after it) runs on the thread that freed the lane (here, in no runtime), inside the pool's
/// runtime, though the lanes were made in no runtime: its tokio timer works.
#[test]
fn a_save_refused_by_a_stopped_bound_pool_runs_in_its_runtime() {
    let (runtime, pool) = bound_pool_of_one();
    let (saved_tx, saved) = channel();
    let state = AsyncKeyState::new(|_: &u32| async { Ok::<u32, String>(0) }).on_idle(
        move |_: &u32, count: u32| {
            let saved_tx = saved_tx.clone();
            async move {
                let called = current_runtime();
                tokio_sleep().await;
                saved_tx.send((count, called)).unwrap();
                Ok(())
            }
        },
    );
    let lanes = pool.typed_lanes_async_loaded(state, |_: &u32, count, (): ()| async move {
        Some(count.unwrap() + 1)
    });
    let lane = lanes.lane(7);
    lane.send(()).unwrap();
    lanes.flush(7).unwrap().join().unwrap();
    pool.shutdown();
    assert!(
        saved.try_recv().is_err(),
        "the lane is pinned: not saved yet"
    );
    assert_eq!(
        current_runtime(),
        None,
        "this test's thread is in no runtime"
    );
    drop((lane, lanes)); // freed here: the pool refuses the save, which runs here
    assert_eq!(
        saved.try_recv(),
        Ok((1, Some(runtime.handle().id()))),
        "(the state saved, the runtime the save ran in)"
    );
}

/// A message of an async typed lane with state handed back by `shutdown_now` and run by its
/// taker (a thread in no runtime) gets the key's state from its slot, where the lane's earlier
/// message left it, and its future's output goes back there: `on_idle` finds it. Its future
/// runs in the pool's runtime (the lanes were made in another one).
#[test]
fn a_handed_back_message_with_state_continues_the_keys_state() {
    let (runtime, pool) = bound_pool_of_one();
    let other = tokio::runtime::Runtime::new().unwrap();
    let (idle_tx, idle) = channel();
    let (said, heard) = channel();
    let state = KeyState::new(|_: &u32| 0u32)
        .on_idle(move |_: &u32, count: u32| idle_tx.send(count).unwrap());
    let lanes = {
        let _other = other.enter();
        let said = said.clone();
        pool.typed_lanes_async_with_state(state, move |_: &u32, count: u32, n: u32| {
            let said = said.clone();
            async move {
                tokio_sleep().await;
                said.send((n, count, current_runtime())).unwrap();
                count + n
            }
        })
    };
    lanes.send(1, 10).unwrap();
    lanes.flush(1).unwrap().join().unwrap();
    // The key's lane is idle, kept with its state (10); its next message waits unstarted.
    let release = hold_the_worker(&pool);
    lanes.send(1, 5).unwrap();
    let pending = shutdown_now_while_busy(&pool, release);
    assert_eq!(pending.len(), 1);
    for task in pending {
        task.run().unwrap();
    }
    drop(lanes);
    assert_eq!(idle.try_iter().collect::<Vec<_>>(), [15], "on_idle: 10 + 5");
    let bound = Some(runtime.handle().id());
    assert_eq!(
        heard.try_iter().collect::<Vec<_>>(),
        [(10, 0, bound), (5, 10, bound)],
        "(message, state given, polled in)"
    );
}
