//! The production state word: who may call the producer, and who must go round again
//! (README.md beside this file, Rules 1–6).
//!
//! One `AtomicUsize`: a two-bit main state (`IDLE`, `PRODUCING`, `HANDOVER`) and two flags
//! (`REPRODUCE`, `QUEUED`). Every change is a read-modify-write with acquire and release
//! (Rule 2), and each transition is one method named after the event, returning what happened.

use crossbeam_utils::CachePadded;

use crate::loom::sync::atomic::AtomicUsize;
use crate::loom::sync::atomic::Ordering::{AcqRel, Acquire};

/// Main state: nobody produces (Rule 1).
pub(super) const IDLE: usize = 0b00;
/// Main state: exactly one thread, the owner, produces (Rule 1).
pub(super) const PRODUCING: usize = 0b01;
/// Main state: production is being handed to a reserved thread; nobody may take it but that
/// thread or, if the hand-off is refused, the owner that started it (Rule 5).
pub(super) const HANDOVER: usize = 0b10;
/// The main-state bits.
const MAIN: usize = 0b11;
/// Flag: production was requested after the owner's current `produce` call began; the owner must
/// call `produce` again before it may go idle (Rule 4). Never set with `IDLE`.
pub(super) const REPRODUCE: usize = 0b100;
/// Flag: a production run launched by `dispatch` has not started yet (Rule 6).
pub(super) const QUEUED: usize = 0b1000;

/// Checks a protocol rule in debug builds and in loom runs (which are release builds).
macro_rules! invariant {
    ($($arg:tt)*) => {
        if cfg!(any(debug_assertions, loom)) {
            assert!($($arg)*);
        }
    };
}

/// What a request for production found (`request` — `produce()` on the caller).
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub(super) enum Requested {
    /// Production was idle: the caller now owns it and must produce (Rule 3).
    Acquired,
    /// Someone owns production (or is handing it over): they will call `produce` again (Rule 4).
    Signalled,
}

/// What `dispatch` found.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub(super) enum Dispatched {
    /// Production was idle and no run was queued: the caller set `QUEUED` and must launch a run,
    /// or call [`State::abandon_queued`] if the executor refuses it (Rule 6).
    Launch,
    /// A run was already queued: it will produce after this call (Rule 6).
    Pending,
    /// Someone owns production (or is handing it over): they will go round again (Rule 4).
    Signalled,
}

/// What a queued run found when it started.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub(super) enum QueuedStart {
    /// Production was idle: the run now owns it and must produce.
    Acquired,
    /// Someone took production after the `dispatch` that queued this run; they produce after
    /// it, so the run has nothing to do (Rule 6).
    Superseded,
}

/// What the owner must do after its producer returned `None`.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub(super) enum Exhausted {
    /// `REPRODUCE` was set (and is now cleared): call `produce` again (Rule 4).
    GoRound,
    /// Production is now idle; the caller no longer owns it.
    Released,
}

/// The state word, alone on its cache line.
pub(super) struct State(CachePadded<AtomicUsize>);

impl State {
    pub(super) fn new() -> Self {
        State(CachePadded::new(AtomicUsize::new(IDLE)))
    }

    /// Applies `f` to the word until a compare-and-swap succeeds (Rule 2: acquire and release);
    /// returns the word `f` was applied to.
    #[inline(always)]
    fn update(&self, mut f: impl FnMut(usize) -> usize) -> usize {
        let mut current = self.0.load(Acquire);
        loop {
            match self
                .0
                .compare_exchange_weak(current, f(current), AcqRel, Acquire)
            {
                Ok(previous) => return previous,
                Err(actual) => current = actual,
            }
        }
    }

    /// A caller of `produce()` asks for production: takes it if idle (Rule 3), else marks that
    /// the owner must go round again (Rule 4). Always writes, even an unchanged word, so that
    /// whatever the caller did before (new data) happens-before the owner's next `produce`.
    pub(super) fn request(&self) -> Requested {
        let previous = self.update(|s| match s & MAIN {
            IDLE => (s & QUEUED) | PRODUCING,
            _ => s | REPRODUCE,
        });
        invariant!(
            previous & MAIN == IDLE || previous & MAIN == PRODUCING || previous & MAIN == HANDOVER
        );
        if previous & MAIN == IDLE {
            invariant!(
                previous & REPRODUCE == 0,
                "Rule 4: IDLE never carries REPRODUCE"
            );
            Requested::Acquired
        } else {
            Requested::Signalled
        }
    }

    /// `dispatch()`: if idle with no run queued, sets `QUEUED` for the caller to launch one;
    /// if a run is queued, leaves it; if someone produces, marks that they must go round again.
    /// Always writes, for the same reason as [`request`](State::request).
    pub(super) fn dispatch(&self) -> Dispatched {
        let previous = self.update(|s| match s & MAIN {
            IDLE => s | QUEUED,
            _ => s | REPRODUCE,
        });
        match previous & MAIN {
            IDLE if previous & QUEUED == 0 => Dispatched::Launch,
            IDLE => Dispatched::Pending,
            _ => Dispatched::Signalled,
        }
    }

    /// The executor refused the run the caller of [`dispatch`](State::dispatch) was to launch:
    /// clear the `QUEUED` flag it set (Rule 6).
    pub(super) fn abandon_queued(&self) {
        let previous = self.update(|s| s & !QUEUED);
        invariant!(
            previous & QUEUED != 0,
            "Rule 6: QUEUED belongs to its launcher"
        );
    }

    /// A queued run starts: clears `QUEUED`, and takes production if it is idle (Rule 6).
    pub(super) fn start_queued(&self) -> QueuedStart {
        let previous = self.update(|s| match s & MAIN {
            IDLE => PRODUCING,
            _ => s & !QUEUED,
        });
        invariant!(
            previous & QUEUED != 0,
            "Rule 6: a queued run finds QUEUED set"
        );
        if previous & MAIN == IDLE {
            QueuedStart::Acquired
        } else {
            QueuedStart::Superseded
        }
    }

    /// The owner's producer returned `None`: go round again if asked to, else go idle (Rule 4).
    pub(super) fn exhausted(&self) -> Exhausted {
        let previous = self.update(|s| {
            if s & REPRODUCE != 0 {
                s & !REPRODUCE
            } else {
                (s & QUEUED) | IDLE
            }
        });
        invariant!(
            previous & MAIN == PRODUCING,
            "Rule 1: only the owner goes idle"
        );
        if previous & REPRODUCE != 0 {
            Exhausted::GoRound
        } else {
            Exhausted::Released
        }
    }

    /// The owner is about to offer production to a reserved thread: `PRODUCING` → `HANDOVER`.
    /// Release: the producer's state, as the owner left it, is visible to whoever takes it.
    pub(super) fn begin_handover(&self) {
        let previous = self.update(|s| (s & !MAIN) | HANDOVER);
        invariant!(
            previous & MAIN == PRODUCING,
            "Rule 5: only the owner starts a hand-off"
        );
    }

    /// Takes production out of `HANDOVER`: the reserved thread the hand-off started, or the
    /// owner that started it if the executor refused (Rule 5). Clears `REPRODUCE`: the taker
    /// calls `produce` next, after every request made so far (Rule 4).
    pub(super) fn take_handover(&self) {
        let previous = self.update(|s| (s & QUEUED) | PRODUCING);
        invariant!(
            previous & MAIN == HANDOVER,
            "Rule 5: exactly one taker per hand-off"
        );
    }

    /// A thread that consumed a task after handing production off tries to produce again, as
    /// Jetty's does: takes production only if it is idle (Rule 3). Never waits, and a failure
    /// needs no write: nobody asked this thread for anything.
    pub(super) fn try_retake(&self) -> bool {
        let mut current = self.0.load(Acquire);
        while current & MAIN == IDLE {
            match self
                .0
                .compare_exchange_weak(current, current | PRODUCING, AcqRel, Acquire)
            {
                Ok(_) => return true,
                Err(actual) => current = actual,
            }
        }
        false
    }

    /// The owner's producer panicked: give production up (Rule 9). Returns true if a request
    /// was pending (`REPRODUCE`), which the caller must now pass on with a `dispatch`.
    pub(super) fn release_after_panic(&self) -> bool {
        let previous = self.update(|s| (s & QUEUED) | IDLE);
        invariant!(
            previous & MAIN == PRODUCING,
            "Rule 1: only the owner releases"
        );
        previous & REPRODUCE != 0
    }

    /// The raw word, for `Debug` and the tests.
    pub(super) fn load(&self) -> usize {
        self.0.load(Acquire)
    }
}

/// Names the word for `Debug`: `PRODUCING|REPRODUCE`.
pub(super) fn describe(word: usize) -> String {
    let mut out = String::from(match word & MAIN {
        IDLE => "IDLE",
        PRODUCING => "PRODUCING",
        HANDOVER => "HANDOVER",
        _ => "INVALID",
    });
    if word & REPRODUCE != 0 {
        out.push_str("|REPRODUCE");
    }
    if word & QUEUED != 0 {
        out.push_str("|QUEUED");
    }
    out
}
