//! Per-worker mailboxes (rule 4): tasks with affinity for one worker.
//!
//! A mailbox is a FIFO that any thread may push to and only its owner pops
//! from. A push from another thread is followed by a targeted wake of the
//! owner if anyone sleeps (`Sleep::new_mailbox_job`), so a task with
//! affinity never waits for a sleeping owner.
//!
//! It also tells other workers whether its owner will come for a proxy soon
//! (`proxy.rs`): the owner marks itself idle while it searches or sleeps,
//! and counts what it takes.
//!
//! Jobs of an isolated region (`region.rs`) wait in a separate, searchable
//! queue, so that the owner in an isolated wait finds its region's jobs
//! without taking the others'. Jobs with *strict* affinity (`spawn_on`, a
//! broadcast's part, a strictly pinned stage), whatever their region, wait
//! in a third queue that every wait of the owner takes from, isolated ones
//! included: no other worker may run them, so an isolated wait that held
//! them off could wait on them forever (two isolated broadcasts did).
//!
//! Invariants: only worker `k` pops mailbox `k`, sets its idle flag and
//! bumps its count (single writer: a relaxed load and store suffice).

use crate::platform::sync::{AtomicBool, AtomicU64, Ordering};
use crate::queues::job::{JobRef, Runner};
use crate::queues::region::Region;
use crate::queues::region_queue::RegionQueue;
use crate::queues::ring_queue::RingQueue;

pub(crate) struct Mailbox<W> {
    /// A ring first: pushing allocates nothing in steady state.
    queue: RingQueue<JobRef<W>>,
    /// Jobs of isolated regions.
    isolated: RegionQueue<W>,
    /// Jobs with strict affinity, of any region.
    strict: RingQueue<JobRef<W>>,
    /// Entries the owner has taken so far.
    taken: AtomicU64,
    /// The owner is searching for work or asleep (or not started yet).
    idle: AtomicBool,
}

impl<W> Default for Mailbox<W> {
    fn default() -> Self {
        Mailbox {
            queue: RingQueue::new(64),
            isolated: RegionQueue::default(),
            strict: RingQueue::new(8),
            taken: AtomicU64::new(0),
            // A worker that has not started yet will look here first. From
            // its first wait on, the flag is set only while it searches.
            idle: AtomicBool::new(true),
        }
    }
}

/// A look at a mailbox's owner, for a worker deciding whether to claim a
/// proxy of that owner's (`Proxy::should_claim`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct MailboxState {
    pub(crate) progress: u64,
    pub(crate) idle: bool,
}

impl<W: Runner> Mailbox<W> {
    pub(crate) fn push(&self, job: JobRef<W>) {
        if job.region().is_isolated() {
            self.isolated.push(job);
        } else {
            self.queue.push(job);
        }
    }

    /// A job with strict affinity: only the owner ever runs it.
    pub(crate) fn push_strict(&self, job: JobRef<W>) {
        self.strict.push(job);
    }

    /// Owner only: the oldest job, of any region.
    #[inline]
    pub(crate) fn pop(&self) -> Option<JobRef<W>> {
        let job = self
            .queue
            .pop()
            .or_else(|| self.strict.pop())
            .or_else(|| self.isolated.pop_any())?;
        self.count_taken();
        Some(job)
    }

    /// Owner only, in an isolated wait: the oldest job with strict
    /// affinity, of any region.
    pub(crate) fn pop_strict(&self) -> Option<JobRef<W>> {
        let job = self.strict.pop()?;
        self.count_taken();
        Some(job)
    }

    /// Is a job with strict affinity waiting?
    pub(crate) fn has_strict(&self) -> bool {
        !self.strict.is_empty()
    }

    /// Owner only, in an isolated wait: the oldest job of `region`.
    pub(crate) fn pop_region(&self, region: Region) -> Option<JobRef<W>> {
        let job = self.isolated.pop_region(region)?;
        self.count_taken();
        Some(job)
    }

    /// Is a job of `region` waiting?
    pub(crate) fn has_region(&self, region: Region) -> bool {
        self.isolated.has_region(region)
    }

    #[inline]
    fn count_taken(&self) {
        self.taken
            .store(self.taken.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// The owner's progress and whether it is idle (read in that order).
    pub(crate) fn state(&self) -> MailboxState {
        let progress = self.progress();
        MailboxState {
            progress,
            idle: self.is_idle(),
        }
    }

    /// The owner's progress so far, to stamp a proxy with.
    #[inline]
    pub(crate) fn progress(&self) -> u64 {
        self.taken.load(Ordering::Relaxed)
    }

    /// Owner only: it starts searching for work.
    #[inline]
    pub(crate) fn set_idle(&self) {
        self.idle.store(true, Ordering::Relaxed);
    }

    /// Owner only: it stops searching.
    #[inline]
    pub(crate) fn set_busy(&self) {
        self.idle.store(false, Ordering::Relaxed);
    }

    /// Is the owner searching for work or asleep (and so checks its
    /// mailbox next; a push wakes it if asleep)?
    #[inline]
    pub(crate) fn is_idle(&self) -> bool {
        self.idle.load(Ordering::Relaxed)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.strict.is_empty() && self.isolated.is_empty()
    }
}
