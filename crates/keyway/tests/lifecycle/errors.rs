//! Errors work with `?`: `TaskError` and `SubmitErrorKind` are `Send + Sync + 'static`, so they
//! convert into `anyhow::Error` and `Box<dyn Error + Send + Sync>`.

use std::error::Error;

use keyway::{Pool, SubmitError, SubmitErrorKind, TaskError};

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
