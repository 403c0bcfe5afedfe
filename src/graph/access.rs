//! How a run reaches a node's parts: the node itself, and its entries in
//! the arrays beside the nodes (links, counts, last workers, placements),
//! all by the node's index, through the pointers the run state holds for
//! the run in progress (`run_graph` sets them before any node runs).
//!
//! Invariant: each function is called only for an index of the graph that
//! is running; every array then has an entry for it, but the placement
//! array, which has one for each node whose link says `PLACED`, and the
//! last workers' array, sized when a run replays.

use super::node::{Link, Node, Placement, RunShared};
use std::ptr;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};

/// `node`'s index in the running graph's storage.
///
/// # Safety
/// `node` is a node of the graph whose run `shared` describes.
#[inline(always)]
pub(super) unsafe fn index_of(shared: &RunShared, node: &Node<'_>) -> usize {
    let base = shared.nodes.load(Ordering::Relaxed).cast_const();
    // SAFETY: `node` lies in the node array at `base`.
    unsafe {
        ptr::from_ref(node)
            .cast::<Node<'static>>()
            .offset_from(base) as usize
    }
}

/// Node `index` of the running graph.
///
/// # Safety
/// `index` is a node of the graph whose run `shared` describes (and so of
/// each array below, which has an entry per node while the graph runs).
#[inline(always)]
pub(super) unsafe fn node_at(shared: &RunShared, index: usize) -> &'static Node<'static> {
    // SAFETY: the caller's.
    unsafe { &*shared.nodes.load(Ordering::Relaxed).add(index) }
}

/// Node `index`'s link.
///
/// # Safety
/// As for `node_at`.
#[inline(always)]
pub(super) unsafe fn link_at(shared: &RunShared, index: usize) -> Link {
    // SAFETY: the caller's.
    unsafe { *shared.links.load(Ordering::Relaxed).add(index) }
}

/// Node `index`'s predecessor count.
///
/// # Safety
/// As for `node_at`.
#[inline(always)]
pub(super) unsafe fn count_at(shared: &RunShared, index: usize) -> &AtomicU32 {
    // SAFETY: the caller's.
    unsafe { &*shared.pending.load(Ordering::Relaxed).add(index) }
}

/// The worker that ran node `index` last.
///
/// # Safety
/// As for `node_at`, in a run that replays (which sized the array).
#[inline(always)]
pub(super) unsafe fn last_worker_at(shared: &RunShared, index: usize) -> &AtomicU16 {
    // SAFETY: the caller's.
    unsafe { &*shared.last_worker.load(Ordering::Relaxed).add(index) }
}

/// Node `index`'s placement: its own if its link says so, else the
/// default.
///
/// # Safety
/// As for `node_at`.
#[inline(always)]
pub(super) unsafe fn placement_at(shared: &RunShared, index: usize) -> Placement {
    // SAFETY: the caller's.
    if unsafe { link_at(shared, index) }.placed() {
        // SAFETY: a placed node has an entry (`Graph::placement_mut`).
        unsafe { *shared.placement.load(Ordering::Relaxed).add(index) }
    } else {
        Placement::DEFAULT
    }
}
