//! `scope`: spawn closures that borrow from the enclosing stack frame; the
//! scope returns when all of them (and what they spawned) finished.
//!
//! Each `Scope::spawn` boxes the closure as a job and pushes it onto the
//! calling worker's own deque (per-thread LIFO, rule 3; thieves take the
//! oldest, rule 6), or onto the shared queue when called from a thread
//! outside the pool. The scope is a structured group (`group.rs`): every
//! spawned job holds one unit; the scope's owner holds one while its body
//! runs, then works by the six rules until the count reaches zero.
//!
//! Failure, rayon's contract: every spawned job runs, even after a sibling
//! or the body panicked (code relies on it for cleanup, and for jobs that
//! own a channel end, a guard or a file); the first panic is kept and
//! resumed when the scope ends, after every job finished, the body's own
//! panic first. (Task graphs keep oneTBB's contract instead: see
//! `group::OnPanic`.) The pool keeps working.
//!
//! The FIFO variant, `ScopeFifo`, is this scope plus per-worker FIFOs
//! (`scope_fifo.rs`); both spawn through `ScopeJob`.
//!
//! Invariants: a job releases its unit as its very last action, after its
//! closure (and everything it borrowed) was dropped, because the scope, on
//! the owner's stack, may end the moment the last unit is released.

use crate::platform::latch::CountLatch;
use crate::platform::node_alloc;
use crate::platform::unwind;
use crate::queues::region::Region;
use crate::worker::global::global_registry;
use crate::worker::group::{Group, OnPanic};
use crate::worker::thread::Registry;
use crate::worker::thread::WorkerThread;
use crate::worker::thread::{JobRef, Next};
use std::alloc::Layout;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;

/// A unit of `group` for a job about to be spawned from `here` (the calling
/// thread's worker of the scope's pool, if it is one): from its credit
/// frame, or added on its own from outside the pool.
#[inline]
pub(super) fn take_unit(here: Option<&WorkerThread>, group: &Group) {
    match here {
        Some(worker) => worker.unit_credit().take_unit(group),
        None => group.add_unit(),
    }
}

/// A scope for spawning borrowing tasks; see [`scope`].
///
/// Each spawned task gets the scope back, so a task can spawn more:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// fn sum_into<'s>(s: &sixfold::Scope<'s>, data: &'s [u64], total: &'s AtomicU64) {
///     if data.len() <= 4 {
///         total.fetch_add(data.iter().sum(), Ordering::Relaxed);
///     } else {
///         let (left, right) = data.split_at(data.len() / 2);
///         s.spawn(move |s| sum_into(s, left, total));
///         s.spawn(move |s| sum_into(s, right, total));
///     }
/// }
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let (data, total): (Vec<u64>, _) = ((1..=100).collect(), AtomicU64::new(0));
/// pool.scope(|s| sum_into(s, &data, &total));
/// assert_eq!(total.into_inner(), 5050);
/// ```
pub struct Scope<'scope> {
    pub(super) group: Group,
    pub(super) registry: Arc<Registry>,
    /// Invariant in `'scope`, as rayon's: spawned closures may borrow for
    /// exactly the scope's lifetime.
    _marker: PhantomData<&'scope mut &'scope ()>,
}

/// Run `op` with a [`Scope`] whose spawned tasks may borrow from the
/// caller's frame; return when `op` and every spawned task finished.
///
/// Inside a worker of a pool, the tasks run in that pool; on one worker
/// they start newest first (LIFO). Outside every pool, `scope` runs in the
/// global pool (see [`Pool::global`](crate::Pool::global)).
///
/// Every spawned task runs, even after another one or `op` panicked; the
/// first panic is resumed once all finished, `op`'s own first.
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let mut halves = [0u64, 0u64];
/// let data: Vec<u64> = (1..=100).collect();
/// pool.scope(|s| {
///     let (left, right) = halves.split_at_mut(1);
///     let data = &data;
///     s.spawn(move |_| left[0] = data[..50].iter().sum());
///     s.spawn(move |_| right[0] = data[50..].iter().sum());
/// });
/// assert_eq!(halves[0] + halves[1], 5050);
/// ```
pub fn scope<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R + Send,
    R: Send,
{
    match WorkerThread::current() {
        Some(worker) => scope_on_worker(worker, op).0,
        None => global_registry().in_worker(|_| scope(op)),
    }
}

pub(super) fn scope_on_worker<'scope, OP, R>(worker: &WorkerThread, op: OP) -> (R, bool)
where
    OP: FnOnce(&Scope<'scope>) -> R + Send,
    R: Send,
{
    let scope = Scope::new(worker);
    finish_scope(worker, &scope, || op(&scope))
}

/// Run the scope's body, then wait for its jobs; resume the first panic,
/// the body's own first. Also says whether the scope was cancelled.
pub(super) fn finish_scope<R>(
    worker: &WorkerThread,
    scope: &Scope<'_>,
    body: impl FnOnce() -> R,
) -> (R, bool) {
    // The body spawns on the owner's credit (`credit.rs`), as work of the
    // scope (`is_cancelled`, nested scopes).
    let (result, credit) = worker.with_cancel_context(&scope.group, || {
        worker
            .unit_credit()
            .with_frame(&scope.group, || unwind::halt_unwinding(body))
    });
    // Drop the body's hold and its unused credit, then work until every
    // spawned job is done.
    // SAFETY: the scope lives on the caller's frame until after the wait.
    unsafe { CountLatch::release_many(scope.group.latch(), 1 + credit) };
    worker.wait_until(
        scope.group.latch().as_core().expect("a worker's latch"),
        Some(scope.group.used_shared_queue()),
    );
    match result {
        Err(payload) => unwind::resume_unwinding(payload),
        Ok(value) => {
            if let Some(payload) = scope.group.take_panic() {
                unwind::resume_unwinding(payload);
            }
            (value, scope.group.is_cancelled())
        }
    }
}

/// Run `op` with a [`Scope`] as [`scope`] does, but with `op` itself on
/// the calling thread, even outside every pool (rayon's `in_place_scope`):
/// the spawned tasks run in the calling worker's pool, or in the global
/// pool, while `op` keeps its thread (and its thread-locals, and any
/// `!Send` state it borrows). The caller then waits for the tasks: a worker
/// by working, an outside thread by blocking.
///
/// ```
/// use std::cell::Cell;
/// let here = Cell::new(0); // not Sync: only `op` on this thread may touch it
/// let total = std::sync::atomic::AtomicU64::new(0);
/// sixfold::in_place_scope(|s| {
///     here.set(here.get() + 1);
///     for i in 1..=10u64 {
///         let total = &total;
///         s.spawn(move |_| { total.fetch_add(i, std::sync::atomic::Ordering::Relaxed); });
///     }
/// });
/// assert_eq!((here.get(), total.into_inner()), (1, 55));
/// ```
pub fn in_place_scope<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R,
{
    match WorkerThread::current() {
        Some(worker) => {
            let scope = Scope::new(worker);
            finish_scope(worker, &scope, || op(&scope)).0
        }
        None => {
            let scope = Scope::outside(global_registry());
            finish_outside(&scope, || op(&scope)).0
        }
    }
}

/// [`in_place_scope`] whose tasks go to `registry`'s pool: `op` runs on
/// the calling thread, which, if it is not one of that pool's workers,
/// blocks until the tasks finished.
pub(crate) fn in_place_scope_in<'scope, OP, R>(registry: &Arc<Registry>, op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R,
{
    match (WorkerThread::current_in(registry), WorkerThread::current()) {
        (Some(_), _) => in_place_scope(op),
        (None, Some(foreign)) => {
            let scope = Scope::for_foreign(registry, foreign);
            finish_foreign(foreign, &scope, || op(&scope)).0
        }
        (None, None) => {
            let scope = Scope::outside(registry);
            finish_outside(&scope, || op(&scope)).0
        }
    }
}

/// `finish_scope` for a scope owned by a thread outside every pool: run the
/// body here, then block until every spawned job finished.
pub(super) fn finish_outside<R>(scope: &Scope<'_>, body: impl FnOnce() -> R) -> (R, bool) {
    finish_then_wait(scope, body, || scope.group.latch().wait_blocking())
}

/// `finish_scope` for a scope of another pool owned by `foreign`, a worker
/// of its own pool: run the body here, then wait as that worker, running
/// its own pool's work meanwhile, as every call into another pool does
/// (`Registry::enter`). Blocking the thread instead let two pools that
/// call into each other deadlock: the scope's task needed this very
/// worker back in its own pool.
pub(super) fn finish_foreign<R>(
    foreign: &WorkerThread,
    scope: &Scope<'_>,
    body: impl FnOnce() -> R,
) -> (R, bool) {
    finish_then_wait(scope, body, || {
        let core = scope
            .group
            .latch()
            .as_core()
            .expect("a foreign worker's scope latch wakes that worker");
        foreign.wait_until(core, None);
    })
}

/// Run a scope's body, give up its own unit, `wait` until the spawned jobs
/// finished, then resume the body's panic, else the first job's, else
/// return the body's value and whether the scope was cancelled.
fn finish_then_wait<R>(
    scope: &Scope<'_>,
    body: impl FnOnce() -> R,
    wait: impl FnOnce(),
) -> (R, bool) {
    let result = unwind::halt_unwinding(body);
    // SAFETY: the scope lives on this frame until after the wait.
    unsafe { CountLatch::release(scope.group.latch()) };
    wait();
    match result {
        Err(payload) => unwind::resume_unwinding(payload),
        Ok(value) => {
            if let Some(payload) = scope.group.take_panic() {
                unwind::resume_unwinding(payload);
            }
            (value, scope.group.is_cancelled())
        }
    }
}

impl<'scope> Scope<'scope> {
    /// A scope waited for by a thread outside every pool, whose jobs run in
    /// `registry`'s pool.
    pub(super) fn outside(registry: &Arc<Registry>) -> Self {
        Scope {
            group: Group::structured(
                CountLatch::for_thread(),
                OnPanic::RunAll,
                crate::queues::region::outside_current(),
            ),
            registry: registry.clone(),
            _marker: PhantomData,
        }
    }

    /// A scope of `registry`'s pool waited for by `foreign`, a worker of
    /// another pool, which keeps working on its own pool meanwhile (its
    /// latch wakes that worker), in its current isolation region.
    pub(super) fn for_foreign(registry: &Arc<Registry>, foreign: &WorkerThread) -> Self {
        let group = Group::structured(
            CountLatch::for_worker(foreign.registry().wake_owner(foreign.index())),
            OnPanic::RunAll,
            foreign.region(),
        );
        // SAFETY: as in `new`: the scope ends inside the task or body of
        // `foreign` that makes it. A cancel reaches it across the pools.
        unsafe { group.set_parent(foreign.cancel_context()) };
        Scope {
            group,
            registry: registry.clone(),
            _marker: PhantomData,
        }
    }

    /// A scope waited for by `worker`, in its current isolation region,
    /// a child of the scope or run whose work makes it (`is_cancelled`).
    pub(super) fn new(worker: &WorkerThread) -> Self {
        let registry = worker.registry();
        let group = Group::structured(
            CountLatch::for_worker(registry.wake_owner(worker.index())),
            OnPanic::RunAll,
            worker.region(),
        );
        // SAFETY: the context's group outlives this scope, which ends
        // inside the task or body that is making it.
        unsafe { group.set_parent(worker.cancel_context()) };
        Scope {
            group,
            registry: registry.clone(),
            _marker: PhantomData,
        }
    }

    /// Cancel the scope: its tasks that have not started are dropped
    /// without running (their closures dropped, so what they own is
    /// freed), and so are those of the scopes and runs nested in its
    /// tasks; running ones see [`is_cancelled`](crate::is_cancelled) and
    /// may stop early. Spawning goes on working, the new tasks dropped.
    /// The scope still returns when every task ran or was dropped; a
    /// scope that already returned cannot be reached, so there is nothing
    /// to cancel. Cancelling is explicit: a panic does not cancel a scope
    /// (rayon's contract).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
    /// let ran = AtomicUsize::new(0);
    /// let outcome = pool.scope_cancellable(|s| {
    ///     for _ in 0..10 {
    ///         s.spawn(|_| { ran.fetch_add(1, Ordering::Relaxed); });
    ///     }
    ///     s.cancel(); // before the one worker got to any of them
    /// });
    /// assert_eq!(outcome, Err(sixfold::Cancelled));
    /// assert_eq!(ran.into_inner(), 0);
    /// ```
    pub fn cancel(&self) {
        self.group.cancel();
    }

    /// Was this scope cancelled, or a scope or run it is nested in?
    ///
    /// ```
    /// sixfold::scope(|s| {
    ///     assert!(!s.is_cancelled());
    ///     s.cancel();
    ///     assert!(s.is_cancelled());
    /// });
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.group.is_cancelled()
    }

    /// Spawn `body` into the scope. It may borrow anything that outlives
    /// the scope, and it gets the scope to spawn more.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut squares = vec![0usize; 4];
    /// pool.scope(|s| {
    ///     for (i, slot) in squares.iter_mut().enumerate() {
    ///         s.spawn(move |s| {
    ///             // A task may spawn more; the scope waits for those too.
    ///             s.spawn(move |_| *slot = i * i);
    ///         });
    ///     }
    /// });
    /// assert_eq!(squares, [0, 1, 4, 9]);
    /// ```
    pub fn spawn<BODY>(&self, body: BODY)
    where
        BODY: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        let here = WorkerThread::current_in(&self.registry);
        take_unit(here, &self.group);
        // SAFETY: the unit just taken keeps the scope alive for the job.
        let job_ref = unsafe { ScopeJob::into_job_ref(self, body, self.group.region()) };
        match here {
            Some(worker) => worker.push(job_ref),
            None => {
                let place = self.group.used_shared_queue().note();
                self.registry.inject_at(job_ref, None, place)
            }
        }
    }
}

/// What a scope job needs of its scope (LIFO or FIFO).
pub(super) trait ScopeKind {
    fn group(this: *const Self) -> *const Group;
    /// Whether the scope's jobs live in node memory (`node_alloc`) rather
    /// than the system allocator's. Measured: FIFO jobs travel through the
    /// scope's FIFOs and are often run (and freed) on another worker,
    /// where the node caches win (`scope_fifo_flat` 0.82 -> 0.65 of rayon);
    /// LIFO jobs are mostly freed by the worker that spawned them, where
    /// the system allocator's own per-thread cache is as fast and node
    /// memory measured 15% slower (`scope_tree`).
    const NODE_MEMORY: bool;
}

impl ScopeKind for Scope<'_> {
    const NODE_MEMORY: bool = false;

    fn group(this: *const Self) -> *const Group {
        // SAFETY: only called with a live scope (the caller holds a unit).
        unsafe { &raw const (*this).group }
    }
}

/// A spawned closure and the scope it belongs to.
pub(super) struct ScopeJob<S, BODY> {
    scope: *const S,
    body: BODY,
}

impl<S: ScopeKind, BODY> ScopeJob<S, BODY>
where
    BODY: FnOnce(&S) + Send,
{
    /// Put the job in memory (see `ScopeKind::NODE_MEMORY`) and erase it
    /// into a `JobRef`.
    ///
    /// # Safety
    /// The caller added a unit to the scope's group for this job, so the
    /// scope outlives it.
    pub(super) unsafe fn into_job_ref(scope: &S, body: BODY, region: Region) -> JobRef {
        let layout = Layout::new::<Self>();
        let memory = if S::NODE_MEMORY {
            node_alloc::allocate(layout)
        } else {
            // SAFETY: the layout is not zero-sized (the scope pointer).
            NonNull::new(unsafe { std::alloc::alloc(layout) })
                .unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
        }
        .cast::<Self>();
        // SAFETY: fresh memory with the layout of `Self` (never zero-sized:
        // it holds the scope pointer).
        unsafe {
            memory.as_ptr().write(ScopeJob {
                scope: scope as *const S,
                body,
            })
        };
        // SAFETY: the job owns the memory and frees it when it runs
        // (exactly once).
        unsafe { JobRef::new(memory.cast(), Self::execute, region) }
    }

    unsafe fn execute(this: NonNull<()>, worker: &WorkerThread) -> Option<Next> {
        let this = this.cast::<Self>();
        // SAFETY: made by `into_job_ref`, run once: we move the job out and
        // give its memory back, with the layout it was allocated with.
        let job = unsafe {
            let job = this.as_ptr().read();
            let layout = Layout::new::<Self>();
            if S::NODE_MEMORY {
                node_alloc::release(this.cast(), layout);
            } else {
                std::alloc::dealloc(this.as_ptr().cast(), layout);
            }
            job
        };
        let scope_ptr = job.scope;
        let group_ptr = S::group(scope_ptr);
        // SAFETY: the scope outlives this job: we hold one of its units.
        let (scope, group) = unsafe { (&*scope_ptr, &*group_ptr) };
        // rayon's contract: run even after a sibling panicked; but not in
        // a cancelled scope: dropped, unstarted. The body spawns on this
        // job's credit (`credit.rs`), as work of the scope.
        let ScopeJob { body, .. } = job;
        let ((), credit) = if group.is_cancelled() {
            if let Err(payload) = unwind::halt_unwinding(|| drop(body)) {
                group.record_panic(payload);
            }
            ((), 0)
        } else {
            worker.with_cancel_context(group_ptr, || {
                worker.unit_credit().with_frame(group, || {
                    if let Err(payload) = unwind::halt_unwinding(|| body(scope)) {
                        group.record_panic(payload);
                    }
                })
            })
        };
        // Last: the owner may end the scope as soon as the units are gone.
        // SAFETY: live until this release, which is our last touch.
        unsafe { Group::release_units(group_ptr, 1 + credit) };
        None
    }
}

/// A scope is shared by the tasks it spawns on several workers: it must be
/// `Sync` on its own merits (a group of atomics and a mutex, an `Arc` of the
/// registry), never by an `unsafe impl`.
const _: () = {
    const fn assert_sync<T: Sync>() {}
    assert_sync::<Scope<'static>>();
};
