//! The run's predecessor counts: one `u32` per node, in an array of their
//! own, apart from the nodes and their links.
//!
//! A finishing node decrements each successor's count. Kept in the nodes,
//! that touched a successor's whole cache line long before the successor
//! ran: a grid walked along its rows counted down the next row, one line
//! per node, and dirtied every line, so each run wrote the whole node
//! array back (when nodes were 64-byte lines). Sixteen counts share a line here: a 1024-wide grid counts
//! down the next row within 4 KiB, and the nodes are only read. (A 1024 x
//! 1024 wavefront with its edges added down-first: on one worker 8.0 ->
//! 7.1 ns a node, on two 12 -> 4.7.)
//!
//! The protocol (`arrive`): a count starts each run at its node's
//! in-degree; each predecessor arrives once. The last one to arrive sees
//! the count at 1, so it need not write: every other predecessor has
//! decremented already (we have not, and only predecessors decrement), and
//! its load synchronizes with each of their decrements (acquire on the
//! release sequence of read-modify-writes). So a node with one predecessor
//! is never written to at all, and a node whose count was written restores
//! it when it starts (`needs_reset`): by then every predecessor is done
//! with it, and the next run's decrements come after this run ends.
//!
//! From the node's start until it completes, its count is free, and a
//! body that spawns children counts them in it (`Subflow`): the body's
//! unit and one a child, the last to finish completes the node. That one
//! restores the count to the in-degree before it touches a successor, so
//! the next run still finds it whole, and a graph needs no array of
//! children counts (nor zeroes one before its first run).
//!
//! Invariants: between runs every count equals its node's in-degree; a
//! count is decremented only by its node's predecessors, once each per
//! run, and by its node's children while it runs; `tests/loom_pending.rs`
//! checks that exactly one arrival sees the node ready, after every other
//! predecessor's writes.

/// The atomic a count is kept in: std's, or loom's in the models.
pub(crate) trait Count {
    fn load(&self, order: std::sync::atomic::Ordering) -> u32;
    fn store(&self, value: u32, order: std::sync::atomic::Ordering);
    fn fetch_sub(&self, value: u32, order: std::sync::atomic::Ordering) -> u32;
}

macro_rules! impl_count {
    ($atomic:ty) => {
        impl Count for $atomic {
            #[inline(always)]
            fn load(&self, order: std::sync::atomic::Ordering) -> u32 {
                <$atomic>::load(self, order)
            }
            #[inline(always)]
            fn store(&self, value: u32, order: std::sync::atomic::Ordering) {
                <$atomic>::store(self, value, order)
            }
            #[inline(always)]
            fn fetch_sub(&self, value: u32, order: std::sync::atomic::Ordering) -> u32 {
                <$atomic>::fetch_sub(self, value, order)
            }
        }
    };
}

impl_count!(std::sync::atomic::AtomicU32);
#[cfg(loom)]
impl_count!(loom::sync::atomic::AtomicU32);

/// One predecessor of the count's node finished: whether it was the last,
/// so that the node is ready. `exclusive`: no other thread touches the
/// graph in this run (a pool with one worker slot), so plain loads and
/// stores do.
#[inline(always)]
pub(crate) fn arrive(count: &impl Count, exclusive: bool) -> bool {
    use std::sync::atomic::Ordering;
    if exclusive {
        let left = count.load(Ordering::Relaxed);
        if left != 1 {
            count.store(left - 1, Ordering::Relaxed);
        }
        left == 1
    } else {
        count.load(Ordering::Acquire) == 1 || count.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

/// Whether a node with this in-degree must restore its count when it
/// starts: with one predecessor (or none) it was never written.
#[inline(always)]
pub(crate) fn needs_reset(in_degree: u32) -> bool {
    in_degree > 1
}
