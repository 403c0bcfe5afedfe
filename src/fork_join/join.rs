//! `join`: run two closures, potentially in parallel, without allocating.
//!
//! The second closure is wrapped in a [`JoinJob`] on the caller's stack and
//! pushed onto the worker's own deque; the first runs at once. Then the
//! worker takes the job back if no thief took it (it is then the newest
//! entry of the deque, possibly under tasks the first closure left there,
//! which are run first), or else works by the six rules until the thief
//! sets the job's latch, sleeping on that latch when there is nothing to do.
//!
//! Invariants: the `JoinJob` does not leave the stack frame before its
//! latch is set or it was taken back (so a thief never sees freed memory);
//! a panic in either closure is resumed only after both finished, the first
//! closure's panic winning; nothing here allocates (the latch and the job
//! live on the stack; only a deque growing its buffer ever allocates).

use crate::observe::stats::Rule;
use crate::platform::latch::CountLatch;
use crate::platform::unwind;
use crate::queues::region::Region;
use crate::worker::global::global_registry;
use crate::worker::thread::{JobRef, Next};
use crate::worker::thread::{Resolved, WorkerThread};
use std::any::Any;
use std::cell::UnsafeCell;
use std::ptr::NonNull;

/// Run `a` and `b`, potentially in parallel, and return both results.
///
/// Inside a worker of a pool, `b` is offered to thieves while `a` runs on
/// this thread. Outside every pool, both run in the global pool (see
/// [`Pool::global`](crate::Pool::global)) while the caller blocks; use
/// [`Pool::join`](crate::Pool::join) to pick a pool. Both always run: a
/// panic in either is resumed after both finished; if both panic, `a`'s
/// panic is the one resumed.
///
/// ```
/// fn fib(n: u64) -> u64 {
///     if n < 2 {
///         return n;
///     }
///     let (a, b) = sixfold::join(|| fib(n - 1), || fib(n - 2));
///     a + b
/// }
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// assert_eq!(pool.install(|| fib(20)), 6765);
/// ```
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    match WorkerThread::current() {
        Some(worker) => join_on_worker(worker, a, b),
        None => global_registry().in_worker(|_| join(a, b)),
    }
}

fn ok_or_resume<R>(result: Result<R, Box<dyn Any + Send>>) -> R {
    match result {
        Ok(value) => value,
        Err(payload) => unwind::resume_unwinding(payload),
    }
}

pub(crate) fn join_on_worker<A, B, RA, RB>(worker: &WorkerThread, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let job_b = JoinJob::new(
        b,
        CountLatch::for_worker(worker.registry().wake_owner(worker.index())),
    );
    // Taken before the job is shared: afterwards the compiler must assume
    // the latch changed under every call and test its kind again.
    let latch = job_b.latch.as_core().expect("a worker's latch");
    let region = worker.region();
    // SAFETY: `job_b` stays in this frame until it was taken back or its
    // latch is set (both ensured below before returning or unwinding).
    let job_b_ref = unsafe { job_b.as_job_ref(region) };
    worker.push(job_b_ref);

    // Even if `a` panics we must not leave before `b` is done: `b` may be
    // running on a thief and borrow from this frame.
    let result_a = unwind::halt_unwinding(a);

    while !latch.probe() {
        match worker.pop_local(region) {
            Some(job) if job.is_for(NonNull::from(&job_b).cast()) => {
                // Not stolen: run `b` right here, without the job machinery
                // (no latch to set, nobody to wake). Counted as rule 3.
                job.discard();
                worker.count_task(Rule::OwnDeque);
                // SAFETY: popped back by its owner, so it never ran.
                let b = unsafe { job_b.take_func() };
                // Nothing is left in the job to drop: its closure was just
                // moved out, it wrote no result, and a worker's latch holds
                // no resource. Forgetting it spares every inline join the
                // drop glue's tests (a tenth of a fork-join's instructions).
                debug_assert!(job_b.is_spent());
                std::mem::forget(job_b);
                if worker.tracing() {
                    return traced_inline(worker, result_a, b);
                }
                return match result_a {
                    // A panic of `b` propagates from here: both finished.
                    Ok(ra) => (ra, b()),
                    Err(payload) => {
                        // `a`'s panic wins; `b` still runs to completion.
                        let _ = unwind::halt_unwinding(b);
                        unwind::resume_unwinding(payload)
                    }
                };
            }
            // Work `a` left on the deque above `b`: run it first.
            Some(job) => {
                if let Resolved::Run(job) = worker.resolve(job) {
                    worker.run_chain(job, Rule::OwnDeque);
                }
            }
            None => {
                // Stolen: work by the six rules until the thief is done.
                // `b` went to our deque, never to the shared queue.
                worker.wait_until(latch, None);
                break;
            }
        }
    }
    let result_b = job_b.into_result();
    (ok_or_resume(result_a), ok_or_resume(result_b))
}

/// `b` taken back and run inline, with a trace record around it; then the
/// results as `join` returns them (the first closure's panic wins).
///
/// Inline, not a cold call: a traced pool takes this path at every join
/// that was not stolen, and the call's frame and argument moves were a
/// quarter to a third of what tracing added to a join (`fib(30)` on one traced worker:
/// 11.2 to 11.7 ms -> 10.0 to 10.7, the untraced pool unchanged).
#[inline]
fn traced_inline<RA, B, RB>(
    worker: &WorkerThread,
    result_a: Result<RA, Box<dyn Any + Send>>,
    b: B,
) -> (RA, RB)
where
    B: FnOnce() -> RB,
{
    match result_a {
        // A panic of `b` propagates from here (its record is written on
        // the way): both finished.
        Ok(ra) => (ra, worker.traced(Rule::OwnDeque, b)),
        Err(payload) => {
            // `a`'s panic wins; `b` still runs to completion.
            let _ = unwind::halt_unwinding(|| worker.traced(Rule::OwnDeque, b));
            unwind::resume_unwinding(payload)
        }
    }
}

/// The second half of a join, on the joining worker's stack.
struct JoinJob<B, RB> {
    latch: CountLatch,
    func: UnsafeCell<Option<B>>,
    result: UnsafeCell<Option<Result<RB, Box<dyn Any + Send>>>>,
}

impl<B, RB> JoinJob<B, RB>
where
    B: FnOnce() -> RB + Send,
    RB: Send,
{
    fn new(func: B, latch: CountLatch) -> Self {
        JoinJob {
            latch,
            func: UnsafeCell::new(Some(func)),
            result: UnsafeCell::new(None),
        }
    }

    /// # Safety
    /// `self` must stay in place until its latch is set or the job was
    /// taken back and run by its owner.
    unsafe fn as_job_ref(&self, region: Region) -> JobRef {
        // SAFETY: forwarded to the caller.
        unsafe { JobRef::new(NonNull::from(self).cast(), Self::execute, region) }
    }

    unsafe fn execute(this: NonNull<()>, _worker: &WorkerThread) -> Option<Next> {
        let this = this.cast::<Self>();
        // SAFETY: the job runs once (from a thief or its owner), so we are
        // the only accessor of `func` and `result` until the latch is set;
        // the owner reads `result` only after that or after running it
        // itself. The latch is released through a raw pointer: the owner
        // may free the job the moment it is set.
        unsafe {
            let job = this.as_ref();
            let func = (*job.func.get()).take().expect("join job run twice");
            *job.result.get() = Some(unwind::halt_unwinding(func));
            CountLatch::release(&raw const (*this.as_ptr()).latch);
        }
        None
    }

    /// Move the closure out, for running the job inline after taking it
    /// back from the deque (so no thief can run it any more). The job's
    /// `func` still reads as `Some` afterwards: the caller forgets the job
    /// instead of dropping it (no store of `None`, no test, on the path
    /// every join not stolen takes).
    ///
    /// # Safety
    /// The owner popped the job back, so it never ran: its closure is
    /// there, and nobody else can reach it. The job is then forgotten,
    /// never dropped or run.
    unsafe fn take_func(&self) -> B {
        // SAFETY: per the contract, `func` holds the closure and we are its
        // only accessor; it is read once (the job is forgotten after).
        unsafe { std::ptr::read(self.func.get()).unwrap_unchecked() }
    }

    /// Whether nothing but the moved-out closure is in the job: no result,
    /// a worker's latch (so forgetting it leaks nothing).
    fn is_spent(&self) -> bool {
        // SAFETY: only the owner calls this, after taking the job back.
        let result = unsafe { &*self.result.get() };
        result.is_none() && self.latch.as_core().is_some()
    }

    fn into_result(self) -> Result<RB, Box<dyn Any + Send>> {
        self.result
            .into_inner()
            .expect("join job finished without a result")
    }
}
