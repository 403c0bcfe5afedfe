//! Type-erased references to runnable work: what the deques, the mailboxes
//! and the shared queue hold.
//!
//! A [`JobRef`] is a pointer plus the function that runs it. Two kinds of
//! work sit behind it: heap task nodes (`task/node/`), which may hand back the
//! next task to run (rules 1 and 2), and [`StackJob`]s, closures that live
//! on the stack of a thread blocked until the job's latch is set.
//!
//! A `JobRef` is two words, as rayon's: the hot paths (`join`, a deque's
//! push and pop) move it in registers. The isolation region (`region.rs`)
//! of a job in an isolated region rides in a small `RegionJob` the
//! `JobRef` points at instead, marked by a tag bit: outside `isolate`
//! nothing changes and nothing is allocated.
//!
//! Invariant: a `JobRef` is executed at most once, and the memory it points
//! at stays valid until then (a task node frees itself when it completes; a
//! stack job's owner waits for its latch before its frame ends). A
//! `RegionJob` is freed when it runs, or by `discard` when its owner takes
//! the job back (a `join`'s second half).

use crate::observe::stats::Rule;
use crate::platform::latch::CountLatch;
use crate::platform::node_alloc;
use crate::platform::unwind;
use crate::queues::deque::Words;
use crate::queues::region::Region;
use std::alloc::Layout;
use std::any::Any;
use std::cell::UnsafeCell;
use std::ptr::NonNull;

/// The low address bit that marks a proxy entry.
const PROXY_TAG: usize = 1;
/// The next bit: a `RegionJob` (a job of an isolated region).
const REGION_TAG: usize = 2;
/// Every job type is at least 4-byte aligned, so both bits are free.
const TAGS: usize = PROXY_TAG | REGION_TAG;

/// A reference to a job, as stored in the scheduler's queues.
///
/// `W` is the worker that runs jobs (`worker::thread::WorkerThread`): the
/// queues pass it on to a job's entry point without knowing it, and ask of
/// it only what [`Runner`] promises.
pub(crate) struct JobRef<W> {
    pointer: NonNull<()>,
    execute_fn: unsafe fn(NonNull<()>, &W) -> Option<Next<W>>,
}

/// A job's entry point: its data, and the worker running it.
pub(crate) type ExecuteFn<W> = unsafe fn(NonNull<()>, &W) -> Option<Next<W>>;

/// What the queues ask of the worker that runs a job: its slot, and its
/// isolation region (a `RegionJob` sets it for the job's duration).
pub(crate) trait Runner: Sized + 'static {
    /// The worker's slot in its pool.
    fn index(&self) -> usize;
    /// The region the worker runs in now.
    fn region(&self) -> Region;
    /// Enter `region`.
    fn set_region(&self, region: Region);
    /// Push `job` onto the worker's own deque (and tell its sleepers).
    fn push(&self, job: JobRef<Self>)
    where
        Self: Sized;
}

impl<W> Clone for JobRef<W> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<W> Copy for JobRef<W> {}

impl<W> std::fmt::Debug for JobRef<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobRef")
            .field("pointer", &self.pointer)
            .finish()
    }
}

// A slot of the deque is two atomic words (`chase_lev.rs`).
impl<W> Words for JobRef<W> {
    #[inline(always)]
    fn into_words(self) -> [*mut (); 2] {
        [self.pointer.as_ptr(), self.execute_fn as *mut ()]
    }

    #[inline(always)]
    unsafe fn from_words(words: [*mut (); 2]) -> Self {
        // SAFETY: the caller passes the words of a JobRef: a non-null
        // pointer, and an `ExecuteFn<W>` cast to a data pointer, which is
        // as wide on every target std supports (a function pointer cast
        // to a data pointer and back is the same function).
        unsafe {
            JobRef {
                pointer: NonNull::new_unchecked(words[0]),
                execute_fn: std::mem::transmute::<*mut (), ExecuteFn<W>>(words[1]),
            }
        }
    }
}

/// A job of an isolated region: the region and the job, behind one
/// pointer. The worker that runs it takes on the region for the job's
/// duration.
// repr(C), `region` first, as a proxy: see `JobRef::region`.
#[repr(C)]
struct RegionJob<W> {
    region: Region,
    job: JobRef<W>,
}

// SAFETY: a JobRef is a unique claim on work whose data is Send (task bodies
// are `Send`, stack jobs require `Send` closures); it moves between threads
// through the queues and is executed exactly once.
unsafe impl<W> Send for JobRef<W> {}
// SAFETY: sharing a JobRef only shares the pointer value; executing it
// requires `unsafe` and the at-most-once invariant.
unsafe impl<W> Sync for JobRef<W> {}

/// The task a finished job hands straight to its worker: rule 1 (returned
/// by `execute`) or rule 2 (a successor it made ready).
#[derive(Debug)]
pub(crate) struct Next<W> {
    pub(crate) job: JobRef<W>,
    pub(crate) rule: Rule,
}

impl<W: Runner> JobRef<W> {
    /// # Safety
    /// `pointer` must stay valid until the job is executed, and
    /// `execute_fn(pointer, ..)` must be sound to call once from any worker.
    /// Its address is even (every job type is at least word-aligned): the
    /// low bit marks proxies.
    /// `region`: the isolation region the job belongs to; `Region::NONE`
    /// costs nothing, another region one small allocation.
    #[inline(always)]
    pub(crate) unsafe fn new(
        pointer: NonNull<()>,
        execute_fn: ExecuteFn<W>,
        region: Region,
    ) -> JobRef<W> {
        debug_assert_eq!(pointer.as_ptr() as usize & TAGS, 0);
        let job = JobRef {
            pointer,
            execute_fn,
        };
        if region.is_isolated() {
            return Self::in_region(job, region);
        }
        job
    }

    /// Wrap `job` in a `RegionJob`.
    #[cold]
    fn in_region(job: JobRef<W>, region: Region) -> JobRef<W> {
        let memory = node_alloc::allocate(Layout::new::<RegionJob<W>>()).cast::<RegionJob<W>>();
        // SAFETY: fresh memory with the layout of `RegionJob`.
        unsafe { memory.as_ptr().write(RegionJob { region, job }) };
        // SAFETY: node memory is 16-byte aligned, so the tag bit is free and
        // the tagged address non-null.
        let tagged = unsafe {
            NonNull::new_unchecked(memory.as_ptr().cast::<()>().map_addr(|a| a | REGION_TAG))
        };
        JobRef {
            pointer: tagged,
            execute_fn: run_region_job::<W>,
        }
    }

    /// A proxy entry (`proxy.rs`): the same as `new`, marked.
    ///
    /// # Safety
    /// As for `new`.
    pub(crate) unsafe fn new_proxy(pointer: NonNull<()>, execute_fn: ExecuteFn<W>) -> JobRef<W> {
        debug_assert_eq!(pointer.as_ptr() as usize & TAGS, 0);
        // SAFETY: setting the low bit of a non-null address keeps it non-null.
        let tagged =
            unsafe { NonNull::new_unchecked(pointer.as_ptr().map_addr(|a| a | PROXY_TAG)) };
        JobRef {
            pointer: tagged,
            execute_fn,
        }
    }

    /// Is this an entry of a proxy (a task with affinity, placed twice)?
    /// Is this a plain job (no proxy, no region wrapper) that `execute_fn`
    /// runs? A false "no" is harmless to callers; a false "yes" would need
    /// two functions at one address, and `execute_fn` is not generic.
    #[inline]
    pub(crate) fn is_plain_run_by(&self, execute_fn: ExecuteFn<W>) -> bool {
        self.pointer.as_ptr() as usize & TAGS == 0
            && std::ptr::fn_addr_eq(self.execute_fn, execute_fn)
    }

    #[inline]
    pub(crate) fn is_proxy(&self) -> bool {
        self.pointer.as_ptr() as usize & PROXY_TAG != 0
    }

    /// The isolation region the job belongs to.
    ///
    /// For a proxy entry, the caller must hold it (not yet taken).
    #[inline]
    pub(crate) fn region(&self) -> Region {
        let tags = self.pointer.as_ptr() as usize & TAGS;
        if tags == 0 {
            return Region::NONE;
        }
        // SAFETY: a tagged job points at a live `RegionJob` or proxy
        // (until it runs, is discarded or taken, and the caller holds it),
        // both repr(C) with their `Region` as first field.
        unsafe { self.pointer().cast::<Region>().read() }
    }

    /// Give up a job its owner took back to run by other means (a
    /// `join`'s second half run inline): frees its `RegionJob`, if any.
    #[inline(always)]
    pub(crate) fn discard(self) {
        if self.pointer.as_ptr() as usize & TAGS == REGION_TAG {
            Self::discard_region_job(self);
        }
    }

    #[cold]
    fn discard_region_job(self) {
        // SAFETY: a region-tagged job owns its `RegionJob`; this is its
        // last use.
        unsafe { free_region_job::<W>(self.pointer().cast()) };
    }

    /// The job's data, without the tag bits.
    #[inline]
    pub(crate) fn pointer(&self) -> NonNull<()> {
        // SAFETY: clearing the tag bits of an address whose untagged form
        // is non-null (it was made from a NonNull) keeps it non-null.
        unsafe { NonNull::new_unchecked(self.pointer.as_ptr().map_addr(|a| a & !TAGS)) }
    }

    /// Is this job, which the caller holds (popped, not yet run or
    /// discarded), the one whose data is at `data`? The data's address is a
    /// job's identity while the data lives: only its owner makes jobs of it.
    /// Two `JobRef`s compared are not: a job wrapped for its isolation
    /// region is named by its wrapper, which is freed when the job runs,
    /// and a later wrapper of another job may get the same address while
    /// the first job's owner still looks for it.
    #[inline]
    pub(crate) fn is_for(&self, data: NonNull<()>) -> bool {
        match self.pointer.as_ptr() as usize & TAGS {
            0 => self.pointer == data,
            REGION_TAG => {
                // SAFETY: a region-tagged job points at its `RegionJob`,
                // live while the job is held (freed when it runs or is
                // discarded).
                let inner = unsafe { &(*self.pointer().cast::<RegionJob<W>>().as_ptr()).job };
                inner.pointer == data
            }
            // A proxy entry: its owner never looks for it by its data.
            _ => false,
        }
    }

    /// # Safety
    /// Called at most once per job, on a worker thread.
    #[inline]
    pub(crate) unsafe fn execute(self, worker: &W) -> Option<Next<W>> {
        // SAFETY: forwarded from the caller: first and only execution.
        unsafe { (self.execute_fn)(self.pointer(), worker) }
    }
}

/// Free a `RegionJob`, returning what it held.
///
/// # Safety
/// `memory` is a live `RegionJob`, not used again.
unsafe fn free_region_job<W>(memory: NonNull<RegionJob<W>>) -> RegionJob<W> {
    // SAFETY: live per the contract; read once, then freed.
    unsafe {
        let region_job = memory.as_ptr().read();
        node_alloc::release(memory.cast(), Layout::new::<RegionJob<W>>());
        region_job
    }
}

/// The `JobRef` entry point of a `RegionJob`: run the job inside its
/// region, and give the worker its region back afterwards.
unsafe fn run_region_job<W: Runner>(memory: NonNull<()>, worker: &W) -> Option<Next<W>> {
    // SAFETY: a region-tagged job points at its `RegionJob`; run once.
    let RegionJob { region, job } = unsafe { free_region_job::<W>(memory.cast()) };
    let outer = worker.region();
    worker.set_region(region);
    // SAFETY: the wrapped job runs exactly when its wrapper does: once.
    let next = unsafe { job.execute(worker) };
    worker.set_region(outer);
    next
}

/// What a stack job produced.
pub(crate) enum JobResult<R> {
    None,
    Ok(R),
    Panic(Box<dyn Any + Send>),
}

/// A closure on the stack of a thread that waits for it to run in a pool
/// (`Pool::install` from outside the pool, or from a worker of another
/// pool). The owner injects `as_job_ref()`, waits on `latch` (blocking, or
/// by working if it is a worker of another pool), then takes the result.
pub(crate) struct StackJob<F, R> {
    /// Set (released once) by the executing worker as its last touch: the
    /// owner may free the job as soon as it sees it set.
    latch: CountLatch,
    func: UnsafeCell<Option<F>>,
    result: UnsafeCell<JobResult<R>>,
}

impl<F, R> StackJob<F, R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    pub(crate) fn new(func: F, latch: CountLatch) -> Self {
        StackJob {
            latch,
            func: UnsafeCell::new(Some(func)),
            result: UnsafeCell::new(JobResult::None),
        }
    }

    /// # Safety
    /// `self` must not move or be dropped until its latch is set.
    pub(crate) unsafe fn as_job_ref<W: Runner>(&self, region: Region) -> JobRef<W> {
        // SAFETY: the caller keeps `self` in place until `execute` has set
        // the latch, which is the last thing `execute` does with it.
        unsafe { JobRef::new(NonNull::from(self).cast(), Self::execute::<W>, region) }
    }

    unsafe fn execute<W>(this: NonNull<()>, _worker: &W) -> Option<Next<W>> {
        let this = this.cast::<Self>();
        // SAFETY: `this` came from `as_job_ref` and the job runs once, so we
        // are the only accessor of `func` and `result` until the latch is
        // set; the owner reads `result` only after that. The latch is
        // released through a raw pointer: the owner may free the job the
        // moment it is set.
        unsafe {
            let job = this.as_ref();
            let func = (*job.func.get()).take().expect("stack job run twice");
            *job.result.get() = match unwind::halt_unwinding(func) {
                Ok(value) => JobResult::Ok(value),
                Err(payload) => JobResult::Panic(payload),
            };
            CountLatch::release(&raw const (*this.as_ptr()).latch);
        }
        None
    }

    /// The latch the owner waits on.
    pub(crate) fn latch(&self) -> &CountLatch {
        &self.latch
    }

    /// The result, resuming the job's panic if it had one. Call after the
    /// latch was set.
    pub(crate) fn into_result(self) -> R {
        match self.result.into_inner() {
            JobResult::Ok(value) => value,
            JobResult::Panic(payload) => unwind::resume_unwinding(payload),
            JobResult::None => unreachable!("stack job finished without a result"),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::queues::region::Region;
    use crate::worker::thread::{JobRef, Next, WorkerThread};
    use std::ptr::NonNull;

    unsafe fn never_run(_: NonNull<()>, _: &WorkerThread) -> Option<Next> {
        unreachable!("the test only makes and discards jobs")
    }

    /// A region job's wrapper is freed when the job runs (here: when it is
    /// discarded), and the next wrapper made on this thread gets the same
    /// memory. Its owner, still looking for the first job, must not take
    /// the second for it: `join` once did, comparing wrappers.
    #[test]
    fn a_region_job_is_known_by_its_data_not_by_its_reused_wrapper() {
        let region = Region::fresh();
        let (first_data, second_data) = (0u64, 1u64);
        let first_at = NonNull::from(&first_data).cast::<()>();
        let second_at = NonNull::from(&second_data).cast::<()>();
        // SAFETY: the data outlive the jobs, which never run.
        let first = unsafe { JobRef::new(first_at, never_run, region) };
        assert!(first.is_for(first_at));
        let first_wrapper = first.pointer;
        first.discard();
        // SAFETY: as above.
        let second = unsafe { JobRef::new(second_at, never_run, region) };
        assert_eq!(
            second.pointer, first_wrapper,
            "the freed wrapper is reused at once (per-thread free list)"
        );
        assert!(!second.is_for(first_at));
        assert!(second.is_for(second_at));
        second.discard();
    }
}
