//! `pool_batches`' own calls, on lanes the other calls use too: closure batches
//! (`Contexts::execute_all`, `Lane::execute_all`, their all-or-none forms) of every closure
//! shape and size, with tasks that panic or whose drop panics and iterators that panic; single
//! sequential and coalescing closures in the same lanes; `execute_async_sequential` futures
//! that complete at once, wait or panic; typed lanes' `send_all` / `send_all_or_none`, `send`
//! and `send_coalescing`, with a sync and an async handler. Each task carries a [`Token`]; the
//! account is [`Witness::check`]'s.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use keyway::{PendingTask, Pool, SubmitError, TypedLanes};

use crate::typed::Msg;

use crate::closures::act;
use crate::input::{BatchLane, BatchOp, Body, FutBody, KeySpec, Pattern, Shape, Size};
use crate::probes::{allowed, key, Key};
use crate::witness::{
    check_back, check_kind, check_refusal, Answer, Bomb, Expect, PanicAt, Token, Witness,
};

/// Runs of the zero-sized closures (they carry no token); reset as a run starts.
static ZST_RUNS: AtomicUsize = AtomicUsize::new(0);

/// What the calls need of the run.
pub struct Env<'a> {
    pub pool: &'a Pool,
    /// Where a task's `shutdown_now` puts what it gets back.
    pub back: &'a Arc<Mutex<Vec<PendingTask>>>,
    /// The pool has a capacity.
    pub bounded: bool,
}

/// A batch's lane, its key made.
enum Target {
    Context(Key),
    Lane(u32),
}

impl Target {
    /// The lane, its number in the log, and whether its key may panic.
    fn of(lane: BatchLane) -> (Target, u8, bool) {
        match lane {
            BatchLane::Context(spec) => {
                let k = key(spec);
                let (id, panics) = (k.id(), k.panics());
                (Target::Context(k), id, panics)
            }
            BatchLane::Lane(id) => {
                let id = id % 4;
                (Target::Lane(u32::from(id)), 8 + id, false)
            }
        }
    }
}

/// A batch's shape of call: how many, what they do, all or none, where the iterator panics.
pub(crate) struct Call {
    pub(crate) n: usize,
    pub(crate) whole: bool,
    /// The iterator panics when asked for this item.
    pub(crate) at: Option<usize>,
}

impl Call {
    pub(crate) fn new(size: Size, whole: bool, iter_panics: Option<u16>) -> Call {
        let n = size.get();
        let at = iter_panics.map(|j| usize::from(j) % (n + 1));
        Call { n, whole, at }
    }

    /// The answer as [`Witness::settle`] takes it: an unwinding call must be the iterator's
    /// panic; the tasks it gave before may have been accepted unless the batch was all or none.
    pub(crate) fn unwound(&self, fired: bool) -> Option<(usize, usize)> {
        let at = self.at.filter(|_| fired)?;
        Some((at, if self.whole { 0 } else { at }))
    }
}

/// `pool_batches`' part of a run.
#[derive(Default)]
pub struct Batches {
    pub(crate) witness: Witness,
    /// Zero-sized tasks surely accepted, and at most accepted.
    zst_sure: usize,
    zst_max: usize,
    pub(crate) sync_lanes: Option<TypedLanes<u8, Msg>>,
    pub(crate) async_lanes: Option<TypedLanes<u8, Msg>>,
    /// What the nested batches' tasks found: (first token, tasks, accepted).
    nested: Arc<Mutex<Vec<(usize, usize, usize)>>>,
    /// A task that may call `shutdown_now` was submitted.
    pub shutdown_now_inside: bool,
}

impl Batches {
    pub fn new() -> Batches {
        ZST_RUNS.store(0, Ordering::SeqCst);
        Batches::default()
    }

    pub fn apply(&mut self, env: &Env<'_>, op: BatchOp) {
        match op {
            BatchOp::ExecuteAll {
                lane,
                shape,
                size,
                pattern,
                all_or_none,
                iter_panics,
            } => {
                let call = Call::new(size, all_or_none, iter_panics);
                match shape {
                    Shape::Small => self
                        .execute_all(env, lane, &call, pattern, |t, b, x, e| task(t, b, x, (), e)),
                    Shape::Padded8 => self.execute_all(env, lane, &call, pattern, |t, b, x, e| {
                        task(t, b, x, [1u64; 1], e)
                    }),
                    Shape::Padded24 => self.execute_all(env, lane, &call, pattern, |t, b, x, e| {
                        task(t, b, x, [3u64; 3], e)
                    }),
                    Shape::Large => self.execute_all(env, lane, &call, pattern, |t, b, x, e| {
                        task(t, b, x, [64u64; 64], e)
                    }),
                    Shape::Aligned => self.execute_all(env, lane, &call, pattern, |t, b, x, e| {
                        task(t, b, x, Aligned(7), e)
                    }),
                    Shape::Boxed => self.execute_all(env, lane, &call, pattern, boxed),
                    Shape::ZeroSized => self.zero_sized(env, lane, &call),
                }
            }
            BatchOp::Single {
                lane,
                coalescing,
                body,
                bomb,
            } => self.single(env, lane, coalescing, body, bomb),
            BatchOp::AsyncSequential { key, body, bomb } => {
                self.async_sequential(env, key, body, bomb)
            }
            BatchOp::SendAll {
                handler,
                lane,
                size,
                pattern,
                all_or_none,
                iter_panics,
            } => {
                let call = Call::new(size, all_or_none, iter_panics);
                self.send_all(env, handler, lane % 4, &call, pattern)
            }
            BatchOp::Send {
                handler,
                key,
                coalescing,
                body,
                bomb,
            } => self.send(env, handler, key % 4, coalescing, body, bomb),
            BatchOp::Nested {
                outer,
                inner,
                size,
                pattern,
                all_or_none,
            } => {
                let call = Call::new(size, all_or_none, None);
                self.nested(env, outer % 4, inner, call, pattern)
            }
        }
    }

    /// A lane task's body, as the input's switches allow.
    fn gate(&mut self, body: Body) -> Body {
        match body {
            Body::ShutdownNow if !allowed("KEYWAY_FUZZ_NO_LANE_SHUTDOWN_NOW") => Body::Quick,
            Body::ShutdownNow => {
                self.shutdown_now_inside = true;
                body
            }
            other => other,
        }
    }

    fn execute_all<F>(
        &mut self,
        env: &Env<'_>,
        lane: BatchLane,
        call: &Call,
        pattern: Pattern<Body>,
        make: impl Fn(Token, Body, bool, &Env<'_>) -> F,
    ) where
        F: FnOnce() + Send + 'static,
    {
        let (target, code, key_panics) = Target::of(lane);
        let first = self.witness.made();
        let mut tasks = Vec::with_capacity(call.n);
        for i in 0..call.n {
            let (body, bomb) = pattern.of(i, Body::Quick);
            let body = self.gate(body);
            let (t, _) = self.witness.token(code);
            tasks.push(make(t, body, bomb, env));
        }
        let (answer, fired) = submit_all(env.pool, target, tasks, call);
        let unwound = call.unwound(fired);
        self.witness.settle(
            answer,
            first,
            call.n,
            unwound,
            key_panics,
            env.bounded,
            call.whole,
        );
    }

    /// A batch of closures that capture nothing: counted, not witnessed one by one.
    fn zero_sized(&mut self, env: &Env<'_>, lane: BatchLane, call: &Call) {
        let (target, _, key_panics) = Target::of(lane);
        let tasks: Vec<_> = (0..call.n).map(|_| zero_sized()).collect();
        let (answer, fired) = submit_all(env.pool, target, tasks, call);
        let accepted = match answer {
            Ok(Ok(())) => call.n,
            Ok(Err(e)) => {
                let kind = e.kind();
                let m = e.into_inner().len();
                check_refusal(kind, m, call.n, call.whole, key_panics, env.bounded);
                call.n - m
            }
            Err(()) => {
                let (_, kept) = call
                    .unwound(fired)
                    .expect("a batch call unwound, and its iterator did not");
                self.zst_max += kept;
                return;
            }
        };
        self.zst_sure += accepted;
        self.zst_max += accepted;
    }

    fn single(&mut self, env: &Env<'_>, lane: BatchLane, coalescing: bool, body: Body, bomb: bool) {
        let (target, code, key_panics) = Target::of(lane);
        let body = self.gate(body);
        let (t, i) = self.witness.token(code);
        let f = task(t, body, bomb, (), env);
        let pool = env.pool;
        let answer = catch_unwind(AssertUnwindSafe(|| match (target, coalescing) {
            (Target::Context(k), false) => pool.contexts::<Key>().execute_sequential(k, f),
            (Target::Context(k), true) => pool.contexts::<Key>().execute_coalescing(k, f),
            (Target::Lane(id), false) => pool.lane(id).execute(f),
            (Target::Lane(id), true) => pool.lane(id).execute_coalescing(f),
        }));
        let answer = answer.unwrap_or_else(|_| panic!("a lane submission unwound"));
        self.settle_one(answer, i, coalescing, key_panics, env.bounded);
    }

    /// The answer to a submission of one task, the one of token `i`.
    pub(crate) fn settle_one<T>(
        &mut self,
        answer: Result<(), SubmitError<T>>,
        i: usize,
        coalescing: bool,
        key_panics: bool,
        bounded: bool,
    ) {
        match answer {
            Ok(()) if coalescing => self.witness.expect(i, Expect::Coalescible),
            Ok(()) => self.witness.expect(i, Expect::Accepted),
            Err(e) => {
                check_kind(e.kind(), key_panics, bounded);
                self.witness.handed_back(vec![e.into_inner()], i);
            }
        }
    }

    fn async_sequential(&mut self, env: &Env<'_>, spec: KeySpec, body: FutBody, bomb: bool) {
        let k = key(spec);
        let (code, key_panics) = (k.id(), k.panics());
        let (t, i) = self.witness.token(code);
        let fut = future(t, body, Bomb(bomb));
        let answer = catch_unwind(AssertUnwindSafe(|| {
            env.pool.execute_async_sequential(k, fut)
        }));
        let answer = answer.unwrap_or_else(|_| panic!("execute_async_sequential unwound"));
        self.settle_one(answer, i, false, key_panics, env.bounded);
    }

    /// A task in the lane of `Lane` handle `outer` that submits a batch of `call.n` tasks to
    /// `inner` from its pool thread and checks the refusal there, as [`Witness::settle`] does;
    /// its tasks' expectations are set at the end from what it found (none if it never ran:
    /// its tasks never did either).
    fn nested(
        &mut self,
        env: &Env<'_>,
        outer: u8,
        inner: BatchLane,
        call: Call,
        pattern: Pattern<Body>,
    ) {
        let (target, inner_code, key_panics) = Target::of(inner);
        // Its own order: the batches of one outer lane's tasks, submitted in their order.
        let code = 32 + outer * 16 + inner_code;
        let first = self.witness.made();
        let (mut tasks, mut seen) = (Vec::with_capacity(call.n), Vec::with_capacity(call.n));
        for i in 0..call.n {
            let (body, bomb) = pattern.of(i, Body::Quick);
            let body = self.gate(body);
            let (t, j) = self.witness.token(code);
            self.witness.expect(j, Expect::Unrun);
            seen.push(self.witness.seen_of(j));
            tasks.push(task(t, body, bomb, (), env));
        }
        let (t, i) = self.witness.token(8 + outer);
        let (pool, bounded, found) = (env.pool.clone(), env.bounded, self.nested.clone());
        // Boxed: a refusal's error holds it.
        let submitter = Box::new(move || {
            let t = t;
            t.start();
            let accepted = match submit_all(&pool, target, tasks, &call).0 {
                Ok(Ok(())) => call.n,
                Ok(Err(e)) => {
                    let kind = e.kind();
                    let back = e.into_inner();
                    let m = back.len();
                    check_refusal(kind, m, call.n, call.whole, key_panics, bounded);
                    check_back(back, &seen[call.n - m..]);
                    call.n - m
                }
                Err(()) => panic!("execute_all unwound on a pool thread"),
            };
            found.lock().unwrap().push((first, call.n, accepted));
        });
        let pool = env.pool;
        let answer = catch_unwind(AssertUnwindSafe(|| {
            pool.lane(u32::from(outer)).execute(submitter)
        }));
        let answer = answer.unwrap_or_else(|_| panic!("a lane submission unwound"));
        self.settle_one(answer, i, false, false, env.bounded);
    }

    /// The account, once every task ran or was handed back and run or dropped.
    pub fn check(self, ran_handed_back: bool) {
        // The typed lanes first: a message's token must be gone with them (nothing kept).
        drop((self.sync_lanes, self.async_lanes));
        let mut witness = self.witness;
        for &(first, n, accepted) in self.nested.lock().unwrap().iter() {
            for j in first..first + n {
                let e = if j < first + accepted {
                    Expect::Accepted
                } else {
                    Expect::Refused
                };
                witness.expect(j, e);
            }
        }
        witness.check(ran_handed_back);
        let runs = ZST_RUNS.load(Ordering::SeqCst);
        assert!(
            runs <= self.zst_max,
            "zero-sized tasks: {runs} ran, at most {} accepted",
            self.zst_max
        );
        if ran_handed_back {
            assert!(
                runs >= self.zst_sure,
                "zero-sized tasks: {runs} ran, {} accepted (lost)",
                self.zst_sure
            );
        }
    }
}

/// Submits `tasks` as a batch in `target`'s lane, through an iterator that panics at
/// `call.at`: the answer (`Err(())`: the call unwound) and whether the iterator panicked.
fn submit_all<F>(pool: &Pool, target: Target, tasks: Vec<F>, call: &Call) -> (Answer<F>, bool)
where
    F: FnOnce() + Send + 'static,
{
    let (it, fired) = PanicAt::new(tasks.into_iter(), call.at);
    let answer = catch_unwind(AssertUnwindSafe(|| match target {
        Target::Context(k) => {
            let contexts = pool.contexts::<Key>();
            if call.whole {
                contexts.execute_all_or_none(k, it)
            } else {
                contexts.execute_all(k, it)
            }
        }
        Target::Lane(id) => {
            let lane = pool.lane(id);
            if call.whole {
                lane.execute_all_or_none(it)
            } else {
                lane.execute_all(it)
            }
        }
    }))
    .map_err(drop);
    (answer, fired.get())
}

/// Over-aligned padding (never read: it is there for its layout).
#[repr(align(64))]
#[allow(dead_code)]
struct Aligned(u8);

/// A lane task: `body`, with its token and `pad` in its closure; its drop panics if `bomb`.
fn task<P: Send + 'static>(
    t: Token,
    body: Body,
    bomb: bool,
    pad: P,
    env: &Env<'_>,
) -> impl FnOnce() + Send + 'static {
    let (pool, back, bomb) = (env.pool.clone(), env.back.clone(), Bomb(bomb));
    move || {
        // Moved whole into the closure, and dropped at its end (or as its panic unwinds).
        let (_bomb, t, pad) = (bomb, t, pad);
        t.start();
        std::hint::black_box(&pad);
        act(body, &pool, &back);
    }
}

/// Boxed tasks of two closure types in turn.
fn boxed(t: Token, body: Body, bomb: bool, env: &Env<'_>) -> Box<dyn FnOnce() + Send> {
    if t.seq().is_multiple_of(2) {
        Box::new(task(t, body, bomb, (), env))
    } else {
        Box::new(task(t, body, bomb, [5u64; 5], env))
    }
}

fn zero_sized() -> impl FnOnce() + Send + 'static {
    || {
        ZST_RUNS.fetch_add(1, Ordering::SeqCst);
    }
}

/// A future for `execute_async_sequential`, with its token and `bomb`.
async fn future(t: Token, body: FutBody, bomb: Bomb) {
    let (_bomb, t) = (bomb, t);
    t.start();
    crate::futures::act(body, || {}).await;
}
