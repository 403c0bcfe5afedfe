//! Isolation regions: [`isolate`], and the region tag every job carries.
//!
//! A worker that waits (in `join`, a scope, `run`, `run_graph`, an
//! `install` into another pool) keeps running other tasks meanwhile. That
//! is what keeps pools that call into each other from deadlocking, but it
//! has a trap rayon's users keep reporting: the waiting frame picks up an
//! unrelated outer task, which grows memory without bound (rayon #1105,
//! #872) or takes a lock the waiting frame already holds (#592, #1174).
//! oneTBB answers with `this_task_arena::isolate`; this is sixfold's.
//!
//! Every job carries the [`Region`] it belongs to: the region of the
//! construct that waits for it (a scope's, a run's, a join's), or, for
//! `'static` work, the region it was spawned in. A worker adopts the region
//! of each job it runs, so a task of a region that another worker stole
//! is isolated on the thief too. A wait in region `r != NONE` is
//! *isolated*: it takes only jobs of `r` (own deque, mailbox, the shared
//! queue's tagged entries) and does not steal; other workers, which are not
//! isolated, still take the region's jobs as usual.
//!
//! Invariants: a region's number is never reused (a 64-bit counter); every
//! job a construct of region `r` waits for carries `r`, so an isolated wait
//! can always run what it waits for (on a one-worker pool nobody else
//! would); `Region::NONE` work is never taken by an isolated wait.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The isolation region a job belongs to (`NONE`: not isolated).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub(crate) struct Region(u64);

impl Region {
    /// Outside every isolated region.
    pub(crate) const NONE: Region = Region(0);

    /// A region number never handed out before.
    fn fresh() -> Region {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Region(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    #[inline]
    pub(crate) fn is_isolated(self) -> bool {
        self != Region::NONE
    }

    /// As a plain number, for storing in an atomic.
    #[inline]
    pub(crate) fn to_bits(self) -> u64 {
        self.0
    }

    /// Back from `to_bits`.
    #[inline]
    pub(crate) fn from_bits(bits: u64) -> Region {
        Region(bits)
    }
}

thread_local! {
    /// The region of a thread that is not a worker right now. A worker
    /// keeps its own (`WorkerThread::region`), read on every push.
    static OUTSIDE_REGION: Cell<Region> = const { Cell::new(Region::NONE) };
}

/// The calling thread's region: its worker's, or the outside thread's.
pub(crate) fn current() -> Region {
    match crate::worker::WorkerThread::current() {
        Some(worker) => worker.region(),
        None => OUTSIDE_REGION.with(Cell::get),
    }
}

/// The region a thread outside every pool is in (a guest worker starts in it).
pub(crate) fn outside_current() -> Region {
    OUTSIDE_REGION.with(Cell::get)
}

/// Run `f` in a fresh isolated region: while the calling thread (or a
/// worker running one of the region's tasks) waits anywhere inside it, in
/// [`join`](crate::join), a scope, [`Pool::run`](crate::Pool::run),
/// [`Pool::run_graph`](crate::Pool::run_graph) or an install into another
/// pool, it runs only tasks spawned inside the region, directly or
/// transitively. Other workers still steal the region's tasks as usual.
///
/// Use it around an inner parallel call made while holding a lock, or
/// while an outer loop's tasks are memory-hungry: without it the waiting
/// worker may start another outer task on top of the waiting frame (rayon
/// issues #592, #1105), which then blocks on the same lock or holds its
/// memory until the inner wait ends.
///
/// The price: an isolated wait does not steal, so a worker whose share of
/// the region ran out sleeps until the rest of the region is done, instead
/// of helping elsewhere.
///
/// ```
/// use std::sync::Mutex;
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let table = Mutex::new(vec![0u64; 8]);
/// pool.scope(|s| {
///     for i in 0..8 {
///         let table = &table;
///         s.spawn(move |_| {
///             let mut row = table.lock().unwrap();
///             // The join's wait runs only the join's halves, never another
///             // outer task that would block on `table` held right here.
///             let (a, b) = sixfold::isolate(|| sixfold::join(|| i * 2, || i * 3));
///             row[i as usize] = a + b;
///         });
///     }
/// });
/// assert_eq!(table.lock().unwrap()[7], 35);
/// ```
pub fn isolate<R>(f: impl FnOnce() -> R) -> R {
    let region = Region::fresh();
    match crate::worker::WorkerThread::current() {
        Some(worker) => {
            let outer = worker.region();
            let _restore = RestoreWorker(worker, outer);
            worker.set_region(region);
            f()
        }
        None => {
            let outer = OUTSIDE_REGION.with(|cell| cell.replace(region));
            let _restore = RestoreOutside(outer);
            f()
        }
    }
}

/// Puts a worker's region back, also when `f` panics.
struct RestoreWorker<'a>(&'a crate::worker::WorkerThread, Region);

impl Drop for RestoreWorker<'_> {
    fn drop(&mut self) {
        self.0.set_region(self.1);
    }
}

/// Puts an outside thread's region back, also when `f` panics.
struct RestoreOutside(Region);

impl Drop for RestoreOutside {
    fn drop(&mut self) {
        OUTSIDE_REGION.with(|cell| cell.set(self.0));
    }
}
