//! What goes into the pool with each task to witness its fate, and the user code that panics on
//! purpose: keys, payloads, results, wakers, a coordinator. Every panic raised on purpose says
//! `fuzz:` (or carries a [`BombPayload`]), which the panic hook lets through.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};

use crate::input::{Hooks, KeySpec, SchedKeySpec};

/// Counts over the closures' probes.
#[derive(Default)]
pub struct Ledger {
    pub created: AtomicUsize,
    pub ran: AtomicUsize,
    pub unrun: AtomicUsize,
    /// Unrun tasks that had no handle to tell why (handle-less or detached).
    pub unrun_without_handle: AtomicUsize,
}

/// Goes with each task's closure: records whether it ran, and its fate when dropped.
pub struct Probe {
    ledger: Arc<Ledger>,
    pub ran: bool,
    has_handle: bool,
}

impl Probe {
    pub fn new(ledger: &Arc<Ledger>, has_handle: bool) -> Probe {
        ledger.created.fetch_add(1, Ordering::SeqCst);
        Probe {
            ledger: ledger.clone(),
            ran: false,
            has_handle,
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        if self.ran {
            self.ledger.ran.fetch_add(1, Ordering::SeqCst);
        } else {
            self.ledger.unrun.fetch_add(1, Ordering::SeqCst);
            if !self.has_handle {
                self.ledger
                    .unrun_without_handle
                    .fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

/// How far one task (a future, a scheduled closure) got, seen from inside it; checked against
/// its handle's outcome one by one.
#[derive(Default, Debug)]
pub struct Fate {
    /// Its body began.
    pub started: AtomicBool,
    /// 0: not ended; [`RETURNED`]; [`PANICKED`].
    pub ended: AtomicU8,
    /// How many times its [`FateProbe`] was dropped (exactly once, run or not, is the rule).
    pub drops: AtomicUsize,
    /// A scheduled task run from what `Scheduler::shutdown_now` handed back (counted
    /// `rejected` by the scheduler whatever is done with it then).
    pub handed_back: AtomicBool,
}

pub const RETURNED: u8 = 1;
pub const PANICKED: u8 = 2;

impl Fate {
    pub fn started(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }

    pub fn ended(&self) -> u8 {
        self.ended.load(Ordering::SeqCst)
    }

    pub fn handed_back(&self) -> bool {
        self.handed_back.load(Ordering::SeqCst)
    }
}

/// Moved into a task's body: dropped with it, run or not.
pub struct FateProbe(pub Arc<Fate>);

impl FateProbe {
    pub fn new() -> (FateProbe, Arc<Fate>) {
        let fate = Arc::new(Fate::default());
        (FateProbe(fate.clone()), fate)
    }

    pub fn start(&self) {
        self.0.started.store(true, Ordering::SeqCst);
    }

    /// About to return (`RETURNED`) or panic (`PANICKED`).
    pub fn end(&self, how: u8) {
        self.0.ended.store(how, Ordering::SeqCst);
    }
}

impl Drop for FateProbe {
    fn drop(&mut self) {
        self.0.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// Input classes that can be turned off while a known defect they trip is being fixed
/// (fuzz/README.md).
pub fn allowed(env: &str) -> bool {
    std::env::var_os(env).is_none()
}

/// A key whose `Hash`/`Drop` panic on request.
pub struct Key {
    spec: KeySpec,
}

pub fn key(spec: KeySpec) -> Key {
    let mut spec = spec;
    spec.id %= 8;
    spec.hash_panics &= allowed("KEYWAY_FUZZ_NO_HASH_PANICS");
    spec.drop_panics &= allowed("KEYWAY_FUZZ_NO_KEY_DROP_PANICS");
    Key { spec }
}

impl Key {
    /// Its id, 0 to 7.
    pub fn id(&self) -> u8 {
        self.spec.id
    }

    /// Whether its `Hash` or `Drop` panics.
    pub fn panics(&self) -> bool {
        self.spec.hash_panics || self.spec.drop_panics
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.spec.id == other.spec.id
    }
}

impl Eq for Key {}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        if self.spec.hash_panics {
            panic!("fuzz: key hash panics");
        }
        self.spec.id.hash(state);
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if self.spec.drop_panics && !std::thread::panicking() {
            panic!("fuzz: key drop panics");
        }
    }
}

/// A scheduled task's context key: its `Clone` or `Drop` panic on request.
#[derive(PartialEq, Eq, Hash)]
pub struct SchedKey {
    id: u8,
    clone_panics: bool,
    drop_panics: bool,
}

pub fn sched_key(spec: SchedKeySpec) -> SchedKey {
    SchedKey {
        id: spec.id % 8,
        clone_panics: spec.clone_panics,
        drop_panics: spec.drop_panics && allowed("KEYWAY_FUZZ_NO_KEY_DROP_PANICS"),
    }
}

impl Clone for SchedKey {
    fn clone(&self) -> Self {
        if self.clone_panics {
            panic!("fuzz: key clone panics");
        }
        SchedKey {
            id: self.id,
            clone_panics: self.clone_panics,
            drop_panics: self.drop_panics,
        }
    }
}

impl Drop for SchedKey {
    fn drop(&mut self) {
        if self.drop_panics && !std::thread::panicking() {
            panic!("fuzz: key drop panics");
        }
    }
}

/// A panic payload whose drop panics (the pool drops it when it reports the panic).
pub struct BombPayload;

impl Drop for BombPayload {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("fuzz: payload drop panics");
        }
    }
}

/// A result whose drop may panic.
pub struct Out(pub bool);

impl Drop for Out {
    fn drop(&mut self) {
        if self.0 && !std::thread::panicking() {
            panic!("fuzz: result drop panics");
        }
    }
}

/// A waker whose `wake` panics.
struct PanickingWake;

impl Wake for PanickingWake {
    fn wake(self: Arc<Self>) {
        panic!("fuzz: waker panics");
    }
}

pub fn panicking_waker() -> Waker {
    Waker::from(Arc::new(PanickingWake))
}

/// A coordinator whose hooks panic on request (its share is the whole limit).
pub struct Coordinator(pub Hooks);

impl keyway::Coordinator for Coordinator {
    fn join(&self, _executor: &str, _limit: f64) {
        if self.0.join_panics {
            panic!("fuzz: coordinator join panics");
        }
    }

    fn leave(&self, _executor: &str) {
        if self.0.leave_panics {
            panic!("fuzz: coordinator leave panics");
        }
    }

    fn share(&self, _executor: &str, limit: f64) -> f64 {
        if self.0.share_panics {
            panic!("fuzz: coordinator share panics");
        }
        limit
    }
}

/// libFuzzer's hook aborts on every panic, caught or not. The panics this target raises on
/// purpose (messages starting `fuzz:`, or a [`BombPayload`]) are expected and contained by the
/// pool; any other panic — a failed check here, or one inside keyway — still aborts and is
/// reported as a crash.
pub fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let fuzzer_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("");
            if !message.starts_with("fuzz:") && !payload.is::<BombPayload>() {
                fuzzer_hook(info);
            }
        }));
    });
}
