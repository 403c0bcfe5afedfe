//! `scope_fifo`: a scope whose tasks start in creation order on each
//! worker, by the indirection of the Rayon RFC on FIFO scopes.
//!
//! A [`ScopeFifo`] is a plain [`Scope`] (its group, registry and failure
//! contract: `scope.rs`) plus one FIFO per worker slot (`queues/fifo.rs`).
//! Spawning pushes the real job onto the spawning worker's FIFO and an
//! indirect job onto its deque; whoever runs the indirect job (its worker
//! by rule 3, a thief by rule 6) runs the front of that FIFO.
//!
//! Invariants: a worker's FIFO is pushed only by that worker, and lives as
//! long as the scope, which waits for every real job an indirect job
//! points at; a job spawned from another isolation region than the
//! scope's skips the FIFO (plain LIFO), so a wait of the scope's region
//! never runs it through the indirection.

use super::scope::{
    Scope, ScopeJob, ScopeKind, finish_foreign, finish_outside, finish_scope, take_unit,
};
use crate::queues::fifo::WorkerFifo;
use crate::worker::global::global_registry;
use crate::worker::group::Group;
use crate::worker::thread::{Registry, WorkerThread};
use std::sync::{Arc, OnceLock};

/// [`scope_fifo`] with `op` on the calling thread, as
/// [`in_place_scope`](crate::in_place_scope) (rayon's
/// `in_place_scope_fifo`). From outside every pool the spawned tasks go
/// through the shared queue, FIFO already.
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
/// let log = std::sync::Mutex::new(Vec::new());
/// pool.install(|| sixfold::in_place_scope_fifo(|s| {
///     for i in 0..3 {
///         let log = &log;
///         s.spawn_fifo(move |_| log.lock().unwrap().push(i));
///     }
/// }));
/// assert_eq!(*log.lock().unwrap(), [0, 1, 2]);
/// ```
pub fn in_place_scope_fifo<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&ScopeFifo<'scope>) -> R,
{
    match WorkerThread::current() {
        Some(worker) => {
            let scope = ScopeFifo::new(worker);
            finish_scope(worker, &scope.base, || op(&scope)).0
        }
        None => {
            let scope = ScopeFifo::outside(global_registry());
            finish_outside(&scope.base, || op(&scope)).0
        }
    }
}

/// [`in_place_scope_fifo`] whose tasks go to `registry`'s pool.
pub(crate) fn in_place_scope_fifo_in<'scope, OP, R>(registry: &Arc<Registry>, op: OP) -> R
where
    OP: FnOnce(&ScopeFifo<'scope>) -> R,
{
    match (WorkerThread::current_in(registry), WorkerThread::current()) {
        (Some(_), _) => in_place_scope_fifo(op),
        (None, Some(foreign)) => {
            let scope = ScopeFifo::with_base(Scope::for_foreign(registry, foreign));
            finish_foreign(foreign, &scope.base, || op(&scope)).0
        }
        (None, None) => {
            let scope = ScopeFifo::outside(registry);
            finish_outside(&scope.base, || op(&scope)).0
        }
    }
}

/// A scope whose tasks start in creation order on each worker; see
/// [`scope_fifo`].
///
/// ```
/// use std::sync::Mutex;
/// fn push_all<'s>(s: &sixfold::ScopeFifo<'s>, log: &'s Mutex<Vec<u32>>) {
///     for i in 0..4 {
///         s.spawn_fifo(move |_| log.lock().unwrap().push(i));
///     }
/// }
/// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
/// let log = Mutex::new(Vec::new());
/// pool.scope_fifo(|s| push_all(s, &log));
/// assert_eq!(log.into_inner().unwrap(), [0, 1, 2, 3]); // one worker: oldest first
/// ```
pub struct ScopeFifo<'scope> {
    base: Scope<'scope>,
    /// One FIFO per worker slot: the real jobs spawned on that worker.
    /// Made on a worker's first spawn (a scope on a big pool may be used
    /// by few of its workers).
    fifos: Box<[OnceLock<WorkerFifo<WorkerThread>>]>,
}

/// Run `op` with a [`ScopeFifo`]: like [`scope`](crate::scope), but the
/// tasks one worker spawns start in the order they were spawned
/// (per-thread FIFO), by the indirection of the Rayon RFC on FIFO scopes.
///
/// Spawning pushes the real job onto this scope's FIFO of the spawning
/// worker and an *indirect* job onto that worker's deque; running an
/// indirect job (by its worker, rule 3, or by a thief, rule 6) runs the
/// front of the FIFO it points at. So one worker processes its own spawns
/// oldest first, and a thief that takes one continues with what that task
/// spawns before it returns for more; nested scopes and `join` still run
/// innermost first.
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
/// let log = std::sync::Mutex::new(Vec::new());
/// pool.scope_fifo(|s| {
///     for i in 0..3 {
///         let log = &log;
///         s.spawn_fifo(move |_| log.lock().unwrap().push(i));
///     }
/// });
/// assert_eq!(*log.lock().unwrap(), [0, 1, 2]);
/// ```
pub fn scope_fifo<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&ScopeFifo<'scope>) -> R + Send,
    R: Send,
{
    match WorkerThread::current() {
        Some(worker) => {
            let scope = ScopeFifo::new(worker);
            finish_scope(worker, &scope.base, || op(&scope)).0
        }
        None => global_registry().in_worker(|_| scope_fifo(op)),
    }
}

impl<'scope> ScopeFifo<'scope> {
    /// The plain scope underneath (its group and registry).
    pub(super) fn base(&self) -> &Scope<'scope> {
        &self.base
    }

    /// A FIFO scope waited for by `worker`.
    pub(super) fn new(worker: &WorkerThread) -> Self {
        Self::with_base(Scope::new(worker))
    }

    /// A FIFO scope waited for by a thread outside every pool.
    fn outside(registry: &Arc<Registry>) -> Self {
        Self::with_base(Scope::outside(registry))
    }

    fn with_base(base: Scope<'scope>) -> Self {
        let fifos = (0..base.registry.num_slots())
            .map(|_| OnceLock::new())
            .collect();
        ScopeFifo { base, fifos }
    }

    /// [`Scope::cancel`] for a FIFO scope.
    ///
    /// ```
    /// let outcome = sixfold::scope_fifo_cancellable(|s| {
    ///     s.spawn_fifo(|s| s.cancel());
    /// });
    /// assert_eq!(outcome, Err(sixfold::Cancelled));
    /// ```
    pub fn cancel(&self) {
        self.base.cancel();
    }

    /// [`Scope::is_cancelled`] for a FIFO scope.
    ///
    /// ```
    /// sixfold::scope_fifo(|s| assert!(!s.is_cancelled()));
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.base.is_cancelled()
    }

    /// Spawn `body` into the scope, behind this worker's earlier spawns.
    ///
    /// ```
    /// use std::sync::Mutex;
    /// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
    /// let log = Mutex::new(Vec::new());
    /// let log = &log;
    /// pool.scope_fifo(|s| {
    ///     s.spawn_fifo(move |s| {
    ///         log.lock().unwrap().push("first");
    ///         s.spawn_fifo(move |_| log.lock().unwrap().push("spawned by first"));
    ///     });
    ///     s.spawn_fifo(move |_| log.lock().unwrap().push("second"));
    /// });
    /// assert_eq!(*log.lock().unwrap(), ["first", "second", "spawned by first"]);
    /// ```
    pub fn spawn_fifo<BODY>(&self, body: BODY)
    where
        BODY: FnOnce(&ScopeFifo<'scope>) + Send + 'scope,
    {
        let here = WorkerThread::current_in(&self.base.registry);
        take_unit(here, &self.base.group);
        let region = self.base.group.region();
        // SAFETY: the unit just taken keeps the scope alive for the job.
        let job_ref = unsafe { ScopeJob::into_job_ref(self, body, region) };
        match here {
            // Spawned from another isolated region than the scope's: the
            // worker's FIFO may hold jobs of the scope's region ahead of
            // it, which a wait of this region must not run through the
            // indirection. Plain LIFO instead (the one case that loses
            // FIFO order).
            Some(worker) if worker.region() != region => worker.push(job_ref),
            Some(worker) => {
                let index = worker.index();
                let fifo = self.fifos[index].get_or_init(|| WorkerFifo::new(index));
                // SAFETY: we are worker `index`; the FIFO lives as long as
                // the scope, which waits for the real job the indirect job
                // will run.
                worker.push(unsafe { fifo.push(index, job_ref) });
            }
            // From outside the pool the shared queue is FIFO already.
            None => {
                let place = self.base.group.used_shared_queue().note();
                self.base.registry.inject_at(job_ref, None, place)
            }
        }
    }
}

impl ScopeKind for ScopeFifo<'_> {
    const NODE_MEMORY: bool = true;

    fn group(this: *const Self) -> *const Group {
        // SAFETY: only called with a live scope (the caller holds a unit).
        unsafe { &raw const (*this).base.group }
    }
}

/// Shared by the tasks it spawns on several workers: `Sync` on its own
/// merits, as `Scope` is.
const _: () = {
    const fn assert_sync<T: Sync>() {}
    assert_sync::<ScopeFifo<'static>>();
};
