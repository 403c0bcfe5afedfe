//! The public face of a node: the [`Task`] trait, the [`TaskRef`] handle that
//! owns a node until it is submitted, and submission itself
//! ([`TaskRef::submit`], [`submit_all`]).
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

use super::cycle::{EDGE_LOCK, reaches};
use super::layout::{self, Header, NO_AFFINITY, Node, header};
use super::ready::{ReadyNode, cancel_chain, release_hold};
use crate::error::TaskError;
use crate::platform::prefetch::prefetch_for_write;
use crate::platform::sync::Ordering;
use crate::queues::dispatch::{Dispatch, Priority};
use crate::queues::region::Region;
use crate::task::context::Context;
use crate::worker::group::Group;
use std::fmt;
use std::ptr::NonNull;

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
    pub fn new<T: Task>(task: T) -> TaskRef {
        TaskRef {
            node: Node::allocate(task),
        }
    }

    /// A new node around a closure that gets the task's [`Context`].
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
    pub fn succeed(&self, predecessor: &mut TaskRef) -> Result<(), TaskError> {
        predecessor.precede(self)
    }

    /// Predecessors of this node that have not completed yet.
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

    /// Hand the node to the scheduler as part of `group`, with the given
    /// placement (None keeps the node's own), submitted from a context in
    /// isolation region `current` (see `Group::region_for`). Returns the
    /// node if releasing the hold made it ready: the caller must then route
    /// or run it.
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
        let node = self.into_raw();
        let header = header(node);
        // SAFETY: we still hold the handle, so we own `meta`.
        let meta = unsafe { &mut *header.meta.get() };
        meta.region = group.region_for(current);
        if let Some(dispatch) = dispatch {
            meta.dispatch = dispatch;
        }
        if let Some(affinity) = affinity {
            // Beyond u32 is out of range for every pool: keep it visible
            // as such (routing refuses it) rather than wrap. (A strict
            // affinity comes with `STRICT_AFFINITY` set.)
            meta.affinity = u32::try_from(affinity).unwrap_or(NO_AFFINITY - 1);
        }
        if header.group.load(Ordering::Relaxed).is_null() {
            let group_ptr = group as *const Group as *mut Group;
            header.group.store(group_ptr, Ordering::Relaxed);
            // A successor already in this group finishes after us and so
            // represents us; otherwise we may be the group's last node.
            // (`layout::header`: the local `header` shadows the function.)
            let in_group =
                |s: &NonNull<Header>| layout::header(*s).group.load(Ordering::Relaxed) == group_ptr;
            let represented = meta.successors.iter().any(|s| in_group(&s));
            if !represented {
                meta.holds_unit = true;
                group.add_unit();
            }
        }
        // Fast path: only our hold is left, and no predecessor can be added
        // (that needs this handle), so no other thread can touch `pending`:
        // a plain load and store replace the read-modify-write. Acquire
        // pairs with the release of the last predecessor's decrement.
        if header.pending.load(Ordering::Acquire) == 1 {
            header.pending.store(0, Ordering::Relaxed);
            return Some(ReadyNode { node });
        }
        release_hold(node)
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
