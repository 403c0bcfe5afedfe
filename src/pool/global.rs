//! The global pool, and the free functions that use it outside every pool.
//!
//! As in rayon and oneTBB, a user who builds no pool still gets
//! parallelism: the global pool is built on first use, with
//! `SIXFOLD_NUM_THREADS` threads if that is a positive number, else one
//! per core of the process's CPU mask; [`Builder::build_global`]
//! configures it instead, once, before first use. Inside a worker, the
//! free functions ([`spawn`], [`spawn_fifo`], [`enqueue`],
//! [`current_num_threads`], and `join`, `scope`, `scope_fifo`) use that
//! worker's pool; outside every pool, the global one.
//!
//! Invariant: the global pool, once set, lives for the rest of the process
//! (its threads are never joined, as rayon's are not).

use super::submit::spawn_broadcast_in;
use crate::loops::BroadcastContext;
use crate::queues::dispatch::{Dispatch, Priority};
use crate::task::node::TaskRef;
use crate::worker::global::current_registry;

/// Run `op` once on every worker of the current pool (the calling
/// worker's, or the global pool from outside every pool), without waiting
/// (rayon's `spawn_broadcast`). Each call runs on its worker and nowhere
/// else (strict affinity: the worker's mailbox, rule 4, taken by that
/// worker in any wait); `op` is dropped after the last call.
///
/// ```
/// let (tx, rx) = std::sync::mpsc::channel();
/// sixfold::spawn_broadcast(move |ctx| tx.send((ctx.index(), ctx.num_threads())).unwrap());
/// let n = sixfold::Pool::global().num_workers();
/// let mut seen: Vec<(usize, usize)> = rx.iter().take(n).collect();
/// seen.sort();
/// assert_eq!(seen, (0..n).map(|i| (i, n)).collect::<Vec<_>>());
/// ```
pub fn spawn_broadcast<OP>(op: OP)
where
    OP: Fn(BroadcastContext) + Send + Sync + 'static,
{
    spawn_broadcast_in(current_registry(), op);
}

/// Spawn a `'static` closure: onto the calling worker's deque in its pool
/// (LIFO for it, stolen oldest first), or from outside every pool into the
/// global pool. See [`Pool::spawn`](super::thread_pool::Pool::spawn).
///
/// ```
/// let (tx, rx) = std::sync::mpsc::channel();
/// sixfold::spawn(move || tx.send(6 * 7).unwrap());
/// assert_eq!(rx.recv().unwrap(), 42);
/// ```
pub fn spawn<F>(f: F)
where
    F: FnOnce() + Send + 'static,
{
    crate::task::submit::submit_static(
        current_registry(),
        TaskRef::from_fn(move |_| f()),
        Some(Dispatch::Spawn),
        None,
    );
}

/// Spawn a `'static` closure in FIFO order for the calling worker (see
/// [`Pool::spawn_fifo`](super::thread_pool::Pool::spawn_fifo)), in its pool or, outside every pool, the global
/// pool.
///
/// ```
/// let (tx, rx) = std::sync::mpsc::channel();
/// sixfold::spawn_fifo(move || tx.send(1).unwrap());
/// assert_eq!(rx.recv().unwrap(), 1);
/// ```
pub fn spawn_fifo<F>(f: F)
where
    F: FnOnce() + Send + 'static,
{
    crate::task::submit::submit_static_fifo(current_registry(), TaskRef::from_fn(move |_| f()));
}

/// Enqueue a `'static` closure on the shared queue (rule 5: fair,
/// approximately FIFO, guaranteed to run) of the calling worker's pool or,
/// outside every pool, the global pool. See [`Pool::enqueue`](super::thread_pool::Pool::enqueue).
///
/// ```
/// let (tx, rx) = std::sync::mpsc::channel();
/// sixfold::enqueue(move || tx.send("ran").unwrap());
/// assert_eq!(rx.recv().unwrap(), "ran");
/// ```
pub fn enqueue<F>(f: F)
where
    F: FnOnce() + Send + 'static,
{
    crate::task::submit::submit_static(
        current_registry(),
        TaskRef::from_fn(move |_| f()),
        Some(Dispatch::Enqueue),
        None,
    );
}

/// [`enqueue`] with a [`Priority`](crate::queues::dispatch::Priority) (see
/// [`Pool::enqueue_with_priority`](super::thread_pool::Pool::enqueue_with_priority)).
///
/// ```
/// let (tx, rx) = std::sync::mpsc::channel();
/// sixfold::enqueue_with_priority(sixfold::Priority::Low, move || tx.send("ran").unwrap());
/// assert_eq!(rx.recv().unwrap(), "ran");
/// ```
pub fn enqueue_with_priority<F>(priority: Priority, f: F)
where
    F: FnOnce() + Send + 'static,
{
    crate::task::submit::submit_static(
        current_registry(),
        TaskRef::from_fn(move |_| f()).with_priority(priority),
        Some(Dispatch::Enqueue),
        None,
    );
}

/// The number of threads of the calling worker's pool (at least 1: a pool
/// without threads runs on its callers), or of the global pool outside
/// every pool (which builds it if needed). The usual grain for splitting
/// work.
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(3).build().unwrap();
/// assert_eq!(pool.install(sixfold::current_num_threads), 3);
/// ```
pub fn current_num_threads() -> usize {
    current_registry().num_threads().max(1)
}
