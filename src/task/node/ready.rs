//! Readiness: the `pending` count that says when a node may run, the
//! [`ReadyNode`] that owns a node once it may, its routing to a queue, and
//! what a freed node still releases (its successors' units, then its group
//! unit), cancelled chains included.
//!
//! Invariants:
//! - The `meta` fields are written only by the current owner; ownership
//!   moves through `pending`'s AcqRel read-modify-writes, which order
//!   those writes.
//! - The last unit is released by an Acquire load that sees 1 and a plain
//!   store: a unit is added only by the holder of another unit (a handle,
//!   or the running predecessor a `Continuation` belongs to), so when the
//!   count is 1 and the unit is ours, no other thread can change it.
//! - A group unit is a node's very last touch: the group may be freed as
//!   soon as it is released.

use super::execute::execute_job;
use super::layout::{Header, Memory, NO_AFFINITY, header};
use crate::platform::sync::Ordering;
use crate::queues::dispatch::{Dispatch, STRICT_AFFINITY, SharedPlace};
use crate::queues::region::Region;
use crate::task::successors::Successors;
use crate::worker::group::Group;
use crate::worker::thread::{JobRef, Registry, WorkerThread};
use std::ptr::NonNull;
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

/// Complete cancelled nodes without running them, with no worker at hand:
/// every node they make ready is cancelled too (a task runs only if all its
/// predecessors ran), so nothing here needs a queue.
pub(super) fn cancel_chain(first: NonNull<Header>) {
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
pub(super) unsafe fn free_node(node: NonNull<Header>) -> Remains {
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
