//! A queue of jobs from isolated regions that a waiter can search by region.
//!
//! The lock-free queues (shared-queue lanes, mailboxes) cannot be searched
//! without taking items out, and an isolated wait (`region.rs`) must find
//! the jobs of its own region among others, and tell, in the sleep
//! protocol's final check, whether one is there, without disturbing anybody.
//! So jobs of an isolated region that go to the shared queue or a mailbox
//! go here instead: a locked deque, searched in place. Such jobs are rare
//! (an `install` into another pool, an `enqueue` or an affinity spawn made
//! inside `isolate`), and the lock is never touched while the queue is
//! empty: `len` answers first.
//!
//! Invariants: `len` equals the deque's length whenever the lock is free;
//! jobs leave in FIFO order among those a taker may take.

use crate::platform::sync::{AtomicUsize, Mutex, Ordering};
use crate::queues::job::{JobRef, Runner};
use crate::queues::region::Region;
use std::collections::VecDeque;

pub(crate) struct RegionQueue<W> {
    jobs: Mutex<VecDeque<JobRef<W>>>,
    /// Updated under the lock; read without it as a hint.
    len: AtomicUsize,
}

impl<W> Default for RegionQueue<W> {
    fn default() -> Self {
        RegionQueue {
            jobs: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
        }
    }
}

impl<W: Runner> RegionQueue<W> {
    pub(crate) fn push(&self, job: JobRef<W>) {
        let mut jobs = self.jobs.lock();
        jobs.push_back(job);
        // SeqCst: read by the sleep protocol's final check after fence F2.
        self.len.store(jobs.len(), Ordering::SeqCst);
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len.load(Ordering::SeqCst) == 0
    }

    /// The oldest job, whatever its region.
    pub(crate) fn pop_any(&self) -> Option<JobRef<W>> {
        if self.is_empty() {
            return None;
        }
        let mut jobs = self.jobs.lock();
        let job = jobs.pop_front();
        self.len.store(jobs.len(), Ordering::SeqCst);
        job
    }

    /// The oldest job of `region`.
    pub(crate) fn pop_region(&self, region: Region) -> Option<JobRef<W>> {
        if self.is_empty() {
            return None;
        }
        let mut jobs = self.jobs.lock();
        let at = jobs.iter().position(|job| job.region() == region)?;
        let job = jobs.remove(at);
        self.len.store(jobs.len(), Ordering::SeqCst);
        job
    }

    /// Is a job of `region` waiting? (Looks, takes nothing.)
    pub(crate) fn has_region(&self, region: Region) -> bool {
        !self.is_empty() && self.jobs.lock().iter().any(|job| job.region() == region)
    }

    /// Is a job of another region than `region` waiting?
    pub(crate) fn has_other_than(&self, region: Region) -> bool {
        !self.is_empty() && self.jobs.lock().iter().any(|job| job.region() != region)
    }
}
