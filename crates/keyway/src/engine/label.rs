//! Printable lane labels: [`LaneLabel`], a key's `Debug` text cut to a bounded length, and
//! [`Labels`], the key types a pool knows how to print.
//!
//! A label is made only for a lane that a snapshot lists (`Stats::largest_lanes`,
//! `Metrics::longest_running`), when the snapshot is taken: nothing is done on a task's path.
//! The key's `Debug` is user code: it runs on the thread taking the snapshot (the pool's
//! monitor, with the `metrics` feature), outside every lock of the pool, and a panic in it is
//! contained (the lane is then listed without a label).

use std::any::{Any, TypeId};
use std::fmt::{self, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// The most bytes of a key's text a [`LaneLabel`] keeps.
const MAX: usize = 48;

/// A lane's printable label: the `Debug` text of its key, at most 48 bytes (cut at a
/// character boundary; [`is_truncated`](LaneLabel::is_truncated) says whether it was cut).
///
/// Keys of the common types (integers, `bool`, `char`, `String`, `&'static str`, `Box<str>`,
/// `Arc<str>`) are labelled by every pool; other key types once the pool is told to with
/// [`PoolBuilder::label_keys`](crate::PoolBuilder::label_keys). A label is computed only for a
/// lane a snapshot lists, as the snapshot is taken, never as tasks are submitted or run.
///
/// ```
/// use std::sync::mpsc::channel;
/// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
/// let (release, gate) = channel::<()>();
/// let (started, running) = channel::<()>();
/// pool.execute_sequential(String::from("orders-7"), move || {
///     started.send(()).unwrap();
///     gate.recv().unwrap()
/// })
/// .unwrap();
/// running.recv().unwrap();
/// pool.execute_sequential(String::from("orders-7"), || ()).unwrap(); // waits behind the first
/// let label = pool.stats().largest_lanes[0].label.unwrap();
/// assert_eq!(label.as_str(), "\"orders-7\"");
/// assert!(!label.is_truncated());
/// release.send(()).unwrap();
/// pool.shutdown();
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaneLabel {
    bytes: [u8; MAX],
    len: u8,
    truncated: bool,
}

impl LaneLabel {
    /// The label's text (without the mark of a cut).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let label = pool.lane_label(&42u32).unwrap();
    /// assert_eq!(label.as_str(), "42");
    /// # pool.shutdown();
    /// ```
    pub fn as_str(&self) -> &str {
        // Only whole characters are ever copied in (`Cut::write_str`).
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }

    /// Whether the key's text was longer than 48 bytes and was cut.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let long = "x".repeat(100);
    /// let label = pool.lane_label(&long).unwrap();
    /// assert!(label.is_truncated());
    /// assert!(label.as_str().len() <= 48);
    /// assert!(label.to_string().ends_with('…')); // Display marks the cut
    /// # pool.shutdown();
    /// ```
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }

    /// `key`'s `Debug` text, cut to the bound; `None` if that `Debug` fails or panics.
    fn of_debug(print: impl FnOnce(&mut dyn Write) -> fmt::Result) -> Option<LaneLabel> {
        let mut cut = Cut {
            label: LaneLabel {
                bytes: [0; MAX],
                len: 0,
                truncated: false,
            },
        };
        match catch_unwind(AssertUnwindSafe(|| print(&mut cut))) {
            Ok(Ok(())) => Some(cut.label),
            // The cut stops a long text with an error: the label is what fitted.
            Ok(Err(fmt::Error)) if cut.label.truncated => Some(cut.label),
            Ok(Err(fmt::Error)) | Err(_) => None,
        }
    }
}

impl fmt::Display for LaneLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())?;
        if self.truncated {
            f.write_char('…')?;
        }
        Ok(())
    }
}

impl fmt::Debug for LaneLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LaneLabel({:?}", self.as_str())?;
        if self.truncated {
            f.write_str(", truncated")?;
        }
        f.write_char(')')
    }
}

/// A writer that keeps whole characters up to the bound, then stops the printing.
struct Cut {
    label: LaneLabel,
}

impl Write for Cut {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let len = usize::from(self.label.len);
        let room = MAX - len;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.label.bytes[len..len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.label.len += take as u8; // at most MAX, which fits a u8
        if take < s.len() {
            self.label.truncated = true;
            return Err(fmt::Error); // the rest would not fit: no need to print it
        }
        Ok(())
    }
}

/// Prints a key of one type (it is that type: the table looked its `TypeId` up).
type Printer = fn(&dyn Any, &mut dyn Write) -> fmt::Result;

fn debug_of<K: fmt::Debug + 'static>(key: &dyn Any, out: &mut dyn Write) -> fmt::Result {
    match key.downcast_ref::<K>() {
        Some(k) => write!(out, "{k:?}"),
        None => Err(fmt::Error),
    }
}

/// The key types a pool prints as lane labels.
#[derive(Clone)]
pub(crate) struct Labels(Arc<Vec<(TypeId, Printer)>>);

impl Labels {
    /// The common key types.
    pub(crate) fn common() -> Self {
        fn entry<K: fmt::Debug + 'static>() -> (TypeId, Printer) {
            (TypeId::of::<K>(), debug_of::<K>)
        }
        Labels(Arc::new(vec![
            entry::<u8>(),
            entry::<u16>(),
            entry::<u32>(),
            entry::<u64>(),
            entry::<u128>(),
            entry::<usize>(),
            entry::<i8>(),
            entry::<i16>(),
            entry::<i32>(),
            entry::<i64>(),
            entry::<i128>(),
            entry::<isize>(),
            entry::<bool>(),
            entry::<char>(),
            entry::<String>(),
            entry::<&'static str>(),
            entry::<Box<str>>(),
            entry::<Arc<str>>(),
        ]))
    }

    /// These and keys of type `K` (its `Debug`).
    pub(crate) fn with<K: fmt::Debug + 'static>(&self) -> Self {
        let id = TypeId::of::<K>();
        let mut list: Vec<_> = self.0.iter().copied().filter(|(t, _)| *t != id).collect();
        list.push((id, debug_of::<K>));
        Labels(Arc::new(list))
    }

    /// The label of a lane whose key is `key`, if its type is one of these.
    pub(crate) fn of(&self, key: &dyn Any) -> Option<LaneLabel> {
        let id = key.type_id();
        let &(_, print) = self.0.iter().find(|(t, _)| *t == id)?;
        LaneLabel::of_debug(|out| print(key, out))
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Labels({} key types)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_keeps_whole_characters_up_to_the_bound() {
        let labels = Labels::common();
        assert_eq!(labels.of(&7u64).unwrap().as_str(), "7");
        assert_eq!(labels.of(&"ab").unwrap().as_str(), "\"ab\"");
        // 'é' is two bytes: the quote and 23 of them are 47 bytes, the 24th does not fit.
        let long: String = "é".repeat(30);
        let l = labels.of(&long).unwrap();
        assert!(l.is_truncated());
        assert_eq!(l.as_str(), format!("\"{}", "é".repeat(23)));
        let exact = "y".repeat(MAX - 2); // with its two quotes: exactly the bound
        let l = labels.of(&exact).unwrap();
        assert!(!l.is_truncated(), "{l:?}");
        assert_eq!(l.as_str().len(), MAX);
        assert_eq!(labels.of(&3.5f64), None, "not a known key type");
    }

    #[derive(Debug)]
    struct Custom(#[allow(dead_code)] u8);

    struct Panics;
    impl fmt::Debug for Panics {
        fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
            panic!("no label for you")
        }
    }

    struct Fails;
    impl fmt::Debug for Fails {
        fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
            Err(fmt::Error)
        }
    }

    #[test]
    fn a_registered_type_is_labelled_and_a_failing_debug_gives_none() {
        let labels = Labels::common().with::<Custom>().with::<Custom>();
        assert_eq!(labels.of(&Custom(3)).unwrap().as_str(), "Custom(3)");
        assert_eq!(labels.0.len(), Labels::common().0.len() + 1);
        let labels = labels.with::<Panics>().with::<Fails>();
        assert_eq!(labels.of(&Panics), None);
        assert_eq!(labels.of(&Fails), None);
    }
}
