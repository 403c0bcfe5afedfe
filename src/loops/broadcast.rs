//! `broadcast`: one call of a closure on every worker of a pool, the
//! results in worker order (rayon's `broadcast`). It runs on the planned
//! partitioner's machinery (`placed.rs`): part `k` is worker `k`'s,
//! placed strictly in its mailbox (rule 4), so each worker runs its call
//! when it next looks there, between tasks or inside a wait.
//!
//! Invariant: every worker runs `op` exactly once per call; a panic is
//! resumed once every worker ran it.

use super::placed::{Placement, run_placed};
use crate::worker::global::current_registry;
use crate::worker::thread::WorkerThread;

/// What a closure run by [`broadcast`] learns: which worker runs it, of how
/// many.
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(3).build().unwrap();
/// let seen = pool.broadcast(|ctx| (ctx.index(), ctx.num_threads()));
/// assert_eq!(seen, [(0, 3), (1, 3), (2, 3)]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct BroadcastContext {
    index: usize,
    num_threads: usize,
}

impl BroadcastContext {
    pub(crate) fn new(index: usize, num_threads: usize) -> Self {
        BroadcastContext { index, num_threads }
    }

    /// The index of the worker running this call (`0..num_threads()`).
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let at = pool.broadcast(|ctx| ctx.index() == sixfold::current_thread_index().unwrap());
    /// assert_eq!(at, [true, true]);
    /// ```
    pub fn index(&self) -> usize {
        self.index
    }

    /// The number of workers the broadcast runs on.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// assert_eq!(pool.broadcast(|ctx| ctx.num_threads()), [2, 2]);
    /// ```
    pub fn num_threads(&self) -> usize {
        self.num_threads
    }
}

/// Run `op` once on every worker of the current pool (the calling
/// worker's, else the global pool) and return the results in worker order
/// (rayon's `broadcast`). Each worker runs it when it next looks at its
/// mailbox: between tasks, or inside a wait. A panic is resumed once every
/// worker ran `op`.
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let names = pool.broadcast(|_| std::thread::current().name().map(str::to_owned));
/// assert_eq!(names.len(), 2);
/// ```
pub fn broadcast<OP, R>(op: OP) -> Vec<R>
where
    OP: Fn(BroadcastContext) -> R + Sync,
    R: Send,
{
    let op = &op;
    current_registry().in_worker(|worker| broadcast_on(worker, op))
}

/// `broadcast` from `worker`, to every worker of its pool.
pub(crate) fn broadcast_on<OP, R>(worker: &WorkerThread, op: &OP) -> Vec<R>
where
    OP: Fn(BroadcastContext) -> R + Sync,
    R: Send,
{
    let num_threads = worker.registry().num_slots();
    let leaf = |workers: std::ops::Range<usize>| {
        workers
            .map(|index| op(BroadcastContext { index, num_threads }))
            .collect::<Vec<R>>()
    };
    let concat = |mut a: Vec<R>, b: Vec<R>| {
        a.extend(b);
        a
    };
    run_placed(
        worker,
        &(0..num_threads),
        num_threads,
        |k| k,
        Placement::Strict,
        &|_, _, _| {},
        &leaf,
        &concat,
    )
    .unwrap_or_default()
}
