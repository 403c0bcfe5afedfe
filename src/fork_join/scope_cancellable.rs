//! `scope_cancellable` and `scope_fifo_cancellable`: rayon's scopes that
//! say whether they were cancelled ([`Scope::cancel`], or a cancelled
//! scope or run they are nested in). How a cancel spreads and why it never
//! loses a unit is `src/cancel.rs`'s.

use super::scope::{Scope, finish_scope, scope_on_worker};
use super::scope_fifo::ScopeFifo;
use crate::cancel::Cancelled;
use crate::worker::global::global_registry;
use crate::worker::thread::WorkerThread;

/// [`scope`](crate::scope) that says whether it was cancelled
/// ([`Scope::cancel`], or a cancelled scope or run it is nested in): then
/// `Err(Cancelled)` (and `op`'s value is dropped), once every task ran or
/// was dropped. Panics are resumed as `scope` does.
///
/// A search that stops at its first hit:
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let found = AtomicUsize::new(usize::MAX);
/// let outcome = sixfold::scope_cancellable(|s| {
///     for chunk in 0..1000usize {
///         let found = &found;
///         s.spawn(move |s| {
///             if (chunk * 1000..chunk * 1000 + 1000).any(|x| x == 4242) {
///                 found.store(4242, Ordering::Relaxed);
///                 s.cancel();
///             }
///         });
///     }
/// });
/// assert_eq!(outcome, Err(sixfold::Cancelled));
/// assert_eq!(found.into_inner(), 4242);
/// ```
pub fn scope_cancellable<'scope, OP, R>(op: OP) -> Result<R, Cancelled>
where
    OP: FnOnce(&Scope<'scope>) -> R + Send,
    R: Send,
{
    let (value, cancelled) = match WorkerThread::current() {
        Some(worker) => scope_on_worker(worker, op),
        None => global_registry().in_worker(|_| {
            let worker = WorkerThread::current().expect("install runs on a worker");
            scope_on_worker(worker, op)
        }),
    };
    if cancelled { Err(Cancelled) } else { Ok(value) }
}

/// [`scope_fifo`](crate::scope_fifo) that says whether it was cancelled,
/// as [`scope_cancellable`] does.
///
/// ```
/// let outcome = sixfold::scope_fifo_cancellable(|s| {
///     s.spawn_fifo(|_| {});
///     7
/// });
/// assert_eq!(outcome, Ok(7));
/// ```
pub fn scope_fifo_cancellable<'scope, OP, R>(op: OP) -> Result<R, Cancelled>
where
    OP: FnOnce(&ScopeFifo<'scope>) -> R + Send,
    R: Send,
{
    let run = |worker: &WorkerThread, op: OP| {
        let scope = ScopeFifo::new(worker);
        finish_scope(worker, scope.base(), || op(&scope))
    };
    let (value, cancelled) = match WorkerThread::current() {
        Some(worker) => run(worker, op),
        None => global_registry().in_worker(|_| {
            run(
                WorkerThread::current().expect("install runs on a worker"),
                op,
            )
        }),
    };
    if cancelled { Err(Cancelled) } else { Ok(value) }
}
