//! The task layer's public face: a [`Task`] (what a body implements), its
//! handle [`TaskRef`] (which owns a node until it is submitted, and
//! submits it), and [`Context`] (what a running task may do to its node;
//! its continuation-passing part is in `fork.rs`). One file: a task's
//! `execute` gets a `Context` and returns a `TaskRef`, a handle is made
//! from a task, and a context spawns handles. Every `Task` is a node body
//! (`layout::Body`) through the glue at the end.
//!
//! Invariants:
//! - A handle is one unit of its node's `pending` (the hold), so a node
//!   with predecessors cannot start before its handle was handed over; until
//!   then the handle owns the node's `meta` (edges are added under
//!   `EDGE_LOCK` as well, for the cycle search of other threads).
//! - Dropping an unsubmitted handle cancels the node: it never runs, and
//!   neither does any node after it (a task runs only if all its
//!   predecessors ran; the same holds when a predecessor panicked or was
//!   skipped).
//! - A submitted node holds a unit of its group unless a successor already
//!   in that group finishes after it and so represents it: the group cannot
//!   end while the node may still run.
//! - A context lives only while its node's body runs, on the worker that
//!   runs it.

use super::cycle::{EDGE_LOCK, reaches};
use super::layout::{Body, Header, Node, RunState, header};
use super::run::{ReadyNode, cancel_chain, release_hold, spawn_node, submit_node};
use crate::error::{AffinityError, TaskError};
use crate::platform::prefetch::prefetch_for_write;
use crate::platform::sync::Ordering;
use crate::queues::dispatch::{Dispatch, Priority, STRICT_AFFINITY};
use crate::queues::region::Region;
use crate::worker::group::Group;
use std::fmt;
use std::ptr::{self, NonNull};

/// A unit of work for the scheduler, written in continuation-passing style.
///
/// `execute` runs once (or again, after [`Context::recycle`]). It may spawn
/// children, create a continuation that runs when they finish, and return a
/// task to run next on this same worker (rule 1, oneTBB's scheduler bypass).
///
/// ```
/// use sixfold::{Context, Pool, Task, TaskRef};
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// struct Hello(Arc<AtomicUsize>);
/// impl Task for Hello {
///     fn execute(&mut self, _cx: &mut Context<'_>) -> Option<TaskRef> {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         None
///     }
/// }
///
/// let pool = Pool::builder().num_threads(2).build().unwrap();
/// let count = Arc::new(AtomicUsize::new(0));
/// pool.run(TaskRef::new(Hello(count.clone())));
/// assert_eq!(count.load(Ordering::Relaxed), 1);
/// ```
pub trait Task: Send + 'static {
    /// Run the task. The returned task (if any) runs next on this worker.
    fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef>;
}

/// A closure as a task.
pub(crate) struct FnTask<F>(Option<F>);

impl<F> FnTask<F> {
    pub(crate) fn new(f: F) -> Self {
        FnTask(Some(f))
    }
}

impl<F> Task for FnTask<F>
where
    F: FnOnce(&mut Context<'_>) + Send + 'static,
{
    fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
        if let Some(f) = self.0.take() {
            f(cx);
        }
        None
    }
}

/// An owned handle to a task node that has not been handed to a pool yet.
///
/// Hand it over with `Pool::run`, `Pool::spawn_task`, `Pool::enqueue_task`,
/// a [`Context`] method, or by returning it from [`Task::execute`]. A node
/// with predecessors runs when the last of them completes; handing it over
/// only says "it may run then". Dropping a handle instead cancels the node:
/// it never runs, and neither do the nodes after it.
///
/// ```
/// use sixfold::{Pool, TaskRef};
/// use std::sync::{Arc, Mutex};
///
/// let log = Arc::new(Mutex::new(Vec::new()));
/// let task = |name: &'static str| {
///     let log = log.clone();
///     TaskRef::from_fn(move |_| log.lock().unwrap().push(name))
/// };
/// // a -> {b, c} -> d
/// let (mut a, mut b, mut c, d) = (task("a"), task("b"), task("c"), task("d"));
/// a.precede(&b).unwrap();
/// a.precede(&c).unwrap();
/// b.precede(&d).unwrap();
/// c.precede(&d).unwrap();
///
/// let pool = Pool::builder().num_threads(2).build().unwrap();
/// pool.run([a, b, c, d]);
/// let log = log.lock().unwrap();
/// assert_eq!((log[0], log[3]), ("a", "d"));
/// ```
pub struct TaskRef {
    node: NonNull<Header>,
}

// SAFETY: the handle uniquely owns an unsubmitted node whose body is `Send`;
// the header's shared fields are atomics.
unsafe impl Send for TaskRef {}

impl fmt::Debug for TaskRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskRef")
            .field("node", &self.node)
            .field("pending_predecessors", &self.pending_predecessors())
            .finish()
    }
}

impl IntoIterator for TaskRef {
    type Item = TaskRef;
    type IntoIter = std::iter::Once<TaskRef>;

    /// A single task is a task set of one, so `Pool::run` takes either.
    fn into_iter(self) -> Self::IntoIter {
        std::iter::once(self)
    }
}

impl TaskRef {
    /// A new node around `task`, with no predecessors and no successors.
    ///
    /// ```
    /// use sixfold::{Context, Task, TaskRef};
    /// use std::sync::mpsc::{channel, Sender};
    ///
    /// struct Answer(Sender<u32>);
    /// impl Task for Answer {
    ///     fn execute(&mut self, _cx: &mut Context<'_>) -> Option<TaskRef> {
    ///         self.0.send(42).unwrap();
    ///         None
    ///     }
    /// }
    ///
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = channel();
    /// let task = TaskRef::new(Answer(tx));
    /// assert_eq!(task.pending_predecessors(), 0); // ready as soon as it is handed over
    /// pool.run(task);
    /// assert_eq!(rx.try_recv(), Ok(42));
    /// ```
    pub fn new<T: Task>(task: T) -> TaskRef {
        TaskRef {
            node: Node::allocate(task),
        }
    }

    /// A new node around a closure that gets the task's [`Context`].
    ///
    /// ```
    /// use sixfold::TaskRef;
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.run(TaskRef::from_fn(move |cx| tx.send(cx.num_workers()).unwrap()));
    /// assert_eq!(rx.try_recv(), Ok(2));
    /// ```
    pub fn from_fn<F>(f: F) -> TaskRef
    where
        F: FnOnce(&mut Context<'_>) + Send + 'static,
    {
        TaskRef::new(FnTask::new(f))
    }

    /// The priority this task has when it goes to the shared queue (as an
    /// enqueued task, [`Context::enqueue`]; see [`Priority`]).
    ///
    /// ```
    /// use sixfold::{Priority, TaskRef};
    /// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let urgent = TaskRef::from_fn(move |_| tx.send("urgent").unwrap()).with_priority(Priority::High);
    /// pool.enqueue_task(urgent);
    /// assert_eq!(rx.recv().unwrap(), "urgent");
    /// ```
    pub fn with_priority(self, priority: Priority) -> TaskRef {
        // SAFETY: an unsubmitted handle owns its node's meta.
        unsafe { &mut *header(self.node).meta.get() }.priority = priority;
        self
    }

    /// Make `successor` wait for `self`: it runs only after `self` completed
    /// (and all its other predecessors). A duplicate edge counts twice,
    /// which is harmless. An edge that would close a cycle is refused with
    /// [`TaskError::Cycle`] and nothing changes.
    ///
    /// ```
    /// use sixfold::{TaskError, TaskRef};
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let step = |name: &'static str| {
    ///     let tx = tx.clone();
    ///     TaskRef::from_fn(move |_| tx.send(name).unwrap())
    /// };
    /// let (mut first, mut second) = (step("first"), step("second"));
    /// first.precede(&second).unwrap();
    /// assert_eq!(second.precede(&first), Err(TaskError::Cycle));
    /// pool.run([second, first]); // the order of the set does not matter
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["first", "second"]);
    /// ```
    pub fn precede(&mut self, successor: &TaskRef) -> Result<(), TaskError> {
        let _edges = EDGE_LOCK.lock();
        // SAFETY: both nodes are unsubmitted (we hold their handles), and
        // every node reachable from `successor` is waiting on it, so nobody
        // is running them; their successor lists change only under
        // EDGE_LOCK, which we hold.
        unsafe {
            // A node with no predecessor left cannot be reached from
            // anywhere: building a chain back to front stays O(1) an edge,
            // as front to back does (the search below finds a successor
            // with no successors at once).
            let unreachable = header(self.node).pending.load(Ordering::Acquire) == 1;
            if !unreachable && reaches(successor.node, self.node) {
                return Err(TaskError::Cycle);
            }
            (*self.node.as_ref().meta.get())
                .successors
                .push(successor.node);
        }
        header(successor.node)
            .pending
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// `predecessor.precede(self)`, read the other way round.
    ///
    /// ```
    /// use sixfold::TaskRef;
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let step = |name: &'static str| {
    ///     let tx = tx.clone();
    ///     TaskRef::from_fn(move |_| tx.send(name).unwrap())
    /// };
    /// let (mut first, second) = (step("first"), step("second"));
    /// second.succeed(&mut first).unwrap();
    /// assert_eq!(second.pending_predecessors(), 1);
    /// pool.run([second, first]);
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["first", "second"]);
    /// ```
    pub fn succeed(&self, predecessor: &mut TaskRef) -> Result<(), TaskError> {
        predecessor.precede(self)
    }

    /// Predecessors of this node that have not completed yet.
    ///
    /// ```
    /// use sixfold::TaskRef;
    /// let (mut a, mut b) = (TaskRef::from_fn(|_| {}), TaskRef::from_fn(|_| {}));
    /// let c = TaskRef::from_fn(|_| {});
    /// assert_eq!(c.pending_predecessors(), 0);
    /// a.precede(&c).unwrap();
    /// b.precede(&c).unwrap();
    /// a.precede(&c).unwrap(); // a duplicate edge counts twice
    /// assert_eq!(c.pending_predecessors(), 3);
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// pool.run([a, b, c]);
    /// ```
    pub fn pending_predecessors(&self) -> usize {
        header(self.node).pending.load(Ordering::Acquire) as usize - 1
    }

    pub(crate) fn from_raw(node: NonNull<Header>) -> TaskRef {
        TaskRef { node }
    }

    fn into_raw(self) -> NonNull<Header> {
        let node = self.node;
        std::mem::forget(self);
        node
    }

    /// Hand the node to the scheduler as part of `group` (see
    /// `submit_node`). Returns the node if releasing the hold made it
    /// ready: the caller must then route or run it.
    // Inlined: `Context::spawn` is inlined into tasks' `execute`, and a
    // call here went through the GOT with every register saved; inlined,
    // the constant placement folds away (fib_cps 7% faster, benches).
    #[inline]
    pub(crate) fn submit(
        self,
        group: &Group,
        dispatch: Option<Dispatch>,
        affinity: Option<usize>,
        current: Region,
    ) -> Option<ReadyNode> {
        submit_node(self.into_raw(), group, dispatch, affinity, current)
    }
}

/// Hand a whole set of nodes to `group` (`Pool::run`), submitted from a
/// context in region `current`, and pass each node this made ready to
/// `route`, in the set's order.
///
/// The nodes are submitted newest first, so that a node whose successor is
/// in the set sees it there already and needs no group unit of its own (a
/// chain of a million nodes takes one unit, not a million read-modify-
/// writes of the group's counter), and each node's line is touched once.
/// The ready ones are routed only at the end: no worker races the
/// submitting thread for the nodes meanwhile. A large set does not fit
/// the caches, so each node's line is asked for a few nodes ahead.
pub(crate) fn submit_all(
    tasks: Vec<TaskRef>,
    group: &Group,
    current: Region,
    mut route: impl FnMut(ReadyNode),
) {
    /// Nodes between a line's prefetch and its use: enough to cover a
    /// miss to memory with the work of submitting the nodes in between.
    const AHEAD: usize = 24;
    let mut ready = Vec::new();
    let handles = tasks.as_ptr();
    for (index, task) in tasks.into_iter().enumerate().rev() {
        if let Some(ahead) = index.checked_sub(AHEAD) {
            // SAFETY: the iterator owns the vector's buffer until it is
            // dropped, and going backwards it has not moved out the handle
            // at a lower index yet: it is a live, initialized `TaskRef`.
            let node = unsafe { (*handles.add(ahead)).node };
            prefetch_for_write(node.as_ptr());
        }
        if let Some(node) = task.submit(group, None, None, current) {
            ready.push(node);
        }
    }
    ready.into_iter().rev().for_each(&mut route);
}

impl Drop for TaskRef {
    /// Dropping an unsubmitted node cancels it and everything after it.
    fn drop(&mut self) {
        let header = header(self.node);
        header.cancelled.store(true, Ordering::Relaxed);
        if let Some(ready) = release_hold(self.node) {
            cancel_chain(ready.node);
        }
    }
}

/// The scheduler's side of a running task, passed to [`Task::execute`]:
/// through it a task spawns children, builds continuations, and hands
/// results to its successor.
///
/// ```
/// use sixfold::TaskRef;
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let done = Arc::new(AtomicUsize::new(0));
/// let counter = done.clone();
/// pool.run(TaskRef::from_fn(move |cx| {
///     for _ in 0..4 {
///         let counter = counter.clone();
///         cx.spawn(TaskRef::from_fn(move |_| {
///             counter.fetch_add(1, Ordering::Relaxed);
///         }));
///     }
/// }));
/// assert_eq!(done.load(Ordering::Relaxed), 4); // the run waited for the children too
/// ```
#[repr(transparent)]
pub struct Context<'w> {
    pub(super) run: RunState<'w>,
}

impl<'w> Context<'w> {
    /// The face of the node layer's record of one run.
    fn of<'a>(run: &'a mut RunState<'w>) -> &'a mut Context<'w> {
        // SAFETY: `Context` is a transparent wrapper of `RunState`.
        unsafe { &mut *ptr::from_mut(run).cast::<Context<'w>>() }
    }

    /// The index of the worker running this task.
    ///
    /// ```
    /// use sixfold::TaskRef;
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.run(TaskRef::from_fn(move |cx| {
    ///     tx.send((cx.worker_index(), sixfold::current_worker())).unwrap()
    /// }));
    /// let (index, current) = rx.try_recv().unwrap();
    /// assert_eq!(Some(index), current);
    /// assert!(index < pool.num_workers());
    /// ```
    pub fn worker_index(&self) -> usize {
        self.run.worker.index()
    }

    /// The number of worker slots of the pool (valid affinity targets).
    ///
    /// ```
    /// use sixfold::TaskRef;
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.run(TaskRef::from_fn(move |cx| tx.send(cx.num_workers()).unwrap()));
    /// assert_eq!(rx.try_recv(), Ok(pool.num_workers()));
    /// assert_eq!(pool.num_workers(), 2);
    /// ```
    pub fn num_workers(&self) -> usize {
        self.run.worker.registry().num_slots()
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
        if !self.run.group.is_static() {
            self.run.group.cancel();
        }
    }

    /// Push `task` onto this worker's own deque (rule 3 here, rule 6 for a
    /// thief). If it still has predecessors, it runs when they complete.
    ///
    /// ```
    /// use sixfold::TaskRef;
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.run(TaskRef::from_fn(move |cx| {
    ///     let step = |name: &'static str| {
    ///         let tx = tx.clone();
    ///         TaskRef::from_fn(move |_| tx.send(name).unwrap())
    ///     };
    ///     let (mut first, second) = (step("first"), step("second"));
    ///     first.precede(&second).unwrap();
    ///     cx.spawn(second); // from the deque it would run before the shared queue
    ///     cx.enqueue(first);
    /// }));
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["first", "second"]);
    /// ```
    // Inlined into the task's `execute`: a fork-join task spawns once per
    // fork, and the call's register saves cost as much as the push.
    #[inline]
    pub fn spawn(&mut self, task: TaskRef) {
        spawn_node(task.into_raw(), self.run.group, self.run.worker);
    }

    /// Push `task` onto the shared queue (rule 5): fair, approximately FIFO,
    /// and guaranteed to run eventually.
    ///
    /// ```
    /// use sixfold::TaskRef;
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.run(TaskRef::from_fn(move |cx| {
    ///     for i in 0..3 {
    ///         let tx = tx.clone();
    ///         cx.enqueue(TaskRef::from_fn(move |_| tx.send(i).unwrap()));
    ///     }
    /// }));
    /// let mut ran: Vec<i32> = rx.try_iter().collect();
    /// ran.sort();
    /// assert_eq!(ran, [0, 1, 2]); // the run waited for all of them
    /// ```
    pub fn enqueue(&mut self, task: TaskRef) {
        self.submit(task, Some(Dispatch::Enqueue), None);
    }

    /// Put `task` in worker `worker`'s mailbox (rule 4 for that worker).
    ///
    /// ```
    /// use sixfold::TaskRef;
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.run(TaskRef::from_fn(move |cx| {
    ///     let nowhere = cx.num_workers(); // not a worker index
    ///     assert!(cx.spawn_with_affinity(nowhere, TaskRef::from_fn(|_| {})).is_err());
    ///     cx.spawn_with_affinity(1, TaskRef::from_fn(move |_| tx.send("ran").unwrap())).unwrap();
    /// }));
    /// assert_eq!(rx.try_recv(), Ok("ran"));
    /// ```
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
        if let Some(ready) =
            task.submit(self.run.group, dispatch, affinity, self.run.worker.region())
        {
            ready.route_from(self.run.worker);
        }
    }
}

/// Every task is a node body: its run is `execute` with the run record
/// seen as its `Context`, the vtable's last act.
impl<T: Task> Body for T {
    #[inline(always)]
    fn run(&mut self, run: &mut RunState<'_>) -> Option<NonNull<Header>> {
        self.execute(Context::of(run)).map(TaskRef::into_raw)
    }
}
