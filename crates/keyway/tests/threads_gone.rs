//! Shutdown returns once the threads it ends are gone, not only done: `Scheduler::shutdown` and
//! `shutdown_now` once the scheduler's thread has exited, and `Pool::shutdown` once a
//! background finisher (`keyway-shutdown`, started by a shutdown called on a pool thread) has.
//!
//! Its own test binary: the tests look for threads by name in the process's thread list
//! (`/proc/self/task`), and a test of another file running beside them in the same process
//! (a pool shut down from inside a task) would start a `keyway-shutdown` thread of its own.

mod common;

use std::sync::mpsc::channel;
use std::time::Duration;

use common::{finishes, jobs_scheduler};
use keyway::{ExecutorConfig, Pool, Scheduler};

/// `Scheduler::shutdown` and `shutdown_now` return once the scheduler's thread is gone, not
/// only done (found by the `pool_mixed` fuzz target: LeakSanitizer saw the thread's
/// thread-local destructors still pending after a run had ended).
#[cfg(target_os = "linux")]
#[test]
fn scheduler_shutdown_returns_once_its_thread_is_gone() {
    finishes("scheduler threads gone at shutdown", || {
        let pool = Pool::new().unwrap();
        for i in 0..200 {
            let name = format!("kw-sched-{i}");
            let s = Scheduler::builder(&pool)
                .interval(Duration::from_millis(10))
                .executor("jobs", ExecutorConfig::unlimited())
                .thread_name(name.clone())
                .build()
                .unwrap();
            if i % 2 == 0 {
                s.shutdown();
            } else {
                assert!(s.shutdown_now().is_empty());
            }
            assert!(
                !thread_alive(&name),
                "{name} still runs after its shutdown returned"
            );
        }
        pool.shutdown();
    });
}

/// Whether a thread of this process named `name` is still in user space (Linux:
/// `/proc/self/task/*`). A thread that has entered the kernel's exit (`PF_EXITING` in its
/// flags) is done with everything a join waits for (its thread-local destructors ran), though
/// it may stay listed a little longer, most of all under load: the joiner it woke can run
/// before it is gone from the list. Such a thread does not count.
#[cfg(target_os = "linux")]
fn thread_alive(name: &str) -> bool {
    const PF_EXITING: u64 = 0x4;
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    tasks.flatten().any(|t| {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            return false;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // After the name in parentheses: state, ppid, pgrp, session, tty_nr, tpgid, flags.
        let flags = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(6))
            .and_then(|f| f.parse::<u64>().ok());
        // Gone from the list meanwhile (no stat), or exiting: not alive.
        flags.is_some_and(|f| f & PF_EXITING == 0)
    })
}

/// `Pool::shutdown` called in a pool task, with a scheduler attached, cannot wait there: a
/// thread finishes it in the background. A later `Pool::shutdown` that waits returns once that
/// thread is gone, not only done (found by the `pool_mixed` fuzz target: LeakSanitizer saw the
/// finishing thread still alive after the run had ended).
#[cfg(target_os = "linux")]
#[test]
fn pool_shutdown_returns_once_a_background_finisher_is_gone() {
    finishes("background shutdown finishers gone", || {
        for _ in 0..50 {
            let pool = Pool::new().unwrap();
            let s = jobs_scheduler(&pool);
            let h = s.schedule("jobs", Duration::from_millis(5), || 1).unwrap();
            let (tx, rx) = channel();
            let p = pool.clone();
            pool.execute(move || {
                p.shutdown(); // on a pool thread: finished in the background
                tx.send(()).unwrap();
            })
            .unwrap();
            rx.recv().unwrap();
            pool.shutdown();
            assert!(
                !thread_alive("keyway-shutdown"),
                "the background finisher still runs after pool.shutdown() returned"
            );
            assert_eq!(h.join().unwrap(), 1);
        }
    });
}
