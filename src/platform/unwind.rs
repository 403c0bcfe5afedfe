//! Catching and resuming panics at task boundaries.
//!
//! A panic must never unwind through the worker loop: each task body runs
//! under `halt_unwinding`, and the payload travels to whoever waits for the
//! task (resumed there) or to the pool's panic handler.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};

/// Run `f`, turning a panic into an `Err` with its payload.
#[inline]
pub(crate) fn halt_unwinding<F, R>(f: F) -> Result<R, Box<dyn Any + Send>>
where
    F: FnOnce() -> R,
{
    // AssertUnwindSafe: the payload is always handed to the waiter, which
    // resumes it, so broken invariants are observed as a panic, as usual.
    panic::catch_unwind(AssertUnwindSafe(f))
}

/// Resume a panic caught by `halt_unwinding`.
pub(crate) fn resume_unwinding(payload: Box<dyn Any + Send>) -> ! {
    panic::resume_unwind(payload)
}

/// A human-readable message from a panic payload.
pub(crate) fn payload_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "Box<dyn Any>"
    }
}

/// Aborts the process if dropped: armed around scheduler code that must not
/// unwind, and defused with `mem::forget` on the normal path.
pub(crate) struct AbortIfPanic;

impl Drop for AbortIfPanic {
    fn drop(&mut self) {
        eprintln!("sixfold: a worker thread panicked outside any task (a scheduler bug); aborting");
        std::process::abort();
    }
}
