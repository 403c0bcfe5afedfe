//! The entry points of `'static` task nodes (`Pool::spawn`,
//! `sixfold::spawn`, `Pool::spawn_fifo`, ...): submitted to the pool's
//! static group from wherever the caller is, and routed.

use crate::queues::dispatch::Dispatch;
use crate::task::node::TaskRef;
use crate::worker::thread::Registry;
use crate::worker::thread::{WorkerThread, current_region};
use std::sync::Arc;

/// Submit a `'static` task node to the pool's static group and route it
/// from wherever the caller is (`Pool::spawn`, `sixfold::spawn`, ...).
pub(crate) fn submit_static(
    registry: &Arc<Registry>,
    task: TaskRef,
    dispatch: Option<Dispatch>,
    affinity: Option<usize>,
) {
    let here = WorkerThread::current_in(registry);
    let current = here.map_or_else(current_region, WorkerThread::region);
    if let Some(ready) = task.submit(&registry.static_group, dispatch, affinity, current) {
        ready.route(registry, here);
    }
}

/// `Pool::spawn_fifo`: behind the calling worker's earlier FIFO spawns
/// (a pool-level FIFO per worker), or the shared queue from outside.
pub(crate) fn submit_static_fifo(registry: &Arc<Registry>, task: TaskRef) {
    let here = WorkerThread::current_in(registry);
    let current = here.map_or_else(current_region, WorkerThread::region);
    let Some(ready) = task.submit(&registry.static_group, Some(Dispatch::Spawn), None, current)
    else {
        return;
    };
    match here {
        // The pool's FIFOs hold region-less jobs only (`fifo.rs`); a
        // spawn inside an isolated region takes the plain deque.
        Some(worker) if !current.is_isolated() => worker.push_fifo(ready.into_job()),
        _ => ready.route(registry, here),
    }
}
