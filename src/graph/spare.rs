//! The arrays of the last large graph dropped, kept for the next one, to
//! start a graph in (`take_array`) or to grow one into (`grow_if_full`).
//!
//! A graph of a million nodes has a 32 MiB node array, and its links,
//! counts, builder lists and edges take another 40 MiB. The system
//! allocator takes arrays that large fresh from the kernel and gives them
//! back when they are freed (glibc maps them above its mmap threshold, or
//! trims them off the heap's top), so every build of such a graph faults
//! in and zeroes its pages again: with 64-byte nodes, a fifth of the time
//! of building and running a million-node chain for the node array alone,
//! and another tenth for the rest. So one array of each kind is kept: a
//! dropped graph whose array is large leaves it here (unless a larger one of that kind is kept
//! already), and a graph that needs a large array takes it when it is big
//! enough. At most one array of each kind, each of at most `MAX_BYTES`,
//! stays allocated after the graphs are gone (ARCHITECTURE.md, known
//! limits).
//!
//! Invariant: a kept array holds no live element. The node array was
//! allocated by the global allocator as a `Vec<Node>` of exactly
//! `capacity` nodes (nodes have no drop glue; their bodies are dropped by
//! the graph beforehand); lifetimes do not change a type's layout, so a
//! `Vec<Node<'a>>` may reuse the array of a `Vec<Node<'b>>`. Every kind is
//! kept as the empty vector it is, by the same two functions.

use super::node::{Edge, Link, Node, NodeMeta};
use parking_lot::Mutex;
use std::mem::{ManuallyDrop, size_of};
use std::sync::atomic::AtomicU32;

/// Smaller arrays are left to the allocator, which reuses them well.
const MIN_BYTES: usize = 4 << 20;
/// Larger arrays are freed: keeping them would cost more than it saves.
const MAX_BYTES: usize = 64 << 20;

const _: () = assert!(!std::mem::needs_drop::<Node<'static>>());

/// The same empty array, typed for nodes of another borrow: lifetimes do
/// not change a type's layout, and an emptied vector holds no node of
/// either (nodes have no drop glue; their bodies are the graph's to drop).
fn with_lifetime<'a, 'b>(mut nodes: Vec<Node<'a>>) -> Vec<Node<'b>> {
    nodes.clear();
    let mut nodes = ManuallyDrop::new(nodes);
    let (ptr, capacity) = (nodes.as_mut_ptr(), nodes.capacity());
    // SAFETY: allocated by the global allocator as a `Vec` of `capacity`
    // elements of this layout, owned by us alone (the original will not be
    // dropped), and none of them live, so length 0 is right.
    unsafe { Vec::from_raw_parts(ptr.cast::<Node<'b>>(), 0, capacity) }
}

/// An empty node vector with room for at least `nodes`, if that is a large
/// array and the kept one is big enough.
pub(super) fn take<'a>(nodes: usize) -> Option<Vec<Node<'a>>> {
    take_array(&NODES, nodes).map(with_lifetime)
}

/// Keep the array of a dropped graph's `nodes` for the next large graph,
/// if it is large and larger than the one kept; free it otherwise.
pub(super) fn give(nodes: Vec<Node<'_>>) {
    give_array(&NODES, with_lifetime(nodes));
}

/// The kept arrays, one of each kind, each as an empty vector (none kept:
/// no capacity).
static NODES: Mutex<Vec<Node<'static>>> = Mutex::new(Vec::new());
pub(super) static META: Mutex<Vec<NodeMeta>> = Mutex::new(Vec::new());
pub(super) static EDGES: Mutex<Vec<Edge>> = Mutex::new(Vec::new());
pub(super) static COUNTS: Mutex<Vec<AtomicU32>> = Mutex::new(Vec::new());
pub(super) static LINKS: Mutex<Vec<Link>> = Mutex::new(Vec::new());
pub(super) static PAIRS: Mutex<Vec<[u32; 2]>> = Mutex::new(Vec::new());

fn is_large<T>(len: usize) -> bool {
    len.saturating_mul(size_of::<T>()) >= MIN_BYTES
}

/// An empty vector with room for at least `len`, from `slot`, if that is
/// a large array and the kept one is big enough.
pub(super) fn take_array<T>(slot: &Mutex<Vec<T>>, len: usize) -> Option<Vec<T>> {
    if !is_large::<T>(len) {
        return None;
    }
    let mut kept = slot.lock();
    (kept.capacity() >= len).then(|| std::mem::take(&mut *kept))
}

/// Keep `array` in `slot` for the next large graph, if it is large and
/// larger than the one kept; free it otherwise.
pub(super) fn give_array<T>(slot: &Mutex<Vec<T>>, mut array: Vec<T>) {
    let capacity = array.capacity();
    if !is_large::<T>(capacity) || capacity.saturating_mul(size_of::<T>()) > MAX_BYTES {
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
    // Freed outside the lock: unmapping up to 64 MiB takes a while.
    drop(freed);
}

/// Room for one more element in `array` if it is full: doubling, as a
/// vector grows, but into the kept array of a dropped graph
/// when one is large enough. A graph built without a size hint otherwise
/// copies each large array into fresh memory as it grows, and faults its
/// pages in again (a 1024 x 1024 grid built with
/// `Graph::new`, dropped and built again: 45 -> 24 ms).
#[inline(always)]
pub(super) fn grow_if_full<T>(array: &mut Vec<T>, slot: &Mutex<Vec<T>>) {
    if array.len() == array.capacity() {
        grow(array, slot);
    }
}

#[cold]
#[inline(never)]
fn grow<T>(array: &mut Vec<T>, slot: &Mutex<Vec<T>>) {
    let wanted = (array.capacity() * 2).max(4);
    match take_array(slot, wanted) {
        Some(mut kept) => {
            kept.append(array);
            *array = kept;
        }
        None => array.reserve(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept array is taken only by a request it is big enough for, once;
    /// a smaller array given back does not replace a larger one kept.
    /// (Safe code over megabytes of memory: not worth Miri's time.)
    #[test]
    #[cfg_attr(miri, ignore)]
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

    /// A node array handed from one borrow to another keeps its memory
    /// and capacity, empty (run under Miri in CI).
    #[test]
    fn a_node_array_changes_borrow_empty_with_its_memory() {
        let nodes: Vec<Node<'_>> = Vec::with_capacity(5);
        let (ptr, capacity) = (nodes.as_ptr() as usize, nodes.capacity());
        let moved: Vec<Node<'static>> = with_lifetime(nodes);
        assert_eq!(moved.as_ptr() as usize, ptr);
        assert_eq!(moved.capacity(), capacity);
        assert!(moved.is_empty());
    }
}
