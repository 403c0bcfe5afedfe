//! What a running task may do: the [`Context`] passed to [`Task::execute`].
//!
//! Through it a task spawns, enqueues or places children with affinity, and
//! builds fork-join in continuation-passing style, as oneTBB's classic
//! `allocate_continuation` / `set_ref_count` / `recycle_as_child_of` did,
//! with no thread ever blocking:
//!
//! 1. `cx.continuation(sum)` makes a node that takes over this task's
//!    successors; it runs when this task and every child made with
//!    `cont.child(..)` have completed (its pending count is kept for you).
//! 2. spawn all children but one; return the last (rule 1), or
//!    `cx.recycle()` to run this very task again as that child.
//! 3. the last child to finish makes the continuation ready (rule 2).
//!
//! Children pass results to their continuation through
//! [`Context::successor`], a shared reference to the continuation's body.
//! Invariant: a [`Continuation`] handle cannot outlive the `execute` call it
//! was made in (it borrows the context's lifetime), and until that call
//! returns the continuation cannot start.
//!
//! This file owns `Context`: its fields are private here. The node layer
//! makes one for each run of a body (`Context::new`) and reads back only
//! whether the body asked to run again (`recycle_requested`); everything
//! else a context does to its node goes through `node::continuation`.

use crate::error::AffinityError;
use crate::queues::dispatch::{Dispatch, STRICT_AFFINITY};
use crate::task::node::{self, Header, Task, TaskRef};
use crate::worker::group::Group;
use crate::worker::thread::WorkerThread;
use std::marker::PhantomData;
use std::ptr::NonNull;

/// The scheduler's side of a running task, passed to [`Task::execute`]:
/// through it a task spawns children, builds continuations, and hands
/// results to its successor.
pub struct Context<'w> {
    worker: &'w WorkerThread,
    node: NonNull<Header>,
    group: &'w Group,
    recycle: bool,
}

impl<'w> Context<'w> {
    /// The context of one run of `node`'s body on `worker`, in `group`.
    pub(crate) fn new(worker: &'w WorkerThread, node: NonNull<Header>, group: &'w Group) -> Self {
        Context {
            worker,
            node,
            group,
            recycle: false,
        }
    }

    /// The index of the worker running this task.
    pub fn worker_index(&self) -> usize {
        self.worker.index()
    }

    /// The number of worker slots of the pool (valid affinity targets).
    pub fn num_workers(&self) -> usize {
        self.worker.registry().num_slots()
    }

    /// Cancel the run this task belongs to (a [`Pool::run`](crate::Pool::run)
    /// or [`Pool::run_cancellable`](crate::Pool::run_cancellable) of task
    /// nodes, and the scopes and runs nested in its tasks): its tasks that
    /// have not started are dropped unrun; running ones see
    /// [`is_cancelled`](crate::is_cancelled). A `'static` task (`spawn`,
    /// `enqueue`) belongs to no run: nothing happens. Graph runs have
    /// their own [`CancelToken`](crate::CancelToken).
    ///
    /// ```
    /// use sixfold::TaskRef;
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let outcome = pool.run_cancellable([TaskRef::from_fn(|cx| {
    ///     cx.cancel_run();
    ///     assert!(sixfold::is_cancelled());
    /// })]);
    /// assert_eq!(outcome, Err(sixfold::Cancelled));
    /// ```
    pub fn cancel_run(&self) {
        if !self.group.is_static() {
            self.group.cancel();
        }
    }

    /// Push `task` onto this worker's own deque (rule 3 here, rule 6 for a
    /// thief). If it still has predecessors, it runs when they complete.
    // Inlined into the task's `execute`: a fork-join task spawns once per
    // fork, and the call's register saves cost as much as the push.
    #[inline]
    pub fn spawn(&mut self, task: TaskRef) {
        self.submit(task, Some(Dispatch::Spawn), None);
    }

    /// Push `task` onto the shared queue (rule 5): fair, approximately FIFO,
    /// and guaranteed to run eventually.
    pub fn enqueue(&mut self, task: TaskRef) {
        self.submit(task, Some(Dispatch::Enqueue), None);
    }

    /// Put `task` in worker `worker`'s mailbox (rule 4 for that worker).
    pub fn spawn_with_affinity(
        &mut self,
        worker: usize,
        task: TaskRef,
    ) -> Result<(), AffinityError> {
        AffinityError::check(worker, self.num_workers())?;
        self.submit(task, None, Some(worker));
        Ok(())
    }

    /// Run `task` on worker `worker` and nowhere else (strict affinity):
    /// it goes to that worker's mailbox only (rule 4), with no proxy, so no
    /// other worker takes it however long that worker stays busy; a worker
    /// waiting inside a task still takes its mailbox.
    ///
    /// ```
    /// use sixfold::TaskRef;
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.run(TaskRef::from_fn(move |cx| {
    ///     let tx = tx.clone();
    ///     cx.spawn_on(1, TaskRef::from_fn(move |_| tx.send(sixfold::current_worker()).unwrap()))
    ///         .unwrap();
    /// }));
    /// assert_eq!(rx.recv().unwrap(), Some(1));
    /// ```
    pub fn spawn_on(&mut self, worker: usize, task: TaskRef) -> Result<(), AffinityError> {
        AffinityError::check(worker, self.num_workers())?;
        self.submit(task, None, Some(worker | STRICT_AFFINITY as usize));
        Ok(())
    }

    /// Submit `task` to this task's group with the given placement (None
    /// keeps the node's own) and route it if that made it ready.
    #[inline]
    fn submit(&self, task: TaskRef, dispatch: Option<Dispatch>, affinity: Option<usize>) {
        if let Some(ready) = task.submit(self.group, dispatch, affinity, self.worker.region()) {
            ready.route_from(self.worker);
        }
    }

    /// Make a continuation: a node that inherits this task's successors and
    /// runs after this task and all of the continuation's children.
    #[inline(always)]
    pub fn continuation<T: Task>(&mut self, task: T) -> Continuation<'w> {
        Continuation {
            node: node::continuation::continuation(self.node, self.group, task),
            _not_send: PhantomData,
        }
    }

    /// Run this task again right after `execute` returns (rule 1) instead of
    /// completing it. After `continuation`, it runs as one more child of that
    /// continuation (oneTBB's `recycle_as_child_of`), which saves allocating
    /// a child. If `execute` also returns a task, that one runs first and
    /// this one is pushed onto the deque.
    pub fn recycle(&mut self) {
        self.recycle = true;
    }

    /// Whether the body asked to run again: read by the node layer after
    /// the body returned, to decide between completing and re-running.
    pub(crate) fn recycle_requested(&self) -> bool {
        self.recycle
    }

    /// The body of this task's first successor, if it is a `T`: how a child
    /// hands its result to its continuation (use atomics or other `Sync`
    /// cells in `T`). After `continuation`, the first successor is the new
    /// continuation.
    pub fn successor<T: Task + Sync>(&self) -> Option<&T> {
        node::continuation::successor_body(self.node)
    }
}

/// A continuation made by [`Context::continuation`]; make its children with
/// [`Continuation::child`]. It starts once the task that made it and all the
/// children have completed.
pub struct Continuation<'w> {
    node: node::continuation::ContinuationRef,
    _not_send: PhantomData<(&'w (), *const ())>,
}

impl Continuation<'_> {
    /// A new node that the continuation waits for. Hand it to the scheduler
    /// (spawn it, or return it from `execute`); dropping it cancels the
    /// continuation.
    #[inline(always)]
    pub fn child<T: Task>(&self, task: T) -> TaskRef {
        node::continuation::child_of(&self.node, task)
    }

    /// [`Continuation::child`] with a closure body.
    pub fn child_fn<F>(&self, f: F) -> TaskRef
    where
        F: FnOnce(&mut Context<'_>) + Send + 'static,
    {
        node::continuation::child_of(&self.node, node::FnTask::new(f))
    }
}
