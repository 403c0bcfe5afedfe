//! The handle of a pool: [`Pool`], `install`, `wait_idle`, what a pool
//! tells about itself, its drop, and `current_worker`.
//!
//! Everything here is a thin, safe layer over the registry; a call that
//! blocks enters the pool by the worker layer's one way into a wait
//! (`Registry::enter`): a worker of the pool keeps working by the six
//! rules, a worker of another pool keeps working on its own, a thread
//! outside every pool sleeps on a lock latch, and on a pool without
//! threads the caller becomes the guest worker.
//!
//! Invariant: a pool's drop runs every `'static` task already submitted
//! before it stops and joins its threads; the global pool is never
//! dropped.

use crate::observe::stats::Stats;
use crate::observe::trace::Trace;
use crate::platform::topology::{CoreInfo, Topology};
use crate::worker::global::global_registry;
use crate::worker::thread::{Registry, WorkerThread};
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

/// A pool of worker threads scheduling task nodes by the six rules.
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let sum = pool.install(|| (1..=10).sum::<u32>());
/// assert_eq!(sum, 55);
/// ```
pub struct Pool {
    registry: Arc<Registry>,
    threads: Vec<JoinHandle<()>>,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("num_threads", &self.num_threads())
            .finish_non_exhaustive()
    }
}

impl Pool {
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The handle of a started registry, joining `threads` on drop.
    pub(crate) fn from_parts(registry: Arc<Registry>, threads: Vec<JoinHandle<()>>) -> Pool {
        Pool { registry, threads }
    }

    /// The global pool, built now if this is its first use (with the
    /// default size: `SIXFOLD_NUM_THREADS`, else one thread per core of the
    /// process's CPU mask), or as [`Builder::build_global`](super::builder::Builder::build_global) configured it.
    ///
    /// # Panics
    /// If it has to be built and the operating system refuses to start its
    /// threads.
    ///
    /// ```
    /// let pool = sixfold::Pool::global();
    /// assert!(pool.num_threads() >= 1);
    /// assert_eq!(pool.install(|| 6 * 7), 42);
    /// ```
    pub fn global() -> &'static Pool {
        static GLOBAL: OnceLock<Pool> = OnceLock::new();
        // Never dropped: the global pool's threads are never joined.
        GLOBAL.get_or_init(|| Pool::from_parts(global_registry().clone(), Vec::new()))
    }

    /// The number of worker threads (0 for a pool that borrows its callers).
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// assert_eq!(pool.num_threads(), 2);
    /// let borrowing = sixfold::Pool::builder().num_threads(0).build().unwrap();
    /// assert_eq!(borrowing.num_threads(), 0);
    /// ```
    pub fn num_threads(&self) -> usize {
        self.registry.num_threads()
    }

    /// The number of worker slots: valid worker indices are
    /// `0..num_workers()`. Equals `num_threads()`, or 1 for a pool without
    /// threads (its guest slot).
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// assert_eq!(pool.num_workers(), 2);
    /// assert!(pool.spawn_with_affinity(pool.num_workers(), || {}).is_err());
    /// let borrowing = sixfold::Pool::builder().num_threads(0).build().unwrap();
    /// assert_eq!(borrowing.num_workers(), 1);
    /// ```
    pub fn num_workers(&self) -> usize {
        self.registry.num_slots()
    }

    /// Run `f` on a worker of this pool and return its result; wait until
    /// then. Inside a worker of this pool, `f` simply runs. A worker of
    /// another pool waits by running its own pool's tasks (and sleeps when
    /// there are none), so pools that call into each other never deadlock;
    /// any other thread blocks. A panic in `f` is resumed here.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let inside = pool.install(|| sixfold::current_worker().is_some());
    /// assert!(inside);
    /// // Pools may call into each other, even with one worker each.
    /// let (a, b) = (
    ///     sixfold::Pool::builder().num_threads(1).build().unwrap(),
    ///     sixfold::Pool::builder().num_threads(1).build().unwrap(),
    /// );
    /// assert_eq!(a.install(|| b.install(|| a.install(|| 1))), 1);
    /// ```
    pub fn install<R, F>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        self.registry.in_worker(|_| f())
    }

    /// Block until every `'static` task spawned or enqueued so far (and all
    /// they spawned) has finished. On a pool without threads, the caller
    /// runs them.
    ///
    /// # Panics
    /// When called from a worker of this same pool: it would wait for the
    /// task it is running.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let done = Arc::new(AtomicUsize::new(0));
    /// for _ in 0..4 {
    ///     let done = done.clone();
    ///     pool.spawn(move || {
    ///         let child = done.clone();
    ///         // From a worker, the free `spawn` goes to this pool too.
    ///         sixfold::spawn(move || { child.fetch_add(1, Ordering::Relaxed); });
    ///         done.fetch_add(1, Ordering::Relaxed);
    ///     });
    /// }
    /// pool.wait_idle();                    // the tasks and what they spawned
    /// assert_eq!(done.load(Ordering::Relaxed), 8);
    /// ```
    pub fn wait_idle(&self) {
        if let Some(worker) = WorkerThread::current_in(&self.registry)
            && crate::worker::lifecycle::is_adopted_here(&self.registry)
            && !worker.in_a_wait()
        {
            // The building thread of a `use_current_thread` pool, outside
            // every task: it works as worker 0 meanwhile.
            let idle = self.registry.static_group.idle_counter();
            worker.help_until(
                || idle.is_zero(),
                || {
                    idle.wait_zero(Some(Duration::from_millis(1)));
                },
            );
            return;
        }
        assert!(
            WorkerThread::current_in(&self.registry).is_none(),
            "Pool::wait_idle called from inside the pool would wait for its own task"
        );
        self.wait_idle_from_outside();
    }

    fn wait_idle_from_outside(&self) {
        let idle = self.registry.static_group.idle_counter();
        if let Some(foreign) = WorkerThread::current() {
            // A worker of another pool keeps its own pool going meanwhile:
            // our tasks may wait for its.
            foreign.help_until(
                || idle.is_zero(),
                || {
                    idle.wait_zero(Some(Duration::from_millis(1)));
                },
            );
            return;
        }
        if self.registry.num_threads() > 0 {
            idle.wait_zero(None);
            return;
        }
        self.registry.with_guest(|worker| {
            loop {
                worker.drain();
                // Whatever is left waits on predecessors elsewhere; look
                // again shortly rather than burn a core.
                if idle.is_zero() || idle.wait_zero(Some(Duration::from_millis(1))) {
                    break;
                }
            }
        });
    }

    /// The trace records since the pool was built or the last take (empty
    /// unless built with [`Builder::trace`](super::builder::Builder::trace)).
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).trace(true).build().unwrap();
    /// pool.install(|| ());
    /// let trace = pool.take_trace();
    /// assert_eq!(trace.tasks.len(), 1);
    /// assert!(pool.take_trace().tasks.is_empty()); // taken: nothing ran since
    /// let untraced = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// untraced.install(|| ());
    /// assert!(untraced.take_trace().tasks.is_empty());
    /// ```
    pub fn take_trace(&self) -> Trace {
        self.registry
            .take_trace(WorkerThread::current_in(&self.registry).is_none())
    }

    /// The topology the pool was built with (detected, or given to
    /// [`Builder::topology`](super::builder::Builder::topology)).
    ///
    /// ```
    /// use sixfold::{Pool, Topology, TopologySource};
    /// let pool = Pool::builder().num_threads(2).build().unwrap();
    /// assert_eq!(pool.topology().num_cores(), Topology::detect().num_cores());
    /// let given = Topology::from_cores(Vec::new()); // no cores given: one, os_index 0
    /// let given = Pool::builder().num_threads(2).topology(given).build().unwrap();
    /// assert_eq!(given.topology().num_cores(), 1);
    /// assert_eq!(given.topology().cores()[0].os_index, 0);
    /// assert_eq!(given.topology().source(), TopologySource::Fallback);
    /// ```
    pub fn topology(&self) -> &Topology {
        self.registry.topology()
    }

    /// The core worker `worker` is bound to, if the pool pins its workers
    /// ([`Pinning::Cores`](crate::platform::topology::Pinning::Cores)); `None` without pinning or for an index the
    /// pool does not have.
    ///
    /// ```
    /// use sixfold::{Pinning, Pool};
    /// let pool = Pool::builder().num_threads(2).pinning(Pinning::Cores).build().unwrap();
    /// assert_eq!(pool.worker_core(1), Some(pool.topology().core_for_worker(1)));
    /// assert_eq!(pool.worker_core(2), None);  // no worker 2
    /// let unpinned = Pool::builder().num_threads(2).build().unwrap();
    /// assert_eq!(unpinned.worker_core(0), None);
    /// ```
    pub fn worker_core(&self, worker: usize) -> Option<&CoreInfo> {
        if worker >= self.registry.num_slots() || self.registry.num_threads() == 0 {
            return None;
        }
        self.registry.pinned_core(worker)
    }

    /// A snapshot of the per-worker counters: tasks by rule, steals (by
    /// tier), sleeps. `Stats` prints as a table.
    ///
    /// ```
    /// use sixfold::Rule;
    /// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
    /// let before = pool.stats();
    /// pool.enqueue(|| {});
    /// pool.wait_idle();
    /// assert_eq!(pool.stats().since(&before).by_rule(Rule::SharedQueue), 1);
    /// println!("{}", pool.stats());
    /// ```
    pub fn stats(&self) -> Stats {
        self.registry.stats()
    }

    /// How many workers are blocked in the sleep protocol right now. A racy
    /// snapshot, for observing the pool (tests, dashboards), not for
    /// synchronizing with it.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// assert!(pool.sleeping_workers() <= pool.num_threads());
    /// // The worker running this closure is awake, whatever the other one does.
    /// assert!(pool.install(|| pool.sleeping_workers()) < pool.num_threads());
    /// ```
    pub fn sleeping_workers(&self) -> usize {
        self.registry.sleep.sleeping_threads()
    }
}

impl Drop for Pool {
    /// Runs every task already spawned or enqueued, then stops and joins
    /// the worker threads.
    fn drop(&mut self) {
        // The building thread of a `use_current_thread` pool runs what is
        // left as worker 0, then leaves the slot: from here on it is an
        // outside thread, and the drop goes on as from one.
        crate::worker::lifecycle::release_adopted(&self.registry);
        if WorkerThread::current_in(&self.registry).is_some() {
            // Dropped by one of its own tasks: we cannot wait for ourselves
            // here. A helper thread waits until every queued `'static` task
            // ran (the workers keep going meanwhile), then stops the
            // workers, which exit on their own (nobody joins them).
            let registry = self.registry.clone();
            let stopper = std::thread::Builder::new()
                .name("sixfold-stopper".into())
                .spawn(move || {
                    registry.static_group.idle_counter().wait_zero(None);
                    registry.terminate();
                });
            if let Err(e) = stopper {
                // Without a thread to wait on, leaving the workers running
                // is the choice that loses no task.
                eprintln!(
                    "sixfold: could not start a thread to stop the pool ({e}); its workers keep running"
                );
            }
            return;
        }
        self.wait_idle_from_outside();
        self.registry.terminate();
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

/// The index of the worker the calling thread is, in whichever pool, or
/// `None` outside every pool.
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// assert_eq!(sixfold::current_worker(), None);
/// let inside = pool.install(sixfold::current_worker);
/// assert!(matches!(inside, Some(0 | 1)));
/// ```
pub fn current_worker() -> Option<usize> {
    WorkerThread::current().map(WorkerThread::index)
}
