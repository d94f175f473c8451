//! Multi-key tasks (Explorer's design): a task names several keys; tasks sharing any key never
//! overlap and run in submission order; the others run in parallel; nothing deadlocks.
//!
//! A keyed task is one [`MultiTask`] standing as an entry in the lane of each of its keys (the
//! very lanes `execute_sequential` uses). Rule 6 of `lane/README.md`:
//!
//! * **Submission** locks the shards of all its keys in ascending shard order, appends the entry
//!   to every lane, then unlocks (two-phase locking). Any two multi-key tasks sharing a key share
//!   that key's shard lock, so their order is the same on every key they share, and the orders
//!   of all conflicting tasks embed in one total order: no cycle, so no deadlock. Ascending lock
//!   order keeps the submitters themselves from deadlocking.
//! * **Arrival**: a lane whose head is the entry *parks*: it stays scheduled with no job (no
//!   thread is held) so pushes do not restart it. Each lane arrives once: at submission if it
//!   was idle (counted by the submitter), through its runner if it was busy, or through the
//!   completion of the multi-key task before it on that lane.
//! * **Run**: whoever makes the last arrival owns the run: a submitter queues the task as a job
//!   of its own, a worker runs it. The worker then pops it from every lane and lets each go on
//!   (idle, arrived at its next multi-key task, or restarted), running next a task this made
//!   ready: a chain of multi-key tasks on busy keys needs no scheduler round-trip.
//! * **Cells**: the task's `MultiTask` goes back to a per-thread stash once the worker holds its
//!   last reference, and the next submission reuses it (`cells`): no allocation per task while
//!   the tasks in flight fit the stashes and the depot.
//!
//! * this file — submission: the look-ups, the pushes under the shard locks, the fresh lanes'
//!   arrivals;
//! * `run` — the task as its lanes see it (a `Barrier`) and the run of a chain of ready tasks;
//! * `multi` — the lane side: the push of a task, and its pop once done;
//! * `cells` — recycled task cells.

pub(super) mod cells;
mod multi;
mod run;

use std::hash::Hash;
use std::sync::Arc;

use smallvec::SmallVec;

use super::closures::{admit_entry_then, admit_then, settle, ClosureEntry, Closures};
use super::key::{catch_key, KeyPanicked};
use super::table::{LaneCore, LaneTable};
use crate::engine::{refused, NotPlain, Registry, Work};
use crate::error::SubmitError;
use crate::lane::entry::Parts;
use crate::task::{drop_quietly, Runnable, Task};
use run::{Body, MultiTask};

/// Builds a task's body, once, when its lanes are found (under their shard locks).
type MakeBody<'a, T> = &'a mut dyn FnMut() -> (T, Body);

/// Appends a multi-key task to the lanes of `keys` (two or more distinct keys). A panic of a
/// key's `Hash`, `Eq` or `Drop` is contained before anything is queued (lanes the look-up created
/// are let go again), and `make` is then not called.
fn submit_many<K, T>(
    table: &Arc<LaneTable<Closures>>,
    registry: &Arc<Registry>,
    keys: SmallVec<[K; 4]>,
    make: MakeBody<'_, T>,
) -> Result<T, KeyPanicked>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    let mut hashed: SmallVec<[(usize, u64, K); 4]> = SmallVec::new();
    let mut keys = keys.into_iter();
    for k in keys.by_ref() {
        match catch_key(|| table.hash(&k)) {
            Ok(h) => hashed.push((table.shard_index(h), h, k)),
            Err(e) => {
                drop_quietly(k);
                drop_quietly((hashed, keys));
                return Err(e);
            }
        }
    }
    hashed.sort_by_key(|&(shard, ..)| shard);
    let mut guards = SmallVec::<[_; 4]>::new();
    for &(shard, ..) in &hashed {
        if guards.last().map(|&(s, _)| s) != Some(shard) {
            guards.push((shard, table.lock_shard(shard)));
        }
    }
    let mut lanes = SmallVec::<[Arc<LaneCore<Closures>>; 4]>::new();
    let mut lane_guard = SmallVec::<[usize; 4]>::new();
    let mut g = 0;
    let mut hashed = hashed.into_iter();
    for (shard, hash, key) in hashed.by_ref() {
        while guards[g].0 != shard {
            g += 1;
        }
        let map = &mut *guards[g].1;
        match catch_key(move || table.lane_in(map, hash, key).clone()) {
            Ok(lane) => {
                lanes.push(lane);
                lane_guard.push(g);
            }
            Err(e) => {
                drop_quietly(hashed);
                // Nothing was queued: lanes the look-up created are idle again (rule 3).
                for (lane, &g) in lanes.iter().zip(&lane_guard) {
                    table.remove_if_idle(&mut guards[g].1, lane);
                }
                return Err(e);
            }
        }
    }
    let (out, multi, fresh) = push_new(table, lanes, make);
    drop(guards);
    count_fresh(registry, multi, fresh);
    Ok(out)
}

/// `submit_many` for exactly two keys (the common case: a transfer between two accounts): the
/// same steps on locals, no vectors.
fn submit_two<K, T>(
    table: &Arc<LaneTable<Closures>>,
    registry: &Arc<Registry>,
    a: K,
    b: K,
    make: MakeBody<'_, T>,
) -> Result<T, KeyPanicked>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    let hashes = catch_key(|| (table.hash(&a), table.hash(&b)));
    let Ok((ha, hb)) = hashes else {
        drop_quietly((a, b));
        return Err(KeyPanicked);
    };
    let (sa, sb) = (table.shard_index(ha), table.shard_index(hb));
    // Ascending shard order (rule 6); one lock when both keys share a shard.
    let ((s1, h1, k1), (s2, h2, k2)) = if sa <= sb {
        ((sa, ha, a), (sb, hb, b))
    } else {
        ((sb, hb, b), (sa, ha, a))
    };
    let mut g1 = table.lock_shard(s1);
    let mut g2 = (s2 != s1).then(|| table.lock_shard(s2));
    let map1 = &mut *g1;
    let l1 = match catch_key(move || table.lane_in(map1, h1, k1).clone()) {
        Ok(lane) => lane,
        Err(e) => {
            drop_quietly(k2);
            return Err(e);
        }
    };
    let map2 = match g2.as_mut() {
        Some(g) => &mut **g,
        None => &mut *g1,
    };
    let l2 = match catch_key(move || table.lane_in(map2, h2, k2).clone()) {
        Ok(lane) => lane,
        Err(e) => {
            // Nothing was queued: a lane the look-up created is idle again (rule 3).
            table.remove_if_idle(&mut g1, &l1);
            return Err(e);
        }
    };
    let (out, multi, fresh) = push_new(table, [l1, l2], make);
    drop(g2);
    drop(g1);
    count_fresh(registry, multi, fresh);
    Ok(out)
}

/// Makes the task (`make`) standing in `lanes` and appends it to each, under their shard locks
/// (the caller's). Returns it with how many lanes were idle: those park at it at once.
fn push_new<T>(
    table: &Arc<LaneTable<Closures>>,
    lanes: impl IntoIterator<Item = Arc<LaneCore<Closures>>>,
    make: MakeBody<'_, T>,
) -> (T, Arc<MultiTask>, usize) {
    let (out, body) = make();
    let multi = cells::new_task(body, lanes);
    let fresh = multi
        .lanes
        .iter()
        .filter(|lane| lane.push_multi(table, &multi))
        .count();
    (out, multi, fresh)
}

/// Rule 6, once the shard locks are let go: the submitter counts the arrivals of the lanes that
/// were idle (after every push, so the count cannot reach zero before every lane has the task).
/// If that completes the count (every lane was idle), the task is ready: it is queued as a job
/// of its own, and no lane needs one.
fn count_fresh(registry: &Arc<Registry>, multi: Arc<MultiTask>, fresh: usize) {
    if fresh > 0 && multi.arrived(fresh) {
        registry.schedule(Work::Lane(multi));
    }
}

/// Runs `f` (made a task by `wrap`) holding every key in `keys` (`Pool::execute_keyed`).
///
/// A task of several keys (or none) is made straight into the body of its cell: never a lane
/// entry first. An entry keeps three words in place and a task four, so a closure of 25 to 32
/// bytes (a `&'static`, an index and two `u32` keys, say) was boxed into an entry and unboxed
/// again into the task on the producer (measured with callgrind, `throughput --keys 2`: the
/// malloc, the free and the move were ~250 of the producer's ~1,100 instructions per task).
pub(crate) fn submit<K, F, T, R>(
    registry: &Arc<Registry>,
    lanes: &Arc<LaneTable<Closures>>,
    keys: impl IntoIterator<Item = K>,
    f: F,
    wrap: impl FnOnce(F) -> (T, R),
) -> Result<T, SubmitError<F>>
where
    K: Hash + Eq + Send + Sync + 'static,
    R: Runnable + 'static,
{
    let Ok(mut distinct) = distinct(keys) else {
        return Err(SubmitError::KeyPanicked(f));
    };
    if distinct.len() == 1 {
        let Some(key) = distinct.pop() else {
            unreachable!("one key")
        };
        return admit_then(registry, f, false, wrap, |registry, make| {
            lanes.submit(registry, key, make)
        });
    }
    let timed = match registry.admit_timing() {
        Ok(()) => false,
        Err(NotPlain::Timed) => true,
        Err(NotPlain::Refused(why)) => {
            // A key whose `Drop` panics must not unwind past the refused task (see
            // `admit_entry_then`).
            drop_quietly(distinct);
            return Err(refused(why, f));
        }
    };
    let mut parts = Some((f, wrap));
    let placed = place(registry, lanes, distinct, &mut || match parts.take() {
        Some((f, wrap)) => {
            let (out, task) = wrap(f);
            let task = Task::new(task);
            (
                out,
                Body::Run(if timed {
                    registry.timed(task).map_or_else(|task| task, Task::new)
                } else {
                    task
                }),
            )
        }
        None => unreachable!("a task's body is made once"),
    });
    settle(registry, placed, parts)
}

/// [`submit`] for any kind of entry (a future's, say).
pub(crate) fn submit_entry<K, F, T>(
    registry: &Arc<Registry>,
    lanes: &Arc<LaneTable<Closures>>,
    keys: impl IntoIterator<Item = K>,
    f: F,
    wrap: impl FnOnce(F) -> (T, ClosureEntry),
) -> Result<T, SubmitError<F>>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    let Ok(mut distinct) = distinct(keys) else {
        return Err(SubmitError::KeyPanicked(f));
    };
    admit_entry_then(registry, f, wrap, |registry, make| {
        if distinct.len() == 1 {
            return match distinct.pop() {
                Some(key) => lanes.submit(registry, key, make),
                None => unreachable!("one key"),
            };
        }
        place(registry, lanes, distinct, &mut || {
            let (out, entry) = make();
            let body = match entry.into_parts() {
                Parts::Task(task) => Body::Run(task),
                Parts::Launch(fut) => Body::Launch(fut),
                Parts::Many(_) => unreachable!("admit_then makes single entries"),
            };
            (out, body)
        })
    })
}

/// The distinct keys of `keys`, in order. De-duplication runs the keys' `Eq` (and `Drop`): a
/// panic there hands the task back.
fn distinct<K: Eq>(keys: impl IntoIterator<Item = K>) -> Result<SmallVec<[K; 4]>, KeyPanicked> {
    catch_key(|| {
        let mut distinct = SmallVec::<[K; 4]>::new();
        for key in keys {
            if !distinct.contains(&key) {
                distinct.push(key);
            }
        }
        distinct
    })
}

/// Queues the task `make` builds on the lanes of `distinct` (none, or two or more keys): a
/// task with no key is a plain one.
fn place<K, T>(
    registry: &Arc<Registry>,
    lanes: &Arc<LaneTable<Closures>>,
    mut distinct: SmallVec<[K; 4]>,
    make: MakeBody<'_, T>,
) -> Result<T, KeyPanicked>
where
    K: Hash + Eq + Send + Sync + 'static,
{
    match distinct.len() {
        0 => {
            let (out, body) = make();
            let task = match body {
                Body::Run(task) => task,
                Body::Launch(fut) => Task::new(fut.into_runnable(Arc::downgrade(registry))),
            };
            registry.schedule(Work::Task(task));
            Ok(out)
        }
        2 => match (distinct.pop(), distinct.pop()) {
            (Some(b), Some(a)) => submit_two(lanes, registry, a, b, make),
            _ => unreachable!("two keys"),
        },
        _ => submit_many(lanes, registry, distinct, make),
    }
}
