//! Blocking runs in a pool: a set of task nodes (`run`, cancellable or
//! not), a graph, a pipeline. Each checks its input, then passes what it
//! starts to the pool's one way into a wait (`Registry::enter`), which
//! decides where the caller is; a panic in the work is resumed here.
//!
//! Invariant: a run's group lives on the frame that waits for it, and
//! that frame returns only once every task of the group ran or was
//! dropped unrun.

use super::thread_pool::Pool;
use crate::cancel::{CancelToken, Cancelled};
use crate::error::PipelineError;
use crate::graph::{Graph, GraphError};
use crate::pipeline::Pipeline;
use crate::platform::latch::CountLatch;
use crate::platform::unwind;
use crate::queues::region;
use crate::task::node::TaskRef;
use crate::worker::entry::Entry;
use crate::worker::group::{Group, OnPanic};
use crate::worker::thread::{Registry, WorkerThread};
use std::sync::Arc;

impl Pool {
    /// Run a set of task nodes (one `TaskRef`, or an array or vector of
    /// them) and everything they spawn, and block until all of it finished.
    ///
    /// A panic in any of these tasks cancels the ones that have not started
    /// yet, lets the started ones finish, and is then resumed here (the
    /// first panic wins). Called from a worker of this pool, the worker keeps
    /// running tasks while it waits.
    ///
    /// ```
    /// use sixfold::TaskRef;
    /// use std::sync::{Arc, Mutex};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let step = |name: &'static str| {
    ///     let log = log.clone();
    ///     TaskRef::from_fn(move |_| log.lock().unwrap().push(name))
    /// };
    /// let (mut first, second) = (step("first"), step("second"));
    /// first.precede(&second).unwrap();
    /// pool.run([second, first]);
    /// assert_eq!(*log.lock().unwrap(), ["first", "second"]);
    /// ```
    pub fn run<I>(&self, tasks: I)
    where
        I: IntoIterator<Item = TaskRef>,
    {
        self.run_reporting_cancel(tasks, None);
    }

    /// [`Pool::run`] that says whether the run was cancelled: by one of
    /// its tasks ([`Context::cancel_run`](crate::Context::cancel_run)) or
    /// through a scope or run it is nested in. Then `Err(Cancelled)`, once
    /// every task ran or was dropped unrun (not-started tasks are dropped,
    /// and with them what their closures own). A panic is resumed as
    /// `run` does. A task dropped because a task before it failed, in
    /// this run or in another one an edge comes from, or had its handle
    /// dropped, also makes it `Err(Cancelled)` (the run's other tasks
    /// still run).
    ///
    /// ```
    /// use sixfold::TaskRef;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
    /// let ran = Arc::new(AtomicUsize::new(0));
    /// let ran2 = ran.clone();
    /// let (mut first, second) = (
    ///     TaskRef::from_fn(|cx| cx.cancel_run()),
    ///     TaskRef::from_fn(move |_| { ran2.fetch_add(1, Ordering::Relaxed); }),
    /// );
    /// first.precede(&second).unwrap();
    /// assert_eq!(pool.run_cancellable([first, second]), Err(sixfold::Cancelled));
    /// assert_eq!(ran.load(Ordering::Relaxed), 0); // dropped, never started
    /// ```
    pub fn run_cancellable<I>(&self, tasks: I) -> Result<(), Cancelled>
    where
        I: IntoIterator<Item = TaskRef>,
    {
        if self.run_reporting_cancel(tasks, None) {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }

    /// [`Pool::run_cancellable`], also cancelled when `token` fires, from
    /// any thread (a [`CancelToken::standalone`](CancelToken::standalone), or a graph's or a
    /// pipeline's token to stop them together).
    ///
    /// ```
    /// use sixfold::{CancelToken, TaskRef};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let token = CancelToken::standalone();
    /// let remote = token.clone();
    /// let waits = TaskRef::from_fn(|_| {
    ///     while !sixfold::is_cancelled() {
    ///         std::thread::yield_now();
    ///     }
    /// });
    /// let canceller = std::thread::spawn(move || remote.cancel());
    /// assert_eq!(pool.run_cancellable_with([waits], &token), Err(sixfold::Cancelled));
    /// canceller.join().unwrap();
    /// ```
    pub fn run_cancellable_with<I>(&self, tasks: I, token: &CancelToken) -> Result<(), Cancelled>
    where
        I: IntoIterator<Item = TaskRef>,
    {
        if self.run_reporting_cancel(tasks, Some(token.clone())) {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }

    /// `run`, returning whether the run's group was cancelled (also by
    /// `token`, if given).
    fn run_reporting_cancel<I>(&self, tasks: I, token: Option<CancelToken>) -> bool
    where
        I: IntoIterator<Item = TaskRef>,
    {
        // Collect first: user iterator code must not run (and perhaps
        // panic) while nodes already point at the group on this frame.
        let tasks: Vec<TaskRef> = tasks.into_iter().collect();
        if tasks.is_empty() {
            return false;
        }
        self.registry().enter(RunTasks { tasks, token })
    }

    /// Run every node of `graph` once, each after all its predecessors, and
    /// block until all ran. Called from a worker of this pool, the worker
    /// keeps running tasks while it waits. A built graph runs with no
    /// allocation of its own, and can run again and again.
    ///
    /// Errors: [`GraphError::AffinityOutOfRange`] (checked before anything
    /// runs), [`GraphError::Cancelled`] if its [`CancelToken`](CancelToken)
    /// fired. A panic in a node skips the nodes not yet started, lets the
    /// started ones finish, and is resumed here; the graph stays usable.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let sum = AtomicU64::new(0);
    /// let mut g = sixfold::Graph::new();
    /// let sum = &sum;
    /// let nodes: Vec<_> = (1..=4u64)
    ///     .map(|i| g.add(move || { sum.fetch_add(i, Ordering::Relaxed); }))
    ///     .collect();
    /// for pair in nodes.windows(2) {
    ///     g.precede(pair[0], pair[1]).unwrap();
    /// }
    /// pool.run_graph(&mut g).unwrap();
    /// assert_eq!(sum.load(Ordering::Relaxed), 10);
    /// ```
    pub fn run_graph(&self, graph: &mut Graph<'_>) -> Result<(), GraphError> {
        crate::graph::run_graph(self.registry(), graph)
    }

    /// Run `pipeline` with at most `tokens` items in flight, until its source
    /// is exhausted and every item passed every stage. Called from a worker
    /// of this pool, the worker keeps running tasks while it waits.
    ///
    /// Errors, before anything runs: [`PipelineError::ZeroTokens`](crate::error::PipelineError::ZeroTokens),
    /// [`PipelineError::AffinityOutOfRange`](crate::error::PipelineError::AffinityOutOfRange) for a stage pinned to a worker
    /// the pool does not have. [`PipelineError::Cancelled`](crate::error::PipelineError::Cancelled) if the
    /// pipeline's [`CancelToken`](CancelToken) fired. A panic in a
    /// stage (or the source) stops the source, drops the items in flight at
    /// their next stage, and is resumed here once all are gone; the pipeline
    /// can run again.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut n = 0;
    /// let mut out = Vec::new();
    /// let mut p = sixfold::Pipeline::new(|| { n += 1; (n <= 5).then_some(n) })
    ///     .parallel(|x: u32| x * 10)
    ///     .serial_in_order(|x| out.push(x));
    /// pool.run_pipeline(&mut p, 3).unwrap();
    /// drop(p);
    /// assert_eq!(out, [10, 20, 30, 40, 50]);
    /// ```
    pub fn run_pipeline<T>(
        &self,
        pipeline: &mut Pipeline<'_, T>,
        tokens: usize,
    ) -> Result<(), PipelineError> {
        crate::pipeline::run_pipeline(self.registry(), pipeline, tokens)
    }

    /// `run_graph` `runs` times in a row; stops at the first error.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let ran = AtomicUsize::new(0);
    /// let mut g = sixfold::Graph::new();
    /// let a = g.add(|| { ran.fetch_add(1, Ordering::Relaxed); });
    /// let b = g.add(|| { ran.fetch_add(1, Ordering::Relaxed); });
    /// g.precede(a, b).unwrap();
    /// pool.run_graph_n(&mut g, 5).unwrap();
    /// assert_eq!(ran.load(Ordering::Relaxed), 10);
    /// g.cancel_token().cancel();       // the next run is cancelled...
    /// assert_eq!(pool.run_graph_n(&mut g, 5), Err(sixfold::GraphError::Cancelled));
    /// assert_eq!(ran.load(Ordering::Relaxed), 10); // ...and the four after it never start
    /// ```
    pub fn run_graph_n(&self, graph: &mut Graph<'_>, runs: usize) -> Result<(), GraphError> {
        for _ in 0..runs {
            self.run_graph(graph)?;
        }
        Ok(())
    }
}

/// What `run` starts: its tasks, in a group of their own. The output says
/// whether the group was cancelled; a panic is resumed.
struct RunTasks {
    tasks: Vec<TaskRef>,
    token: Option<CancelToken>,
}

impl Entry for RunTasks {
    type Output = bool;

    fn on_worker(self, worker: &WorkerThread) -> bool {
        resume_panic(run_on_worker(worker, self.tasks, self.token))
    }

    /// The tasks go straight to the pool's queues; the caller blocks.
    fn blocking_outside(self, registry: &Arc<Registry>) -> bool {
        resume_panic(run_from_outside(registry, self.tasks, self.token))
    }
}

/// `run` from a worker of the pool: submit, then work until the group is
/// empty. Returns the group so the caller can take its panic.
fn run_on_worker(worker: &WorkerThread, tasks: Vec<TaskRef>, token: Option<CancelToken>) -> Group {
    let registry = worker.registry();
    let group = with_token(
        Group::structured(
            CountLatch::for_worker(registry.wake_owner(worker.index())),
            OnPanic::Cancel,
            worker.region(),
        ),
        token,
    );
    // SAFETY: the context's group outlives this run, which ends inside the
    // task or body that started it.
    unsafe { group.set_parent(worker.cancel_context()) };
    worker.prepare_wait(group.used_shared_queue());
    crate::task::node::submit_all(tasks, &group, group.region(), |ready| {
        ready.route_from(worker)
    });
    // SAFETY: the group lives on this frame until after the wait.
    unsafe { CountLatch::release(group.latch()) };
    worker.wait_until(
        group.latch().as_core().expect("a worker's latch"),
        Some(group.used_shared_queue()),
    );
    group
}

/// `run` from a thread outside every pool: submit, then block until the
/// group is empty.
fn run_from_outside(
    registry: &Arc<Registry>,
    tasks: Vec<TaskRef>,
    token: Option<CancelToken>,
) -> Group {
    let group = with_token(
        Group::structured(
            CountLatch::for_thread(),
            OnPanic::Cancel,
            region::outside_current(),
        ),
        token,
    );
    crate::task::node::submit_all(tasks, &group, group.region(), |ready| {
        ready.route(registry, None)
    });
    // SAFETY: the group lives on this frame until after the wait.
    unsafe { CountLatch::release(group.latch()) };
    group.latch().wait_blocking();
    group
}

/// `group`, also cancelled when `token` fires.
fn with_token(group: Group, token: Option<CancelToken>) -> Group {
    match token {
        Some(token) => group.with_external_cancel(Box::new(move || token.is_cancelled())),
        None => group,
    }
}

/// Resume the first panic of a finished group, if it had one; else say
/// whether it was cancelled or had a node dropped unrun (over an edge from
/// a failed node, perhaps of another run).
fn resume_panic(group: Group) -> bool {
    if let Some(payload) = group.take_panic() {
        unwind::resume_unwinding(payload);
    }
    group.is_cancelled() || group.dropped_nodes()
}
