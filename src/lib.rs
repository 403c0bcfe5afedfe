//! sixfold: a work-stealing task scheduler that picks each worker's next
//! task by oneTBB's six rules, with Rayon's sleep protocol.
//!
//! After a worker finishes task `t`, it takes its next task from the first
//! of these that has one:
//!
//! ```text
//!  finished t ─┬─ 1. the task t.execute() returned ........ (no queue at all)
//!              ├─ 2. t's successor, if t was its last pending predecessor
//!              ├─ 3. the tail of its own deque ............ (LIFO: locality)
//!              ├─ 4. its mailbox .......................... (affinity)
//!              ├─ 5. ~ the front of the shared queue ...... (enqueue: fairness)
//!              └─ 6. the head of a random other deque ..... (steal)
//!                    nothing: search in rounds, then sleep until woken
//! ```
//!
//! Without any setup, the free functions run in a global pool, built on
//! first use with one worker per core (`SIXFOLD_NUM_THREADS` overrides),
//! as rayon's do:
//!
//! ```
//! fn sum(slice: &[u64]) -> u64 {
//!     if slice.len() <= 1024 {
//!         return slice.iter().sum();
//!     }
//!     let (left, right) = slice.split_at(slice.len() / 2);
//!     let (a, b) = sixfold::join(|| sum(left), || sum(right));
//!     a + b
//! }
//! let data: Vec<u64> = (1..=100_000).collect();
//! assert_eq!(sum(&data), 5_000_050_000);
//!
//! // Tasks that borrow from this frame; the scope returns when all ran.
//! let mut halves = [0u64; 2];
//! let (low, high) = halves.split_at_mut(1);
//! sixfold::scope(|s| {
//!     s.spawn(|_| low[0] = data[..50_000].iter().sum());
//!     s.spawn(|_| high[0] = data[50_000..].iter().sum());
//! });
//! assert_eq!(halves[0] + halves[1], 5_000_050_000);
//! ```
//!
//! `spawn` pushes onto the calling worker's deque (or, from outside, the
//! shared queue); `enqueue` always uses the shared queue, whose lanes are
//! FIFO per submitting thread, and guarantees the task runs even on a pool
//! without threads. Fork-join is `join` and scopes, or continuation
//! passing with task nodes: see [`Context`].
//!
//! The pieces, by what you want to do:
//!
//! | to ... | use |
//! |---|---|
//! | fork-join over borrowed data | [`join`], [`scope`], [`scope_fifo`] |
//! | fire-and-forget work | [`spawn`], [`enqueue`], [`spawn_fifo`] (or the [`Pool`] methods) |
//! | a pool of your own (size, names, pinning, tracing) | [`Pool::builder`], [`Builder::build_global`] |
//! | run a dependency graph again and again | [`Graph`], [`Pool::run_graph`] |
//! | stream items through serial and parallel stages | [`Pipeline`], [`Pool::run_pipeline`] |
//! | keep work on one core | [`Pool::spawn_with_affinity`], [`Graph::set_affinity`], [`Pinning`] |
//! | continuation-passing task trees | [`Task`], [`TaskRef`], [`Context`], [`Pool::run`] |
//! | wait without picking up unrelated work | [`isolate`] |
//! | see what happened | [`Pool::stats`], [`Builder::trace`], [`Trace`] |
//!
//! # Waiting
//!
//! Waits inside tasks (`join`, scopes, `run`, `run_graph`) keep the worker
//! busy with other tasks, but stop stealing past half of its stack and
//! leave enqueued tasks to workers at their outermost level. A worker of
//! one pool that waits on another pool (`install`, `join`, `scope`, `run`
//! through it) keeps running its own pool's tasks, so pools that call into
//! each other never deadlock. Inside [`isolate`], a wait runs only the
//! region's own tasks.
//!
//! # Failure: two contracts
//!
//! | construct | a panic in one task |
//! |---|---|
//! | [`join`], [`scope`], [`scope_fifo`], the loops ([`for_range`], [`reduce`], ...) (rayon's) | every other spawned task still runs; the first panic is resumed once all finished, the body's (or `join`'s first closure's) first |
//! | [`Pool::run`], [`Pool::run_graph`] (oneTBB's) | cancels the tasks not yet started, lets started ones finish, resumes the panic; a graph stays reusable |
//! | `'static` tasks ([`spawn`], [`enqueue`], ...) | goes to [`Builder::panic_handler`], or is printed and counted; the pool keeps working |

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

// The layers, top to bottom (ARCHITECTURE.md): each imports only below it.
mod cancel;
mod fork_join;
mod graph;
mod loops;
mod pipeline;
mod pool;

mod task;

mod worker;

mod queues;

mod error;
mod observe;
mod platform;

#[cfg(loom)]
pub mod loom_api;

pub use cancel::{CancelToken, Cancelled, is_cancelled};
pub use error::{AffinityError, BuildError, PipelineError, TaskError};
pub use fork_join::{
    FnContext, Scope, ScopeFifo, Yield, current_thread_has_pending_tasks, current_thread_index,
    in_place_scope, in_place_scope_fifo, isolate, join, join_context, max_num_threads, scope,
    scope_cancellable, scope_fifo, scope_fifo_cancellable, yield_local, yield_now,
};
pub use graph::{Graph, GraphError, NodeId, Subflow};
pub use loops::{
    AffinityPartitioner, BroadcastContext, Partitioner, Range2d, broadcast, for_chunks,
    for_chunks_mut, for_chunks_mut_with, for_chunks_with, for_each_index, for_range,
    for_range_with, for_tiles, for_tiles_with, reduce, reduce_deterministic, reduce_with,
};
pub use observe::{Rule, SleepEvent, Stats, TaskEvent, Trace, WorkerStats};
pub use pipeline::{Pipeline, StageMode};
pub use platform::{CoreInfo, Pinning, Proximity, Topology, TopologySource};
pub use pool::{
    Builder, Pool, current_num_threads, current_worker, enqueue, enqueue_with_priority, spawn,
    spawn_broadcast, spawn_fifo,
};
pub use queues::{Dispatch, Priority};
pub use task::{Context, Continuation, Task, TaskRef};
