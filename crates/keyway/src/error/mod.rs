//! Errors: bad configuration, refused submissions, the outcomes of a task that did not run, a
//! shutdown that did not finish in time, and a key's state that could not be loaded or saved. One file per kind.

mod build;
mod shutdown;
mod state;
mod submit;
mod task;

pub use build::BuildError;
pub(crate) use build::BuildErrorKind;
pub use shutdown::ShutdownTimedOut;
pub use state::StateError;
pub use submit::{SubmitError, SubmitErrorKind, TryExecuteError};
pub(crate) use task::{panic_message, panic_text};
pub use task::{PanicPayload, TaskError};
