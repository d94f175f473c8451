//! The pool's tracing events as a subscriber sees them: each names its pool (`pool` field), the
//! panic event names the context and thread and keeps its text out of the reserved `message`
//! field, and pool threads run inside a `keyway_pool` span a filter can select.
//!
//! A test binary of its own: the capturing subscriber is the process-wide default (pool threads
//! are not the test's thread, so a thread-local default would miss them), which can be set once
//! per process and would see the events of every other test running in it.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

type Fields = HashMap<String, String>;

#[derive(Debug, Clone)]
struct Captured {
    fields: Fields,
    /// The innermost entered span: its name and fields.
    span: Option<(String, Fields)>,
}

#[derive(Default)]
struct Capture {
    next_id: AtomicU64,
    spans: Mutex<HashMap<u64, (String, Fields)>>,
    events: Mutex<Vec<Captured>>,
}

thread_local! {
    static ENTERED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

struct Collect<'a>(&'a mut Fields);

impl Visit for Collect<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

struct Sub(Arc<Capture>);

impl Subscriber for Sub {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = self.0.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fields = Fields::new();
        span.record(&mut Collect(&mut fields));
        let name = span.metadata().name().to_owned();
        self.0.spans.lock().unwrap().insert(id, (name, fields));
        Id::from_u64(id)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::new();
        event.record(&mut Collect(&mut fields));
        let span = ENTERED
            .with(|e| e.borrow().last().copied())
            .and_then(|id| self.0.spans.lock().unwrap().get(&id).cloned());
        self.0
            .events
            .lock()
            .unwrap()
            .push(Captured { fields, span });
    }
    fn enter(&self, id: &Id) {
        ENTERED.with(|e| e.borrow_mut().push(id.into_u64()));
    }
    fn exit(&self, id: &Id) {
        ENTERED.with(|e| {
            let mut e = e.borrow_mut();
            if let Some(pos) = e.iter().rposition(|&x| x == id.into_u64()) {
                e.remove(pos);
            }
        });
    }
    // Spans are never closed in this capture: ids are not reused, so none is needed.
}

#[test]
fn events_name_the_pool_the_context_and_the_panic_without_the_reserved_field() {
    let capture = Arc::new(Capture::default());
    tracing::subscriber::set_global_default(Sub(capture.clone())).unwrap();

    let orders = keyway::Pool::builder()
        .name("orders")
        .thread_name("ord")
        .core_threads(2)
        .build()
        .unwrap();
    let other = keyway::Pool::builder().name("other").build().unwrap();
    let typed = orders.typed_lanes(|key: &u32, _: ()| panic!("oops {key}"));
    for key in 0..16u32 {
        typed.send(key, ()).unwrap();
    }
    let h = orders
        .submit_sequential("client-9", || -> () { panic!("oops client") })
        .unwrap();
    assert!(h.join().unwrap_err().is_panic());
    orders.shutdown();
    other.execute(|| panic!("elsewhere")).unwrap();
    other.shutdown();
    let pending = other.shutdown_now();
    assert!(pending.is_empty());

    let events = capture.events.lock().unwrap().clone();
    let panics: Vec<_> = events
        .iter()
        .filter(|e| e.fields.get("message").map(String::as_str) == Some("keyway task panicked"))
        .collect();
    assert_eq!(panics.len(), 18, "{events:#?}");
    let mut typed_keys_seen = 0;
    for e in &panics {
        let f = &e.fields;
        let pool = f.get("pool").expect("the panic event names its pool");
        // The pool's span wraps every pool thread: a filter on `keyway_pool{pool=...}` works.
        let (span, span_fields) = e.span.as_ref().expect("raised inside the pool's span");
        assert_eq!(span, "keyway_pool");
        assert_eq!(span_fields.get("pool"), Some(pool));
        let text = f.get("panic").expect("the panic's text is in `panic`");
        assert!(text.starts_with("oops") || text == "elsewhere", "{f:?}");
        assert!(f.contains_key("thread"), "{f:?}");
        if pool == "orders" {
            assert!(f["thread"].starts_with("ord-"), "{f:?}");
            let hash: u64 = f["context_hash"].parse().unwrap();
            if let Some(key) = text
                .strip_prefix("oops ")
                .and_then(|k| k.parse::<u32>().ok())
            {
                assert_eq!(hash, orders.context_hash(&key), "{f:?}");
                typed_keys_seen += 1;
            } else {
                assert_eq!(hash, orders.context_hash(&"client-9"), "{f:?}");
            }
        } else {
            assert_eq!(pool, "other");
            assert!(
                !f.contains_key("context_hash"),
                "a plain task has no context: {f:?}"
            );
        }
    }
    assert_eq!(typed_keys_seen, 16);
    // An event raised on the caller's thread (outside any pool span) still names its pool.
    let stop = events
        .iter()
        .find(|e| e.fields.get("message").map(String::as_str) == Some("keyway shutdown_now"))
        .expect("shutdown_now's event");
    assert_eq!(stop.fields.get("pool").map(String::as_str), Some("other"));
    assert!(stop.span.is_none());
}
