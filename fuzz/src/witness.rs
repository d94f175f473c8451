//! What `pool_batches` puts in each task of a batch (and each task beside them in the same
//! lanes) to witness its fate: a [`Token`] that counts the task's runs and drops and logs where it
//! started in its lane; what the run expects of each ([`Expect`]); and the account at the end —
//! each task ran at most once (exactly once if it was accepted, could not be coalesced away and
//! handed-back tasks were run), each was dropped exactly once, each lane ran its tasks in the
//! order they were submitted, and a refusal handed back the refused tasks, in order.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use keyway::{SubmitError, SubmitErrorKind};

/// One task's runs and drops.
#[derive(Default, Debug)]
pub struct Seen {
    runs: AtomicUsize,
    drops: AtomicUsize,
}

impl Seen {
    /// Runs and drops so far.
    fn now(&self) -> (usize, usize) {
        (
            self.runs.load(Ordering::SeqCst),
            self.drops.load(Ordering::SeqCst),
        )
    }
}

/// `back`, handed back by a refusal, must be the tasks `seen` witnesses, in order, none run, none
/// dropped yet: each is dropped here, and the one dropped must be the one expected.
pub fn check_back<T>(back: Vec<T>, seen: &[Arc<Seen>]) {
    assert_eq!(back.len(), seen.len());
    for (j, (t, s)) in back.into_iter().zip(seen).enumerate() {
        assert_eq!(
            s.now(),
            (0, 0),
            "task {j} handed back by a refusal ran or was dropped before"
        );
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(t)));
        assert_eq!(
            s.now(),
            (0, 1),
            "task {j} handed back by a refusal is not the task expected there (order)"
        );
    }
}

/// Where each task started, in the order they started: its lane's number and its submission
/// number.
type Log = Mutex<Vec<(u8, u64)>>;

/// Goes with a task into the pool (moved whole into its closure, message or future): dropped
/// with it, run or not.
pub struct Token {
    seen: Arc<Seen>,
    lane: u8,
    seq: u64,
    log: Arc<Log>,
}

impl Token {
    /// The task starts: one run more, and its place in its lane logged.
    pub fn start(&self) {
        self.seen.runs.fetch_add(1, Ordering::SeqCst);
        self.log.lock().unwrap().push((self.lane, self.seq));
    }
}

impl Token {
    /// Its submission number.
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        self.seen.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// A batch submission's answer: accepted, refused (what came back), or the call unwound.
pub type Answer<T> = Result<Result<(), SubmitError<Vec<T>>>, ()>;

/// What a task's fate must be, as its submission answered.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Expect {
    /// Accepted: it runs, or is handed back.
    Accepted,
    /// Accepted as a coalescing task: it runs, is handed back or is replaced.
    Coalescible,
    /// Refused, and handed back to the caller (checked as it came back).
    Refused,
    /// Never accepted: dropped unrun (a batch given up while its iterator panicked).
    Unrun,
    /// Accepted or not: its batch's iterator panicked, and what it gave may have been refused.
    Unknown,
}

/// Every token of a run, what each must come to, and the log of starts.
#[derive(Default)]
pub struct Witness {
    log: Arc<Log>,
    next_seq: u64,
    tasks: Vec<(Arc<Seen>, Expect)>,
}

impl Witness {
    /// A token for a task of lane `lane`, submitted after every token made before; its index.
    pub fn token(&mut self, lane: u8) -> (Token, usize) {
        let seen = Arc::new(Seen::default());
        self.tasks.push((seen.clone(), Expect::Unknown));
        self.next_seq += 1;
        let token = Token {
            seen,
            lane,
            seq: self.next_seq,
            log: self.log.clone(),
        };
        (token, self.tasks.len() - 1)
    }

    /// How many tokens were made.
    pub fn made(&self) -> usize {
        self.tasks.len()
    }

    pub fn expect(&mut self, i: usize, e: Expect) {
        self.tasks[i].1 = e;
    }

    fn seen(&self, i: usize) -> (usize, usize) {
        self.tasks[i].0.now()
    }

    /// The answer to a submission of the `n` tasks (or messages) whose tokens are
    /// `first..first + n`, made in order. `unwound`: the call unwound (only the iterator may
    /// make it: `gave` tasks given before it panicked, of which the first `kept` may have been
    /// accepted). `key_panics`: the key may panic; `bounded`: the pool has a capacity; `whole`:
    /// all or none.
    #[allow(clippy::too_many_arguments)]
    pub fn settle<T>(
        &mut self,
        answer: Answer<T>,
        first: usize,
        n: usize,
        unwound: Option<(usize, usize)>,
        key_panics: bool,
        bounded: bool,
        whole: bool,
    ) {
        match answer {
            Ok(Ok(())) => {
                for i in first..first + n {
                    self.expect(i, Expect::Accepted);
                }
            }
            Ok(Err(e)) => {
                let kind = e.kind();
                let back = e.into_inner();
                let m = back.len();
                check_refusal(kind, m, n, whole, key_panics, bounded);
                for i in first..first + n - m {
                    self.expect(i, Expect::Accepted);
                }
                self.handed_back(back, first + n - m);
            }
            Err(()) => {
                let (gave, kept) = unwound.expect("a batch call unwound, and its iterator did not");
                for i in first..first + n {
                    let e = if i < first + kept {
                        Expect::Unknown
                    } else {
                        Expect::Unrun
                    };
                    self.expect(i, e);
                }
                assert!(gave <= n);
            }
        }
    }

    /// `back`, handed back by a refusal, must be the tasks `from..` in order (see
    /// [`check_back`]).
    pub fn handed_back<T>(&mut self, back: Vec<T>, from: usize) {
        let m = back.len();
        let seen: Vec<Arc<Seen>> = (from..from + m).map(|i| self.seen_of(i)).collect();
        check_back(back, &seen);
        for i in from..from + m {
            self.expect(i, Expect::Refused);
        }
    }

    /// Task `i`'s runs and drops, to be watched elsewhere.
    pub fn seen_of(&self, i: usize) -> Arc<Seen> {
        self.tasks[i].0.clone()
    }

    /// The account: runs and drops of each task, and each lane's order.
    pub fn check(&self, ran_handed_back: bool) {
        for (i, (seen, e)) in self.tasks.iter().enumerate() {
            let (runs, drops) = self.seen(i);
            assert_eq!(drops, 1, "a task dropped {drops} times ({e:?}, {seen:?})");
            assert!(runs <= 1, "a task ran {runs} times ({e:?})");
            match e {
                Expect::Refused | Expect::Unrun => {
                    assert_eq!(runs, 0, "a task never accepted ran ({e:?})")
                }
                Expect::Accepted if ran_handed_back => {
                    assert_eq!(runs, 1, "an accepted task never ran (lost)")
                }
                _ => {}
            }
        }
        let log = self.log.lock().unwrap();
        let mut last = [0u64; 256];
        for &(lane, seq) in log.iter() {
            let before = &mut last[usize::from(lane)];
            assert!(
                seq > *before,
                "lane {lane}: task {seq} started after task {before}, submitted later"
            );
            *before = seq;
        }
    }
}

/// A batch's refusal: a reason the call could have, and the part handed back (`m` of `n`) one
/// it could hand back: a tail, the whole batch if all or none or the key panicked.
pub fn check_refusal(
    kind: SubmitErrorKind,
    m: usize,
    n: usize,
    whole: bool,
    key_panics: bool,
    bounded: bool,
) {
    check_kind(kind, key_panics, bounded);
    assert!(m <= n, "a refusal handed back {m} of a batch of {n}");
    assert!(m > 0 || n == 0, "a refusal of a batch handed back nothing");
    if whole || matches!(kind, SubmitErrorKind::KeyPanicked) {
        assert_eq!(m, n, "a whole batch refused ({kind:?}) in part");
    }
}

/// A refusal's reason must be one the call could have.
pub fn check_kind(kind: SubmitErrorKind, key_panics: bool, bounded: bool) {
    match kind {
        SubmitErrorKind::KeyPanicked => assert!(key_panics, "KeyPanicked for a quiet key"),
        SubmitErrorKind::Full => assert!(bounded, "Full from a pool without a capacity"),
        SubmitErrorKind::Shutdown => {}
        other => panic!("a refusal this target does not know: {other:?}"),
    }
}

/// An iterator that panics when asked for item `at` (`None`: never), and says whether it did.
/// Its size hint is short (0 to all) when it may panic, exact otherwise.
pub struct PanicAt<I> {
    inner: I,
    given: usize,
    at: Option<usize>,
    fired: Rc<Cell<bool>>,
}

impl<I> PanicAt<I> {
    pub fn new(inner: I, at: Option<usize>) -> (Self, Rc<Cell<bool>>) {
        let fired = Rc::new(Cell::new(false));
        let it = PanicAt {
            inner,
            given: 0,
            at,
            fired: fired.clone(),
        };
        (it, fired)
    }
}

impl<I: Iterator> Iterator for PanicAt<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        if Some(self.given) == self.at {
            self.fired.set(true);
            panic!("fuzz: batch iterator panics");
        }
        self.given += 1;
        self.inner.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let (low, high) = self.inner.size_hint();
        match self.at {
            Some(_) => (0, high),
            None => (low, high),
        }
    }
}

/// A value whose drop panics on request (in a task's closure, a message, a future).
pub struct Bomb(pub bool);

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.0 && !std::thread::panicking() {
            panic!("fuzz: a task's drop panics");
        }
    }
}
