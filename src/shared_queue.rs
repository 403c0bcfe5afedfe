//! The shared enqueue queue (rule 5): fair, approximately FIFO, scalable.
//!
//! As in oneTBB, the queue is a set of lanes, each a lock-free FIFO
//! (`RingQueue`: a preallocated ring with an unbounded queue behind it, so
//! pushing allocates nothing in steady state). There is one lane per worker slot. A thread
//! always pushes into its own *home lane*: worker `i` into lane `i`, and a
//! thread outside the pool into a lane picked once per thread, round robin.
//! A worker pops from its home lane first, then from the others in order.
//!
//! Ordering guarantee (documented in the crate docs): tasks enqueued by one
//! thread land in one lane and leave it in the order they were enqueued, so
//! a single worker starts them in FIFO order; with several workers, tasks of
//! one lane start in FIFO order but may finish in any order, and tasks from
//! different lanes are only approximately ordered. Every enqueued task is
//! eventually taken: idle workers scan every lane before they sleep, and the
//! sleep protocol's final check looks at every lane.

use crate::job::JobRef;
use crate::ring_queue::RingQueue;
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Tasks a lane holds before it spills into its unbounded part.
const LANE_RING: usize = 256;

pub(crate) struct SharedQueue {
    lanes: Box<[CachePadded<RingQueue<JobRef>>]>,
    next_outside_lane: AtomicUsize,
}

thread_local! {
    /// The lane an outside thread pushes into, per queue (keyed by address).
    static OUTSIDE_LANE: Cell<(usize, usize)> = const { Cell::new((0, usize::MAX)) };
}

impl SharedQueue {
    pub(crate) fn new(num_lanes: usize) -> Self {
        SharedQueue {
            lanes: (0..num_lanes.max(1))
                .map(|_| CachePadded::new(RingQueue::new(LANE_RING)))
                .collect(),
            next_outside_lane: AtomicUsize::new(0),
        }
    }

    /// The home lane of the calling thread: its worker index, or a lane
    /// assigned to this outside thread the first time it pushes.
    fn home_lane(&self, worker: Option<usize>) -> usize {
        if let Some(index) = worker {
            return index % self.lanes.len();
        }
        let me = self as *const Self as usize;
        OUTSIDE_LANE.with(|cell| {
            let (queue, lane) = cell.get();
            if queue == me && lane != usize::MAX {
                lane
            } else {
                let lane =
                    self.next_outside_lane.fetch_add(1, Ordering::Relaxed) % self.lanes.len();
                cell.set((me, lane));
                lane
            }
        })
    }

    /// Push at the back of the caller's home lane. Returns whether that lane
    /// was empty before (a hint for how many sleepers to wake).
    pub(crate) fn push(&self, job: JobRef, worker: Option<usize>) -> bool {
        let lane = &self.lanes[self.home_lane(worker)];
        let was_empty = lane.is_empty();
        lane.push(job);
        was_empty
    }

    /// Pop approximately the oldest task: the front of the home lane, else
    /// the front of the next non-empty lane.
    #[inline]
    pub(crate) fn pop(&self, worker: usize) -> Option<JobRef> {
        let n = self.lanes.len();
        let home = worker % n;
        (0..n).find_map(|k| self.lanes[(home + k) % n].pop())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.lanes.iter().all(|lane| lane.is_empty())
    }
}
