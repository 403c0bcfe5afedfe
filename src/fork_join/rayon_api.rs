//! The rest of rayon-core's API, under rayon's names, so that porting is a
//! change of `use` lines: [`join_context`], [`broadcast`] (and
//! `spawn_broadcast`, in `pool/`), [`yield_now`]
//! and [`yield_local`], [`current_thread_index`],
//! [`current_thread_has_pending_tasks`], [`max_num_threads`].
//!
//! A broadcast sends one job to each worker's mailbox with no proxy (a
//! strict placement: no other worker may take it) and runs the caller's
//! own share in place; every wait takes its mailbox (rule 4), so a worker
//! blocked in a nested wait still runs its broadcast job. It reuses the
//! loops' planned parts (`loops/placed.rs`): the results come back in
//! worker order, and a panic is resumed once every worker ran its job.

use super::join::join_on_worker;
use crate::worker::global::global_registry;
use crate::worker::thread::WorkerThread;

/// What a closure run by [`join_context`] learns about where it runs.
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let (a, _) = pool.install(|| sixfold::join_context(|ctx| ctx.migrated(), |_| ()));
/// assert!(!a, "the first closure runs on the calling worker");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct FnContext {
    migrated: bool,
}

impl FnContext {
    /// True if the closure runs on another thread than the one that called
    /// `join_context`: it was stolen, or the call came from outside every
    /// pool (both closures then run in the pool).
    ///
    /// ```
    /// let (a, b) = sixfold::join_context(|ctx| ctx.migrated(), |ctx| ctx.migrated());
    /// assert!(a && b, "called from outside the pool: both moved into it");
    /// ```
    pub fn migrated(&self) -> bool {
        self.migrated
    }
}

/// [`join`](crate::join), with each closure told whether it was moved to
/// another thread (rayon's `join_context`): an adaptive algorithm splits
/// further where work was stolen.
///
/// ```
/// fn count(n: u32) -> u32 {
///     if n == 0 {
///         return 1;
///     }
///     let (a, b) = sixfold::join_context(|_| count(n - 1), |_| count(n - 1));
///     a + b
/// }
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// assert_eq!(pool.install(|| count(10)), 1024);
/// ```
pub fn join_context<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce(FnContext) -> RA + Send,
    B: FnOnce(FnContext) -> RB + Send,
    RA: Send,
    RB: Send,
{
    match WorkerThread::current() {
        Some(worker) => {
            let home = worker.index();
            join_on_worker(
                worker,
                || a(FnContext { migrated: false }),
                || {
                    let here = WorkerThread::current().map(WorkerThread::index);
                    b(FnContext {
                        migrated: here != Some(home),
                    })
                },
            )
        }
        None => global_registry().in_worker(|_| {
            let worker = WorkerThread::current().expect("install runs on a worker");
            join_on_worker(
                worker,
                || a(FnContext { migrated: true }),
                || b(FnContext { migrated: true }),
            )
        }),
    }
}

/// What [`yield_now`] and [`yield_local`] did.
///
/// ```
/// use sixfold::Yield;
/// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
/// let (first, second) = pool.install(|| {
///     sixfold::spawn(|| ()); // onto this worker's own deque
///     (sixfold::yield_local(), sixfold::yield_local())
/// });
/// assert_eq!(first, Some(Yield::Executed)); // ran the spawned task
/// assert_eq!(second, Some(Yield::Idle)); // nothing left to run
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Yield {
    /// A pending task ran (and whatever it spawned and waited for).
    Executed,
    /// There was no pending task to run.
    Idle,
}

/// Run one pending task of the current worker's pool, if there is one:
/// from its own deque, its mailbox, the shared queue or another worker's
/// deque (rules 3 to 6). `None` outside every pool (rayon's `yield_now`).
///
/// ```
/// assert_eq!(sixfold::yield_now(), None);
/// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
/// let result = pool.install(|| {
///     sixfold::spawn(|| ());
///     sixfold::yield_now()
/// });
/// assert_eq!(result, Some(sixfold::Yield::Executed));
/// ```
pub fn yield_now() -> Option<Yield> {
    WorkerThread::current().map(|worker| yielded(worker.run_one(false)))
}

/// Run one pending task from the current worker's own deque only (rule 3),
/// if there is one; `None` outside every pool (rayon's `yield_local`).
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
/// assert_eq!(pool.install(sixfold::yield_local), Some(sixfold::Yield::Idle));
/// ```
pub fn yield_local() -> Option<Yield> {
    WorkerThread::current().map(|worker| yielded(worker.run_one(true)))
}

fn yielded(ran: bool) -> Yield {
    if ran { Yield::Executed } else { Yield::Idle }
}

/// The index of the calling worker in its pool, `None` outside every pool
/// (rayon's name for [`current_worker`](crate::current_worker)).
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// assert!(matches!(pool.install(sixfold::current_thread_index), Some(0 | 1)));
/// assert_eq!(sixfold::current_thread_index(), None);
/// ```
pub fn current_thread_index() -> Option<usize> {
    WorkerThread::current().map(WorkerThread::index)
}

/// Whether the calling worker has tasks waiting that only it would take
/// next (its own deque, or its mailbox); `None` outside every pool.
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(1).build().unwrap();
/// let pending = pool.install(|| {
///     sixfold::spawn(|| ());
///     sixfold::current_thread_has_pending_tasks()
/// });
/// assert_eq!(pending, Some(true));
/// assert_eq!(sixfold::current_thread_has_pending_tasks(), None);
/// ```
pub fn current_thread_has_pending_tasks() -> Option<bool> {
    WorkerThread::current().map(WorkerThread::has_pending_tasks)
}

/// The most threads a pool can have (the sleep counters' limit): a
/// `num_threads` above it is a build error.
///
/// ```
/// assert!(sixfold::max_num_threads() >= 1024);
/// ```
pub fn max_num_threads() -> usize {
    crate::worker::sleep::counters::MAX_THREADS
}
