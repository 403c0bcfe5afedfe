//! The node array of the last large graph dropped, kept for the next one.
//!
//! A graph of a million nodes has a 64 MiB node array. The system allocator
//! takes an array that large fresh from the kernel and gives it back when
//! it is freed (glibc does so above its 32 MiB mmap ceiling), so every
//! build of such a graph faults in and zeroes its pages again: a fifth of
//! the time of building and running a million-node chain. So one array is
//! kept: a dropped graph whose node array is large leaves it here (unless
//! a larger one is kept already), and a graph that needs a large array
//! takes it when it is big enough. At most one array, of at most
//! `MAX_BYTES`, stays allocated after the graphs are gone (ARCHITECTURE.md,
//! known limits).
//!
//! Invariant: the kept array was allocated by the global allocator as a
//! `Vec<Node>` of exactly `capacity` nodes, and holds no live node (nodes
//! have no drop glue; their bodies are dropped by the graph beforehand).
//! Lifetimes do not change a type's layout, so a `Vec<Node<'a>>` may reuse
//! the array of a `Vec<Node<'b>>`.

use super::node::Node;
use parking_lot::Mutex;
use std::mem::{ManuallyDrop, size_of};
use std::ptr::NonNull;

/// Smaller arrays are left to the allocator, which reuses them well.
const MIN_BYTES: usize = 4 << 20;
/// Larger arrays are freed: keeping them would cost more than it saves.
const MAX_BYTES: usize = 64 << 20;

const _: () = assert!(!std::mem::needs_drop::<Node<'static>>());

struct Spare {
    ptr: NonNull<Node<'static>>,
    capacity: usize,
}

// SAFETY: the spare is memory with no live node in it; whoever takes it
// out of the mutex owns it alone.
unsafe impl Send for Spare {}

impl Spare {
    /// Back into a vector (and so to its owner, or the allocator).
    fn into_vec<'a>(self) -> Vec<Node<'a>> {
        // SAFETY: the module invariant: allocated as a `Vec<Node>` of
        // `capacity` nodes, none of them live, so length 0 is right.
        unsafe { Vec::from_raw_parts(self.ptr.as_ptr().cast::<Node<'a>>(), 0, self.capacity) }
    }
}

static SPARE: Mutex<Option<Spare>> = Mutex::new(None);

fn is_large(nodes: usize) -> bool {
    nodes.saturating_mul(size_of::<Node<'static>>()) >= MIN_BYTES
}

/// An empty node vector with room for at least `nodes`, if that is a large
/// array and the kept one is big enough.
pub(super) fn take<'a>(nodes: usize) -> Option<Vec<Node<'a>>> {
    if !is_large(nodes) {
        return None;
    }
    let mut slot = SPARE.lock();
    if slot.as_ref()?.capacity < nodes {
        return None;
    }
    slot.take().map(Spare::into_vec)
}

/// Keep the array of a dropped graph's `nodes` for the next large graph,
/// if it is large and larger than the one kept; free it otherwise.
pub(super) fn give(mut nodes: Vec<Node<'_>>) {
    let capacity = nodes.capacity();
    if !is_large(capacity) || capacity.saturating_mul(size_of::<Node<'static>>()) > MAX_BYTES {
        return;
    }
    nodes.clear();
    let mut nodes = ManuallyDrop::new(nodes);
    let spare = Spare {
        ptr: NonNull::new(nodes.as_mut_ptr().cast::<Node<'static>>())
            .expect("a vector with capacity has a non-null pointer"),
        capacity,
    };
    let freed = {
        let mut slot = SPARE.lock();
        match &*slot {
            Some(kept) if kept.capacity >= capacity => Some(spare),
            _ => slot.replace(spare),
        }
    };
    // Freed outside the lock: unmapping 64 MiB takes a while.
    drop(freed.map(Spare::into_vec));
}
