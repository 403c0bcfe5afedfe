//! The shared enqueue queue (rule 5): fair, approximately FIFO, scalable.
//!
//! As in oneTBB, the queue is a set of lanes, each a lock-free FIFO
//! (`RingQueue`: a preallocated ring with an unbounded queue behind it, so
//! pushing allocates nothing in steady state). There is one lane per worker slot. A thread
//! always pushes into its own *home lane*: worker `i` into lane `i`, and a
//! thread outside the pool into a lane picked once per thread, round robin.
//! A worker starts each pop at the lane after the one its previous pop
//! started at (its home lane first), then tries the others in order: no
//! lane waits behind another that is never empty.
//!
//! Two more lanes sit beside them, because not every wait may take every
//! enqueued task (`worker::WaitAccess`):
//!
//! * the *entry* lane holds the jobs that a thread outside the pool blocks
//!   on (`install`, and through it `join`, `scope`, `run` from a worker of
//!   another pool). Any wait of the pool may take them, nested or not: a
//!   worker of pool A waiting on pool B may hold the very worker B's job
//!   needs back in A (`a.install(|| b.install(|| a.install(..)))`).
//! * the *isolated* lane (`RegionQueue`) holds every job of an isolated
//!   region that comes here (an entry, an enqueue, a spawn from outside),
//!   so that an isolated wait can find its own without taking others'.
//! * the *kept-apart* lane (a `RegionQueue` too) holds the enqueued tasks
//!   of work that a nested wait waits for (`Pool::run`, `run_graph`,
//!   `run_pipeline` inside a task), keyed by that wait
//!   (`SharedQueueFlag::keep_apart`). The nested wait takes its own from
//!   here, and never from the lanes: tasks enqueued before it, unrelated
//!   to it, stay for workers at their outermost level, as the crate docs
//!   promise. Workers at their outermost level take from it as from the
//!   entry lane: a thread waits on every job in it.
//!
//! Ordering guarantee (documented in the crate docs): tasks enqueued by one
//! thread land in one lane and leave it in the order they were enqueued, so
//! a single worker starts them in FIFO order; with several workers, tasks of
//! one lane start in FIFO order but may finish in any order, and tasks from
//! different lanes are only approximately ordered. Every enqueued task is
//! eventually taken: idle workers scan every lane before they sleep, and the
//! sleep protocol's final check looks at every lane.

use crate::platform::sync::{AtomicBool, AtomicU64};
use crate::queues::dispatch::{Priority, SharedPlace};
use crate::queues::job::{JobRef, Runner};
use crate::queues::region::Region;
use crate::queues::region_queue::RegionQueue;
use crate::queues::ring_queue::RingQueue;
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Tasks a lane holds before it spills into its unbounded part.
const LANE_RING: usize = 256;
/// Blocking entries waiting at once before the entry lane spills.
const ENTRY_RING: usize = 64;

pub(crate) struct SharedQueue<W> {
    lanes: Box<[CachePadded<RingQueue<JobRef<W>>>]>,
    /// Enqueued tasks of high and of low priority: one lane each (they are
    /// rare), taken before and after the normal lanes.
    high: CachePadded<RingQueue<JobRef<W>>>,
    low: CachePadded<RingQueue<JobRef<W>>>,
    /// Tasks waiting in `high` and `low`: one load tells a worker that
    /// there are none (the common case). Raised before a push, lowered
    /// after a pop.
    prioritized: AtomicUsize,
    /// Jobs a thread outside the pool blocks on (region `NONE`).
    entries: CachePadded<RingQueue<JobRef<W>>>,
    /// Jobs of isolated regions, searchable by region.
    isolated: RegionQueue<W>,
    /// Enqueued tasks of nested waits' work, searchable by wait.
    kept_apart: RegionQueue<W>,
    /// Entries plus isolated jobs waiting: one load tells a searching
    /// worker that there are none (the common case), without touching the
    /// two queues' lines. Raised before a push, lowered after a pop.
    special: AtomicUsize,
    next_outside_lane: AtomicUsize,
}

thread_local! {
    /// The lane an outside thread pushes into, per queue (keyed by address).
    static OUTSIDE_LANE: Cell<(usize, usize)> = const { Cell::new((0, usize::MAX)) };
}

impl<W: Runner> SharedQueue<W> {
    pub(crate) fn new(num_lanes: usize) -> Self {
        SharedQueue {
            lanes: (0..num_lanes.max(1))
                .map(|_| CachePadded::new(RingQueue::new(LANE_RING)))
                .collect(),
            high: CachePadded::new(RingQueue::new(ENTRY_RING)),
            low: CachePadded::new(RingQueue::new(ENTRY_RING)),
            prioritized: AtomicUsize::new(0),
            entries: CachePadded::new(RingQueue::new(ENTRY_RING)),
            isolated: RegionQueue::default(),
            kept_apart: RegionQueue::default(),
            special: AtomicUsize::new(0),
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

    /// Push at the back of the caller's home lane (a job of an isolated
    /// region: the isolated lane; of a nested wait's work, `wait_key` not
    /// zero: the kept-apart lane). Returns whether that lane was empty
    /// before (a hint for how many sleepers to wake).
    pub(crate) fn push(&self, job: JobRef<W>, worker: Option<usize>, place: SharedPlace) -> bool {
        if job.region().is_isolated() {
            return self.push_isolated(job);
        }
        if place.wait_key != 0 {
            return self.push_kept_apart(place.wait_key, job);
        }
        let lane = match place.priority {
            Priority::Normal => &self.lanes[self.home_lane(worker)],
            Priority::High => return self.push_prioritized(&self.high, job),
            Priority::Low => return self.push_prioritized(&self.low, job),
        };
        let was_empty = lane.is_empty();
        lane.push(job);
        was_empty
    }

    /// Push a job that a thread outside the pool blocks on.
    pub(crate) fn push_entry(&self, job: JobRef<W>) -> bool {
        if job.region().is_isolated() {
            return self.push_isolated(job);
        }
        let was_empty = self.entries.is_empty();
        self.special.fetch_add(1, Ordering::SeqCst);
        self.entries.push(job);
        was_empty
    }

    #[cold]
    fn push_isolated(&self, job: JobRef<W>) -> bool {
        let was_empty = self.isolated.is_empty();
        self.special.fetch_add(1, Ordering::SeqCst);
        self.isolated.push(job);
        was_empty
    }

    #[cold]
    fn push_prioritized(&self, lane: &RingQueue<JobRef<W>>, job: JobRef<W>) -> bool {
        let was_empty = lane.is_empty();
        // SeqCst: read by the sleep protocol's final check after fence F2.
        self.prioritized.fetch_add(1, Ordering::SeqCst);
        lane.push(job);
        was_empty
    }

    /// The front of a priority lane, if any task waits in one.
    #[inline]
    fn pop_prioritized(&self, lane: &RingQueue<JobRef<W>>) -> Option<JobRef<W>> {
        if self.prioritized.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let job = lane.pop()?;
        self.prioritized.fetch_sub(1, Ordering::SeqCst);
        Some(job)
    }

    #[cold]
    fn push_kept_apart(&self, wait_key: u64, job: JobRef<W>) -> bool {
        let was_empty = self.kept_apart.is_empty();
        self.kept_apart.push_keyed(wait_key, job);
        was_empty
    }

    /// Is an entry or an isolated region's job (perhaps) waiting? Exact
    /// when nobody pushes or pops at the same time.
    #[inline]
    fn has_special(&self) -> bool {
        self.special.load(Ordering::SeqCst) != 0
    }

    /// One special job was taken.
    #[inline]
    fn took_special(&self, job: Option<JobRef<W>>) -> Option<JobRef<W>> {
        if job.is_some() {
            self.special.fetch_sub(1, Ordering::SeqCst);
        }
        job
    }

    /// Pop approximately the oldest task, for a wait that may take any:
    /// an entry first (a thread is blocked on it), else the front of lane
    /// `start`, else the front of the next non-empty lane.
    #[inline]
    pub(crate) fn pop(&self, start: usize) -> Option<JobRef<W>> {
        self.pop_entry().or_else(|| self.pop_lanes(start))
    }

    /// The oldest entry, or job of an isolated region, whatever its region.
    #[inline]
    pub(crate) fn pop_entry(&self) -> Option<JobRef<W>> {
        if !self.has_special() {
            return None;
        }
        self.took_special(self.entries.pop().or_else(|| self.isolated.pop_any()))
    }

    /// For a worker at its outermost level: the oldest task kept apart for
    /// a nested wait (that wait's thread is blocked on it), else the front
    /// of lane `start`, else of the next non-empty lane. Callers move
    /// `start` on with every pop: starting at one home lane each time, a
    /// worker whose tasks re-enqueue themselves there never reached the
    /// other lanes, and a task enqueued from elsewhere waited as long as
    /// that went on (an enqueue must run eventually).
    #[inline]
    pub(crate) fn pop_lanes(&self, start: usize) -> Option<JobRef<W>> {
        if let Some(job) = self.kept_apart.pop_any() {
            return Some(job);
        }
        if let Some(job) = self.pop_prioritized(&self.high) {
            return Some(job);
        }
        let n = self.lanes.len();
        let first = start % n;
        (0..n)
            .find_map(|k| self.lanes[(first + k) % n].pop())
            .or_else(|| self.pop_prioritized(&self.low))
    }

    /// For the nested wait `wait_key`: the oldest of its own enqueued
    /// tasks.
    #[inline]
    pub(crate) fn pop_kept_apart(&self, wait_key: u64) -> Option<JobRef<W>> {
        self.kept_apart.pop_key(wait_key)
    }

    /// Is one of nested wait `wait_key`'s tasks waiting? (For its final
    /// check before sleeping.)
    pub(crate) fn has_kept_apart(&self, wait_key: u64) -> bool {
        self.kept_apart.has_key(wait_key)
    }

    /// The oldest job of isolated region `region`.
    pub(crate) fn pop_region(&self, region: Region) -> Option<JobRef<W>> {
        if !self.has_special() {
            return None;
        }
        self.took_special(self.isolated.pop_region(region))
    }

    /// Is a job of `region` waiting? (For an isolated wait's final check.)
    pub(crate) fn has_region(&self, region: Region) -> bool {
        self.isolated.has_region(region)
    }

    /// Work an isolated wait of `region` may not take: anything in the
    /// lanes or entries, or another region's job.
    pub(crate) fn has_work_outside(&self, region: Region) -> bool {
        !self.entries.is_empty() || !self.lanes_empty() || self.isolated.has_other_than(region)
    }

    /// Is an entry (or an isolated region's job) waiting?
    #[inline]
    pub(crate) fn has_entries(&self) -> bool {
        self.has_special()
    }

    fn lanes_empty(&self) -> bool {
        self.kept_apart.is_empty()
            && self.prioritized.load(Ordering::SeqCst) == 0
            && self.lanes.iter().all(|lane| lane.is_empty())
    }

    /// Is an enqueued task (not an entry) waiting?
    pub(crate) fn has_lane_work(&self) -> bool {
        !self.lanes_empty()
    }

    /// Is an enqueued task waiting that the nested wait `wait_key` may not
    /// take (in the lanes, or kept apart for another wait)?
    pub(crate) fn has_lane_work_outside(&self, wait_key: u64) -> bool {
        self.kept_apart.has_other_key_than(wait_key)
            || self.prioritized.load(Ordering::SeqCst) != 0
            || self.lanes.iter().any(|l| !l.is_empty())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.lanes_empty() && !self.has_entries()
    }
}

/// What a wait knows of its work's way through the shared queue: whether
/// any of it went there, and, for a nested wait, the key its enqueued tasks
/// are kept apart under.
///
/// Set before any of the work is submitted (`keep_apart`) and noted before
/// each push to the shared queue (`note`): a nested wait takes rule 5 for
/// its own tasks only (the kept-apart lane, by key), or it could wait for
/// a task only it would run (a one-worker pool), yet must not take tasks
/// enqueued before it by unrelated work.
pub(crate) struct SharedQueueFlag {
    used: AtomicBool,
    /// 0: the work's tasks go to the lanes (its wait is at a worker's
    /// outermost level, or outside the pool); else the kept-apart key.
    wait_key: AtomicU64,
}

impl SharedQueueFlag {
    pub(crate) fn new() -> Self {
        SharedQueueFlag {
            used: AtomicBool::new(false),
            wait_key: AtomicU64::new(0),
        }
    }

    /// Before the work is submitted: keep its enqueued tasks apart, under
    /// a key of their own, if its wait is nested.
    pub(crate) fn keep_apart(&self, nested: bool) {
        let key = if nested { Region::fresh().to_bits() } else { 0 };
        self.wait_key.store(key, Ordering::Relaxed);
    }

    /// The key the work's enqueued tasks are kept apart under (0: none).
    #[inline]
    pub(crate) fn wait_key(&self) -> u64 {
        self.wait_key.load(Ordering::Relaxed)
    }

    /// Some of the work is about to go to the shared queue. Call before the
    /// push, so a waiter that sees the task sees the flag too. Returns where
    /// to push it: its kept-apart lane, or the normal lanes.
    #[inline]
    pub(crate) fn note(&self) -> SharedPlace {
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::SeqCst);
        }
        SharedPlace::kept_apart(self.wait_key())
    }

    /// For work that starts over (a graph's next run): unused, and not
    /// kept apart until `keep_apart` says so again.
    pub(crate) fn reset(&self) {
        self.used.store(false, Ordering::Relaxed);
        self.wait_key.store(0, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn is_set(&self) -> bool {
        self.used.load(Ordering::SeqCst)
    }
}
