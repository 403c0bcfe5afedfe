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
//! Failure: the first panic (of the body or of a spawned job) is kept,
//! cancels the jobs that have not started (they are dropped unrun), and is
//! resumed when the scope ends, after every started job finished; the
//! body's own panic wins. The pool keeps working.
//!
//! Invariants: a job releases its unit as its very last action, after its
//! closure (and everything it borrowed) was dropped, because the scope, on
//! the owner's stack, may end the moment the last unit is released.

use crate::group::Group;
use crate::job::{JobRef, Next};
use crate::latch::CountLatch;
use crate::registry::Registry;
use crate::unwind;
use crate::worker::WorkerThread;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;

/// A scope for spawning borrowing tasks; see [`scope`].
pub struct Scope<'scope> {
    group: Group,
    registry: Arc<Registry>,
    /// Invariant in `'scope`, as rayon's: spawned closures may borrow for
    /// exactly the scope's lifetime.
    _marker: PhantomData<&'scope mut &'scope ()>,
}

/// Run `op` with a [`Scope`] whose spawned tasks may borrow from the
/// caller's frame; return when `op` and every spawned task finished.
///
/// Inside a worker of a pool, the tasks run in that pool; on one worker
/// they start newest first (LIFO). Outside every pool, `scope` runs
/// everything on the calling thread, as a pool without threads would.
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
        Some(worker) => scope_on_worker(worker, op),
        None => {
            let pool = crate::Pool::builder()
                .num_threads(0)
                .build()
                .expect("a pool without threads needs no resources");
            pool.install(|| scope(op))
        }
    }
}

fn scope_on_worker<'scope, OP, R>(worker: &WorkerThread, op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R + Send,
    R: Send,
{
    let registry = worker.registry();
    let scope = Scope {
        group: Group::structured(CountLatch::for_worker(registry.wake_owner(worker.index()))),
        registry: registry.clone(),
        _marker: PhantomData,
    };
    let result = unwind::halt_unwinding(|| op(&scope));
    if result.is_err() {
        scope.group.cancel();
    }
    // Drop the body's hold, then work until every spawned job is done.
    // SAFETY: `scope` lives on this frame until after the wait.
    unsafe { CountLatch::release(scope.group.latch()) };
    worker.wait_until(scope.group.latch().as_core().expect("a worker's latch"));
    match result {
        Err(payload) => unwind::resume_unwinding(payload),
        Ok(value) => {
            if let Some(payload) = scope.group.take_panic() {
                unwind::resume_unwinding(payload);
            }
            value
        }
    }
}

impl<'scope> Scope<'scope> {
    /// Spawn `body` into the scope. It may borrow anything that outlives
    /// the scope, and it gets the scope to spawn more.
    pub fn spawn<BODY>(&self, body: BODY)
    where
        BODY: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        self.group.add_unit();
        let job = Box::new(ScopeJob {
            scope: self as *const Scope<'scope>,
            body,
        });
        // SAFETY: the box is leaked into the job, which frees it when it
        // runs; the scope outlives the job because the job holds a unit.
        let job_ref = unsafe {
            JobRef::new(
                NonNull::from(Box::leak(job)).cast(),
                ScopeJob::<BODY>::execute,
            )
        };
        match WorkerThread::current_in(&self.registry) {
            Some(worker) => worker.push(job_ref),
            None => self.registry.inject(job_ref, None),
        }
    }
}

/// A spawned closure and the scope it belongs to.
struct ScopeJob<'scope, BODY> {
    scope: *const Scope<'scope>,
    body: BODY,
}

impl<'scope, BODY> ScopeJob<'scope, BODY>
where
    BODY: FnOnce(&Scope<'scope>) + Send + 'scope,
{
    unsafe fn execute(this: NonNull<()>, _worker: &WorkerThread) -> Option<Next> {
        // SAFETY: made by `Scope::spawn` from a leaked box, run once.
        let job = unsafe { Box::from_raw(this.cast::<Self>().as_ptr()) };
        let scope_ptr = job.scope;
        // SAFETY: the scope outlives this job: we hold one of its units.
        let scope = unsafe { &*scope_ptr };
        if scope.group.is_cancelled() {
            drop(job);
        } else {
            let ScopeJob { body, .. } = *job;
            if let Err(payload) = unwind::halt_unwinding(|| body(scope)) {
                scope.group.record_panic(payload);
            }
        }
        // Last: the owner may end the scope as soon as the unit is gone.
        // SAFETY: live until this release, which is our last touch.
        unsafe { Group::release_unit(&raw const (*scope_ptr).group) };
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
