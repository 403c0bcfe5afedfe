//! An MPMC FIFO that does not allocate in steady state: a preallocated ring
//! (crossbeam's `ArrayQueue`) with an unbounded `SegQueue` behind it for
//! bursts. The shared-queue lanes and the mailboxes use it, so that pushing
//! to them (a graph run started from outside the pool, enqueued nodes,
//! affinity) costs no allocation once warm; a `SegQueue` alone allocates a
//! block every 31 pushes.
//!
//! Order: while the overflow is empty, pushes go to the ring; once it is
//! not, they go to the overflow, which is drained only after the ring. So
//! everything in the ring is older than everything in the overflow, up to
//! pushes racing with the switch (a push may land in the ring just after
//! another went to the overflow): approximately FIFO, as the shared queue
//! promises. Invariant: nothing is lost; `is_empty` is exact when no push or
//! pop runs concurrently.

use crossbeam_queue::{ArrayQueue, SegQueue};

pub(crate) struct RingQueue<T> {
    ring: ArrayQueue<T>,
    overflow: SegQueue<T>,
}

impl<T> RingQueue<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        RingQueue {
            ring: ArrayQueue::new(capacity.max(1)),
            overflow: SegQueue::new(),
        }
    }

    #[inline]
    pub(crate) fn push(&self, item: T) {
        if self.overflow.is_empty() {
            match self.ring.push(item) {
                Ok(()) => {}
                Err(item) => self.overflow.push(item),
            }
        } else {
            self.overflow.push(item);
        }
    }

    #[inline]
    pub(crate) fn pop(&self) -> Option<T> {
        self.ring.pop().or_else(|| self.overflow.pop())
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.ring.is_empty() && self.overflow.is_empty()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::RingQueue;

    #[test]
    fn keeps_fifo_order_across_the_overflow() {
        let q = RingQueue::new(4);
        for i in 0..10 {
            q.push(i);
        }
        // Ring 0..4, overflow 4..10; a push now still goes behind.
        assert_eq!(q.pop(), Some(0));
        q.push(10);
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, (1..=10).collect::<Vec<_>>());
        assert!(q.is_empty());
    }
}
