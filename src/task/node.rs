//! Task nodes: the unit the six rules schedule.
//!
//! A node is a [`Header`] followed by a body that implements [`Task`]. The
//! header holds the count of predecessors that have not
//! completed (`pending`), the successors, the dispatch (spawn or enqueue),
//! an optional affinity, plus the group the node was submitted to.
//!
//! # Ownership
//!
//! A node is owned, in turn, by:
//! 1. its [`TaskRef`] handle, while unsubmitted. The handle is itself one
//!    unit of `pending` (the *hold*), so a node with predecessors cannot
//!    start before its handle was handed to the scheduler;
//! 2. nobody, while `pending > 0` after submission (it waits; its
//!    predecessors hold raw pointers to it);
//! 3. the thread whose decrement took `pending` to zero: it routes the node
//!    by its placement, and whichever worker takes it runs it, completes its
//!    successors and frees it.
//!
//! The `meta` fields are written only by the current owner; ownership moves
//! through `pending`'s AcqRel read-modify-writes, which order those writes.
//! The last unit is released by an Acquire load that sees 1 and a plain
//! store: a unit is added only by the holder of another unit (a handle, or
//! the running predecessor a `Continuation` belongs to), so when the count
//! is 1 and the unit is ours, no other thread can change it.
//! Dropping an unsubmitted handle cancels the node: it never runs, and
//! neither does any node after it (a task runs only if all its predecessors
//! ran; the same holds when a predecessor panicked or was skipped).
//!
//! The only `unsafe` of the task layer is here: raw node pointers, their
//! allocation and freeing, and the type-erased call of a body.

use crate::error::TaskError;
use crate::observe::stats::Rule;
use crate::platform::node_alloc;
use crate::platform::prefetch::prefetch_for_write;
use crate::platform::sync::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
use crate::platform::unwind;
use crate::queues::dispatch::{Dispatch, Priority, STRICT_AFFINITY, SharedPlace};
use crate::queues::region::Region;
use crate::task::successors::{Many, Split, Successors};
use crate::worker::group::Group;
use crate::worker::thread::Registry;
use crate::worker::thread::WorkerThread;
use crate::worker::thread::{ExecuteFn, JobRef, Next};
use std::alloc::Layout;
use std::any::TypeId;
use std::cell::{Cell, UnsafeCell};
use std::collections::HashSet;
use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::Arc;

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

/// The scheduler's side of a running task, passed to [`Task::execute`]:
/// through it a task spawns children, builds continuations, and hands
/// results to its successor.
pub struct Context<'w> {
    pub(super) worker: &'w WorkerThread,
    pub(super) node: NonNull<Header>,
    pub(super) group: &'w Group,
    pub(super) recycle: bool,
}

impl<'w> Context<'w> {
    pub(crate) fn new(worker: &'w WorkerThread, node: NonNull<Header>, group: &'w Group) -> Self {
        Context {
            worker,
            node,
            group,
            recycle: false,
        }
    }

    pub(crate) fn recycle_requested(&self) -> bool {
        self.recycle
    }
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

const NO_AFFINITY: u32 = u32::MAX;

/// The fields only the node's current owner touches.
struct Meta {
    dispatch: Dispatch,
    /// The lane of the shared queue an enqueue-dispatch node goes to.
    priority: Priority,
    /// `NO_AFFINITY` or a worker index.
    affinity: u32,
    /// The isolation region the node runs in (set at submission).
    region: Region,
    /// Whether this node holds a unit of its group (see `group.rs`).
    holds_unit: bool,
    /// Where the node's memory came from, and so who gives it back.
    memory: Memory,
    successors: Successors<Header>,
}

/// Where a node's memory came from.
///
/// A continuation-passing fork makes a continuation and a child that
/// finishes before it: the continuation's block has room for that child
/// (`RESERVE_OFFSET`), which saves one allocation and one free a fork.
/// Invariant: a child in a reserve is dropped (never freed) before it
/// releases its continuation, the only release that can let the
/// continuation run and free the block.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Memory {
    /// A block of its own (the layout of its `Node<T>`).
    Own,
    /// A continuation's `PAIR_LAYOUT` block, with room for one child.
    WithReserve,
    /// A child placed in its continuation's reserve.
    InReserve,
}

/// The block of a continuation with room for a child: the continuation at
/// offset 0, the child at `RESERVE_OFFSET`; each at most `RESERVE_OFFSET`
/// bytes and aligned to at most 16 (the node allocator's 256-byte class).
const PAIR_LAYOUT: Layout = match Layout::from_size_align(256, 16) {
    Ok(layout) => layout,
    Err(_) => panic!("a valid layout"),
};
const RESERVE_OFFSET: usize = 128;

/// Does a node with this layout fit one half of a pair block?
const fn fits_half(layout: Layout) -> bool {
    layout.size() <= RESERVE_OFFSET && layout.align() <= PAIR_LAYOUT.align()
}

struct VTable {
    execute: unsafe fn(NonNull<Header>, &mut Context<'_>) -> Option<TaskRef>,
    drop_node: unsafe fn(NonNull<Header>),
    type_id: fn() -> TypeId,
    /// Whether the body has drop glue (a node in a reserve whose body has
    /// none needs no call at all when it is freed).
    drops_body: bool,
}

/// The scheduler's part of a task node.
pub(crate) struct Header {
    /// Predecessors not yet completed, plus one while a handle holds it.
    pending: AtomicU32,
    /// Set when a predecessor failed or the handle was dropped: skip the body.
    cancelled: AtomicBool,
    /// The group the node was submitted to; null before submission.
    group: AtomicPtr<Group>,
    meta: UnsafeCell<Meta>,
    vtable: &'static VTable,
}

// A one-shot closure node (header plus a small body) fits the 64-byte
// class of the node allocator: one line to write, submit, run and free.
// (Loom's atomics are larger: the bound is for real builds.)
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Header>() <= 48);

#[repr(C)]
struct Node<T> {
    header: Header,
    body: UnsafeCell<T>,
}

/// The header fields a new node starts with (the rest start the same for
/// every node: one hold, not cancelled, spawn dispatch, no affinity).
struct NodeStart {
    successors: Successors<Header>,
    region: Region,
    group: *mut Group,
    holds_unit: bool,
    memory: Memory,
}

impl NodeStart {
    /// A node for a handle: no edges, no group until it is submitted.
    const UNSUBMITTED: NodeStart = NodeStart {
        successors: Successors::NONE,
        region: Region::NONE,
        group: ptr::null_mut(),
        holds_unit: false,
        memory: Memory::Own,
    };
}

impl<T: Task> Node<T> {
    const VTABLE: VTable = VTable {
        execute: Self::execute,
        drop_node: Self::drop_node,
        type_id: TypeId::of::<T>,
        drops_body: std::mem::needs_drop::<T>(),
    };

    /// The vtable of `T`'s nodes, from one function so that its address is
    /// the same at every use in a crate (a constant referenced from code
    /// inlined into several codegen units may be emitted once per unit):
    /// `successor_body` compares addresses first.
    #[inline(never)]
    fn vtable() -> &'static VTable {
        &Self::VTABLE
    }

    const LAYOUT: Layout = Layout::new::<Node<T>>();

    #[inline(always)]
    fn allocate(body: T) -> NonNull<Header> {
        let memory = node_alloc::allocate(Self::LAYOUT).cast();
        // SAFETY: fresh memory with the layout of `Node<T>`.
        unsafe { Self::write(memory, body, NodeStart::UNSUBMITTED) }
    }

    /// Write a node whose header starts as `start` says into `memory`.
    /// Every field is written once and not read back: a fork writes two
    /// nodes and then uses them at once, and a load of a field still in the
    /// store buffer (written wider, or read back in part) stalls until the
    /// store completes. (Memory first, then the node written into it in
    /// place: built on the stack and copied, it cost a third more
    /// instructions.)
    ///
    /// # Safety
    /// `memory` is unused, valid for a `Node<T>`, and of the kind that
    /// `start.memory` names.
    #[inline(always)]
    unsafe fn write(memory: NonNull<Node<T>>, body: T, start: NodeStart) -> NonNull<Header> {
        // SAFETY: see the function's contract.
        unsafe {
            memory.as_ptr().write(Node {
                header: Header {
                    pending: AtomicU32::new(1),
                    cancelled: AtomicBool::new(false),
                    group: AtomicPtr::new(start.group),
                    meta: UnsafeCell::new(Meta {
                        dispatch: Dispatch::Spawn,
                        priority: Priority::Normal,
                        affinity: NO_AFFINITY,
                        region: start.region,
                        holds_unit: start.holds_unit,
                        memory: start.memory,
                        successors: start.successors,
                    }),
                    vtable: Self::vtable(),
                },
                body: UnsafeCell::new(body),
            })
        };
        // `header` is the first field of a repr(C) struct: same address.
        memory.cast()
    }

    unsafe fn execute(node: NonNull<Header>, cx: &mut Context<'_>) -> Option<TaskRef> {
        // SAFETY: the caller owns the running node (pending reached zero, or
        // it is being re-run after a recycle), so nobody else accesses the
        // body; `node` was made by `allocate::<T>`, so the cast is right.
        let body = unsafe { &mut *node.cast::<Node<T>>().as_ref().body.get() };
        body.execute(cx)
    }

    /// Drop the node, and give its memory back unless it lies in its
    /// continuation's reserve (the continuation's block goes back with it).
    unsafe fn drop_node(node: NonNull<Header>) {
        // SAFETY: the caller owns the node and nothing points at it any more
        // (it completed or was cancelled with no predecessor left).
        let memory = unsafe { (*header(node).meta.get()).memory };
        let node = node.cast::<Node<T>>();
        // SAFETY: as above; the node was made by `write`, into memory of
        // the kind its header names.
        unsafe {
            std::ptr::drop_in_place(node.as_ptr());
            match memory {
                Memory::Own => node_alloc::release(node.cast(), Self::LAYOUT),
                Memory::WithReserve => node_alloc::release(node.cast(), PAIR_LAYOUT),
                Memory::InReserve => {}
            }
        }
    }
}

/// Serializes edge insertion with the cycle search, which reads the
/// successor lists of nodes that other threads may be linking.
static EDGE_LOCK: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

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
            let in_group =
                |s: &NonNull<Header>| header_of(*s).group.load(Ordering::Relaxed) == group_ptr;
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

/// A node whose pending count reached zero, owned by the holder of this
/// value, which must route it (`into_job`) or cancel it.
pub(crate) struct ReadyNode {
    node: NonNull<Header>,
}

impl ReadyNode {
    /// May a worker run it right here (rule 1 or 2) rather than route it?
    /// Only spawn-dispatch nodes with no affinity, or affinity for `worker`.
    #[inline]
    pub(crate) fn is_local_to(&self, worker: usize) -> bool {
        let (dispatch, affinity, _) = self.placement();
        dispatch == Dispatch::Spawn && (affinity.is_none() || affinity == Some(worker))
    }

    /// Dispatch, affinity (the worker index) and whether it is strict.
    pub(crate) fn placement(&self) -> (Dispatch, Option<usize>, bool) {
        // SAFETY: a ready node is owned by the holder of the ReadyNode.
        let meta = unsafe { &*header(self.node).meta.get() };
        let strict = meta.affinity != NO_AFFINITY && meta.affinity & STRICT_AFFINITY != 0;
        let affinity =
            (meta.affinity != NO_AFFINITY).then_some((meta.affinity & !STRICT_AFFINITY) as usize);
        (meta.dispatch, affinity, strict)
    }

    /// The group the node was submitted to (null for a node whose handle
    /// was dropped before submission, which only gets cancelled).
    pub(crate) fn group(&self) -> *const Group {
        header(self.node).group.load(Ordering::Relaxed)
    }

    /// Send the node where its placement says, from `here`, the calling
    /// worker if it belongs to `registry`'s pool.
    pub(crate) fn route(self, registry: &Arc<Registry>, here: Option<&WorkerThread>) {
        let (dispatch, affinity, strict) = self.placement();
        // SAFETY: a ready node is owned by the holder of the ReadyNode.
        let priority = unsafe { &*header(self.node).meta.get() }.priority;
        let group = self.group();
        let job = self.into_job();
        if let (true, Some(worker)) = (strict, affinity)
            && registry.route_strict_if_possible(job, worker)
        {
            return;
        }
        registry.route(job, dispatch, affinity, here, || {
            // SAFETY: a ready node's group lives until the node ran (the
            // node or a descendant of it holds a unit).
            let place = match unsafe { group.as_ref() } {
                Some(group) => group.used_shared_queue().note(),
                None => SharedPlace::PLAIN,
            };
            SharedPlace { priority, ..place }
        });
    }

    /// [`route`](Self::route) from `worker`.
    #[inline]
    pub(crate) fn route_from(self, worker: &WorkerThread) {
        // SAFETY: a ready node is owned by the holder of the ReadyNode.
        let meta = unsafe { &*header(self.node).meta.get() };
        // The common case, decided here without the full placement: a
        // spawn with no affinity goes to the calling worker's deque (what
        // `Registry::route` does with it too).
        if meta.dispatch == Dispatch::Spawn && meta.affinity == NO_AFFINITY {
            worker.push(self.into_job());
        } else {
            self.route(worker.registry(), Some(worker));
        }
    }

    /// The isolation region it was submitted in.
    #[inline]
    fn region(&self) -> Region {
        // SAFETY: a ready node is owned by the holder of the ReadyNode.
        unsafe { (*header(self.node).meta.get()).region }
    }

    #[inline]
    pub(crate) fn into_job(self) -> JobRef {
        // SAFETY: the node stays allocated until its execution completes
        // it, and it is pushed to exactly one queue.
        unsafe { JobRef::new(self.node.cast(), execute_job, self.region()) }
    }
}

#[inline]
fn header<'a>(node: NonNull<Header>) -> &'a Header {
    // SAFETY: every NonNull<Header> in this module points at a live node:
    // handles and ready nodes own theirs, and successor pointers are kept
    // alive by the pending count they are part of.
    unsafe { node.as_ref() }
}

#[inline]
fn header_of<'a>(node: NonNull<Header>) -> &'a Header {
    header(node)
}

/// Release one unit of `pending`; if it was the last, the node is ready and
/// the caller owns it.
#[inline]
fn release_hold(node: NonNull<Header>) -> Option<ReadyNode> {
    let pending = &header(node).pending;
    // Fast path: our unit is the only one left, so nobody else can touch
    // the count: a unit can only be added by a holder of another unit (a
    // handle, or the running node a `Continuation` belongs to, which is
    // itself a predecessor). A plain load and store replace the
    // read-modify-write (the last release of every node goes this way).
    // Acquire pairs with the release of every earlier decrement.
    if pending.load(Ordering::Acquire) == 1 {
        pending.store(0, Ordering::Relaxed);
        return Some(ReadyNode { node });
    }
    // AcqRel: release our writes to the node to its next owner, acquire the
    // writes of every earlier releaser if we are that owner.
    (pending.fetch_sub(1, Ordering::AcqRel) == 1).then_some(ReadyNode { node })
}

/// Does `from` reach `target` through successor edges?
///
/// # Safety
/// Caller holds EDGE_LOCK and all nodes reachable from `from` are waiting.
unsafe fn reaches(from: NonNull<Header>, target: NonNull<Header>) -> bool {
    // SAFETY: see the function's contract.
    if from != target && unsafe { (*header(from).meta.get()).successors.is_empty() } {
        return false; // the common case when building front to back
    }
    let mut seen = HashSet::new();
    let mut stack = vec![from];
    while let Some(node) = stack.pop() {
        if node == target {
            return true;
        }
        if seen.insert(node) {
            // SAFETY: see the function's contract.
            let meta = unsafe { &*header(node).meta.get() };
            stack.extend(meta.successors.iter());
        }
    }
    false
}

/// Complete cancelled nodes without running them, with no worker at hand:
/// every node they make ready is cancelled too (a task runs only if all its
/// predecessors ran), so nothing here needs a queue.
fn cancel_chain(first: NonNull<Header>) {
    let mut ready = vec![first];
    while let Some(node) = ready.pop() {
        // SAFETY: we own `node` (its pending count reached zero), and no
        // predecessor points at it any more.
        let remains = unsafe { free_node(node) };
        for s in remains.successors.iter() {
            header(s).cancelled.store(true, Ordering::Relaxed);
            if let Some(r) = release_hold(s) {
                ready.push(r.node);
            }
        }
        remains.release_unit();
    }
}

/// What must still be released once a node is freed: its successors, and
/// then its group unit (the last touch, since the group may be freed as
/// soon as the unit is released).
struct Remains {
    successors: Successors<Header>,
    unit: Option<*mut Group>,
}

impl Remains {
    #[inline(always)]
    fn release_unit(self) {
        let Remains { successors, unit } = self;
        drop(successors);
        release_unit(unit);
    }
}

/// Release a node's group unit, if it held one: its very last touch.
#[inline(always)]
fn release_unit(unit: Option<*mut Group>) {
    if let Some(group) = unit {
        // SAFETY: a unit holder's group outlives the unit.
        unsafe { Group::release_unit(group) };
    }
}

/// Free a completed or cancelled node and keep what it still has to
/// release. The node goes first: a child in its continuation's reserve
/// must be gone before the release that may let the continuation run and
/// free the block (see `Memory`).
///
/// # Safety
/// The caller owns `node`, and no predecessor points at it any more.
#[inline(always)]
unsafe fn free_node(node: NonNull<Header>) -> Remains {
    let header = header(node);
    // SAFETY: owned by the caller.
    let meta = unsafe { &mut *header.meta.get() };
    let successors = meta.successors.take();
    let unit = meta
        .holds_unit
        .then(|| header.group.load(Ordering::Relaxed));
    // A child in a reserve with a body without drop glue has nothing to
    // drop (its successor list is empty now) and no memory to give back.
    if meta.memory != Memory::InReserve || header.vtable.drops_body {
        // SAFETY: owned by the caller, nothing else points at it.
        unsafe { (header.vtable.drop_node)(node) };
    }
    Remains { successors, unit }
}

/// The `JobRef` entry point for task nodes.
#[inline(never)]
unsafe fn execute_job(node: NonNull<()>, worker: &WorkerThread) -> Option<Next> {
    // SAFETY: forwarded: the node is ready and ours, executed once.
    unsafe { execute_node(node.cast(), worker) }
}

/// Run a ready node, complete it, and hand back the next task by rule 1 or
/// rule 2 (the rest of what it made ready is routed to queues).
///
/// The path of a node that runs, returns nothing and has one successor is
/// kept short (a continuation-passing fork starts three nodes); returned
/// tasks, failures and long successor lists go through cold functions.
/// A node that recycles itself, or a successor it made ready, runs next in
/// this same call (rules 1 and 2, counted as the worker's loop counts
/// them) unless a trace is on or an isolation region is entered or left.
///
/// # Safety
/// The caller owns the ready node; it is executed once per readiness.
#[inline]
unsafe fn execute_node(mut node: NonNull<Header>, worker: &WorkerThread) -> Option<Next> {
    'nodes: loop {
        let header = header(node);
        let group_ptr = header.group.load(Ordering::Relaxed);
        // SAFETY: a submitted node's group lives until the node's unit-holding
        // descendant finishes, which is after us. A node never submitted (its
        // handle was dropped) has no group and is cancelled.
        let group = match unsafe { group_ptr.as_ref() } {
            Some(group) if !header.cancelled.load(Ordering::Relaxed) && !group.is_cancelled() => {
                group
            }
            // SAFETY: we own the node.
            _ => return unsafe { complete(node, worker, true, None) },
        };
        loop {
            let mut cx = Context::new(worker, node, group);
            // SAFETY: we own the node; the vtable matches its body type.
            // The body runs as work of its group (`is_cancelled`, nested
            // scopes and runs).
            let returned = match worker.with_cancel_context(group, || {
                unwind::halt_unwinding(|| unsafe { (header.vtable.execute)(node, &mut cx) })
            }) {
                Ok(returned) => returned,
                Err(payload) => {
                    worker.registry().task_panicked(group, payload);
                    // SAFETY: we own the node.
                    return unsafe { complete(node, worker, true, None) };
                }
            };
            // Rule 1: the returned task, if it is ready and may run here.
            let bypass = match returned {
                None => None,
                Some(task) => submit_returned(task, group, worker),
            };
            if !cx.recycle_requested() {
                if bypass.is_some() || worker.tracing() {
                    // SAFETY: we own the node.
                    return unsafe { complete(node, worker, false, bypass) };
                }
                // SAFETY: we own the node.
                return match unsafe { finish(node, worker, false, None) } {
                    // Rule 2 right here, as the worker's loop would run the
                    // successor next (counted, and checked for cancellation
                    // at the top), without a trip through it. (Not into or
                    // out of an isolation region: a region job's wrapper
                    // sets and restores the worker's region around it.)
                    Taken::Successor(ready)
                        if !ready.region().is_isolated() && !worker.region().is_isolated() =>
                    {
                        worker.count_task(Rule::Successor);
                        node = ready.node;
                        continue 'nodes;
                    }
                    // Nothing made ready: rule 3 right here when the loop
                    // would take the deque's newest job next anyway and it
                    // is a task node (a spawned child, in a fork-join).
                    Taken::Nothing => {
                        let job = worker.pop_own_task_in_main_loop(|job| {
                            job.is_plain_run_by(execute_job as ExecuteFn)
                        })?;
                        worker.count_task(Rule::OwnDeque);
                        node = job.pointer().cast();
                        continue 'nodes;
                    }
                    taken => taken.into_next(),
                };
            }
            if bypass.is_some() || worker.tracing() {
                // SAFETY: we still own the node.
                return Some(unsafe { recycled(node, bypass, worker) });
            }
            // Recycled with nothing returned: rule 1 runs the node again right
            // here, as a new start would (counted, and skipped if cancelled
            // meanwhile), without a trip through the worker's loop. (With a
            // trace on, each run goes through the loop to get its record.)
            worker.count_task(Rule::Returned);
            if header.cancelled.load(Ordering::Relaxed) || group.is_cancelled() {
                // SAFETY: we own the node.
                return unsafe { complete(node, worker, true, None) };
            }
        }
    }
}

/// Submit the task a node returned: the job to run next here if it is
/// ready and may run here (rule 1); routed if it is ready elsewhere.
#[cold]
#[inline(never)]
fn submit_returned(task: TaskRef, group: &Group, worker: &WorkerThread) -> Option<JobRef> {
    let ready = task.submit(group, None, None, worker.region())?;
    if ready.is_local_to(worker.index()) {
        Some(ready.into_job())
    } else {
        ready.route_from(worker);
        None
    }
}

/// A node that asked to run again: it is not completed, and runs next as a
/// child of the continuation it created (if any), which still counts it as
/// pending; a returned task runs before it.
///
/// # Safety
/// The caller owns the node.
unsafe fn recycled(node: NonNull<Header>, bypass: Option<JobRef>, worker: &WorkerThread) -> Next {
    // SAFETY: we still own the node.
    let region = unsafe { (*header(node).meta.get()).region };
    // SAFETY: we still own the node; it is queued or run exactly once.
    let again = unsafe { JobRef::new(node.cast(), execute_job, region) };
    let job = match bypass {
        Some(job) => {
            worker.push(again);
            job
        }
        None => again,
    };
    Next {
        job,
        rule: Rule::Returned,
    }
}

/// What completing a node leaves to run next on this worker.
enum Taken {
    Nothing,
    /// The task the node returned (rule 1).
    Bypass(JobRef),
    /// A successor it made ready that may run here (rule 2).
    Successor(ReadyNode),
}

impl Taken {
    fn into_next(self) -> Option<Next> {
        match self {
            Taken::Nothing => None,
            Taken::Bypass(job) => Some(Next {
                job,
                rule: Rule::Returned,
            }),
            Taken::Successor(ready) => Some(Next {
                job: ready.into_job(),
                rule: Rule::Successor,
            }),
        }
    }
}

/// Complete a node that ran (or was skipped, `failed`): release each
/// successor; the first one made ready that may run here is the next task
/// (rule 2) unless `bypass` (rule 1) came first; the others are routed.
/// Then free the node and release its group unit.
///
/// # Safety
/// The caller owns the node, which is not used afterwards.
#[inline(always)]
unsafe fn finish(
    node: NonNull<Header>,
    worker: &WorkerThread,
    failed: bool,
    bypass: Option<JobRef>,
) -> Taken {
    // SAFETY: we own the node, and it completed: nothing points at it.
    let Remains { successors, unit } = unsafe { free_node(node) };
    let successor = match successors.split() {
        Split::None => None,
        Split::One(only) => release_successor(only, failed, bypass.is_none(), worker),
        Split::Many(all) => release_all(all, failed, bypass.is_none(), worker),
    };
    release_unit(unit);
    match (bypass, successor) {
        (Some(job), _) => Taken::Bypass(job),
        (None, Some(ready)) => Taken::Successor(ready),
        (None, None) => Taken::Nothing,
    }
}

/// [`finish`], with what it leaves to run as the worker loop's next job.
///
/// # Safety
/// As for [`finish`].
#[inline(always)]
unsafe fn complete(
    node: NonNull<Header>,
    worker: &WorkerThread,
    failed: bool,
    bypass: Option<JobRef>,
) -> Option<Next> {
    // SAFETY: forwarded.
    unsafe { finish(node, worker, failed, bypass) }.into_next()
}

/// Release one successor `s` of a completed node: if that made it ready,
/// return it as the next job when `may_take` and it may run here, route
/// it otherwise (or complete it unrun if it is cancelled).
#[inline(always)]
fn release_successor(
    s: NonNull<Header>,
    failed: bool,
    may_take: bool,
    worker: &WorkerThread,
) -> Option<ReadyNode> {
    if failed {
        header_of(s).cancelled.store(true, Ordering::Relaxed);
    }
    let ready = release_hold(s)?;
    if header_of(s).cancelled.load(Ordering::Relaxed) {
        // Never runs: complete it (and what it cancels) here.
        cancel_chain(s);
        None
    } else if may_take && ready.is_local_to(worker.index()) {
        Some(ready)
    } else {
        ready.route_from(worker);
        None
    }
}

/// Release the successors of a node with several (most have one or
/// none); the first made ready that may run here is returned when
/// `no_bypass`.
#[cold]
#[inline(never)]
fn release_all(
    all: Many<Header>,
    failed: bool,
    no_bypass: bool,
    worker: &WorkerThread,
) -> Option<ReadyNode> {
    let mut successor = None;
    for &s in all.as_slice() {
        let may_take = no_bypass && successor.is_none();
        if let Some(ready) = release_successor(s, failed, may_take, worker) {
            successor = Some(ready);
        }
    }
    successor
}

/// What `Context` may do to the node it runs. These functions are the
/// context's only way into node internals.
pub(crate) mod running {
    use super::*;

    /// A continuation being given children: its node, the region and group
    /// its children inherit (kept here, not read back from the node, whose
    /// fields were just written), and its reserve for a child, until used.
    pub(crate) struct ContinuationRef {
        node: NonNull<Header>,
        region: Region,
        group: *mut Group,
        /// The free half of the continuation's pair block (`Memory`), or
        /// null when it has none or a child took it.
        reserve: Cell<*mut u8>,
    }

    /// Make a continuation of the running node `current`: it takes over
    /// `current`'s successors and group unit, and `current` becomes its
    /// only predecessor for now (so it cannot start before `current` ends).
    #[inline(always)]
    pub(crate) fn continuation<T: Task>(
        current: NonNull<Header>,
        group: &Group,
        body: T,
    ) -> ContinuationRef {
        // SAFETY: `current` is running on this thread, so we own its meta.
        let current_meta = unsafe { &mut *header(current).meta.get() };
        let region = current_meta.region;
        let group = group as *const Group as *mut Group;
        let (block, memory, reserve) = if fits_half(Node::<T>::LAYOUT) {
            let block = node_alloc::allocate(PAIR_LAYOUT);
            // SAFETY: the block is `PAIR_LAYOUT.size()` bytes long.
            let reserve = unsafe { block.as_ptr().add(RESERVE_OFFSET) };
            (block, Memory::WithReserve, reserve)
        } else {
            let block = node_alloc::allocate(Node::<T>::LAYOUT);
            (block, Memory::Own, ptr::null_mut())
        };
        let start = NodeStart {
            successors: std::mem::take(&mut current_meta.successors),
            region,
            group,
            holds_unit: std::mem::replace(&mut current_meta.holds_unit, false),
            memory,
        };
        // SAFETY: fresh memory, valid for a `Node<T>` (which fits the first
        // half of a pair block when it got one), of the kind `memory` names.
        let cont = unsafe { Node::write(block.cast(), body, start) };
        // Emptied by the take above.
        current_meta.successors = Successors::one(cont);
        ContinuationRef {
            node: cont,
            region,
            group,
            reserve: Cell::new(reserve),
        }
    }

    /// A new node whose only successor is `cont`, in `cont`'s group, holding
    /// no unit (`cont` finishes after it). The first child that fits takes
    /// the continuation's reserve.
    #[inline(always)]
    pub(crate) fn child_of<T: Task>(cont: &ContinuationRef, body: T) -> TaskRef {
        let reserve = cont.reserve.get();
        let (block, memory) = if fits_half(Node::<T>::LAYOUT) && !reserve.is_null() {
            cont.reserve.set(ptr::null_mut());
            // SAFETY: a reserve is the unused second half of a live pair
            // block, aligned to 16.
            (
                unsafe { NonNull::new_unchecked(reserve) },
                Memory::InReserve,
            )
        } else {
            (node_alloc::allocate(Node::<T>::LAYOUT), Memory::Own)
        };
        let start = NodeStart {
            successors: Successors::one(cont.node),
            region: cont.region,
            group: cont.group,
            holds_unit: false,
            memory,
        };
        // SAFETY: unused memory valid for a `Node<T>` (it fits a reserve
        // when it took one), of the kind `memory` names. A child in the
        // reserve is dropped before it releases `cont` (`free_node`), and
        // `cont` cannot free its block before that release.
        let child = unsafe { Node::write(block.cast(), body, start) };
        add_unit_to_continuation(cont.node);
        TaskRef::from_raw(child)
    }

    /// One more unit of `cont`'s pending count, for a child being made by
    /// the task that made `cont`. That task holds a unit of it until it
    /// ends (or a later continuation of the same task holds it, and cannot
    /// start before the task ends).
    ///
    /// The other units belong to children made before, which may be
    /// releasing theirs on other workers right now. At 1, only ours is
    /// left: every earlier child has released (its decrement is before
    /// the value read), nobody else can add, so no other thread can
    /// change the count, and a plain store replaces the read-modify-write
    /// (a locked instruction on every fork of a continuation-passing
    /// recursion). Acquire pairs with those earlier releases, so their
    /// writes reach whoever takes the continuation through our own later
    /// release. `tests/continuation_stress.rs` races children against it.
    #[inline]
    fn add_unit_to_continuation(cont: NonNull<Header>) {
        let pending = &header(cont).pending;
        if pending.load(Ordering::Acquire) == 1 {
            pending.store(2, Ordering::Relaxed);
        } else {
            pending.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The body of `current`'s first successor, if it is a `T`.
    ///
    /// The successor cannot start (or be freed) before `current` completes,
    /// and `T: Sync` makes shared access from several predecessors sound.
    pub(crate) fn successor_body<'a, T: Task + Sync>(current: NonNull<Header>) -> Option<&'a T> {
        // SAFETY: `current` is running on this thread; we own its meta.
        let first = unsafe { (*header(current).meta.get()).successors.first() }?;
        let succ = header(first);
        // The vtable's address says "a `T`" in one comparison almost
        // always; the type id (a call through the vtable) decides when the
        // same vtable was emitted twice (addresses of constants are not
        // guaranteed unique).
        if !ptr::eq(succ.vtable, Node::<T>::vtable())
            && (succ.vtable.type_id)() != TypeId::of::<T>()
        {
            return None;
        }
        // SAFETY: the type matches; the body lives until `current` (one of
        // its predecessors) completes, which outlasts the borrow the caller
        // ties to its context; nobody holds `&mut` to it before then.
        Some(unsafe { &*first.cast::<Node<T>>().as_ref().body.get() })
    }
}
