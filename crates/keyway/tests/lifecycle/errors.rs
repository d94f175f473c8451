//! Errors: every public error's message, word for word, and its `std::error::Error` impl (the
//! messages are part of what users see and match on in logs, so a change to them is
//! deliberate); the error types are `Send + Sync + 'static`, so they convert into
//! `anyhow::Error` and `Box<dyn Error + Send + Sync>` and work with `?`; `TaskError`'s kinds.

use std::error::Error;
use std::time::Duration;

use keyway::{
    ConfigError, ExecutorConfig, Pool, ScheduleError, Scheduler, Sequencer, SequencerError,
    SubmitError, SubmitErrorKind, TaskError, TryExecuteError,
};

fn is_error<E: Error + Send + Sync + 'static>(_: &E) {}

#[test]
fn build_error_messages() {
    let cases = [
        (
            Pool::builder().core_threads(0),
            "core_threads must be at least 1",
        ),
        (
            Pool::builder().max_threads(0),
            "max_threads must be at least 1",
        ),
        (
            Pool::builder().core_threads(4).max_threads(2),
            "core_threads (4) is greater than max_threads (2)",
        ),
        (
            Pool::builder().keep_alive(Duration::ZERO),
            "keep_alive must be longer than zero (got 0ns)",
        ),
        (
            Pool::builder().reserved_threads(1).min_reserved_threads(2),
            "min_reserved_threads (2) is greater than reserved_threads (1)",
        ),
        (
            Pool::builder().lane_batch(0),
            "lane_batch must be at least 1",
        ),
        (
            Pool::builder().core_threads(5000),
            "core_threads (5000) is more than the 4096 threads a pool may have",
        ),
        (
            Pool::builder().thread_name("a\0b"),
            "thread_name must not contain a NUL byte",
        ),
    ];
    for (builder, expected) in cases {
        let err = builder.build().unwrap_err();
        is_error(&err);
        assert_eq!(err.to_string(), expected);
        assert!(err.source().is_none());
    }
}

#[test]
fn submit_and_try_execute_error_messages() {
    let cases = [
        (
            SubmitError::Shutdown(()),
            "the pool is shut down and accepts no more tasks",
        ),
        (
            SubmitError::Full(()),
            "the pool is full: its capacity of queued tasks is reached",
        ),
        (
            SubmitError::KeyPanicked(()),
            "the context key's Hash, Eq or Drop panicked; the task is handed back",
        ),
    ];
    for (err, expected) in cases {
        is_error(&err);
        assert_eq!(err.to_string(), expected);
    }
    let cases = [
        (
            TryExecuteError::Busy(()),
            "no reserved thread is idle to take the task now",
        ),
        (
            TryExecuteError::Shutdown(()),
            "the pool is shut down and accepts no more tasks",
        ),
    ];
    for (err, expected) in cases {
        is_error(&err);
        assert_eq!(err.to_string(), expected);
    }
    // An error holding a task that is neither `Send` nor `Sync` is still an `Error`.
    let not_send = SubmitError::Full(std::rc::Rc::new(()));
    let _: &dyn Error = &not_send;
}

#[test]
fn task_error_messages() {
    let cases = [
        (
            TaskError::Cancelled,
            "the task was cancelled before it started",
        ),
        (
            TaskError::Coalesced,
            "the task was replaced by a newer coalescing task of its context",
        ),
        (
            TaskError::Rejected,
            "the task was handed back at shutdown and dropped without running",
        ),
        (
            TaskError::TimedOut,
            "the task's timeout passed before it could start; it was not run",
        ),
    ];
    for (err, expected) in cases {
        assert_eq!(err.to_string(), expected);
        let _: &dyn Error = &err;
    }
    let pool = Pool::new().unwrap();
    let err = pool
        .submit(|| -> () { panic!("oops") })
        .unwrap()
        .join()
        .unwrap_err();
    assert_eq!(err.to_string(), "the task panicked: oops");
    pool.shutdown();
}

#[test]
fn scheduler_error_messages() {
    let cases = [
        (
            ConfigError::InvalidTps {
                executor: "mail".into(),
                value: -1.0,
            },
            "executor \"mail\": the TPS limit must be a finite number >= 0 (got -1)",
        ),
        (
            ConfigError::IntervalTooShort(Duration::from_millis(1)),
            "the interval must be at least 10 ms (got 1ms)",
        ),
        (
            ConfigError::IntervalTooLong(Duration::from_secs(100_000)),
            "the interval must be at most one day (got 100000s)",
        ),
        (
            ConfigError::DuplicateExecutor("a".into()),
            "executor \"a\" is configured twice",
        ),
        (
            ConfigError::UnknownExecutor("b".into()),
            "no executor is named \"b\"",
        ),
        (
            ConfigError::Spawn("no threads".into()),
            "could not start the scheduler's thread: no threads",
        ),
    ];
    for (err, expected) in cases {
        is_error(&err);
        assert_eq!(err.to_string(), expected);
    }
    let pool = Pool::new().unwrap();
    let scheduler = Scheduler::builder(&pool)
        .executor("mail", ExecutorConfig::unlimited())
        .build()
        .unwrap();
    let err = scheduler
        .schedule("sms", Duration::ZERO, || ())
        .unwrap_err();
    is_error(&err);
    assert_eq!(err.to_string(), "no executor is named \"sms\"");
    let cases: [(ScheduleError<()>, &str); 2] = [
        (
            ScheduleError::Shutdown(()),
            "the scheduler is shut down and accepts no more tasks",
        ),
        (
            ScheduleError::ZeroPeriod(()),
            "a repeating task needs a period longer than zero",
        ),
    ];
    for (err, expected) in cases {
        assert_eq!(err.to_string(), expected);
    }
    scheduler.shutdown();
    pool.shutdown();
}

#[test]
fn sequencer_error_messages() {
    let err = Sequencer::new(0).unwrap_err();
    is_error(&err);
    assert_eq!(err, SequencerError::ZeroCapacity);
    assert_eq!(err.to_string(), "sequencer capacity must be at least 1");
    let err = Sequencer::new(usize::MAX).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "sequencer capacity {} is above the maximum of {}",
            usize::MAX,
            Sequencer::MAX_CAPACITY
        )
    );
}

// ---- with `?` -----------------------------------------------------------------------------

fn assert_send_sync_error<E: Error + Send + Sync + 'static>() {}

#[test]
fn error_types_are_send_sync() {
    assert_send_sync_error::<TaskError>();
    assert_send_sync_error::<SubmitErrorKind>();
    assert_send_sync_error::<keyway::BuildError>();
    // A refused task whose closure is Sync keeps its task and is still `Send + Sync`.
    assert_send_sync_error::<SubmitError<fn()>>();
}

fn with_anyhow(pool: &Pool) -> anyhow::Result<u32> {
    let handle = pool.submit(|| 40)?;
    let not_sync = std::cell::Cell::new(2u32);
    let other = pool
        .submit(move || not_sync.get())
        .map_err(SubmitError::into_kind)?;
    Ok(handle.join()? + other.join()?)
}

fn with_boxed(pool: &Pool) -> Result<u32, Box<dyn Error + Send + Sync>> {
    let handle = pool.submit(|| 40)?;
    let not_sync = std::cell::Cell::new(2u32);
    let other = pool
        .submit(move || not_sync.get())
        .map_err(SubmitErrorKind::from)?;
    Ok(handle.join()? + other.join()?)
}

fn panics_through_anyhow(pool: &Pool) -> anyhow::Result<()> {
    pool.submit(|| -> () { panic!("deliberate") })?.join()?;
    Ok(())
}

#[test]
fn question_mark_into_anyhow_and_boxed() {
    let pool = Pool::new().unwrap();
    assert_eq!(with_anyhow(&pool).unwrap(), 42);
    assert_eq!(with_boxed(&pool).unwrap(), 42);

    let err = panics_through_anyhow(&pool).unwrap_err();
    let task_err = err.downcast::<TaskError>().expect("a TaskError inside");
    assert!(task_err.is_panic());
    assert_eq!(task_err.to_string(), "the task panicked: deliberate");
    assert_eq!(
        task_err.into_panic().downcast_ref::<&str>(),
        Some(&"deliberate")
    );

    pool.shutdown();
    let err = with_anyhow(&pool).unwrap_err();
    assert!(err.to_string().contains("shut down"));
    let err = with_boxed(&pool).unwrap_err();
    assert!(err.to_string().contains("shut down"));
}

#[test]
fn task_error_kinds() {
    let pool = Pool::builder().core_threads(1).build().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    pool.execute_sequential(1, move || rx.recv().unwrap())
        .unwrap();
    let cancelled = pool.submit_sequential(1, || ()).unwrap();
    let old = pool.submit_coalescing(1, || 1).unwrap();
    let new = pool.submit_coalescing(1, || 2).unwrap();
    assert!(cancelled.cancel());
    tx.send(()).unwrap();
    let err = cancelled.join().unwrap_err();
    assert!(err.is_cancelled() && !err.is_panic());
    let err = err.try_into_panic().unwrap_err();
    assert!(err.is_cancelled());
    assert!(old.join().unwrap_err().is_coalesced());
    assert_eq!(new.join().unwrap(), 2);
    assert!(TaskError::Rejected.is_rejected());
    assert!(TaskError::TimedOut.is_timed_out());
    let payload = pool
        .submit(|| -> () { std::panic::panic_any(7u64) })
        .unwrap()
        .join()
        .unwrap_err()
        .try_into_panic()
        .unwrap();
    assert_eq!(payload.downcast_ref::<u64>(), Some(&7));
    pool.shutdown();
}

#[test]
#[should_panic(expected = "did not panic")]
fn into_panic_on_other_kind_panics() {
    let _ = TaskError::Cancelled.into_panic();
}
