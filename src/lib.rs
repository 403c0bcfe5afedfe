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
//! | [`join`], [`scope`], [`scope_fifo`] (rayon's) | every other spawned task still runs; the first panic is resumed once all finished, the body's (or `join`'s first closure's) first |
//! | [`Pool::run`], [`Pool::run_graph`] (oneTBB's) | cancels the tasks not yet started, lets started ones finish, resumes the panic; a graph stays reusable |
//! | `'static` tasks ([`spawn`], [`enqueue`], ...) | goes to [`Builder::panic_handler`], or is printed and counted; the pool keeps working |
//!
//! ```
//! use sixfold::{Pool, TaskRef};
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! let pool = Pool::builder().num_threads(2).build()?;
//! let total = Arc::new(AtomicU64::new(0));
//! let t = total.clone();
//! pool.run(TaskRef::from_fn(move |cx| {
//!     for i in 1..=4 {
//!         let t = t.clone();
//!         cx.spawn(TaskRef::from_fn(move |_| {
//!             t.fetch_add(i, Ordering::Relaxed);
//!         }));
//!     }
//! }));
//! assert_eq!(total.load(Ordering::Relaxed), 10);
//! # Ok::<(), sixfold::BuildError>(())
//! ```

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod context;
mod deque;
mod error;
mod fifo;
mod global;
mod graph;
mod group;
mod job;
mod join;
mod latch;
mod mailbox;
mod node_alloc;
mod pipeline;
mod pool;
mod proxy;
mod region;
mod region_queue;
mod registry;
mod ring_queue;
mod scope;
mod shared_queue;
mod sleep;
mod stats;
mod sync;
mod task;
mod topology;
mod trace;
mod unwind;
mod worker;

pub use context::{Context, Continuation};
pub use error::{AffinityError, BuildError, GraphError, PipelineError, TaskError};
pub use global::{current_num_threads, enqueue, spawn, spawn_fifo};
pub use graph::{CancelToken, Graph, NodeId, Subflow};
pub use join::join;
pub use pipeline::Pipeline;
pub use pool::{Builder, Pool, current_worker};
pub use region::isolate;
pub use scope::{Scope, ScopeFifo, scope, scope_fifo};
pub use stats::{Rule, Stats, WorkerStats};
pub use task::{Dispatch, Task, TaskRef};
pub use topology::{CoreInfo, Pinning, Proximity, Topology, TopologySource};
pub use trace::{SleepEvent, TaskEvent, Trace};

/// The sleep protocol and the core latch, opened up for the loom models in
/// `tests/loom_*.rs`. Only compiled under `--cfg loom`; not part of the API.
#[cfg(loom)]
#[doc(hidden)]
#[allow(missing_docs)]
pub mod loom_api {
    use crate::deque::{Steal, Stealer, Worker};
    use crate::latch::CoreLatch;
    use crate::sleep::{IdleState, Sleep};

    /// A worker's deque as the scheduler sees it under loom (the facade's
    /// stand-in), for models that push, pop and steal.
    pub struct LoomDeque(Worker<u32>);
    /// A thief's end of a `LoomDeque`.
    pub struct LoomStealer(Stealer<u32>);

    impl LoomDeque {
        pub fn new() -> Self {
            LoomDeque(Worker::new_lifo())
        }
        pub fn push(&self, job: u32) {
            self.0.push(job)
        }
        pub fn pop(&self) -> Option<u32> {
            self.0.pop()
        }
        pub fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
        pub fn stealer(&self) -> LoomStealer {
            LoomStealer(self.0.stealer())
        }
    }

    impl Default for LoomDeque {
        fn default() -> Self {
            Self::new()
        }
    }

    impl LoomStealer {
        /// Steal from the front; `Retry` is turned into another attempt.
        pub fn steal(&self) -> Option<u32> {
            loop {
                match self.0.steal() {
                    Steal::Success(job) => return Some(job),
                    Steal::Empty => return None,
                    Steal::Retry => {}
                }
            }
        }
        pub fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }

    pub struct LoomSleep(Sleep);
    pub struct LoomIdle(IdleState);
    pub struct LoomLatch(CoreLatch);

    impl LoomSleep {
        pub fn new(workers: usize) -> Self {
            LoomSleep(Sleep::new(workers))
        }
        pub fn start_looking(&self, worker: usize) -> LoomIdle {
            LoomIdle(self.0.start_looking(worker))
        }
        pub fn work_found(&self) {
            self.0.work_found(|| false)
        }
        /// True if the worker blocked.
        pub fn no_work_found(
            &self,
            idle: &mut LoomIdle,
            latch: &LoomLatch,
            has_injected_work: impl FnOnce() -> bool,
        ) -> bool {
            self.0
                .no_work_found(&mut idle.0, &latch.0, has_injected_work)
        }
        pub fn new_injected_jobs(&self, jobs: usize, queue_was_empty: bool) -> usize {
            self.0.new_injected_jobs(jobs, queue_was_empty)
        }
        pub fn new_internal_jobs(&self, jobs: usize, queue_was_empty: bool) -> usize {
            self.0.new_internal_jobs(jobs, queue_was_empty)
        }
        pub fn notify_worker_latch_is_set(&self, worker: usize) {
            self.0.notify_worker_latch_is_set(worker)
        }
        pub fn sleeping_threads(&self) -> usize {
            self.0.sleeping_threads()
        }
    }

    impl LoomLatch {
        pub fn new() -> Self {
            LoomLatch(CoreLatch::new())
        }
        pub fn probe(&self) -> bool {
            self.0.probe()
        }
        /// True if the owner was asleep and must be woken.
        pub fn set(&self) -> bool {
            // SAFETY: `self` outlives the call (the model owns it in an Arc).
            unsafe { CoreLatch::set(&self.0) }
        }
    }

    impl Default for LoomLatch {
        fn default() -> Self {
            Self::new()
        }
    }

    /// A pipeline's in-order gate (`pipeline/gate.rs`).
    pub struct LoomInOrderGate(crate::pipeline::InOrderGate);
    /// A pipeline's any-order gate.
    pub struct LoomAnyOrderGate(crate::pipeline::AnyOrderGate);

    /// What `arrive` gave: entered, parked, or switched to another
    /// parked slot (which the caller now holds the gate for).
    #[derive(Debug, PartialEq, Eq)]
    pub enum LoomArrival {
        Enter,
        Parked,
        Switch(u32),
    }

    fn arrival(a: crate::pipeline::Arrival) -> LoomArrival {
        match a {
            crate::pipeline::Arrival::Enter => LoomArrival::Enter,
            crate::pipeline::Arrival::Parked => LoomArrival::Parked,
            crate::pipeline::Arrival::Switch(slot) => LoomArrival::Switch(slot),
        }
    }

    impl LoomInOrderGate {
        pub fn new(tokens: usize) -> Self {
            LoomInOrderGate(crate::pipeline::InOrderGate::new(tokens))
        }
        pub fn arrive(&self, sequence: u64, slot: u32) -> LoomArrival {
            arrival(self.0.arrive(sequence, slot))
        }
        pub fn finish(&self, sequence: u64) -> Option<u32> {
            self.0.finish(sequence)
        }
    }

    impl LoomAnyOrderGate {
        pub fn new(tokens: usize) -> Self {
            LoomAnyOrderGate(crate::pipeline::AnyOrderGate::new(tokens))
        }
        pub fn arrive(&self, slot: u32) -> LoomArrival {
            arrival(self.0.arrive(slot))
        }
        pub fn finish(&self) -> Option<u32> {
            self.0.finish()
        }
    }

    /// One entry of a mailbox proxy (`proxy.rs`), around a dummy task.
    pub struct LoomProxyEntry(crate::job::JobRef);

    /// The two entries of a new proxy.
    pub fn loom_proxy_pair() -> (LoomProxyEntry, LoomProxyEntry) {
        static TASK: u64 = 0;
        unsafe fn never_run(
            _: std::ptr::NonNull<()>,
            _: &crate::worker::WorkerThread,
        ) -> Option<crate::job::Next> {
            unreachable!("the model only claims")
        }
        // SAFETY: the dummy task is a static and is never run.
        let job = unsafe {
            crate::job::JobRef::new(
                std::ptr::NonNull::from(&TASK).cast(),
                never_run,
                crate::region::Region::NONE,
            )
        };
        let entry = crate::proxy::Proxy::new_pair(job, 0, 0);
        (LoomProxyEntry(entry), LoomProxyEntry(entry))
    }

    /// Proxies freed so far in this process (each must be freed once).
    pub fn loom_proxy_frees() -> usize {
        crate::proxy::FREES.load(std::sync::atomic::Ordering::SeqCst)
    }

    impl LoomProxyEntry {
        /// Take this entry: true if it claimed the task.
        pub fn take(self) -> bool {
            // SAFETY: each entry is consumed once (by value).
            matches!(
                unsafe { crate::proxy::Proxy::take(self.0) },
                crate::proxy::Taken::Run(_)
            )
        }
    }
}
