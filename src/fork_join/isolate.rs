//! [`isolate`]: waits that run only their own region's tasks. The region
//! tag itself lives with the jobs (`queues/region.rs`); here a thread, a
//! worker or not, enters a fresh region for the duration of a closure.

use crate::queues::region::{self, Region};
use crate::worker::thread::WorkerThread;

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
/// One kind of outside task does run in an isolated wait: a task with
/// strict affinity for the waiting worker ([`Pool::spawn_on`](crate::Pool::spawn_on),
/// a [`broadcast`](crate::broadcast)'s part), which no other worker may run.
/// Holding it off could wait forever: two workers each in an isolated
/// region, each broadcasting, would each wait for the other's part.
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
    let fresh = Region::fresh();
    match WorkerThread::current() {
        Some(worker) => {
            let outer = worker.region();
            let _restore = RestoreWorker(worker, outer);
            worker.set_region(fresh);
            f()
        }
        None => {
            let outer = region::replace_outside(fresh);
            let _restore = RestoreOutside(outer);
            f()
        }
    }
}

/// Puts a worker's region back, also when `f` panics.
struct RestoreWorker<'a>(&'a WorkerThread, Region);

impl Drop for RestoreWorker<'_> {
    fn drop(&mut self) {
        self.0.set_region(self.1);
    }
}

/// Puts an outside thread's region back, also when `f` panics.
struct RestoreOutside(Region);

impl Drop for RestoreOutside {
    fn drop(&mut self) {
        region::replace_outside(self.0);
    }
}
