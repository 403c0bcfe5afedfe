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
//! Invariants: only worker `k` pops mailbox `k`, sets its idle flag and
//! bumps its count (single writer: a relaxed load and store suffice).

use crate::job::JobRef;
use crate::ring_queue::RingQueue;
use crate::sync::{AtomicBool, AtomicU64, Ordering};

pub(crate) struct Mailbox {
    /// A ring first: pushing allocates nothing in steady state.
    queue: RingQueue<JobRef>,
    /// Entries the owner has taken so far.
    taken: AtomicU64,
    /// The owner is searching for work or asleep (or not started yet).
    idle: AtomicBool,
}

impl Default for Mailbox {
    fn default() -> Self {
        Mailbox {
            queue: RingQueue::new(64),
            taken: AtomicU64::new(0),
            // A worker that has not started yet will look here first. From
            // its first wait on, the flag is set only while it searches.
            idle: AtomicBool::new(true),
        }
    }
}

impl Mailbox {
    pub(crate) fn push(&self, job: JobRef) {
        self.queue.push(job);
    }

    /// Owner only.
    #[inline]
    pub(crate) fn pop(&self) -> Option<JobRef> {
        let job = self.queue.pop()?;
        self.taken
            .store(self.taken.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        Some(job)
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
        self.queue.is_empty()
    }
}
