//! The cycle check of [`TaskRef::precede`](super::TaskRef::precede): an
//! edge that would close a cycle is refused, since the nodes on a cycle
//! would each wait for another forever and their group would never end.
//!
//! Invariant: the search reads only successor lists of nodes that wait on
//! an unsubmitted node (nobody runs them), and edges are added only under
//! [`EDGE_LOCK`], which the search's caller holds; so no list it reads is
//! being written.

use super::layout::{Header, header};
use std::collections::HashSet;
use std::ptr::NonNull;

/// Serializes edge insertion with the cycle search, which reads the
/// successor lists of nodes that other threads may be linking.
pub(super) static EDGE_LOCK: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// Does `from` reach `target` through successor edges?
///
/// # Safety
/// Caller holds EDGE_LOCK and all nodes reachable from `from` are waiting.
pub(super) unsafe fn reaches(from: NonNull<Header>, target: NonNull<Header>) -> bool {
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
