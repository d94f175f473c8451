//! What a panic caught in a turn looks like to the [panic hook](super::Sequencer::set_panic_hook).

use std::any::Any;
use std::fmt;

/// A hook called with every panic caught in a turn.
pub(super) type PanicHook = dyn Fn(&TicketPanic<'_>) + Send + Sync + 'static;

/// A panic caught while running a turn, as given to the
/// [panic hook](super::Sequencer::set_panic_hook). (A panic in a pool task is a
/// [`PanicReport`](crate::PanicReport) instead.)
///
/// # Examples
///
/// ```
/// use keyway::Sequencer;
/// use std::sync::{Arc, Mutex};
///
/// let sequencer = Sequencer::new(4).unwrap();
/// let seen = Arc::new(Mutex::new(None));
/// let seen2 = Arc::clone(&seen);
/// sequencer.set_panic_hook(move |report| {
///     *seen2.lock().unwrap() = Some((report.ticket(), report.message().map(String::from)));
/// });
/// let _ = sequencer.next_ticket().run(|| {});
/// let _ = sequencer.next_ticket().run(|| panic!("bad frame"));
/// assert_eq!(*seen.lock().unwrap(), Some((1, Some("bad frame".to_string()))));
/// ```
pub struct TicketPanic<'a> {
    pub(super) ticket: u64,
    pub(super) payload: &'a (dyn Any + Send),
}

impl<'a> TicketPanic<'a> {
    /// The number of the ticket whose closure panicked.
    ///
    /// ```
    /// use keyway::Sequencer;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    ///
    /// let sequencer = Sequencer::new(8).unwrap();
    /// let last = Arc::new(AtomicU64::new(0));
    /// let l = Arc::clone(&last);
    /// sequencer.set_panic_hook(move |report| l.store(report.ticket(), Ordering::Relaxed));
    /// for n in 0..5 {
    ///     let _ = sequencer.next_ticket().run(move || assert!(n != 3));
    /// }
    /// assert_eq!(last.load(Ordering::Relaxed), 3);
    /// ```
    pub fn ticket(&self) -> u64 {
        self.ticket
    }

    /// The panic payload, as `std::panic::catch_unwind` returns it.
    ///
    /// ```
    /// use keyway::Sequencer;
    /// use std::sync::atomic::{AtomicI32, Ordering};
    /// use std::sync::Arc;
    ///
    /// let sequencer = Sequencer::new(1).unwrap();
    /// let code = Arc::new(AtomicI32::new(0));
    /// let c = Arc::clone(&code);
    /// sequencer.set_panic_hook(move |report| {
    ///     if let Some(n) = report.payload().downcast_ref::<i32>() {
    ///         c.store(*n, Ordering::Relaxed);
    ///     }
    /// });
    /// let _ = sequencer.next_ticket().run(|| std::panic::panic_any(42_i32));
    /// assert_eq!(code.load(Ordering::Relaxed), 42);
    /// ```
    pub fn payload(&self) -> &'a (dyn Any + Send) {
        self.payload
    }

    /// The panic message, when the payload is a string (as with `panic!("...")`).
    ///
    /// ```
    /// use keyway::Sequencer;
    /// use std::sync::{Arc, Mutex};
    ///
    /// let sequencer = Sequencer::new(1).unwrap();
    /// let messages = Arc::new(Mutex::new(Vec::new()));
    /// let m = Arc::clone(&messages);
    /// sequencer.set_panic_hook(move |report| {
    ///     m.lock().unwrap().push(report.message().map(String::from));
    /// });
    /// let _ = sequencer.next_ticket().run(|| panic!("frame {} is corrupt", 7));
    /// let _ = sequencer.next_ticket().run(|| std::panic::panic_any(7_u8));
    /// assert_eq!(*messages.lock().unwrap(), [Some("frame 7 is corrupt".to_string()), None]);
    /// ```
    pub fn message(&self) -> Option<&'a str> {
        payload_message(self.payload)
    }
}

impl fmt::Debug for TicketPanic<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TicketPanic")
            .field("ticket", &self.ticket)
            .field("message", &self.message())
            .finish()
    }
}

/// The message of a `panic!` payload, if it is a string.
pub(super) fn payload_message(payload: &(dyn Any + Send)) -> Option<&str> {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        Some(s)
    } else {
        payload.downcast_ref::<String>().map(String::as_str)
    }
}
