//! Every public error's message, word for word, and its `std::error::Error` impl: the messages
//! are part of what users see (and match on in logs), so a change to them is deliberate.

use std::error::Error;
use std::time::Duration;

use keyway::{
    ConfigError, ExecutorConfig, Pool, ScheduleError, Scheduler, Sequencer, SequencerError,
    SubmitError, TaskError, TryExecuteError,
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
