//! A queue of jobs that a waiter can search by key: the job's isolation
//! region (`region.rs`), or the nested wait whose work it is
//! (`SharedQueueFlag` in `shared_queue.rs`).
//!
//! The lock-free queues (shared-queue lanes, mailboxes) cannot be searched
//! without taking items out, and a wait that may take only some jobs (an
//! isolated wait, a nested wait) must find its own among others, and tell,
//! in the sleep protocol's final check, whether one is there, without
//! disturbing anybody. So such jobs go here instead: a locked deque,
//! searched in place. They are rare (an `install` into another pool, an
//! `enqueue` or an affinity spawn made inside `isolate` or inside a nested
//! run), and the lock is never touched while the queue is empty: `len`
//! answers first.
//!
//! Invariants: `len` equals the deque's length whenever the lock is free;
//! jobs leave in FIFO order among those a taker may take.

use crate::platform::sync::{AtomicUsize, Mutex, Ordering};
use crate::queues::job::{JobRef, Runner};
use crate::queues::region::Region;
use std::collections::VecDeque;

pub(crate) struct RegionQueue<W> {
    jobs: Mutex<VecDeque<(u64, JobRef<W>)>>,
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
    /// Push a job keyed by its own isolation region.
    pub(crate) fn push(&self, job: JobRef<W>) {
        self.push_keyed(job.region().to_bits(), job);
    }

    /// Push a job under `key` (a region's number, or a wait's key: both
    /// come from one counter, so they never collide).
    pub(crate) fn push_keyed(&self, key: u64, job: JobRef<W>) {
        let mut jobs = self.jobs.lock();
        jobs.push_back((key, job));
        // SeqCst: read by the sleep protocol's final check after fence F2.
        self.len.store(jobs.len(), Ordering::SeqCst);
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len.load(Ordering::SeqCst) == 0
    }

    /// The oldest job, whatever its key.
    pub(crate) fn pop_any(&self) -> Option<JobRef<W>> {
        if self.is_empty() {
            return None;
        }
        let mut jobs = self.jobs.lock();
        let job = jobs.pop_front();
        self.len.store(jobs.len(), Ordering::SeqCst);
        job.map(|(_, job)| job)
    }

    /// The oldest job of `region`.
    pub(crate) fn pop_region(&self, region: Region) -> Option<JobRef<W>> {
        self.pop_key(region.to_bits())
    }

    /// The oldest job under `key`.
    pub(crate) fn pop_key(&self, key: u64) -> Option<JobRef<W>> {
        if self.is_empty() {
            return None;
        }
        let mut jobs = self.jobs.lock();
        let at = jobs.iter().position(|&(k, _)| k == key)?;
        let job = jobs.remove(at);
        self.len.store(jobs.len(), Ordering::SeqCst);
        job.map(|(_, job)| job)
    }

    /// Is a job of `region` waiting? (Looks, takes nothing.)
    pub(crate) fn has_region(&self, region: Region) -> bool {
        self.has_key(region.to_bits())
    }

    /// Is a job under `key` waiting? (Looks, takes nothing.)
    pub(crate) fn has_key(&self, key: u64) -> bool {
        !self.is_empty() && self.jobs.lock().iter().any(|&(k, _)| k == key)
    }

    /// Is a job of another region than `region` waiting?
    pub(crate) fn has_other_than(&self, region: Region) -> bool {
        self.has_other_key_than(region.to_bits())
    }

    /// Is a job under another key than `key` waiting?
    pub(crate) fn has_other_key_than(&self, key: u64) -> bool {
        !self.is_empty() && self.jobs.lock().iter().any(|&(k, _)| k != key)
    }
}
