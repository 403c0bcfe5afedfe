//! The arrays of the last large graph dropped, kept for the next one.
//!
//! A graph of a million nodes has a 64 MiB node array, and its counts,
//! builder lists and edges take another 28 MiB. The system allocator takes
//! arrays that large fresh from the kernel and gives them back when they
//! are freed (glibc maps them above its mmap threshold, or trims them off
//! the heap's top), so every build of such a graph faults in and zeroes
//! its pages again: a fifth of the time of building and running a
//! million-node chain for the node array alone, and another tenth for the
//! rest. So one array of each kind is kept: a dropped graph whose array
//! is large leaves it here (unless a larger one of that kind is kept
//! already), and a graph that needs a large array takes it when it is big
//! enough. At most one array of each kind, each of at most `MAX_BYTES`,
//! stays allocated after the graphs are gone (ARCHITECTURE.md, known
//! limits).
//!
//! Invariant: a kept array holds no live element. The node array was
//! allocated by the global allocator as a `Vec<Node>` of exactly
//! `capacity` nodes (nodes have no drop glue; their bodies are dropped by
//! the graph beforehand); lifetimes do not change a type's layout, so a
//! `Vec<Node<'a>>` may reuse the array of a `Vec<Node<'b>>`. The other
//! kinds are kept as the empty vectors they are.

use super::node::{Edge, Node, NodeMeta};
use parking_lot::Mutex;
use std::mem::{ManuallyDrop, size_of};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

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
    is_large_array::<Node<'static>>(nodes)
}

fn is_large_array<T>(len: usize) -> bool {
    len.saturating_mul(size_of::<T>()) >= MIN_BYTES
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

/// The kinds of arrays besides the nodes', each kept as an empty vector
/// (none kept: no capacity).
pub(super) static META: Mutex<Vec<NodeMeta>> = Mutex::new(Vec::new());
pub(super) static EDGES: Mutex<Vec<Edge>> = Mutex::new(Vec::new());
pub(super) static COUNTS: Mutex<Vec<AtomicU32>> = Mutex::new(Vec::new());

/// An empty vector with room for at least `len`, from `slot`, if that is
/// a large array and the kept one is big enough.
pub(super) fn take_array<T>(slot: &Mutex<Vec<T>>, len: usize) -> Option<Vec<T>> {
    if !is_large_array::<T>(len) {
        return None;
    }
    let mut kept = slot.lock();
    (kept.capacity() >= len).then(|| std::mem::take(&mut *kept))
}

/// Keep `array` in `slot` for the next large graph, if it is large and
/// larger than the one kept; free it otherwise.
pub(super) fn give_array<T>(slot: &Mutex<Vec<T>>, mut array: Vec<T>) {
    let capacity = array.capacity();
    if !is_large_array::<T>(capacity) || capacity.saturating_mul(size_of::<T>()) > MAX_BYTES {
        return;
    }
    array.clear();
    let freed = {
        let mut kept = slot.lock();
        if kept.capacity() >= capacity {
            array
        } else {
            std::mem::replace(&mut *kept, array)
        }
    };
    // Freed outside the lock: unmapping tens of MiB takes a while.
    drop(freed);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept array is taken only by a request it is big enough for, once;
    /// a smaller array given back does not replace a larger one kept.
    #[test]
    fn a_kept_array_goes_to_the_first_request_it_fits_and_the_larger_stays() {
        static SLOT: Mutex<Vec<u64>> = Mutex::new(Vec::new());
        let large = MIN_BYTES / size_of::<u64>();
        assert!(take_array(&SLOT, large).is_none(), "nothing kept yet");
        give_array(&SLOT, Vec::<u64>::with_capacity(large / 2));
        assert_eq!(SLOT.lock().capacity(), 0, "a small array is freed");
        give_array(&SLOT, vec![7u64; 2 * large]);
        give_array(&SLOT, Vec::<u64>::with_capacity(large));
        assert!(take_array(&SLOT, 3 * large).is_none(), "too small for that");
        assert!(take_array(&SLOT, 16).is_none(), "small requests allocate");
        let taken = take_array(&SLOT, large + 1).expect("the larger one kept");
        assert!(taken.is_empty() && taken.capacity() >= 2 * large);
        assert!(take_array(&SLOT, large).is_none(), "taken once");
        give_array(&SLOT, Vec::<u64>::with_capacity(MAX_BYTES / 4));
        assert_eq!(SLOT.lock().capacity(), 0, "a huge array is freed");
    }
}
