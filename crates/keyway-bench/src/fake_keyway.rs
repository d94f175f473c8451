//! TEMPORARY stand-in for the keyway API until the library compiles. Not for commit.
#![allow(missing_docs, dead_code)]
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
type Job = Box<dyn FnOnce() -> bool + Send>;
struct Inner {
    senders: Mutex<Option<Vec<crossbeam_channel::Sender<Job>>>>,
    list: Vec<crossbeam_channel::Sender<Job>>,
    rr: AtomicUsize,
    handles: Mutex<Vec<JoinHandle<()>>>,
}
#[derive(Clone)]
pub struct Pool(Arc<Inner>);
pub struct Builder(usize);
#[derive(Debug)]
pub struct BuildError;
impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("build")
    }
}
pub struct SubmitError<F>(pub F);
impl Builder {
    pub fn core_threads(self, n: usize) -> Self {
        Builder(n)
    }
    pub fn build(self) -> Result<Pool, BuildError> {
        let mut list = vec![];
        let mut handles = vec![];
        for _ in 0..self.0 {
            let (tx, rx) = crossbeam_channel::unbounded::<Job>();
            list.push(tx);
            handles.push(std::thread::spawn(move || {
                for j in rx {
                    if !j() {
                        break;
                    }
                }
            }));
        }
        Ok(Pool(Arc::new(Inner {
            senders: Mutex::new(Some(list.clone())),
            list,
            rr: AtomicUsize::new(0),
            handles: Mutex::new(handles),
        })))
    }
}
impl Pool {
    pub fn builder() -> Builder {
        Builder(2)
    }
    fn send<F: FnOnce() + Send + 'static>(&self, i: usize, f: F) -> Result<(), SubmitError<F>> {
        let _ = self.0.list[i % self.0.list.len()].send(Box::new(move || {
            f();
            true
        }));
        Ok(())
    }
    pub fn execute<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<(), SubmitError<F>> {
        let i = self.0.rr.fetch_add(1, Ordering::Relaxed);
        self.send(i, f)
    }
    pub fn execute_sequential<K: Hash, F: FnOnce() + Send + 'static>(
        &self,
        k: K,
        f: F,
    ) -> Result<(), SubmitError<F>> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        k.hash(&mut h);
        self.send(h.finish() as usize, f)
    }
    pub fn lane<K: Hash>(&self, k: K) -> Lane {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        k.hash(&mut h);
        Lane(self.clone(), h.finish() as usize)
    }
    pub fn shutdown(&self) {
        self.0.senders.lock().unwrap().take();
        let hs: Vec<_> = self.0.handles.lock().unwrap().drain(..).collect();
        for tx in &self.0.list {
            let _ = tx.send(Box::new(|| false));
        }
        for h in hs {
            h.join().unwrap();
        }
    }
}
pub struct Lane(Pool, usize);
impl Lane {
    pub fn execute<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<(), SubmitError<F>> {
        self.0.send(self.1, f)
    }
}
