//! Per-worker FIFOs: the indirection of the Rayon RFC on FIFO scopes.
//!
//! `scope_fifo` keeps one [`WorkerFifo`] per worker slot and scope, the pool
//! one per worker for `Pool::spawn_fifo`. Spawning pushes the real job onto
//! the spawning worker's FIFO and an *indirect* job onto its deque; running
//! an indirect job (by its worker, rule 3, or a thief, rule 6) runs the
//! front of the FIFO it points at. So each worker starts its own spawns
//! oldest first, and a thief that takes one continues with what that task
//! spawns before it comes back for more.
//!
//! A FIFO is a crossbeam deque of the FIFO flavour: only its owner pushes
//! (a plain store, no CAS, no per-block allocation as in a `SegQueue`) and
//! pops the front; everyone else steals the front. Invariants: only the
//! worker whose index is `owner` (the one thread holding that slot; a guest
//! slot is held by one thread at a time) touches `local`; there is exactly
//! one indirect job per real job, pushed after it, so a FIFO is never empty
//! when an indirect job for it runs.

use crate::queues::deque::{Steal, Stealer, Worker};
use crate::queues::job::{JobRef, Next, Runner};
use std::cell::UnsafeCell;
use std::ptr::NonNull;

pub(crate) struct WorkerFifo<W> {
    owner: usize,
    /// The owner's end; touched only by worker `owner`.
    local: UnsafeCell<Worker<JobRef<W>>>,
    stealer: Stealer<JobRef<W>>,
}

// SAFETY: `local` is only used by the one thread that is worker `owner`
// (checked at each use against the running worker's index); everything
// else goes through the `Stealer`, which is Sync.
unsafe impl<W> Sync for WorkerFifo<W> {}

impl<W: Runner> WorkerFifo<W> {
    pub(crate) fn new(owner: usize) -> Self {
        let local = Worker::new_fifo();
        let stealer = local.stealer();
        WorkerFifo {
            owner,
            local: UnsafeCell::new(local),
            stealer,
        }
    }

    /// Put `job` behind the earlier FIFO spawns of worker `pusher`, and
    /// return the indirect job for it, which the caller pushes onto that
    /// worker's deque.
    ///
    /// # Safety
    /// The caller is worker `owner` of the registry whose workers will run
    /// the indirect job, and `self` outlives that job's execution (its
    /// owner waits for the real job, or owns the FIFO for good).
    #[must_use = "the indirect job goes onto the owner's deque"]
    pub(crate) unsafe fn push(&self, pusher: usize, job: JobRef<W>) -> JobRef<W> {
        assert_eq!(pusher, self.owner, "a FIFO is pushed by its owner");
        let region = job.region();
        // SAFETY: we are worker `owner`, the only user of `local`.
        unsafe { (*self.local.get()).push(job) };
        // SAFETY: the caller keeps `self` alive for the indirect job. It
        // carries the real job's region: a FIFO only ever holds jobs of
        // one region at a time (callers push only in the job's region).
        unsafe { JobRef::new(NonNull::from(self).cast(), run_front::<W>, region) }
    }

    /// The oldest job, for the indirect job that `worker` runs.
    fn take_front(&self, worker: &W) -> JobRef<W> {
        if worker.index() == self.owner {
            // SAFETY: we are worker `owner`, the only user of `local`.
            let local = unsafe { &*self.local.get() };
            return local.pop().expect("one FIFO job per indirect job");
        }
        loop {
            match self.stealer.steal() {
                Steal::Success(job) => return job,
                // Lost a race with another claimer: ours is still there.
                Steal::Retry => std::hint::spin_loop(),
                Steal::Empty => unreachable!("one FIFO job per indirect job"),
            }
        }
    }
}

/// The indirect job: run the front of the FIFO it points at.
unsafe fn run_front<W: Runner>(fifo: NonNull<()>, worker: &W) -> Option<Next<W>> {
    // SAFETY: made by `WorkerFifo::push`, whose caller keeps the FIFO alive
    // until this job ran; indirect jobs of a pool run only on its workers.
    let fifo = unsafe { fifo.cast::<WorkerFifo<W>>().as_ref() };
    let job = fifo.take_front(worker);
    // SAFETY: claimed once (popped or stolen), so run once.
    unsafe { job.execute(worker) }
}
