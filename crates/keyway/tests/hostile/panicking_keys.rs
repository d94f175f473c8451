//! Keys whose `Hash`, `Eq` or `Drop` panic: the task is handed back (`KeyPanicked`) with no
//! panic escaping, a key dropped when its lane is freed or its task is coalesced away kills no
//! worker, and shutdown completes. Each test fails (hangs, loses a task or kills a worker) on
//! the code before the fix.

use crate::common;

use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::{finishes, fixed_pool, Gate};
use keyway::{Pool, SubmitError};

/// A key whose `Hash` (or `Eq`, or `Drop` when `bad_drop`) panics, if told to.
struct Touchy {
    id: u32,
    bad_hash: bool,
    bad_eq: bool,
    bad_drop: bool,
}

impl Touchy {
    fn new(id: u32) -> Self {
        Touchy {
            id,
            bad_hash: false,
            bad_eq: false,
            bad_drop: false,
        }
    }
}

impl Hash for Touchy {
    fn hash<H: Hasher>(&self, h: &mut H) {
        assert!(!self.bad_hash, "Hash panics");
        self.id.hash(h)
    }
}

impl PartialEq for Touchy {
    fn eq(&self, other: &Self) -> bool {
        assert!(!self.bad_eq && !other.bad_eq, "Eq panics");
        self.id == other.id
    }
}

impl Eq for Touchy {}

impl Drop for Touchy {
    fn drop(&mut self) {
        if self.bad_drop && !std::thread::panicking() {
            panic!("Drop panics");
        }
    }
}

fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info.to_string();
            if !msg.contains("panics") {
                default(info);
            }
        }));
    });
}

/// Submits with `key` and expects the task handed back as `KeyPanicked`, with no panic escaping.
fn refused_for_key(pool: &Pool, key: Touchy) {
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let out = catch_unwind(AssertUnwindSafe(|| {
        pool.execute_sequential(key, move || r.store(true, Ordering::SeqCst))
    }));
    let err = match out {
        Ok(Err(err)) => err,
        Ok(Ok(())) => panic!("a task with a panicking key was accepted"),
        Err(_) => panic!("the key's panic escaped execute_sequential"),
    };
    assert!(matches!(err, SubmitError::KeyPanicked(_)), "{err:?}");
    err.into_inner()(); // handed back intact
    assert!(ran.load(Ordering::SeqCst));
}

#[test]
fn a_panicking_hash_hands_the_task_back_and_shutdown_completes() {
    quiet_panics();
    let pool = fixed_pool(1);
    refused_for_key(
        &pool,
        Touchy {
            bad_hash: true,
            ..Touchy::new(1)
        },
    );
    // Multi-key: one bad key among good ones; nothing queued, no lane left behind.
    let out = catch_unwind(AssertUnwindSafe(|| {
        pool.execute_keyed(
            [
                Touchy::new(2),
                Touchy::new(3),
                Touchy {
                    bad_hash: true,
                    ..Touchy::new(4)
                },
            ],
            || (),
        )
    }));
    assert!(matches!(out, Ok(Err(SubmitError::KeyPanicked(_)))));
    // The pool still works and its accounting is exact: shutdown does not wait for a ghost.
    pool.submit_sequential(Touchy::new(5), || 5)
        .unwrap()
        .join()
        .unwrap();
    let p = pool.clone();
    finishes("shutdown", move || p.shutdown());
    assert_eq!(pool.stats().live_lanes, 0);
}

#[test]
fn a_panicking_eq_or_key_drop_on_look_up_hands_the_task_back() {
    quiet_panics();
    let pool = fixed_pool(1);
    let gate = Gate::new();
    let g = gate.clone();
    // Lane 1 exists (busy), so the next look-up of id 1 compares keys.
    pool.execute_sequential(Touchy::new(1), move || g.wait())
        .unwrap();
    refused_for_key(
        &pool,
        Touchy {
            bad_eq: true,
            ..Touchy::new(1)
        },
    );
    // Found the lane, then dropped the caller's key: its Drop panics.
    refused_for_key(
        &pool,
        Touchy {
            bad_drop: true,
            ..Touchy::new(1)
        },
    );
    // Multi-key, the bad key last: the lanes found before it are let go again.
    let out = catch_unwind(AssertUnwindSafe(|| {
        pool.execute_keyed(
            [
                Touchy::new(9),
                Touchy::new(1),
                Touchy {
                    bad_eq: true,
                    ..Touchy::new(1)
                },
            ],
            || (),
        )
    }));
    assert!(
        matches!(out, Ok(Err(SubmitError::KeyPanicked(_)))),
        "dedup Eq"
    );
    gate.open();
    let p = pool.clone();
    finishes("shutdown", move || p.shutdown());
    assert_eq!(pool.stats().live_lanes, 0);
}

#[test]
fn a_key_whose_drop_panics_when_its_lane_is_freed_kills_nothing() {
    quiet_panics();
    let pool = fixed_pool(1);
    for i in 0..200 {
        let key = Touchy {
            bad_drop: true,
            ..Touchy::new(i)
        };
        pool.submit_sequential(key, move || i)
            .unwrap()
            .join()
            .unwrap();
    }
    // Lanes are freed by their runner, the monitor's sweep or shutdown: none of them may die.
    assert_eq!(pool.submit(|| 7).unwrap().join().unwrap(), 7);
    let p = pool.clone();
    finishes("shutdown", move || p.shutdown());
    assert_eq!(pool.stats().live_lanes, 0);
}

/// Panics when dropped (not when run).
struct PanicOnDrop(bool);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if self.0 {
            panic!("capture Drop panics");
        }
    }
}

#[test]
fn a_panicking_drop_of_a_coalesced_away_task_is_contained() {
    quiet_panics();
    let pool = fixed_pool(1);
    let gate = Gate::new();
    let g = gate.clone();
    pool.execute_sequential("px", move || g.wait()).unwrap();
    let shown = Arc::new(Mutex::new(Vec::new()));
    for i in 0..5 {
        let s = shown.clone();
        let bomb = PanicOnDrop(true);
        let out = catch_unwind(AssertUnwindSafe(|| {
            pool.execute_coalescing("px", move || {
                let mut bomb = bomb;
                bomb.0 = false; // ran: defuse
                s.lock().unwrap().push(i)
            })
        }));
        assert!(
            matches!(out, Ok(Ok(()))),
            "submission {i} saw the replaced task's panic"
        );
    }
    gate.open();
    let p = pool.clone();
    finishes("shutdown", move || p.shutdown());
    assert_eq!(*shown.lock().unwrap(), vec![4], "the newest ran");
    assert_eq!(
        pool.stats().panicked_tasks,
        4,
        "each replaced task's panic reported"
    );
}

/// Counts its drops: the witness that a refused task was handed back, not leaked.
struct Probe(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Probe {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Found by the fuzz target (`fuzz/regressions/refused-with-a-key-whose-drop-panics`): a
/// submission refused by a shut-down pool dropped its keys after the refusal was formed, so a
/// key's panicking `Drop` unwound through the return and leaked the refused task.
#[test]
fn a_refused_task_whose_key_drop_panics_is_handed_back() {
    quiet_panics();
    let pool = fixed_pool(1);
    pool.shutdown();
    let bad = |id| Touchy {
        bad_drop: true,
        ..Touchy::new(id)
    };
    let drops = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let task = |drops: &Arc<std::sync::atomic::AtomicUsize>| {
        let probe = Probe(drops.clone());
        move || drop(probe)
    };
    // Each submission path that takes a key, refused: the task comes back, nothing unwinds.
    let refusals: Vec<Box<dyn FnOnce() -> bool>> = vec![
        Box::new({
            let (pool, t) = (pool.clone(), task(&drops));
            move || {
                matches!(
                    pool.execute_sequential(bad(1), t),
                    Err(SubmitError::Shutdown(_))
                )
            }
        }),
        Box::new({
            let (pool, t) = (pool.clone(), task(&drops));
            move || {
                matches!(
                    pool.submit_keyed([bad(2), bad(3)], t),
                    Err(SubmitError::Shutdown(_))
                )
            }
        }),
        Box::new({
            let (pool, t) = (pool.clone(), task(&drops));
            move || {
                matches!(
                    pool.submit_coalescing(bad(4), t),
                    Err(SubmitError::Shutdown(_))
                )
            }
        }),
        Box::new({
            let pool = pool.clone();
            let probe = Probe(drops.clone());
            move || {
                let lanes = pool.typed_lanes(|_: &Touchy, msg: Probe| drop(msg));
                matches!(lanes.send(bad(5), probe), Err(SubmitError::Shutdown(_)))
            }
        }),
    ];
    let n = refusals.len();
    for (i, refuse) in refusals.into_iter().enumerate() {
        let out = catch_unwind(AssertUnwindSafe(refuse));
        assert!(
            matches!(out, Ok(true)),
            "submission {i}: refused task not handed back"
        );
    }
    assert_eq!(drops.load(Ordering::SeqCst), n, "a refused task leaked");
}
