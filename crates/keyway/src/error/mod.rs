//! Errors: bad configuration, refused submissions, the outcomes of a task that did not run, and
//! a shutdown that did not finish in time. One file per kind.

mod build;
mod shutdown;
mod submit;
mod task;

pub use build::BuildError;
pub(crate) use build::BuildErrorKind;
pub use shutdown::ShutdownTimedOut;
pub use submit::{SubmitError, SubmitErrorKind, TryExecuteError};
pub(crate) use task::{panic_message, panic_text};
pub use task::{PanicPayload, TaskError};
