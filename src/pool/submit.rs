//! `'static` work submitted to a pool without waiting: `spawn` (the
//! worker's own deque, rule 3), `spawn_fifo`, `enqueue` (the shared queue,
//! rule 5, fair and guaranteed to run), with a priority, with an affinity
//! (rule 4) or strictly on one worker, and `spawn_broadcast`.
//!
//! Invariant: every task submitted here belongs to the pool's static
//! group, so `wait_idle` and the pool's drop wait for it: none is lost.

use super::thread_pool::Pool;
use crate::error::AffinityError;
use crate::loops::BroadcastContext;
use crate::queues::dispatch::{Dispatch, Priority, STRICT_AFFINITY};
use crate::task::node::TaskRef;
use crate::worker::thread::{Registry, WorkerThread};
use std::sync::Arc;

impl Pool {
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
    ///
    /// ```
    /// use sixfold::TaskRef;
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let (tx1, tx2) = (tx.clone(), tx);
    /// let mut first = TaskRef::from_fn(move |_| tx1.send("first").unwrap());
    /// let second = TaskRef::from_fn(move |_| tx2.send("second").unwrap());
    /// first.precede(&second).unwrap();
    /// pool.spawn_task(second);             // waits for `first`
    /// pool.spawn_task(first);
    /// pool.wait_idle();
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["first", "second"]);
    /// ```
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
        crate::task::submit::submit_static_fifo(self.registry(), TaskRef::from_fn(move |_| f()));
    }

    /// [`Pool::spawn`] with a name for the task's trace record.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).trace(true).build().unwrap();
    /// pool.spawn_named("load", || {});
    /// pool.spawn(|| {});
    /// pool.wait_idle();
    /// let mut names: Vec<_> = pool.take_trace().tasks.into_iter().map(|t| t.name).collect();
    /// names.sort();
    /// assert_eq!(names, [None, Some("load".into())]);
    /// ```
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

    /// [`Pool::enqueue`] with a [`Priority`](Priority): rule 5 takes
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
    pub fn enqueue_with_priority<F>(&self, priority: Priority, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.enqueue_task(TaskRef::from_fn(move |_| f()).with_priority(priority));
    }

    /// [`Pool::enqueue`] for a task node (with the priority it was given,
    /// [`TaskRef::with_priority`]).
    ///
    /// ```
    /// use sixfold::{Priority, TaskRef};
    /// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.install(|| {
    ///     // The only worker is busy here: both wait in the shared queue.
    ///     let (a, b) = (tx.clone(), tx.clone());
    ///     pool.enqueue_task(TaskRef::from_fn(move |_| a.send("normal").unwrap()));
    ///     let urgent = TaskRef::from_fn(move |_| b.send("high").unwrap());
    ///     pool.enqueue_task(urgent.with_priority(Priority::High));
    /// });
    /// pool.wait_idle();
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["high", "normal"]);
    /// ```
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
    ///
    /// ```
    /// use sixfold::TaskRef;
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let tx2 = tx.clone();
    /// pool.spawn_task_with_affinity(1, TaskRef::from_fn(move |_| tx.send("ran").unwrap()))
    ///     .unwrap();
    /// assert_eq!(rx.recv().unwrap(), "ran");
    /// let task = TaskRef::from_fn(move |_| tx2.send("ran").unwrap());
    /// assert!(pool.spawn_task_with_affinity(2, task).is_err()); // no worker 2
    /// assert!(rx.recv().is_err()); // dropped unrun: every sender is gone
    /// ```
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

    /// [`spawn_broadcast`](super::global::spawn_broadcast) to this pool's workers:
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
        OP: Fn(BroadcastContext) + Send + Sync + 'static,
    {
        spawn_broadcast_in(self.registry(), op);
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
        crate::task::submit::submit_static(self.registry(), task, dispatch, affinity);
    }
}

/// `spawn_broadcast` into `registry`'s pool: one `'static` task a worker,
/// each strictly placed on its worker (its mailbox, no proxy: rule 4), in
/// the pool's static group (`wait_idle` waits for them).
pub(crate) fn spawn_broadcast_in<OP>(registry: &Arc<Registry>, op: OP)
where
    OP: Fn(BroadcastContext) + Send + Sync + 'static,
{
    let op = Arc::new(op);
    let num_threads = registry.num_slots();
    for index in 0..num_threads {
        let op = op.clone();
        let task = TaskRef::from_fn(move |_| op(BroadcastContext::new(index, num_threads)));
        crate::task::submit::submit_static(
            registry,
            task,
            None,
            Some(index | STRICT_AFFINITY as usize),
        );
    }
}
