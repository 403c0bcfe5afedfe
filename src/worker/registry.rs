//! The state a pool's workers share, and how work enters the pool.
//!
//! The registry owns, per worker slot, the stealer end of its deque, its
//! mailbox, its counters and its terminate latch; and, for the whole pool,
//! the shared queue, the sleep state and the static group of `'static`
//! tasks. `route_ready` is the one place that decides where a ready node
//! goes: a mailbox (affinity for another worker), the shared queue (enqueue
//! dispatch, or a spawn from outside the pool), or the calling worker's own
//! deque.
//!
//! A pool built with `num_threads(0)` has one *guest* slot and no threads:
//! `install`, `run` and `wait_idle` borrow the calling thread as worker 0,
//! and work injected from outside starts a temporary *drainer* thread that
//! takes the slot, runs by the six rules until nothing is left, and exits.
//! That keeps oneTBB's guarantee that an enqueued task runs even when no
//! worker would otherwise take it.
//!
//! Invariants: slot `i`'s deque is owned by exactly one thread at a time
//! (its worker thread, or the guest holding `guest`); every injection is
//! followed by the sleep protocol's `new_injected_jobs` (fence F1).

use crate::error::BuildError;
use crate::observe::stats::{Stats, WorkerCounters};
use crate::observe::trace::{self, Trace, TraceBuffer};
use crate::platform::latch::{CoreLatch, CountLatch, WakeOwner};
use crate::platform::sync::{AtomicBool, AtomicPtr, AtomicU64, Ordering, fence, hint, thread};
use crate::platform::topology::{CoreInfo, Pinning, Topology, VictimTiers};
use crate::platform::unwind;
use crate::queues::deque::{Stealer, Worker};
use crate::queues::dispatch::Dispatch;
use crate::queues::fifo::WorkerFifo;
use crate::queues::job::StackJob;
use crate::queues::mailbox::Mailbox;
use crate::queues::proxy::{Proxy, Taken};
use crate::queues::region;
use crate::queues::shared_queue::SharedQueue;
use crate::worker::group::Group;
use crate::worker::sleep::Sleep;
use crate::worker::thread::JobRef;
use crate::worker::thread::{
    GUEST_STACK_BUDGET, WorkerGuard, WorkerThread, default_thread_stack_size,
};
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::any::Any;
use std::ptr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

pub(crate) type PanicHandler = Box<dyn Fn(Box<dyn Any + Send>) + Send + Sync>;
pub(crate) type ThreadHandler = Box<dyn Fn(usize) + Send + Sync>;

/// Per-slot shared state.
struct ThreadInfo {
    stealer: Stealer<JobRef>,
    mailbox: Mailbox<WorkerThread>,
    /// The pool-level FIFO of `Pool::spawn_fifo` from this worker.
    fifo: WorkerFifo<WorkerThread>,
    /// On a line of its own: the owner writes it per task, while thieves
    /// read `stealer` per steal attempt.
    counters: CachePadded<WorkerCounters>,
    /// The pipeline engine whose job this slot's thread is executing (the
    /// innermost one; null if none): the run's caller frees nothing until
    /// no slot names its engine (`wait_until_left`). Written by the owner.
    inside_engine: CachePadded<AtomicPtr<()>>,
    /// Set when the pool shuts down; the worker's main loop waits on it.
    terminate: CoreLatch,
    /// This worker's trace records (with `Builder::trace(true)`).
    trace: TraceBuffer,
}

/// What `Builder` hands to `Registry::new`.
pub(crate) struct RegistryConfig {
    pub(crate) num_threads: usize,
    pub(crate) thread_name: Option<Box<dyn FnMut(usize) -> String>>,
    pub(crate) stack_size: Option<usize>,
    pub(crate) panic_handler: Option<PanicHandler>,
    pub(crate) start_handler: Option<ThreadHandler>,
    pub(crate) exit_handler: Option<ThreadHandler>,
    pub(crate) topology: Topology,
    pub(crate) pinning: Pinning,
    pub(crate) trace: bool,
}

pub(crate) struct Registry {
    thread_infos: Box<[CachePadded<ThreadInfo>]>,
    pub(crate) shared: SharedQueue<WorkerThread>,
    pub(crate) sleep: Sleep,
    pub(crate) static_group: Group,
    num_threads: usize,
    /// The deque of the guest slot of a zero-thread pool, while no thread
    /// holds the slot.
    guest: Mutex<Option<Worker<JobRef>>>,
    drainer_active: AtomicBool,
    unhandled_panics: AtomicU64,
    panic_handler: Option<PanicHandler>,
    start_handler: Option<ThreadHandler>,
    exit_handler: Option<ThreadHandler>,
    stack_size: Option<usize>,
    topology: Topology,
    pinning: Pinning,
    /// Tracing on, and the time trace records count from.
    trace: bool,
    epoch: Instant,
    /// Per worker slot: the other workers, nearest first.
    victims: Box<[VictimTiers]>,
}

impl Registry {
    pub(crate) fn new(
        mut config: RegistryConfig,
    ) -> Result<(Arc<Registry>, Vec<JoinHandle<()>>), BuildError> {
        let max = crate::worker::sleep::counters::MAX_THREADS;
        if config.num_threads > max {
            return Err(BuildError::TooManyThreads {
                requested: config.num_threads,
                max,
            });
        }
        let num_slots = config.num_threads.max(1);
        let deques: Vec<Worker<JobRef>> = (0..num_slots).map(|_| Worker::new_lifo()).collect();
        let thread_infos = deques
            .iter()
            .enumerate()
            .map(|(index, deque)| {
                CachePadded::new(ThreadInfo {
                    stealer: deque.stealer(),
                    mailbox: Mailbox::default(),
                    fifo: WorkerFifo::new(index),
                    counters: CachePadded::new(WorkerCounters::default()),
                    inside_engine: CachePadded::new(AtomicPtr::new(ptr::null_mut())),
                    terminate: CoreLatch::new(),
                    trace: TraceBuffer::default(),
                })
            })
            .collect();
        let mut deques = deques.into_iter();
        let guest = if config.num_threads == 0 {
            deques.next()
        } else {
            None
        };
        let registry = Arc::new(Registry {
            thread_infos,
            shared: SharedQueue::new(num_slots),
            sleep: Sleep::new(num_slots),
            static_group: Group::new_static(),
            num_threads: config.num_threads,
            guest: Mutex::new(guest),
            drainer_active: AtomicBool::new(false),
            unhandled_panics: AtomicU64::new(0),
            panic_handler: config.panic_handler.take(),
            start_handler: config.start_handler.take(),
            exit_handler: config.exit_handler.take(),
            stack_size: config.stack_size,
            victims: VictimTiers::for_pool(&config.topology, config.pinning, num_slots).into(),
            topology: config.topology,
            pinning: config.pinning,
            trace: config.trace,
            epoch: Instant::now(),
        });

        let mut handles = Vec::with_capacity(config.num_threads);
        for (index, deque) in deques.enumerate().take(config.num_threads) {
            let name = match config.thread_name.as_mut() {
                // A panicking naming closure must not leave the threads
                // already started running for the life of the process.
                Some(name) => match unwind::halt_unwinding(|| name(index)) {
                    Ok(name) => name,
                    Err(payload) => {
                        registry.stop_started(handles);
                        unwind::resume_unwinding(payload);
                    }
                },
                None => format!("sixfold-{index}"),
            };
            let mut builder = std::thread::Builder::new().name(name);
            if let Some(size) = config.stack_size {
                builder = builder.stack_size(size);
            }
            let registry_for_thread = registry.clone();
            match builder.spawn(move || main_loop(registry_for_thread, index, deque)) {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    registry.stop_started(handles);
                    return Err(BuildError::ThreadSpawn(e));
                }
            }
        }
        Ok((registry, handles))
    }

    /// A build failed part way: stop the threads already started and join
    /// them (each runs its exit handler), so nothing outlives the build.
    fn stop_started(&self, handles: Vec<JoinHandle<()>>) {
        self.terminate();
        for handle in handles {
            let _ = handle.join();
        }
    }

    /// Worker slots: the number of threads, or one guest slot for a pool
    /// without threads.
    #[inline]
    pub(crate) fn num_slots(&self) -> usize {
        self.thread_infos.len()
    }

    pub(crate) fn num_threads(&self) -> usize {
        self.num_threads
    }

    #[inline]
    pub(crate) fn counters(&self, index: usize) -> &WorkerCounters {
        &self.thread_infos[index].counters
    }

    /// Slot `index`'s thread starts executing a job of pipeline engine
    /// `engine`; returns the engine it was inside before (nested runs),
    /// for `left_engine`. No ordering needed on this store: the thread owns
    /// a token of the run now, and gives it away (or retires it) only by
    /// release operations that the run's caller acquires before it looks.
    pub(crate) fn entered_engine(&self, index: usize, engine: *mut ()) -> *mut () {
        let inside = &self.thread_infos[index].inside_engine;
        let outer = inside.load(Ordering::Relaxed);
        inside.store(engine, Ordering::Relaxed);
        outer
    }

    /// Slot `index`'s thread is done with the engine it entered last: it
    /// is inside `outer` again. Release: its last touches of the engine
    /// happen before the caller frees it.
    pub(crate) fn left_engine(&self, index: usize, outer: *mut ()) {
        self.thread_infos[index]
            .inside_engine
            .store(outer, Ordering::Release);
    }

    /// For the caller of a pipeline run whose last token retired: wait
    /// until no thread is still inside `engine`'s code (a thread that gave
    /// away or retired the last token returns from the engine a moment
    /// later; until it has, the engine must not be freed).
    pub(crate) fn wait_until_left(&self, engine: *mut ()) {
        for info in self.thread_infos.iter() {
            let mut spins = 0u32;
            while info.inside_engine.load(Ordering::Acquire) == engine {
                spins += 1;
                if spins < 64 {
                    hint::spin_loop();
                } else {
                    // Preempted on its way out: let it run.
                    thread::yield_now();
                }
            }
        }
    }

    #[inline]
    pub(crate) fn mailbox(&self, index: usize) -> &Mailbox<WorkerThread> {
        &self.thread_infos[index].mailbox
    }

    /// Worker `index`'s steal victims, nearest tier first.
    #[inline]
    pub(crate) fn victims(&self, index: usize) -> &VictimTiers {
        &self.victims[index]
    }

    pub(crate) fn tracing(&self) -> bool {
        self.trace
    }

    /// Nanoseconds since the pool was built.
    #[inline]
    pub(crate) fn trace_now(&self) -> u64 {
        trace::since(self.epoch)
    }

    pub(crate) fn trace_buffer(&self, index: usize) -> &TraceBuffer {
        &self.thread_infos[index].trace
    }

    /// Take every worker's records.
    pub(crate) fn take_trace(&self) -> Trace {
        let from_outside = WorkerThread::current_in(self).is_none();
        trace::collect(
            self.thread_infos.iter().map(|info| &info.trace),
            self.num_slots(),
            from_outside,
        )
    }

    pub(crate) fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The core worker `index` is bound to, if the pool pins.
    pub(crate) fn pinned_core(&self, index: usize) -> Option<&CoreInfo> {
        match self.pinning {
            Pinning::Cores => Some(self.topology.core_for_worker(index)),
            Pinning::None => None,
        }
    }

    #[inline]
    pub(crate) fn stealer(&self, index: usize) -> &Stealer<JobRef> {
        &self.thread_infos[index].stealer
    }

    /// Send a ready job where its placement says: the mailbox of its
    /// affinity, else the shared queue (enqueue dispatch, or from outside
    /// the pool), else `here`'s deque. `before_shared` runs just before a
    /// push to the shared queue (a waiter's flag, see `worker::WaitAccess`).
    #[inline]
    pub(crate) fn route(
        self: &Arc<Self>,
        job: JobRef,
        dispatch: Dispatch,
        affinity: Option<usize>,
        here: Option<&WorkerThread>,
        before_shared: impl FnOnce(),
    ) {
        let here_index = here.map(WorkerThread::index);
        match affinity {
            // Always the mailbox, even when the target is the calling worker:
            // its own deque could be stolen from, and affinity means "run
            // there". (Rules 1 and 2 still run such a task in place when
            // the target is the worker at hand.)
            Some(target) if target < self.num_slots() => {
                let mailbox = self.mailbox(target);
                match here {
                    // Our own affinity: our mailbox is all it needs.
                    Some(worker) if worker.index() == target => mailbox.push(job),
                    // A proxy: the mailbox and our own deque.
                    Some(worker) => {
                        let proxy = Proxy::new_pair(job, target, mailbox.progress());
                        mailbox.push(proxy);
                        self.sleep.new_mailbox_job(target);
                        worker.push(proxy);
                    }
                    // From outside: the mailbox and the shared queue.
                    None => {
                        let proxy = Proxy::new_pair(job, target, mailbox.progress());
                        mailbox.push(proxy);
                        self.sleep.new_mailbox_job(target);
                        before_shared();
                        self.inject(proxy, None);
                    }
                }
            }
            _ => match (dispatch, here) {
                (Dispatch::Spawn, Some(worker)) => worker.push(job),
                _ => {
                    before_shared();
                    self.inject(job, here_index)
                }
            },
        }
    }

    /// Worker `index`'s FIFO of `Pool::spawn_fifo` jobs.
    pub(crate) fn fifo(&self, index: usize) -> &WorkerFifo<WorkerThread> {
        &self.thread_infos[index].fifo
    }

    /// Push to the shared queue and make sure someone will see it: fence F1
    /// and the wake logic, and, from outside a zero-thread pool, a drainer.
    pub(crate) fn inject(self: &Arc<Self>, job: JobRef, here: Option<usize>) {
        let was_empty = self.shared.push(job, here);
        // Fence F1 and the injected-work wake even from a worker: a worker
        // in a nested wait may not take rule 5 itself (`WaitAccess`), so a
        // sleeper must not miss the push.
        self.sleep.new_injected_jobs(1, was_empty);
        if here.is_none() {
            self.start_drainer_if_needed();
        }
    }

    /// Push a job that a thread outside the pool blocks on to the shared
    /// queue's entry lane, which every wait of the pool may take from.
    pub(crate) fn inject_entry(self: &Arc<Self>, job: JobRef) {
        let was_empty = self.shared.push_entry(job);
        self.sleep.new_injected_jobs(1, was_empty);
        self.start_drainer_if_needed();
    }

    /// Run `f` on a worker of this pool and return its result: at once on
    /// one of its own workers; else as an entry job, which the caller waits
    /// for by working on its own pool if it is a worker of another pool
    /// (so pools that call into each other never deadlock), by blocking
    /// otherwise. On a pool without threads an outside caller becomes the
    /// guest worker. A panic in `f` is resumed here.
    pub(crate) fn in_worker<R, F>(self: &Arc<Self>, f: F) -> R
    where
        F: FnOnce(&WorkerThread) -> R + Send,
        R: Send,
    {
        match WorkerThread::current() {
            Some(worker) if Arc::ptr_eq(worker.registry(), self) => f(worker),
            Some(foreign) => self.in_worker_cross(foreign, f),
            None if self.num_threads == 0 => self.with_guest(f),
            None => self.in_worker_cold(f),
        }
    }

    /// `in_worker` from a worker of another pool: it keeps running its own
    /// pool's work (entries at any depth) until our worker sets its latch,
    /// which wakes it across the pools.
    fn in_worker_cross<R, F>(self: &Arc<Self>, foreign: &WorkerThread, f: F) -> R
    where
        F: FnOnce(&WorkerThread) -> R + Send,
        R: Send,
    {
        let latch = CountLatch::for_worker(foreign.registry().wake_owner(foreign.index()));
        let job = StackJob::new(
            || f(WorkerThread::current().expect("run by a worker")),
            latch,
        );
        // SAFETY: `job` stays on this frame until its latch is set: the wait
        // below returns only then.
        let job_ref = unsafe { job.as_job_ref(foreign.region()) };
        self.inject_entry(job_ref);
        let core = job.latch().as_core().expect("a worker's latch");
        foreign.wait_until(core, None);
        job.into_result()
    }

    /// `in_worker` from a thread outside every pool: block until done.
    fn in_worker_cold<R, F>(self: &Arc<Self>, f: F) -> R
    where
        F: FnOnce(&WorkerThread) -> R + Send,
        R: Send,
    {
        let job = StackJob::new(
            || f(WorkerThread::current().expect("run by a worker")),
            CountLatch::for_thread(),
        );
        // SAFETY: `job` stays on this frame until its latch is set.
        let job_ref = unsafe { job.as_job_ref(region::outside_current()) };
        self.inject_entry(job_ref);
        job.latch().wait_blocking();
        job.into_result()
    }

    /// A task panicked: a structured group records it (and cancels its
    /// not-started nodes); a `'static` task's panic goes to the handler.
    pub(crate) fn task_panicked(&self, group: &Group, payload: Box<dyn Any + Send>) {
        if !group.is_static() {
            group.record_panic(payload);
            return;
        }
        match &self.panic_handler {
            Some(handler) => {
                if let Err(inner) = unwind::halt_unwinding(|| handler(payload)) {
                    eprintln!(
                        "sixfold: the panic handler itself panicked: {}",
                        unwind::payload_message(&*inner)
                    );
                    self.unhandled_panics.fetch_add(1, Ordering::Relaxed);
                }
            }
            None => {
                eprintln!(
                    "sixfold: a task panicked: {}",
                    unwind::payload_message(&*payload)
                );
                self.unhandled_panics.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn stats(&self) -> Stats {
        Stats {
            workers: self
                .thread_infos
                .iter()
                .map(|info| info.counters.snapshot())
                .collect(),
            unhandled_panics: self.unhandled_panics.load(Ordering::Relaxed),
        }
    }

    /// The `WakeOwner` for a latch that worker `index` of this registry
    /// will wait on.
    pub(crate) fn wake_owner(self: &Arc<Self>, index: usize) -> WakeOwner {
        WakeOwner {
            registry: Arc::as_ptr(self).cast(),
            index,
            set_and_wake: set_and_wake_owner,
        }
    }

    /// Ask every worker to exit once its work is done.
    pub(crate) fn terminate(&self) {
        for (index, info) in self.thread_infos.iter().enumerate() {
            // SAFETY: the registry owns the latch; it outlives this call.
            if unsafe { CoreLatch::set(&info.terminate) } {
                self.sleep.notify_worker_latch_is_set(index);
            }
        }
    }

    /// Run `f` with the calling thread as the guest worker of a zero-thread
    /// pool (waiting for the slot if another thread holds it).
    pub(crate) fn with_guest<R>(self: &Arc<Self>, f: impl FnOnce(&WorkerThread) -> R) -> R {
        debug_assert_eq!(self.num_threads, 0);
        let mut slot = self.guest.lock();
        let deque = slot.take().expect("guest slot held twice");
        let worker = WorkerThread::enter(deque, 0, self.clone(), GUEST_STACK_BUDGET);
        // Put the deque back even if `f` panics.
        struct Restore<'a> {
            worker: Option<WorkerGuard>,
            slot: &'a mut Option<Worker<JobRef>>,
        }
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                if let Some(worker) = self.worker.take() {
                    *self.slot = Some(worker.leave());
                }
            }
        }
        let result = {
            let restore = Restore {
                worker: Some(worker),
                slot: &mut slot,
            };
            f(restore.worker.as_deref().expect("guest worker present"))
        };
        drop(slot);
        // Work the caller left behind (spawned or enqueued while it was the
        // guest) must not wait for the next caller: hand it to a drainer.
        if self.guest_has_work() {
            self.start_drainer_if_needed();
        }
        result
    }

    /// On a zero-thread pool, make sure a drainer thread will take what was
    /// just injected.
    fn start_drainer_if_needed(self: &Arc<Self>) {
        if self.num_threads > 0 {
            return;
        }
        // Pairs with the fence in `drainer_main` after it clears the flag:
        // either we see the flag clear and start a drainer, or the drainer
        // sees our push when it re-checks.
        fence(Ordering::SeqCst);
        if self.drainer_active.swap(true, Ordering::SeqCst) {
            return;
        }
        let registry = self.clone();
        let mut builder = std::thread::Builder::new().name("sixfold-drainer".into());
        if let Some(size) = self.stack_size {
            builder = builder.stack_size(size);
        }
        if let Err(e) = builder.spawn(move || drainer_main(registry)) {
            self.drainer_active.store(false, Ordering::SeqCst);
            eprintln!(
                "sixfold: could not start a drainer thread ({e}); queued tasks run at the next install, run, wait_idle or drop"
            );
        }
    }

    fn guest_has_work(&self) -> bool {
        !self.shared.is_empty() || !self.mailbox(0).is_empty() || !self.stealer(0).is_empty()
    }
}

impl Drop for Registry {
    /// Give back proxy entries left in the shared queue, the mailboxes and a
    /// guest deque: their tasks ran through the other entry (the pool only
    /// stops once its tasks are done), so each take finds them claimed.
    fn drop(&mut self) {
        let guest = self.guest.get_mut().take();
        let mut leftovers: Vec<JobRef> = std::iter::from_fn(|| self.shared.pop(0)).collect();
        for info in self.thread_infos.iter() {
            leftovers.extend(std::iter::from_fn(|| info.mailbox.pop()));
        }
        if let Some(deque) = guest {
            leftovers.extend(std::iter::from_fn(|| deque.pop()));
        }
        for job in leftovers {
            if job.is_proxy() {
                // SAFETY: the entry came out of a queue; nobody else holds it.
                let taken = unsafe { Proxy::take(job) };
                debug_assert!(
                    matches!(taken, Taken::Nothing),
                    "a task was lost at pool drop"
                );
            }
        }
    }
}

/// `WakeOwner::set_and_wake` for registries: set the latch and wake its
/// owner, keeping the registry alive across the wake.
///
/// # Safety
/// `registry` points at a live registry (the waiting worker holds it).
unsafe fn set_and_wake_owner(registry: *const (), index: usize, latch: *const CoreLatch) {
    let registry = registry.cast::<Registry>();
    // The woken owner may return at once and drop the last handle to its
    // pool. If we are not a worker of that pool (the pool's drop joins its
    // own workers, so they are safe), hold a reference across the wake.
    // SAFETY: live until the latch is set, per the caller's contract.
    let is_own_worker = WorkerThread::current_in(unsafe { &*registry }).is_some();
    let keep_alive = if is_own_worker {
        None
    } else {
        // SAFETY: `registry` came from `Arc::as_ptr` and is still alive.
        unsafe {
            Arc::increment_strong_count(registry);
            Some(Arc::from_raw(registry))
        }
    };
    // SAFETY: the latch is live until set; not touched afterwards.
    if unsafe { CoreLatch::set(latch) } {
        // SAFETY: still alive: our own worker thread or `keep_alive`.
        unsafe { (*registry).sleep.notify_worker_latch_is_set(index) };
    }
    drop(keep_alive);
}

/// A worker thread's life: start handler, the six rules until terminated,
/// exit handler.
fn main_loop(registry: Arc<Registry>, index: usize, deque: Worker<JobRef>) {
    // Task panics are caught per task; a panic out here is a scheduler bug,
    // and a silently dead worker would hang its pool. Fail loudly instead.
    let abort_guard = unwind::AbortIfPanic;
    if let Some(core) = registry.pinned_core(index) {
        let id = core_affinity::CoreId {
            id: core.os_index as usize,
        };
        if !core_affinity::set_for_current(id) {
            eprintln!(
                "sixfold: could not pin worker {index} to CPU {}",
                core.os_index
            );
        }
    }
    let stack_budget = registry
        .stack_size
        .unwrap_or_else(default_thread_stack_size);
    let worker = WorkerThread::enter(deque, index, registry.clone(), stack_budget);
    if let Some(handler) = &registry.start_handler
        && let Err(payload) = unwind::halt_unwinding(|| handler(index))
    {
        eprintln!(
            "sixfold: start handler of worker {index} panicked: {}",
            unwind::payload_message(&*payload)
        );
    }
    worker.wait_until(&registry.thread_infos[index].terminate, None);
    worker.release_leftovers();
    if let Some(handler) = &registry.exit_handler
        && let Err(payload) = unwind::halt_unwinding(|| handler(index))
    {
        eprintln!(
            "sixfold: exit handler of worker {index} panicked: {}",
            unwind::payload_message(&*payload)
        );
    }
    drop(worker.leave());
    std::mem::forget(abort_guard);
}

/// The temporary worker of a zero-thread pool: drain, then exit, unless new
/// work arrived while it was deciding to.
fn drainer_main(registry: Arc<Registry>) {
    loop {
        registry.with_guest(|worker| worker.drain());
        registry.drainer_active.store(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if !registry.guest_has_work() || registry.drainer_active.swap(true, Ordering::SeqCst) {
            return;
        }
    }
}
