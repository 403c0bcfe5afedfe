//! The one way into a wait: every blocking call of the API (`install`,
//! `Pool::run`, running a graph or a pipeline, a loop, `join` and `scope`
//! from outside a pool) passes what it starts to `Registry::enter`, which
//! decides where the caller is and runs the start and the wait there.
//!
//! | the caller is                    | what happens                                   |
//! |----------------------------------|------------------------------------------------|
//! | a worker of this pool            | it starts and waits as itself (`on_worker`)    |
//! | a worker of another pool         | an entry job runs `on_worker` on one of ours; the caller waits by working on its own pool, woken across the pools |
//! | outside every pool, 0 threads    | it becomes the pool's guest worker for the call |
//! | outside every pool               | `blocking_outside`: by default an entry job, the caller blocked on a lock latch |
//!
//! A call that can start its work without a worker (a graph's roots, a
//! pipeline's tokens, a run's tasks) overrides `blocking_outside` to inject it
//! straight into the shared queue and block; the rest go through an entry
//! job.
//!
//! Invariants: an entry job's closure and result live on the caller's
//! frame, which returns only after the job's latch is set; every wait of a
//! pool takes the shared queue's entry lane, so pools that call into each
//! other (`a.install(|| b.install(|| a.install(..)))`) never deadlock. A
//! panic in the work is resumed in the caller.

use crate::platform::latch::CountLatch;
use crate::queues::deque::Worker;
use crate::queues::job::StackJob;
use crate::queues::region;
use crate::worker::group::Group;
use crate::worker::thread::{GUEST_STACK_BUDGET, JobRef, Registry, WorkerGuard, WorkerThread};
use std::sync::Arc;

/// What a blocking call starts and waits for, in the two shapes a caller
/// can be in (see the module documentation).
pub(crate) trait Entry: Send + Sized {
    type Output: Send;

    /// Start and wait as `worker`, a worker of the pool: the caller
    /// itself, the guest, or the worker that runs the entry job.
    fn on_worker(self, worker: &WorkerThread) -> Self::Output;

    /// Start and wait from a thread outside every pool, blocking. By
    /// default through an entry job, which a worker runs by `on_worker`.
    fn blocking_outside(self, registry: &Arc<Registry>) -> Self::Output {
        registry.in_worker_cold(move |worker| self.on_worker(worker))
    }
}

/// A worker's cancel context (`WorkerThread::cancel_context`), handed to
/// the worker of another pool that runs a cross-pool entry.
#[derive(Clone, Copy)]
struct CancelContext(*const Group);

// SAFETY: the group is only read (its cancel flags, atomics), and it
// outlives the entry: it belongs to the task or body the calling worker
// is running, which waits in `in_worker_cross` until the entry is done.
unsafe impl Send for CancelContext {}

/// A closure to run on a worker (`install`): the plain entry. From
/// outside every pool its entry job wakes one sleeper, or, for a parallel
/// loop (`wake_all`), every sleeper at once: the loop will cut work for
/// all of them, and woken together they are searching when the first cut
/// lands, instead of each waiting for the wake-up of the one before (the
/// entry wakes one worker, whose first cut wakes the next).
struct OnAWorker<F> {
    f: F,
    wake_all: bool,
}

impl<R: Send, F: FnOnce(&WorkerThread) -> R + Send> Entry for OnAWorker<F> {
    type Output = R;

    fn on_worker(self, worker: &WorkerThread) -> R {
        (self.f)(worker)
    }

    fn blocking_outside(self, registry: &Arc<Registry>) -> R {
        let wake = if self.wake_all {
            registry.num_threads()
        } else {
            1
        };
        registry.in_worker_cold_waking(move |worker| self.on_worker(worker), wake)
    }
}

impl Registry {
    /// Run `entry` where the caller is (see the module documentation).
    pub(crate) fn enter<E: Entry>(self: &Arc<Self>, entry: E) -> E::Output {
        match WorkerThread::current() {
            Some(worker) if Arc::ptr_eq(worker.registry(), self) => entry.on_worker(worker),
            Some(foreign) => self.in_worker_cross(foreign, move |worker| entry.on_worker(worker)),
            None if self.num_threads() == 0 => {
                self.with_guest(move |worker| entry.on_worker(worker))
            }
            None => entry.blocking_outside(self),
        }
    }

    /// Run `f` on a worker of this pool and return its result, waiting
    /// where the caller is (`enter`). A panic in `f` is resumed here.
    pub(crate) fn in_worker<R, F>(self: &Arc<Self>, f: F) -> R
    where
        F: FnOnce(&WorkerThread) -> R + Send,
        R: Send,
    {
        self.enter(OnAWorker { f, wake_all: false })
    }

    /// `in_worker` for a parallel loop: from outside every pool, the
    /// entry wakes every sleeper (`OnAWorker::wake_all`).
    pub(crate) fn in_worker_for_loop<R, F>(self: &Arc<Self>, f: F) -> R
    where
        F: FnOnce(&WorkerThread) -> R + Send,
        R: Send,
    {
        self.enter(OnAWorker { f, wake_all: true })
    }

    /// `f` from a worker of another pool: it keeps running its own pool's
    /// work (entries at any depth) until our worker sets its latch, which
    /// wakes it across the pools.
    fn in_worker_cross<R, F>(self: &Arc<Self>, foreign: &WorkerThread, f: F) -> R
    where
        F: FnOnce(&WorkerThread) -> R + Send,
        R: Send,
    {
        let latch = CountLatch::for_worker(foreign.registry().wake_owner(foreign.index()));
        // The caller's cancel context goes along: a scope or run that `f`
        // opens on our pool is a child of the one the caller works for,
        // so a cancel reaches it across the pools.
        let context = CancelContext(foreign.cancel_context());
        let job = StackJob::new(
            move || {
                let context = context;
                let worker = WorkerThread::current().expect("run by a worker");
                worker.with_cancel_context(context.0, || f(worker))
            },
            latch,
        );
        // SAFETY: `job` stays on this frame until its latch is set: the wait
        // below returns only then.
        let job_ref = unsafe { job.as_job_ref(foreign.region()) };
        self.inject_entry(job_ref);
        let core = job.latch().as_core().expect("a worker's latch");
        foreign.wait_until(core, None);
        job.into_result()
    }

    /// `f` from a thread outside every pool, as an entry job: block until
    /// done.
    fn in_worker_cold<R, F>(self: &Arc<Self>, f: F) -> R
    where
        F: FnOnce(&WorkerThread) -> R + Send,
        R: Send,
    {
        self.in_worker_cold_waking(f, 1)
    }

    /// `in_worker_cold`, waking up to `workers` sleepers for the entry.
    fn in_worker_cold_waking<R, F>(self: &Arc<Self>, f: F, workers: usize) -> R
    where
        F: FnOnce(&WorkerThread) -> R + Send,
        R: Send,
    {
        let job = StackJob::new(
            || f(WorkerThread::current().expect("run by a worker")),
            CountLatch::for_thread(),
        );
        // SAFETY: `job` stays on this frame until its latch is set.
        let job_ref = unsafe { job.as_job_ref(region::outside_current()) };
        self.inject_entry_waking(job_ref, workers);
        job.latch().wait_blocking();
        job.into_result()
    }

    /// Run `f` with the calling thread as the guest worker of a zero-thread
    /// pool (waiting for the slot if another thread holds it).
    pub(crate) fn with_guest<R>(self: &Arc<Self>, f: impl FnOnce(&WorkerThread) -> R) -> R {
        debug_assert_eq!(self.num_threads(), 0);
        let mut slot = self.guest.lock();
        let deque = slot.take().expect("guest slot held twice");
        let worker = WorkerThread::enter(deque, 0, self.clone(), GUEST_STACK_BUDGET);
        // Put the deque back even if `f` panics.
        struct Restore<'a> {
            worker: Option<WorkerGuard>,
            slot: &'a mut Option<Worker<JobRef>>,
        }
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                if let Some(worker) = self.worker.take() {
                    *self.slot = Some(worker.leave());
                }
            }
        }
        let result = {
            let restore = Restore {
                worker: Some(worker),
                slot: &mut slot,
            };
            f(restore.worker.as_deref().expect("guest worker present"))
        };
        drop(slot);
        // Work the caller left behind (spawned or enqueued while it was the
        // guest) must not wait for the next caller: hand it to a drainer.
        if self.guest_has_work() {
            self.start_drainer_if_needed();
        }
        result
    }
}
