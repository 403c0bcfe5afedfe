//! A node's life after submission: readiness (the `pending` count that
//! says when it may run, and the [`ReadyNode`] that owns it once it may),
//! routing a ready node to a queue, running it (the `JobRef` entry point,
//! the call of its body: a panic fails the node, it does not unwind into
//! the worker), and completion, which releases its successors and picks
//! what this worker runs next: rule 1 (the task the body returned) before
//! rule 2 (a successor it made ready). One file: a completed node makes
//! its successors ready, and a ready node becomes a job whose entry runs
//! and completes it.
//!
//! Invariants:
//! - The `meta` fields are written only by the current owner; ownership
//!   moves through `pending`'s AcqRel read-modify-writes, which order
//!   those writes.
//! - The last unit is released by an Acquire load that sees 1 and a plain
//!   store: a unit is added only by the holder of another unit (a handle,
//!   or the running predecessor a `Continuation` belongs to), so when the
//!   count is 1 and the unit is ours, no other thread can change it. For
//!   the same reason, a count of 2 whose other unit belongs to a job we
//!   just popped off our own deque is released by a plain store of 1
//!   (`finish`: a continuation-passing fork, whose spawned
//!   child is still on top when the recycled parent finishes);
//!   `tests/loom_sibling.rs` races it against a thief.
//! - A ready node is run by one worker, once per readiness (a recycled node
//!   is ready again, as a new job).
//! - A cancelled node, or one whose group is cancelled, is completed
//!   without running its body; a node that did not run to the end
//!   (skipped, or its body panicked) cancels its successors.
//! - A node is freed before its successors and group unit are released
//!   (`free_node`), which is what lets a child live in its continuation's
//!   reserve; a group unit is a node's very last touch: the group may be
//!   freed as soon as it is released.

use super::layout::{self, Header, Memory, NO_AFFINITY, PAIR_LAYOUT, RunState, header};
use super::release::{Release, TakeSibling, release_count, release_or_sibling};
use crate::observe::stats::Rule;
use crate::platform::node_alloc::{self, ThreadCache};
use crate::platform::sync::Ordering;
use crate::platform::unwind;
use crate::queues::dispatch::{Dispatch, STRICT_AFFINITY, SharedPlace};
use crate::queues::region::Region;
use crate::task::successors::{Many, Split, Successors};
use crate::worker::group::Group;
use crate::worker::thread::{ExecuteFn, JobRef, Next, Registry, WorkerThread};
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// A node whose pending count reached zero, owned by the holder of this
/// value, which must route it (`into_job`) or cancel it.
pub(crate) struct ReadyNode {
    pub(super) node: NonNull<Header>,
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
    pub(super) fn region(&self) -> Region {
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

/// Release one unit of `pending`; if it was the last, the node is ready and
/// the caller owns it.
#[inline]
pub(super) fn release_hold(node: NonNull<Header>) -> Option<ReadyNode> {
    release_count(&header(node).pending).then_some(ReadyNode { node })
}

/// Complete cancelled nodes without running them, with no worker at hand:
/// every node they make ready is cancelled too (a task runs only if all its
/// predecessors ran), so nothing here needs a queue.
pub(super) fn cancel_chain(first: NonNull<Header>) {
    let mut ready = vec![first];
    while let Some(node) = ready.pop() {
        note_dropped(node);
        // SAFETY: we own `node` (its pending count reached zero), and no
        // predecessor points at it any more.
        let remains = unsafe { free_node(node, None) };
        for s in remains.successors.iter() {
            header(s).cancelled.store(true, Ordering::Relaxed);
            if let Some(r) = release_hold(s) {
                ready.push(r.node);
            }
        }
        remains.release_unit();
    }
}

/// A node about to be completed unrun: if a failed predecessor cancelled
/// it (its own flag), its run hears of it (`Group::node_dropped`).
fn note_dropped(node: NonNull<Header>) {
    let header = header(node);
    if header.cancelled.load(Ordering::Relaxed) {
        // SAFETY: a submitted node's group lives until the node's
        // unit-holding descendant finishes, which is after this node is
        // freed; a never-submitted node has none.
        if let Some(group) = unsafe { header.group.load(Ordering::Relaxed).as_ref() } {
            group.node_dropped();
        }
    }
}

/// What must still be released once a node is freed: its successors, and
/// then its group unit (the last touch, since the group may be freed as
/// soon as the unit is released).
pub(super) struct Remains {
    pub(super) successors: Successors<Header>,
    pub(super) unit: Option<*mut Group>,
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
pub(super) fn release_unit(unit: Option<*mut Group>) {
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
pub(super) unsafe fn free_node(node: NonNull<Header>, cache: Option<ThreadCache>) -> Remains {
    let header = header(node);
    // SAFETY: owned by the caller.
    let meta = unsafe { &mut *header.meta.get() };
    let successors = meta.successors.take();
    let unit = meta
        .holds_unit
        .then(|| header.group.load(Ordering::Relaxed));
    // A body without drop glue needs no call through the vtable unless
    // the block's layout is the body's own: a child in a reserve has no
    // memory to give back, a continuation with a reserve gives back a
    // pair block (a continuation-passing fork frees one a fork). The
    // header has nothing to drop: its successor list is empty now.
    match meta.memory {
        Memory::InReserve if !header.vtable.drops_body => {}
        // SAFETY: a pair block, allocated with `PAIR_LAYOUT` and owned
        // by the caller; its reserve's child was dropped before it
        // released this node (see `Memory`).
        Memory::WithReserve if !header.vtable.drops_body => match cache {
            // SAFETY: as above, and the worker's own cache on its thread.
            Some(cache) => unsafe { cache.release(node.cast(), PAIR_LAYOUT) },
            // SAFETY: as above.
            None => unsafe { release_pair(node) },
        },
        // SAFETY: owned by the caller, nothing else points at it.
        _ => unsafe { (header.vtable.drop_node)(node) },
    }
    Remains { successors, unit }
}

/// Give back a continuation's pair block: a direct call, out of line (the
/// allocator's thread-local access would weigh on every caller's frame).
///
/// # Safety
/// `node` is a pair block owned by the caller, whose body needs no drop.
#[inline(never)]
unsafe fn release_pair(node: NonNull<Header>) {
    // SAFETY: forwarded.
    unsafe { node_alloc::release(node.cast(), PAIR_LAYOUT) }
}

/// `Context::spawn`: hand `node`, held by a handle until now, to
/// `worker`'s deque as part of `group` (or to where its placement says,
/// once ready), from the task `worker` is running.
///
/// The fork of a continuation-passing recursion takes the first branch: a
/// continuation's child spawned into its own group. The child was written
/// with the spawn placement (nothing else sets a placement before
/// submission) and in the running task's region; while that is still the
/// worker's region, `region_for` would give it again (a structured group's
/// nodes are all in its region, a `'static` group's in their submitter's),
/// so nothing needs writing, and only the handle's hold can be left (a
/// predecessor added by `precede` fails the test). As in `submit_node`, a
/// plain store releases the hold, and the child goes on the deque.
// Inlined into the task's `execute`, as `Context::spawn` is.
#[inline(always)]
pub(super) fn spawn_node(node: NonNull<Header>, group: &Group, worker: &WorkerThread) {
    let header = header(node);
    let current = worker.region();
    // SAFETY: the caller held the handle, so we own `meta`.
    let region = unsafe { (*header.meta.get()).region };
    if ptr::eq(header.group.load(Ordering::Relaxed), group)
        && region == current
        && header.pending.load(Ordering::Acquire) == 1
    {
        header.pending.store(0, Ordering::Relaxed);
        // SAFETY: the node is ready and ours; it is pushed once.
        worker.push(unsafe { JobRef::new(node.cast(), execute_job, region) });
        return;
    }
    if let Some(ready) = submit_node(node, group, Some(Dispatch::Spawn), None, current) {
        ready.route_from(worker);
    }
}

/// Hand `node`, held by a handle until now, to the scheduler as part of
/// `group`, with the given placement (None keeps the node's own),
/// submitted from a context in isolation region `current` (see
/// `Group::region_for`). Returns the node if releasing the hold made it
/// ready: the caller must then route or run it.
// Inlined: `Context::spawn` is inlined into tasks' `execute`, and a
// call here went through the GOT with every register saved; inlined,
// the constant placement folds away (fib_cps 7% faster, benches).
#[inline]
pub(super) fn submit_node(
    node: NonNull<Header>,
    group: &Group,
    dispatch: Option<Dispatch>,
    affinity: Option<usize>,
    current: Region,
) -> Option<ReadyNode> {
    let header = header(node);
    // SAFETY: the caller held the handle, so we own `meta`.
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
    let group_ptr = group as *const Group as *mut Group;
    // A new node has no group yet. A continuation's child has its
    // continuation's group and holds no unit of it (the continuation
    // does): spawned from the same run, it stays so; handed to another
    // run (`Pool::run` inside `execute`), it joins that run, whose wait
    // must cover it.
    if header.group.load(Ordering::Relaxed) != group_ptr {
        debug_assert!(!meta.holds_unit, "a node is submitted once");
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

/// The `JobRef` entry point for task nodes.
#[inline(never)]
pub(super) unsafe fn execute_job(node: NonNull<()>, worker: &WorkerThread) -> Option<Next> {
    // Each body runs with its group as the worker's cancel context, set
    // before it by `execute_node` (a store a node, not a save and a
    // restore around each); the context found here is restored once.
    let outer = worker.cancel_context();
    // SAFETY: forwarded: the node is ready and ours, executed once.
    let next = unsafe { execute_node(node.cast(), worker) };
    worker.set_cancel_context(outer);
    next
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
            _ => {
                note_dropped(node);
                // SAFETY: we own the node.
                return unsafe { complete(node, worker, true, None) };
            }
        };
        loop {
            // SAFETY: we own the node; the vtable matches its body type.
            // The body runs as work of its group (`is_cancelled`, nested
            // scopes and runs).
            let mut run = RunState {
                worker,
                node,
                group,
                recycle: false,
            };
            // No restore after the body: a panic stops at `halt_unwinding`,
            // and `execute_job` restores the context it found, whatever
            // this loop returns.
            worker.set_cancel_context(group);
            let returned =
                match unwind::halt_unwinding(|| unsafe { (header.vtable.execute)(node, &mut run) })
                {
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
            if !run.recycle {
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
                    LeftToRun::Successor(ready)
                        if !ready.region().is_isolated() && !worker.region().is_isolated() =>
                    {
                        worker.count_task(Rule::Successor);
                        node = ready.node;
                        continue 'nodes;
                    }
                    // Our successor waits for the child we took off our
                    // deque, and for nothing else: run it (rule 3).
                    LeftToRun::Sibling(job) => {
                        worker.count_task(Rule::OwnDeque);
                        node = job.pointer().cast();
                        continue 'nodes;
                    }
                    // Nothing made ready: rule 3 right here when the loop
                    // would take the deque's newest job next anyway and it
                    // is a task node (a spawned child, in a fork-join).
                    LeftToRun::Nothing => {
                        let job = worker.pop_own_task_in_main_loop(|job| {
                            job.is_plain_run_by(execute_job as ExecuteFn)
                        })?;
                        worker.count_task(Rule::OwnDeque);
                        node = job.pointer().cast();
                        continue 'nodes;
                    }
                    left => left.into_next(),
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
fn submit_returned(task: NonNull<Header>, group: &Group, worker: &WorkerThread) -> Option<JobRef> {
    let ready = submit_node(task, group, None, None, worker.region())?;
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

/// What completing a node leaves to run next on this worker. (Not
/// `queues::proxy::Taken`, which is what taking a proxy entry gave.)
enum LeftToRun {
    Nothing,
    /// The task the node returned (rule 1).
    Bypass(JobRef),
    /// A successor it made ready that may run here (rule 2).
    Successor(ReadyNode),
    /// The newest job of our deque, taken off it: a task node whose only
    /// successor is ours, which now waits for it alone (rule 3, see
    /// [`finish`]).
    Sibling(JobRef),
}

impl LeftToRun {
    /// As the worker loop's next job.
    fn into_next(self) -> Option<Next> {
        match self {
            LeftToRun::Nothing => None,
            LeftToRun::Bypass(job) => Some(Next {
                job,
                rule: Rule::Returned,
            }),
            LeftToRun::Successor(ready) => Some(Next {
                job: ready.into_job(),
                rule: Rule::Successor,
            }),
            LeftToRun::Sibling(job) => Some(Next {
                job,
                rule: Rule::OwnDeque,
            }),
        }
    }
}

/// Complete a node that ran (or was skipped, `failed`): release each
/// successor; the first one made ready that may run here is the next task
/// (rule 2) unless `bypass` (rule 1) came first; the others are routed.
/// Then free the node and release its group unit.
///
/// Beside the spawned child: a continuation-passing fork leaves its
/// continuation waiting for the recycled parent and the spawned child,
/// which is usually still on top of our deque when the parent finishes.
/// Releasing by a read-modify-write and then popping the child costs a
/// locked instruction the pop makes needless: so with a count of 2 we pop
/// first, and if the job is a task node whose only successor is ours, a
/// plain store releases our unit and the child runs next (rule 3, as the
/// worker's loop would take it); any other job goes back on top (why the
/// count cannot move meanwhile: `release.rs`).
///
/// # Safety
/// The caller owns the node, which is not used afterwards.
#[inline(always)]
unsafe fn finish(
    node: NonNull<Header>,
    worker: &WorkerThread,
    failed: bool,
    bypass: Option<JobRef>,
) -> LeftToRun {
    // SAFETY: we own the node, and it completed: nothing points at it.
    let Remains { successors, unit } = unsafe { free_node(node, worker.node_cache()) };
    let successor = match successors.split() {
        Split::None => None,
        // The usual end of a continuation-passing fork's parent: see
        // "Beside the spawned child" above.
        Split::One(only) if !failed && bypass.is_none() => {
            match release_or_sibling(&header(only).pending, OnOurDeque { s: only, worker }) {
                Release::Sibling(job) => {
                    release_unit(unit);
                    return LeftToRun::Sibling(job);
                }
                Release::Last => made_ready(ReadyNode { node: only }, true, worker),
                Release::NotLast => None,
            }
        }
        Split::One(only) => release_successor(only, failed, bypass.is_none(), worker),
        Split::Many(all) => release_all(all, failed, bypass.is_none(), worker),
    };
    release_unit(unit);
    match (bypass, successor) {
        (Some(job), _) => LeftToRun::Bypass(job),
        (None, Some(ready)) => LeftToRun::Successor(ready),
        (None, None) => LeftToRun::Nothing,
    }
}

/// The other holder of `s`'s count, if it is the newest job of the
/// worker's deque: a task node whose only successor is `s`.
struct OnOurDeque<'w> {
    s: NonNull<Header>,
    worker: &'w WorkerThread,
}

impl TakeSibling for OnOurDeque<'_> {
    type Job = JobRef;

    #[inline(always)]
    fn take(self) -> Option<JobRef> {
        take_sibling(self.s, self.worker)
    }
}

/// Pop our deque's newest job if it is a task node whose only successor
/// is `s`; else leave the deque as it was. See [`finish`].
#[inline(always)]
fn take_sibling(s: NonNull<Header>, worker: &WorkerThread) -> Option<JobRef> {
    let job =
        worker.pop_own_task_in_main_loop(|job| job.is_plain_run_by(execute_job as ExecuteFn))?;
    // SAFETY: a plain task-node job popped by its owner: the node is
    // ours until we run it or push it back, and so is its `meta`.
    let meta = unsafe { &*header(job.pointer().cast::<Header>()).meta.get() };
    if meta.successors.is_only(s) {
        return Some(job);
    }
    // Back on top, as it was (it was announced when first pushed).
    worker.push_quiet(job);
    None
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
        header(s).cancelled.store(true, Ordering::Relaxed);
    }
    made_ready(release_hold(s)?, may_take, worker)
}

/// A successor our release made ready: the next job when `may_take` and
/// it may run here, routed otherwise (or completed unrun if cancelled).
#[inline(always)]
fn made_ready(ready: ReadyNode, may_take: bool, worker: &WorkerThread) -> Option<ReadyNode> {
    if header(ready.node).cancelled.load(Ordering::Relaxed) {
        // Never runs: complete it (and what it cancels) here.
        cancel_chain(ready.node);
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
