//! A worker thread and the six-rule loop.
//!
//! After finishing a task a worker takes its next one by the first rule
//! that applies:
//!
//! | rule | source                                   | where                           |
//! |------|------------------------------------------|---------------------------------|
//! | 1    | the task `execute` returned              | `task::execute_node` -> `run_chain` |
//! | 2    | the successor this task made ready       | `task::execute_node` -> `run_chain` |
//! | 3    | the tail of the own deque (LIFO)         | `find_work`                     |
//! | 4    | the own mailbox                          | `find_work`                     |
//! | 5    | approximately the front of the shared queue | `find_work`                  |
//! | 6    | the head of a random other worker's deque | `find_work` -> `steal`         |
//!
//! Rules 1 and 2 are decided by the task that just finished, so they come
//! back from `JobRef::execute` as a `Next`; `run_chain` (here) follows them
//! without touching any queue. When the chain ends, `find_work` tries rules
//! 3 to 6 in order (`search.rs`). A worker that finds nothing enters the
//! sleep protocol (`sleep/`), and a worker that waits for a latch (`run`,
//! the pool's terminate latch) keeps doing all of this until the latch is
//! set (`wait.rs`, which also bounds what a wait nested in a task takes).
//!
//! This module holds the worker itself: its state, its TLS (`enter`,
//! `current`, `WorkerGuard::leave`), the pushes and pops of its own deque
//! and the run chain. The child modules are further `impl WorkerThread`
//! blocks, so that each reads the state declared here without it being
//! visible outside: `search.rs` (rules 3 to 6), `wait.rs` (waits and the
//! idle path) and `tracing.rs` (the per-worker trace records).
//!
//! Invariants: only the owning thread pushes to or pops from the tail of
//! its deque and pops its mailbox; a `JobRef` taken from any source is
//! executed exactly once; a `WorkerThread` is reachable from its thread's
//! TLS exactly while it lives.

mod access;
mod search;
mod tracing;
mod wait;

use crate::observe::stats::{Rule, WorkerCounters};
use crate::platform::node_alloc::ThreadCache;
use crate::queues::deque::Worker;
use crate::queues::job::{self, Runner};
use crate::queues::lent::LentSlot;
use crate::queues::region::{self, Region};
use crate::worker::credit::CreditFrames;
use crate::worker::group::Group;
use crate::worker::registry;
use std::alloc::{self, Layout};
use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::Arc;

pub(crate) use search::Resolved;
use tracing::TraceLocal;

/// The calling thread's isolation region: its worker's, or, on a thread
/// outside every pool, the one `isolate` put it in.
pub(crate) fn current_region() -> Region {
    match WorkerThread::current() {
        Some(worker) => worker.region(),
        None => region::outside_current(),
    }
}

/// The stack size std gives a thread when none is asked for.
pub(crate) fn default_thread_stack_size() -> usize {
    std::env::var("RUST_MIN_STACK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2 << 20)
}

/// How much stack a guest thread (the caller of a zero-thread pool) is
/// assumed to have left where it enters: its real size is unknown.
pub(crate) const GUEST_STACK_BUDGET: usize = 1 << 20;

/// An address in the caller's frame: the stack pointer, give or take a
/// frame. Stacks grow down on every platform Rust's std threads run on.
#[inline(always)]
fn approximate_stack_pointer() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

thread_local! {
    static WORKER_THREAD: Cell<*const WorkerThread> = const { Cell::new(ptr::null()) };
    static SPARE_MEMORY: SpareMemory = const { SpareMemory(Cell::new(None)) };
}

/// The memory of one `WorkerThread` this thread has left, kept for its next
/// `enter`: a guest of a zero-thread pool enters and leaves once per call,
/// and the system allocator's over-aligned allocation and free of a
/// worker's 128-byte-aligned box cost as much as the rest of the call.
struct SpareMemory(Cell<Option<NonNull<WorkerThread>>>);

impl Drop for SpareMemory {
    fn drop(&mut self) {
        if let Some(memory) = self.0.take() {
            // SAFETY: allocated in `allocate_worker` with this layout, and
            // holds no value (its worker was moved out in `leave`).
            unsafe { alloc::dealloc(memory.as_ptr().cast(), Layout::new::<WorkerThread>()) };
        }
    }
}

/// Memory for a `WorkerThread`: this thread's spare, else a fresh block.
fn allocate_worker() -> NonNull<WorkerThread> {
    if let Ok(Some(memory)) = SPARE_MEMORY.try_with(|spare| spare.0.take()) {
        return memory;
    }
    let layout = Layout::new::<WorkerThread>();
    // SAFETY: the layout has a non-zero size.
    let memory = unsafe { alloc::alloc(layout) };
    NonNull::new(memory.cast()).unwrap_or_else(|| alloc::handle_alloc_error(layout))
}

/// Give back the memory of a `WorkerThread` whose value was moved out:
/// kept as this thread's spare if it has none, else freed.
///
/// # Safety
/// `memory` came from `allocate_worker` and holds no value any more.
unsafe fn release_worker(memory: NonNull<WorkerThread>) {
    let kept = SPARE_MEMORY.try_with(|spare| match spare.0.get() {
        None => {
            spare.0.set(Some(memory));
            true
        }
        Some(_) => false,
    });
    if kept != Ok(true) {
        // SAFETY: the caller's: allocated with this layout, now empty.
        unsafe { alloc::dealloc(memory.as_ptr().cast(), Layout::new::<WorkerThread>()) };
    }
}

/// Owns the calling thread's `WorkerThread` while it is a worker; `leave`
/// ends that.
pub(crate) struct WorkerGuard {
    ptr: NonNull<WorkerThread>,
}

impl std::ops::Deref for WorkerGuard {
    type Target = WorkerThread;
    fn deref(&self) -> &WorkerThread {
        // SAFETY: the allocation lives until `leave`, which consumes the
        // guard; only shared references are ever made from it.
        unsafe { self.ptr.as_ref() }
    }
}

impl WorkerGuard {
    /// Restore the thread's TLS and give the deque back (for a guest slot).
    pub(crate) fn leave(self) -> Worker<JobRef> {
        self.flush_trace();
        WORKER_THREAD.with(|cell| cell.set(self.previous));
        // SAFETY: written in `enter`; the TLS no longer points at it and
        // this guard, its last user, is consumed: the value is moved out
        // once, and its memory given back empty.
        let worker = unsafe { self.ptr.as_ptr().read() };
        // SAFETY: from `allocate_worker`, and its value was just moved out.
        unsafe { release_worker(self.ptr) };
        worker.deque
    }
}

/// A job as a pool's queues hold it: run by a `WorkerThread`.
pub(crate) type JobRef = job::JobRef<WorkerThread>;
/// What a finished job hands straight to its worker (rules 1 and 2).
pub(crate) type Next = job::Next<WorkerThread>;
/// The entry point of a job run by a `WorkerThread`.
pub(crate) type ExecuteFn = job::ExecuteFn<WorkerThread>;
/// A pool's shared state, with `WorkerThread`s as its workers.
pub(crate) type Registry = registry::Registry<WorkerThread>;

/// The queues see a worker only through this (see `queues/job.rs`).
impl Runner for WorkerThread {
    #[inline]
    fn index(&self) -> usize {
        WorkerThread::index(self)
    }
    #[inline]
    fn region(&self) -> Region {
        WorkerThread::region(self)
    }
    #[inline]
    fn set_region(&self, region: Region) {
        WorkerThread::set_region(self, region)
    }
    #[inline]
    fn push(&self, job: JobRef) {
        WorkerThread::push(self, job)
    }
}

/// The state a worker keeps on its own thread. Aligned to its own cache
/// lines: two workers' boxes allocated side by side must not share one.
#[repr(align(128))]
pub(crate) struct WorkerThread {
    deque: Worker<JobRef>,
    index: usize,
    rng: Cell<u64>,
    /// Per worker slot: how many offers that worker had made at our last
    /// look at its lent work (`lent.rs`: we take only an offer seen twice).
    lent_seen: Box<[Cell<u64>]>,
    registry: Arc<Registry>,
    /// The TLS value to restore when this worker ends (a guest may run on a
    /// thread that already is a worker of another pool).
    previous: *const WorkerThread,
    /// This worker's counters in the registry (looked up once: the hot
    /// paths count every task).
    counters: *const WorkerCounters,
    /// This worker's lent work in the registry (looked up once: a light
    /// pipeline offers and withdraws once an item).
    lent: *const LentSlot<JobRef>,
    /// This thread's node-allocator cache (None only on a thread whose
    /// thread-locals are being torn down).
    node_cache: Option<ThreadCache>,
    /// Waits on this thread's stack right now (0 in no wait).
    wait_depth: Cell<u32>,
    /// The lane this worker's next pop from the enqueue lanes starts its
    /// scan at (its own index first, then one further each pop:
    /// `SharedQueue::pop_lanes`), so no lane waits behind another that its
    /// worker keeps refilling.
    lane_turn: Cell<usize>,
    /// This worker ran a share of a parallel loop and found nothing else:
    /// it keeps searching a while before the sleep rounds
    /// (`search_or_sleep`), for the next step of the loop.
    ran_loop_share: Cell<bool>,
    /// The structured group (scope or run) of the task or scope body
    /// running here now, or null: what `is_cancelled` asks, and the parent
    /// of a scope or run started here (`Group::set_parent`).
    cancel_context: Cell<*const Group>,
    /// The outermost wait is a pool thread's main loop, whose latch only
    /// says "shut down" (not a guest's, which waits for its caller's work).
    serving: Cell<bool>,
    /// The isolation region of what this worker runs right now: adopted
    /// from each job it starts, set by `isolate` (`fork_join/isolate.rs`).
    region: Cell<Region>,
    /// A nested wait whose frame lies below this address (half of the
    /// stack used) does not steal.
    steal_floor: usize,
    /// Units of a scope's group that the scope job (or scope body) running
    /// on this thread added ahead for its spawns (`credit.rs`).
    unit_credit: CreditFrames,
    /// The pool records a trace (`trace.rs`): copied here, so the hot path
    /// tests a flag it owns.
    tracing: bool,
    /// What tracing keeps on the worker (its stream allocated only when
    /// the pool traces): in place, not boxed, so that a guest's entry
    /// allocates nothing more for it and a traced event skips a load.
    trace: TraceLocal,
}

impl WorkerThread {
    /// Make the calling thread worker `index` of `registry` until the
    /// returned guard's `leave`.
    /// `stack_budget`: the stack the thread has from here on; the stack
    /// guard stops steals in nested waits once half of it is used.
    pub(crate) fn enter(
        deque: Worker<JobRef>,
        index: usize,
        registry: Arc<Registry>,
        stack_budget: usize,
    ) -> WorkerGuard {
        let previous = WORKER_THREAD.with(Cell::get);
        // A guest starts in the region of the thread that enters.
        let start_region = current_region();
        let registry_tracing = registry.tracing();
        let seed =
            (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (&previous as *const _ as u64);
        // A raw pointer from the start: the TLS copy and the guard are equal,
        // shared aliases (a live Box would claim uniqueness).
        let counters: *const WorkerCounters = registry.counters(index);
        let lent: *const LentSlot<JobRef> = registry.lent(index);
        let trace = TraceLocal::new(registry.trace_buffer(index), registry_tracing);
        let memory = allocate_worker();
        let worker = WorkerThread {
            deque,
            index,
            counters,
            lent,
            rng: Cell::new(seed | 1),
            lent_seen: (0..registry.num_slots())
                .map(|_| Cell::new(u64::MAX))
                .collect(),
            registry,
            previous,
            node_cache: ThreadCache::current(),
            wait_depth: Cell::new(0),
            lane_turn: Cell::new(index),
            ran_loop_share: Cell::new(false),
            cancel_context: Cell::new(ptr::null()),
            serving: Cell::new(false),
            unit_credit: CreditFrames::new(),
            region: Cell::new(start_region),
            tracing: registry_tracing,
            trace,
            steal_floor: approximate_stack_pointer().saturating_sub(stack_budget / 2),
        };
        // SAFETY: `memory` is unused and laid out for a `WorkerThread`
        // (`allocate_worker`); `leave` moves the value out again.
        unsafe { memory.as_ptr().write(worker) };
        WORKER_THREAD.with(|cell| cell.set(memory.as_ptr().cast_const()));
        WorkerGuard { ptr: memory }
    }

    /// The worker the calling thread is, if any.
    #[inline]
    pub(crate) fn current() -> Option<&'static WorkerThread> {
        let ptr = WORKER_THREAD.with(Cell::get);
        // SAFETY: the pointer is set only while the WorkerThread lives
        // and is cleared (restored) before it is dropped; the reference does
        // not escape the thread because WorkerThread is !Sync.
        unsafe { ptr.as_ref() }
    }

    /// The calling thread's worker, if it belongs to `registry`.
    #[inline]
    pub(crate) fn current_in(registry: &Registry) -> Option<&'static WorkerThread> {
        Self::current().filter(|w| ptr::eq(&*w.registry, registry))
    }

    #[inline]
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    #[inline]
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    #[inline]
    pub(crate) fn counters(&self) -> &WorkerCounters {
        // SAFETY: points into the registry, which this worker keeps alive.
        unsafe { &*self.counters }
    }

    /// The isolation region of what this worker runs now.
    #[inline]
    pub(crate) fn region(&self) -> Region {
        self.region.get()
    }

    /// Enter or leave an isolated region (`isolate`).
    #[inline]
    pub(crate) fn set_region(&self, region: Region) {
        self.region.set(region);
    }

    /// Push onto the tail of the own deque and tell the sleep protocol.
    #[inline]
    pub(crate) fn push(&self, job: JobRef) {
        let was_empty = self.deque.is_empty();
        self.deque.push(job);
        self.registry.sleep.new_internal_jobs(1, was_empty);
    }

    /// Push onto the tail of the own deque without telling the sleep
    /// protocol: for work that idle workers may take but that is not worth
    /// waking one for yet (a pipeline chain lent out around a stage body,
    /// `pipeline/engine/lend.rs`). Sleepers find it at their next heartbeat
    /// (`Sleep::start_heartbeat`), searchers at once.
    #[inline]
    pub(crate) fn push_quiet(&self, job: JobRef) {
        self.deque.push(job);
    }

    /// Pop the tail of the own deque (rule 3) as it is: the caller looks
    /// for a job it pushed itself, so no proxy is resolved.
    #[inline]
    pub(crate) fn pop_own(&self) -> Option<JobRef> {
        self.deque.pop()
    }

    /// `Pool::spawn_fifo` from this worker: the job goes behind its
    /// earlier FIFO spawns, and an indirect job onto its deque.
    pub(crate) fn push_fifo(&self, job: JobRef) {
        // SAFETY: we are worker `index` of the registry, which owns the
        // FIFO and outlives its workers.
        let indirect = unsafe { self.registry.fifo(self.index).push(self.index, job) };
        self.push(indirect);
    }

    /// Pop the newest job of the own deque (rule 3) that a wait in region
    /// `region` (the worker's current one) may run, for `join` taking its
    /// second half back.
    #[inline(always)]
    pub(crate) fn pop_local(&self, region: Region) -> Option<JobRef> {
        if region.is_isolated() {
            return self.pop_own_in(region);
        }
        self.deque.pop()
    }

    /// The newest job of region `region` in the own deque. The newer jobs
    /// of other regions above it are popped and pushed back in order (a
    /// Chase-Lev deque cannot skip); since thieves might have looked while
    /// they were out, the push-back tells the sleep protocol as an
    /// injection does.
    #[cold]
    fn pop_own_in(&self, region: Region) -> Option<JobRef> {
        let mut aside = Vec::new();
        let found = loop {
            match self.deque.pop() {
                Some(job) if job.region() == region => break Some(job),
                Some(job) => aside.push(job),
                None => break None,
            }
        };
        if !aside.is_empty() {
            for job in aside.into_iter().rev() {
                self.deque.push(job);
            }
            self.registry.sleep.new_injected_jobs(1, true);
        }
        found
    }

    /// The lane this worker's next pop from the enqueue lanes starts at
    /// (its own index first, then each next one in turn).
    #[inline]
    pub(crate) fn next_lane_turn(&self) -> usize {
        let turn = self.lane_turn.get();
        self.lane_turn.set(turn.wrapping_add(1));
        turn
    }

    /// Count a task this worker ran outside `run_chain` (a join's second
    /// half taken back and run inline).
    #[inline]
    pub(crate) fn count_task(&self, rule: Rule) {
        self.counters().task(rule);
    }

    /// The scope credit frames of this thread (`credit.rs`).
    #[inline]
    pub(crate) fn unit_credit(&self) -> &CreditFrames {
        &self.unit_credit
    }

    /// Would another worker take work offered now? Some worker of the pool
    /// is searching or asleep, and everything this worker offered so far
    /// was taken (its deque is empty: while a job waits there, a searcher
    /// should take that one first). A racy hint for the loops' demand cut
    /// (`loops/split.rs`); two loads, no write.
    #[inline]
    pub(crate) fn sees_demand(&self) -> bool {
        self.deque.is_empty() && self.registry.sleep.has_inactive_threads()
    }

    /// Does this worker have tasks waiting for it alone to take (its deque
    /// or its mailbox)?
    pub(crate) fn has_pending_tasks(&self) -> bool {
        !self.deque.is_empty() || !self.registry.mailbox(self.index).is_empty()
    }

    /// Rule 3 for a task that just finished, without going back through
    /// the worker's loop: the newest job of the own deque, if it is one
    /// `is_ready_task` accepts; None if the deque is empty or its newest
    /// job is not such a task (it stays there, for the loop to take).
    ///
    /// Only in a pool thread's main loop outside isolated regions, where
    /// the loop would take exactly that job next: its latch only asks the
    /// thread to shut down, so not probing it first changes nothing a
    /// caller waits for (a nested wait's latch would: it returns as soon
    /// as its own work is done, not after the worker's other work).
    #[inline(always)]
    pub(crate) fn pop_own_task_in_main_loop(
        &self,
        is_ready_task: impl FnOnce(&JobRef) -> bool,
    ) -> Option<JobRef> {
        if !self.serving.get() || self.wait_depth.get() != 1 || self.region.get().is_isolated() {
            return None;
        }
        let job = self.deque.pop()?;
        if is_ready_task(&job) {
            return Some(job);
        }
        // Back where it was, for the loop (a proxy needs resolving first).
        self.deque.push(job);
        None
    }

    /// Rules 1 and 2: run `job`, then whatever each task hands straight back.
    /// (A job of an isolated region takes on its region as it runs: see
    /// `job::RegionJob`.)
    #[inline]
    pub(crate) fn run_chain(&self, job: JobRef, rule: Rule) {
        // A job taken here belongs to no scope or run of ours: those that
        // do set their own context (`cancel_context`); the rest (a stolen
        // join half, a pipeline chain) run in none, not in the one this
        // wait is nested in.
        self.with_cancel_context(ptr::null(), || self.run_chain_in_no_context(job, rule));
    }

    #[inline]
    fn run_chain_in_no_context(&self, mut job: JobRef, mut rule: Rule) {
        loop {
            self.counters().task(rule);
            let next = if self.tracing {
                self.run_traced(job, rule)
            } else {
                // SAFETY: every job reaching here was taken from exactly one
                // queue or handed back by the task that owned it: run once.
                unsafe { job.execute(self) }
            };
            match next {
                Some(next) => {
                    job = next.job;
                    rule = next.rule;
                }
                None => return,
            }
        }
    }

    /// This thread's node-allocator cache, reached without a thread-local
    /// lookup (valid while this worker runs on its thread).
    #[inline]
    pub(crate) fn node_cache(&self) -> Option<ThreadCache> {
        self.node_cache
    }

    /// The structured group of what runs here now (see `cancel_context`).
    #[inline]
    pub(crate) fn cancel_context(&self) -> *const Group {
        self.cancel_context.get()
    }

    /// Make `group` the context of what runs here from now on, with no
    /// restore: for a caller that restores the context it found itself
    /// (the task-node loop sets each body's group and restores once).
    #[inline]
    pub(crate) fn set_cancel_context(&self, group: *const Group) {
        self.cancel_context.set(group);
    }

    /// Run `f` as work of `group` (its tasks and nested scopes see it as
    /// their context), then restore the context, also if `f` unwinds.
    #[inline]
    pub(crate) fn with_cancel_context<R>(&self, group: *const Group, f: impl FnOnce() -> R) -> R {
        struct Restore<'w>(&'w Cell<*const Group>, *const Group);
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                self.0.set(self.1);
            }
        }
        let _restore = Restore(&self.cancel_context, self.cancel_context.replace(group));
        f()
    }
}
