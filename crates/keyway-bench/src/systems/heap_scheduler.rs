//! `heap-scheduler`: what a competent user writes without a scheduler library — a binary heap
//! of (due time, task) under one mutex, and worker threads that sleep on a condition variable
//! until the earliest task is due.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use super::ScheduleSystem;

type Job = Box<dyn FnOnce() + Send>;

struct Item {
    due: Instant,
    seq: u64,
    job: Job,
}

impl PartialEq for Item {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Item {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.seq).cmp(&(other.due, other.seq))
    }
}

#[derive(Default)]
struct State {
    heap: BinaryHeap<Reverse<Item>>,
    seq: u64,
    stop: bool,
}

/// The heap, its lock and condition variable, and the worker threads.
pub struct HeapScheduler {
    shared: Arc<(Mutex<State>, Condvar)>,
    workers: Vec<JoinHandle<()>>,
}

fn worker(shared: &(Mutex<State>, Condvar)) {
    let (lock, cv) = shared;
    let mut st = lock.lock().unwrap();
    loop {
        if st.stop {
            return;
        }
        let now = Instant::now();
        match st.heap.peek() {
            Some(Reverse(top)) if top.due <= now => {
                let Reverse(item) = st.heap.pop().expect("peeked");
                // Another worker may take the next one while this one runs.
                if st.heap.peek().is_some() {
                    cv.notify_one();
                }
                drop(st);
                (item.job)();
                st = lock.lock().unwrap();
            }
            Some(Reverse(top)) => {
                let wait = top.due - now;
                st = cv.wait_timeout(st, wait).unwrap().0;
            }
            None => st = cv.wait(st).unwrap(),
        }
    }
}

impl ScheduleSystem for HeapScheduler {
    const NAME: &'static str = "heap-scheduler";

    fn build(threads: usize) -> Result<Self, String> {
        let shared = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let workers = (0..threads)
            .map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("heap-scheduler-{i}"))
                    .spawn(move || worker(&shared))
                    .map_err(|e| format!("spawning a heap-scheduler worker: {e}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { shared, workers })
    }

    fn schedule_at<F: FnOnce() + Send + 'static>(
        &self,
        due: Instant,
        task: F,
    ) -> Result<(), String> {
        let (lock, cv) = &*self.shared;
        let mut st = lock.lock().unwrap();
        let earliest = st.heap.peek().is_none_or(|Reverse(top)| due < top.due);
        st.seq += 1;
        let seq = st.seq;
        st.heap.push(Reverse(Item {
            due,
            seq,
            job: Box::new(task),
        }));
        drop(st);
        if earliest {
            cv.notify_one();
        }
        Ok(())
    }

    fn shutdown(self) {
        let (lock, cv) = &*self.shared;
        {
            let mut st = lock.lock().unwrap();
            st.stop = true;
            st.heap.clear();
        }
        cv.notify_all();
        for w in self.workers {
            let _ = w.join();
        }
    }
}
