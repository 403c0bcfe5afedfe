//! The public face of a pool: [`Builder`], [`Pool`] and `current_worker`.
//!
//! Everything here is a thin, safe layer over the registry: it wraps
//! closures in task nodes, picks the group a submission belongs to (the
//! pool's static group for `'static` work, a stack-allocated structured
//! group for `run`), and blocks the caller the right way: a worker of the
//! pool keeps working by the six rules, a thread outside it sleeps on a
//! lock latch, and on a pool without threads the caller becomes the guest
//! worker.

use crate::error::{AffinityError, BuildError};
use crate::graph::Graph;
use crate::graph::GraphError;
use crate::observe::stats::Stats;
use crate::observe::trace::Trace;
use crate::platform::latch::CountLatch;
use crate::platform::topology::{CoreInfo, Pinning, Topology};
use crate::platform::unwind;
use crate::queues::dispatch::{Dispatch, STRICT_AFFINITY};
use crate::queues::region;
use crate::task::node::TaskRef;
use crate::worker::group::{Group, OnPanic};
use crate::worker::registry::{PanicHandler, RegistryConfig, ThreadHandler};
use crate::worker::thread::Registry;
use crate::worker::thread::WorkerThread;
use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Configures and builds a [`Pool`].
///
/// ```
/// let pool = sixfold::Pool::builder()
///     .num_threads(2)
///     .thread_name(|i| format!("worker-{i}"))
///     .stack_size(4 << 20)
///     .build()
///     .expect("pool");
/// assert_eq!(pool.num_threads(), 2);
/// ```
#[derive(Default)]
#[must_use]
pub struct Builder {
    num_threads: Option<usize>,
    thread_name: Option<Box<dyn FnMut(usize) -> String>>,
    stack_size: Option<usize>,
    panic_handler: Option<PanicHandler>,
    start_handler: Option<ThreadHandler>,
    exit_handler: Option<ThreadHandler>,
    pinning: Pinning,
    topology: Option<Topology>,
    trace: bool,
    use_current_thread: bool,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("num_threads", &self.num_threads)
            .field("stack_size", &self.stack_size)
            .field("pinning", &self.pinning)
            .finish_non_exhaustive()
    }
}

impl Builder {
    /// A builder with the defaults: one worker per core this process may
    /// run on, threads named `sixfold-N`, the platform's stack size.
    pub fn new() -> Self {
        Builder::default()
    }

    /// The number of worker threads. Without it: `SIXFOLD_NUM_THREADS` if
    /// that is a positive number, else one per core this process may run
    /// on. `0` means none of its own: the thread that calls `install`,
    /// `run` or `wait_idle` runs the tasks (handy for deterministic
    /// debugging), and work submitted from outside, or from a worker of
    /// another pool, starts a temporary thread that drains it.
    pub fn num_threads(mut self, n: usize) -> Self {
        self.num_threads = Some(n);
        self
    }

    /// Make the building thread the pool's worker 0 (rayon's
    /// `use_current_thread`): the pool starts `num_threads - 1` threads,
    /// and this thread's own `join`, `scope`, loops and calls into the pool
    /// run as worker 0 of it, with the others stealing from it. It runs no
    /// main loop: it takes part in the pool's work while it waits in such
    /// a call, so work placed on worker 0 alone (a strict task, its share
    /// of a `broadcast` from another thread) waits until it does. Drop the
    /// pool on this thread: the drop first runs, as worker 0, what is left
    /// for the pool, then makes the thread an outside thread again (a pool
    /// dropped on another thread leaves this one worker 0 of a pool with
    /// no other threads). No start or exit handler and no pinning apply to
    /// it. `build` fails with [`BuildError::CurrentThreadIsAWorker`] on a
    /// thread that already is a worker.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).use_current_thread().build().unwrap();
    /// assert_eq!(sixfold::current_thread_index(), Some(0));
    /// let (a, b) = sixfold::join(|| sixfold::current_thread_index(), || 2 + 2);
    /// assert_eq!((a, b), (Some(0), 4));
    /// assert_eq!(pool.install(|| sixfold::current_num_threads()), 2);
    /// drop(pool);
    /// assert_eq!(sixfold::current_thread_index(), None);
    /// ```
    pub fn use_current_thread(mut self) -> Self {
        self.use_current_thread = true;
        self
    }

    /// Name worker thread `i` with `name(i)`. If `name` panics, `build`
    /// stops and joins the threads it had started (their exit handlers
    /// run), then resumes the panic.
    pub fn thread_name<F>(mut self, name: F) -> Self
    where
        F: FnMut(usize) -> String + 'static,
    {
        self.thread_name = Some(Box::new(name));
        self
    }

    /// Stack size of each worker thread, in bytes.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Called with the payload when a `'static` task (`spawn`, `enqueue`,
    /// `spawn_with_affinity`) panics. Without one, the panic is printed and
    /// counted in `Stats::unhandled_panics`. The pool keeps working.
    pub fn panic_handler<H>(mut self, handler: H) -> Self
    where
        H: Fn(Box<dyn Any + Send>) + Send + Sync + 'static,
    {
        self.panic_handler = Some(Box::new(handler));
        self
    }

    /// Called on each worker thread, with its index, before it takes work.
    pub fn start_handler<H>(mut self, handler: H) -> Self
    where
        H: Fn(usize) + Send + Sync + 'static,
    {
        self.start_handler = Some(Box::new(handler));
        self
    }

    /// Called on each worker thread, with its index, as it exits.
    pub fn exit_handler<H>(mut self, handler: H) -> Self
    where
        H: Fn(usize) + Send + Sync + 'static,
    {
        self.exit_handler = Some(Box::new(handler));
        self
    }

    /// Bind workers to cores ([`Pinning::Cores`]: worker i to the i-th core
    /// of the topology, wrapping around) or not (the default).
    ///
    /// ```
    /// use sixfold::{Pinning, Pool};
    /// let pool = Pool::builder().num_threads(2).pinning(Pinning::Cores).build().unwrap();
    /// let core = pool.worker_core(0).expect("pinned");
    /// assert_eq!(core, pool.topology().core_for_worker(0));
    /// ```
    pub fn pinning(mut self, pinning: Pinning) -> Self {
        self.pinning = pinning;
        self
    }

    /// Use `topology` instead of [`Topology::detect`] (for example one
    /// built with [`Topology::from_cores`]): it decides where pinned workers
    /// go and in which order workers look for victims.
    pub fn topology(mut self, topology: Topology) -> Self {
        self.topology = Some(topology);
        self
    }

    /// Record an execution trace: one record per task (worker, rule, start
    /// and end, name) and per sleep, taken with [`Pool::take_trace`]. Off
    /// by default; off, it costs the hot path one predictable branch.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).trace(true).build().unwrap();
    /// pool.spawn_named("hello", || println!("hello"));
    /// pool.wait_idle();
    /// let trace = pool.take_trace();
    /// assert_eq!(trace.tasks.len(), 1);
    /// assert_eq!(trace.tasks[0].name.as_deref(), Some("hello"));
    /// println!("{}", trace.summary());
    /// ```
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on;
        self
    }

    /// Start the pool's threads. On an error, the threads already started
    /// have been stopped and joined.
    pub fn build(self) -> Result<Pool, BuildError> {
        let num_threads = self.num_threads.unwrap_or_else(default_num_threads);
        // The building thread is one of them: at least one.
        let num_threads = if self.use_current_thread {
            num_threads.max(1)
        } else {
            num_threads
        };
        let topology = self.topology.unwrap_or_else(Topology::detect);
        let started = Registry::start(RegistryConfig {
            num_threads,
            thread_name: self.thread_name,
            stack_size: self.stack_size,
            panic_handler: self.panic_handler,
            start_handler: self.start_handler,
            exit_handler: self.exit_handler,
            topology,
            pinning: self.pinning,
            trace: self.trace,
            adopt_current_thread: self.use_current_thread,
        })?;
        let registry = started.registry;
        if let Some(deque) = started.adopted {
            crate::worker::lifecycle::adopt_current_thread(&registry, deque);
        }
        Ok(Pool {
            registry,
            threads: started.handles,
        })
    }
}

/// `SIXFOLD_NUM_THREADS` if it is a positive number, else the cores this
/// process may run on (its CPU mask), else what the OS reports as
/// available parallelism.
pub(crate) fn default_num_threads() -> usize {
    if let Some(n) = std::env::var("SIXFOLD_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        return n;
    }
    core_affinity::get_core_ids()
        .map(|ids| ids.len())
        .filter(|&n| n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
}

/// A pool of worker threads scheduling task nodes by the six rules.
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let sum = pool.install(|| (1..=10).sum::<u32>());
/// assert_eq!(sum, 55);
/// ```
pub struct Pool {
    registry: Arc<Registry>,
    threads: Vec<JoinHandle<()>>,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("num_threads", &self.num_threads())
            .finish_non_exhaustive()
    }
}

impl Pool {
    /// A builder; see [`Builder`].
    pub fn builder() -> Builder {
        Builder::new()
    }

    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// A pool with the default configuration.
    pub fn new() -> Result<Pool, BuildError> {
        Builder::new().build()
    }

    /// The number of worker threads (0 for a pool that borrows its callers).
    pub fn num_threads(&self) -> usize {
        self.registry.num_threads()
    }

    /// The number of worker slots: valid worker indices are
    /// `0..num_workers()`. Equals `num_threads()`, or 1 for a pool without
    /// threads (its guest slot).
    pub fn num_workers(&self) -> usize {
        self.registry.num_slots()
    }

    /// Run `f` on a worker of this pool and return its result; wait until
    /// then. Inside a worker of this pool, `f` simply runs. A worker of
    /// another pool waits by running its own pool's tasks (and sleeps when
    /// there are none), so pools that call into each other never deadlock;
    /// any other thread blocks. A panic in `f` is resumed here.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let inside = pool.install(|| sixfold::current_worker().is_some());
    /// assert!(inside);
    /// // Pools may call into each other, even with one worker each.
    /// let (a, b) = (
    ///     sixfold::Pool::builder().num_threads(1).build().unwrap(),
    ///     sixfold::Pool::builder().num_threads(1).build().unwrap(),
    /// );
    /// assert_eq!(a.install(|| b.install(|| a.install(|| 1))), 1);
    /// ```
    pub fn install<R, F>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        self.registry.in_worker(|_| f())
    }

    /// Spawn a `'static` closure: onto the calling worker's deque (rule 3
    /// for it, rule 6 for a thief), or from outside the pool onto the shared
    /// queue. `wait_idle` and the pool's drop wait for it.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let count = Arc::new(AtomicUsize::new(0));
    /// for _ in 0..10 {
    ///     let count = count.clone();
    ///     pool.spawn(move || { count.fetch_add(1, Ordering::Relaxed); });
    /// }
    /// pool.wait_idle();
    /// assert_eq!(count.load(Ordering::Relaxed), 10);
    /// ```
    pub fn spawn<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.spawn_task(TaskRef::from_fn(move |_| f()));
    }

    /// [`Pool::spawn`] for a task node (it runs once its predecessors, if
    /// any, have completed).
    pub fn spawn_task(&self, task: TaskRef) {
        self.submit_static(task, Some(Dispatch::Spawn), None);
    }

    /// Spawn a `'static` closure in FIFO order for the calling worker: the
    /// tasks one worker spawns this way start in the order spawned (per
    /// worker FIFOs with indirect jobs on the deque, as `scope_fifo`). From
    /// outside the pool it goes to the shared queue, which is FIFO too.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let pool = Arc::new(sixfold::Pool::builder().num_threads(1).build().unwrap());
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let (p, l) = (pool.clone(), log.clone());
    /// pool.install(move || {
    ///     for i in 0..3 {
    ///         let l = l.clone();
    ///         p.spawn_fifo(move || l.lock().unwrap().push(i));
    ///     }
    /// });
    /// pool.wait_idle();
    /// assert_eq!(*log.lock().unwrap(), [0, 1, 2]);
    /// ```
    pub fn spawn_fifo<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        crate::task::submit::submit_static_fifo(&self.registry, TaskRef::from_fn(move |_| f()));
    }

    /// [`Pool::spawn`] with a name for the task's trace record.
    pub fn spawn_named<F>(&self, name: impl Into<Arc<str>>, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        let name: Arc<str> = name.into();
        self.spawn(move || {
            f();
            // Named at its end, so that tasks it ran while waiting (which
            // end first) do not take its name.
            if let Some(worker) = WorkerThread::current()
                && worker.tracing()
            {
                worker.set_trace_name(Some(name));
            }
        });
    }

    /// Enqueue a `'static` closure on the shared queue: fair (approximately
    /// FIFO) and guaranteed to run, even on a pool without threads.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// for i in 0..3 {
    ///     let tx = tx.clone();
    ///     pool.enqueue(move || tx.send(i).unwrap());
    /// }
    /// pool.wait_idle();
    /// // One thread enqueued them, one worker ran them: in order.
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), [0, 1, 2]);
    /// ```
    pub fn enqueue<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.enqueue_task(TaskRef::from_fn(move |_| f()));
    }

    /// [`Pool::enqueue`] with a [`Priority`](crate::Priority): rule 5 takes
    /// high-priority tasks before normal ones, and low-priority ones only
    /// when neither is waiting (no preemption, and no promise that a low
    /// task runs while higher ones keep coming).
    ///
    /// ```
    /// use sixfold::Priority;
    /// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.install(|| {
    ///     let (a, b) = (tx.clone(), tx.clone());
    ///     pool.enqueue(move || a.send("normal").unwrap());
    ///     pool.enqueue_with_priority(Priority::High, move || b.send("high").unwrap());
    /// });
    /// pool.wait_idle();
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["high", "normal"]);
    /// ```
    pub fn enqueue_with_priority<F>(&self, priority: crate::Priority, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.enqueue_task(TaskRef::from_fn(move |_| f()).with_priority(priority));
    }

    /// [`Pool::enqueue`] for a task node (with the priority it was given,
    /// [`TaskRef::with_priority`]).
    pub fn enqueue_task(&self, task: TaskRef) {
        self.submit_static(task, Some(Dispatch::Enqueue), None);
    }

    /// Run a `'static` closure on worker `worker` when it can: it goes to
    /// that worker's mailbox (rule 4) and, as a *proxy*, to the calling
    /// worker's deque (from outside the pool: the shared queue). The first
    /// to take either entry claims the task. Other workers leave it to its
    /// worker while that worker is idle or working through its mailbox, and
    /// claim it once that worker has been busy, taking nothing from its
    /// mailbox, for about a millisecond: a long task there cannot strand
    /// the rest.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.spawn_with_affinity(1, move || tx.send(sixfold::current_worker()).unwrap())
    ///     .unwrap();
    /// assert_eq!(rx.recv().unwrap(), Some(1)); // worker 1 was free
    /// assert!(pool.spawn_with_affinity(2, || {}).is_err()); // no worker 2
    /// ```
    pub fn spawn_with_affinity<F>(&self, worker: usize, f: F) -> Result<(), AffinityError>
    where
        F: FnOnce() + Send + 'static,
    {
        self.spawn_task_with_affinity(worker, TaskRef::from_fn(move |_| f()))
    }

    /// [`Pool::spawn_with_affinity`] for a task node. On error the node is
    /// dropped (cancelled).
    pub fn spawn_task_with_affinity(
        &self,
        worker: usize,
        task: TaskRef,
    ) -> Result<(), AffinityError> {
        AffinityError::check(worker, self.num_workers())?;
        self.submit_static(task, None, Some(worker));
        Ok(())
    }

    /// Run a `'static` closure on worker `worker` and nowhere else (strict
    /// affinity): it goes to that worker's mailbox only, with no proxy, so
    /// no other worker ever takes it, however long `worker` stays busy. For
    /// thread-bound resources: a GPU context, a `!Send` handle kept per
    /// worker, a library that must always be called from one thread. A
    /// worker waiting inside a task (join, scope, run) still takes its
    /// mailbox, so this cannot deadlock on a waiting worker. (In a pool of
    /// zero threads it is an ordinary affinity: its only worker is whoever
    /// calls into it.)
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// for _ in 0..100 {
    ///     let tx = tx.clone();
    ///     pool.spawn_on(1, move || tx.send(sixfold::current_worker()).unwrap()).unwrap();
    /// }
    /// drop(tx);
    /// assert!(rx.iter().all(|w| w == Some(1)));
    /// assert!(pool.spawn_on(2, || {}).is_err()); // no worker 2
    /// ```
    pub fn spawn_on<F>(&self, worker: usize, f: F) -> Result<(), AffinityError>
    where
        F: FnOnce() + Send + 'static,
    {
        self.spawn_task_on(worker, TaskRef::from_fn(move |_| f()))
    }

    /// [`spawn_broadcast`](crate::spawn_broadcast) to this pool's workers:
    /// `op` once on each, strictly placed, without waiting.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.spawn_broadcast(move |ctx| tx.send(ctx.index()).unwrap());
    /// let mut seen: Vec<usize> = rx.iter().take(2).collect();
    /// seen.sort();
    /// assert_eq!(seen, [0, 1]);
    /// ```
    pub fn spawn_broadcast<OP>(&self, op: OP)
    where
        OP: Fn(crate::BroadcastContext) + Send + Sync + 'static,
    {
        spawn_broadcast_in(&self.registry, op);
    }

    /// [`Pool::spawn_on`] for a task node. On error the node is dropped
    /// (cancelled).
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let task = sixfold::TaskRef::from_fn(move |_| tx.send(sixfold::current_worker()).unwrap());
    /// pool.spawn_task_on(0, task).unwrap();
    /// assert_eq!(rx.recv().unwrap(), Some(0));
    /// ```
    pub fn spawn_task_on(&self, worker: usize, task: TaskRef) -> Result<(), AffinityError> {
        AffinityError::check(worker, self.num_workers())?;
        self.submit_static(task, None, Some(worker | STRICT_AFFINITY as usize));
        Ok(())
    }

    fn submit_static(&self, task: TaskRef, dispatch: Option<Dispatch>, affinity: Option<usize>) {
        crate::task::submit::submit_static(&self.registry, task, dispatch, affinity);
    }

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
    /// `run` does.
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
    pub fn run_cancellable<I>(&self, tasks: I) -> Result<(), crate::Cancelled>
    where
        I: IntoIterator<Item = TaskRef>,
    {
        if self.run_reporting_cancel(tasks, None) {
            Err(crate::Cancelled)
        } else {
            Ok(())
        }
    }

    /// [`Pool::run_cancellable`], also cancelled when `token` fires, from
    /// any thread (a [`CancelToken::standalone`](crate::CancelToken::standalone), or a graph's or a
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
    pub fn run_cancellable_with<I>(
        &self,
        tasks: I,
        token: &crate::CancelToken,
    ) -> Result<(), crate::Cancelled>
    where
        I: IntoIterator<Item = TaskRef>,
    {
        if self.run_reporting_cancel(tasks, Some(token.clone())) {
            Err(crate::Cancelled)
        } else {
            Ok(())
        }
    }

    /// `run`, returning whether the run's group was cancelled (also by
    /// `token`, if given).
    fn run_reporting_cancel<I>(&self, tasks: I, token: Option<crate::CancelToken>) -> bool
    where
        I: IntoIterator<Item = TaskRef>,
    {
        // Collect first: user iterator code must not run (and perhaps
        // panic) while nodes already point at the group on this frame.
        let tasks: Vec<TaskRef> = tasks.into_iter().collect();
        if tasks.is_empty() {
            return false;
        }
        let registry = &self.registry;
        let group = match WorkerThread::current() {
            Some(worker) if Arc::ptr_eq(worker.registry(), registry) => {
                run_on_worker(worker, tasks, token)
            }
            // A worker of another pool waits by working on its own: run
            // from one of ours, entered through an entry job.
            Some(_) => {
                return registry
                    .in_worker(|worker| resume_panic(run_on_worker(worker, tasks, token)));
            }
            None if registry.num_threads() == 0 => {
                registry.with_guest(|worker| run_on_worker(worker, tasks, token))
            }
            None => run_from_outside(registry, tasks, token),
        };
        resume_panic(group)
    }

    /// Run every node of `graph` once, each after all its predecessors, and
    /// block until all ran. Called from a worker of this pool, the worker
    /// keeps running tasks while it waits. A built graph runs with no
    /// allocation of its own, and can run again and again.
    ///
    /// Errors: [`GraphError::AffinityOutOfRange`] (checked before anything
    /// runs), [`GraphError::Cancelled`] if its [`CancelToken`](crate::CancelToken)
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
        match WorkerThread::current() {
            // A worker of another pool waits by working on its own.
            Some(worker) if !Arc::ptr_eq(worker.registry(), &self.registry) => self
                .registry
                .in_worker(|_| crate::graph::run_graph(&self.registry, graph)),
            _ => crate::graph::run_graph(&self.registry, graph),
        }
    }

    /// Run `pipeline` with at most `tokens` items in flight, until its source
    /// is exhausted and every item passed every stage. Called from a worker
    /// of this pool, the worker keeps running tasks while it waits.
    ///
    /// Errors, before anything runs: [`PipelineError::ZeroTokens`](crate::error::PipelineError::ZeroTokens),
    /// [`PipelineError::AffinityOutOfRange`](crate::error::PipelineError::AffinityOutOfRange) for a stage pinned to a worker
    /// the pool does not have. [`PipelineError::Cancelled`](crate::error::PipelineError::Cancelled) if the
    /// pipeline's [`CancelToken`](crate::CancelToken) fired. A panic in a
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
        pipeline: &mut crate::pipeline::Pipeline<'_, T>,
        tokens: usize,
    ) -> Result<(), crate::error::PipelineError> {
        crate::pipeline::run_pipeline(&self.registry, pipeline, tokens)
    }

    /// `run_graph` `runs` times in a row; stops at the first error.
    pub fn run_graph_n(&self, graph: &mut Graph<'_>, runs: usize) -> Result<(), GraphError> {
        for _ in 0..runs {
            self.run_graph(graph)?;
        }
        Ok(())
    }

    /// Block until every `'static` task spawned or enqueued so far (and all
    /// they spawned) has finished. On a pool without threads, the caller
    /// runs them.
    ///
    /// # Panics
    /// When called from a worker of this same pool: it would wait for the
    /// task it is running.
    pub fn wait_idle(&self) {
        if let Some(worker) = WorkerThread::current_in(&self.registry)
            && crate::worker::lifecycle::is_adopted_here(&self.registry)
            && !worker.in_a_wait()
        {
            // The building thread of a `use_current_thread` pool, outside
            // every task: it works as worker 0 meanwhile.
            let idle = self.registry.static_group.idle_counter();
            worker.help_until(
                || idle.is_zero(),
                || {
                    idle.wait_zero(Some(Duration::from_millis(1)));
                },
            );
            return;
        }
        assert!(
            WorkerThread::current_in(&self.registry).is_none(),
            "Pool::wait_idle called from inside the pool would wait for its own task"
        );
        self.wait_idle_from_outside();
    }

    fn wait_idle_from_outside(&self) {
        let idle = self.registry.static_group.idle_counter();
        if let Some(foreign) = WorkerThread::current() {
            // A worker of another pool keeps its own pool going meanwhile:
            // our tasks may wait for its.
            foreign.help_until(
                || idle.is_zero(),
                || {
                    idle.wait_zero(Some(Duration::from_millis(1)));
                },
            );
            return;
        }
        if self.registry.num_threads() > 0 {
            idle.wait_zero(None);
            return;
        }
        self.registry.with_guest(|worker| {
            loop {
                worker.drain();
                // Whatever is left waits on predecessors elsewhere; look
                // again shortly rather than burn a core.
                if idle.is_zero() || idle.wait_zero(Some(Duration::from_millis(1))) {
                    break;
                }
            }
        });
    }

    /// The trace records since the pool was built or the last take (empty
    /// unless built with [`Builder::trace`]).
    pub fn take_trace(&self) -> Trace {
        self.registry
            .take_trace(WorkerThread::current_in(&self.registry).is_none())
    }

    /// The topology the pool was built with (detected, or given to
    /// [`Builder::topology`]).
    pub fn topology(&self) -> &Topology {
        self.registry.topology()
    }

    /// The core worker `worker` is bound to, if the pool pins its workers
    /// ([`Pinning::Cores`]); `None` without pinning or for an index the
    /// pool does not have.
    pub fn worker_core(&self, worker: usize) -> Option<&CoreInfo> {
        if worker >= self.registry.num_slots() || self.registry.num_threads() == 0 {
            return None;
        }
        self.registry.pinned_core(worker)
    }

    /// A snapshot of the per-worker counters: tasks by rule, steals (by
    /// tier), sleeps. `Stats` prints as a table.
    ///
    /// ```
    /// use sixfold::Rule;
    /// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
    /// let before = pool.stats();
    /// pool.enqueue(|| {});
    /// pool.wait_idle();
    /// assert_eq!(pool.stats().since(&before).by_rule(Rule::SharedQueue), 1);
    /// println!("{}", pool.stats());
    /// ```
    pub fn stats(&self) -> Stats {
        self.registry.stats()
    }

    /// How many workers are blocked in the sleep protocol right now. A racy
    /// snapshot, for observing the pool (tests, dashboards), not for
    /// synchronizing with it.
    pub fn sleeping_workers(&self) -> usize {
        self.registry.sleep.sleeping_threads()
    }
}

/// `run` from a worker of the pool: submit, then work until the group is
/// empty. Returns the group so the caller can take its panic.
fn run_on_worker(
    worker: &WorkerThread,
    tasks: Vec<TaskRef>,
    token: Option<crate::CancelToken>,
) -> Group {
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
    token: Option<crate::CancelToken>,
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
fn with_token(group: Group, token: Option<crate::CancelToken>) -> Group {
    match token {
        Some(token) => group.with_external_cancel(Box::new(move || token.is_cancelled())),
        None => group,
    }
}

/// Resume the first panic of a finished group, if it had one; else say
/// whether it was cancelled.
fn resume_panic(group: Group) -> bool {
    if let Some(payload) = group.take_panic() {
        unwind::resume_unwinding(payload);
    }
    group.is_cancelled()
}

impl Drop for Pool {
    /// Runs every task already spawned or enqueued, then stops and joins
    /// the worker threads.
    fn drop(&mut self) {
        // The building thread of a `use_current_thread` pool runs what is
        // left as worker 0, then leaves the slot: from here on it is an
        // outside thread, and the drop goes on as from one.
        crate::worker::lifecycle::release_adopted(&self.registry);
        if WorkerThread::current_in(&self.registry).is_some() {
            // Dropped by one of its own tasks: we cannot wait for ourselves
            // here. A helper thread waits until every queued `'static` task
            // ran (the workers keep going meanwhile), then stops the
            // workers, which exit on their own (nobody joins them).
            let registry = self.registry.clone();
            let stopper = std::thread::Builder::new()
                .name("sixfold-stopper".into())
                .spawn(move || {
                    registry.static_group.idle_counter().wait_zero(None);
                    registry.terminate();
                });
            if let Err(e) = stopper {
                // Without a thread to wait on, leaving the workers running
                // is the choice that loses no task.
                eprintln!(
                    "sixfold: could not start a thread to stop the pool ({e}); its workers keep running"
                );
            }
            return;
        }
        self.wait_idle_from_outside();
        self.registry.terminate();
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

/// The index of the worker the calling thread is, in whichever pool, or
/// `None` outside every pool.
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// assert_eq!(sixfold::current_worker(), None);
/// let inside = pool.install(sixfold::current_worker);
/// assert!(matches!(inside, Some(0 | 1)));
/// ```
pub fn current_worker() -> Option<usize> {
    WorkerThread::current().map(WorkerThread::index)
}

/// `spawn_broadcast` into `registry`'s pool: one `'static` task a worker,
/// each strictly placed on its worker (its mailbox, no proxy: rule 4), in
/// the pool's static group (`wait_idle` waits for them).
pub(crate) fn spawn_broadcast_in<OP>(registry: &Arc<Registry>, op: OP)
where
    OP: Fn(crate::BroadcastContext) + Send + Sync + 'static,
{
    let op = Arc::new(op);
    let num_threads = registry.num_slots();
    for index in 0..num_threads {
        let op = op.clone();
        let task = TaskRef::from_fn(move |_| op(crate::BroadcastContext::new(index, num_threads)));
        crate::task::submit::submit_static(
            registry,
            task,
            None,
            Some(index | STRICT_AFFINITY as usize),
        );
    }
}
