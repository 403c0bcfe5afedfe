//! What `Context` may do to the node it runs: make a continuation that
//! takes over the node's successors and group unit, give it children, and
//! read the body of the node's first successor (how a child hands its
//! result to its continuation). These functions are the context's only way
//! into node internals.
//!
//! Invariants:
//! - The running node is its continuation's predecessor until it ends, so
//!   the continuation cannot start (or be freed) while the node's task can
//!   still add children or read it; only that task adds units to it.
//! - A continuation whose body fits half a pair block gets one, and its
//!   first child that fits takes the other half (`Memory`), saving an
//!   allocation and a free a fork.

use super::layout::{
    Body, Header, Memory, Node, NodeStart, PAIR_LAYOUT, RESERVE_OFFSET, fits_half, header,
};
use crate::platform::node_alloc::{self, ThreadCache};
use crate::platform::sync::Ordering;
use crate::queues::region::Region;
use crate::task::successors::Successors;
use crate::worker::group::Group;
use std::any::TypeId;
use std::cell::Cell;
use std::ptr::{self, NonNull};

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
    /// No child made yet: the count holds the maker's unit alone.
    childless: Cell<bool>,
}

/// Make a continuation of the running node `current`: it takes over
/// `current`'s successors and group unit, and `current` becomes its
/// only predecessor for now (so it cannot start before `current` ends).
#[inline(always)]
pub(crate) fn continuation<T: Body>(
    current: NonNull<Header>,
    group: &Group,
    cache: Option<ThreadCache>,
    body: T,
) -> ContinuationRef {
    // SAFETY: `current` is running on this thread, so we own its meta.
    let current_meta = unsafe { &mut *header(current).meta.get() };
    let region = current_meta.region;
    let group = group as *const Group as *mut Group;
    let (block, memory, reserve) = if fits_half(Node::<T>::LAYOUT) {
        let block = match cache {
            // SAFETY: the running worker's own cache, on its thread.
            Some(cache) => unsafe { cache.allocate(PAIR_LAYOUT) },
            None => node_alloc::allocate(PAIR_LAYOUT),
        };
        // SAFETY: the block is `PAIR_LAYOUT.size()` bytes long.
        let reserve = unsafe { block.as_ptr().add(RESERVE_OFFSET) };
        (block, Memory::WithReserve, reserve)
    } else {
        let block = node_alloc::allocate(Node::<T>::LAYOUT);
        (block, Memory::Own, ptr::null_mut())
    };
    // The continuation's address is the block's: `current` points at it
    // before it is written, so its old list moves over in one exchange
    // (taken, then stored, it was loaded again to drop the empty list).
    let cont = block.cast::<Header>();
    let start = NodeStart {
        successors: std::mem::replace(&mut current_meta.successors, Successors::one(cont)),
        region,
        group,
        holds_unit: std::mem::replace(&mut current_meta.holds_unit, false),
        memory,
    };
    // SAFETY: fresh memory, valid for a `Node<T>` (which fits the first
    // half of a pair block when it got one), of the kind `memory` names.
    let cont = unsafe { Node::write(block.cast(), body, start) };
    ContinuationRef {
        node: cont,
        region,
        group,
        reserve: Cell::new(reserve),
        childless: Cell::new(true),
    }
}

/// A new node whose only successor is `cont`, in `cont`'s group, holding
/// no unit (`cont` finishes after it). The first child that fits takes
/// the continuation's reserve.
#[inline(always)]
pub(crate) fn child_of<T: Body>(cont: &ContinuationRef, body: T) -> NonNull<Header> {
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
    if cont.childless.replace(false) {
        // The count is the one `continuation` wrote, and no other thread
        // knows the node: a store makes it two, with nothing to read (in
        // a fork, made and given its child in one inlined stretch, the
        // test folds away).
        header(cont.node).pending.store(2, Ordering::Relaxed);
    } else {
        add_unit_to_continuation(cont.node);
    }
    child
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
pub(crate) fn successor_body<'a, T: Body + Sync>(current: NonNull<Header>) -> Option<&'a T> {
    // SAFETY: `current` is running on this thread; we own its meta.
    let first = unsafe { (*header(current).meta.get()).successors.first() }?;
    let succ = header(first);
    // The vtable holds the type id as a constant: one comparison with
    // no call. (Comparing vtable addresses instead would depend on
    // codegen: the same vtable may be emitted once per codegen unit.)
    if succ.vtable.type_id != TypeId::of::<T>() {
        return None;
    }
    // SAFETY: the type matches; the body lives until `current` (one of
    // its predecessors) completes, which outlasts the borrow the caller
    // ties to its context; nobody holds `&mut` to it before then.
    Some(unsafe { &*first.cast::<Node<T>>().as_ref().body.get() })
}
