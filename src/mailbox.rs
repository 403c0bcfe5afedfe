//! Per-worker mailboxes (rule 4): tasks with affinity for one worker.
//!
//! A mailbox is a FIFO that any thread may push to and only its owner pops
//! from. A push is followed by a targeted wake of the owner
//! (`Sleep::new_mailbox_job`), so a task with affinity never waits for a
//! sleeping owner. Invariant: only worker `k` pops mailbox `k`.

use crate::job::JobRef;
use crossbeam_queue::SegQueue;

#[derive(Default)]
pub(crate) struct Mailbox {
    queue: SegQueue<JobRef>,
}

impl Mailbox {
    pub(crate) fn push(&self, job: JobRef) {
        self.queue.push(job);
    }

    /// Owner only.
    #[inline]
    pub(crate) fn pop(&self) -> Option<JobRef> {
        self.queue.pop()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}
