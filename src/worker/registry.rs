//! The state a pool's workers share, and how work enters the pool.
//!
//! The registry owns, per worker slot, the stealer end of its deque, its
//! mailbox, its counters and its terminate latch; and, for the whole pool,
//! the shared queue, the sleep state and the static group of `'static`
//! tasks. `Registry::route` is the one place that decides where a ready
//! job goes: a mailbox (affinity for another worker), the shared queue
//! (enqueue dispatch, or a spawn from outside the pool), or the calling
//! worker's own deque. (The task layer's `ReadyNode::route_from` sends the
//! common case, a spawn without affinity from a worker, straight to that
//! worker's deque, which is what `route` would do with it.)
//!
//! The registry is generic over its worker type `W`, as the queues are, so
//! that it does not import the worker above it; `worker/thread/` names
//! `Registry<WorkerThread>`. A pool built with `num_threads(0)` has one
//! *guest* slot and no threads (see `lifecycle.rs`); work injected from
//! outside it starts a temporary *drainer* thread, whose body is the
//! function pointer `lifecycle.rs` passed to `Registry::new`. That keeps
//! oneTBB's guarantee that an enqueued task runs even when no worker would
//! otherwise take it.
//!
//! Invariants: slot `i`'s deque is owned by exactly one thread at a time
//! (its worker thread, or the guest holding `guest`); every injection is
//! followed by the sleep protocol's `new_injected_jobs` (fence F1).

use crate::error::BuildError;
use crate::observe::clock::TraceClock;
use crate::observe::stats::{Stats, WorkerCounters};
use crate::observe::trace::{self, Trace, TraceBuffer};
use crate::platform::latch::CoreLatch;
use crate::platform::sync::{AtomicBool, AtomicPtr, AtomicU64, Ordering, fence, hint, thread};
use crate::platform::topology::{CoreInfo, Pinning, Topology, VictimTiers};
use crate::platform::unwind;
use crate::queues::deque::{Stealer, Worker};
use crate::queues::dispatch::{Dispatch, SharedPlace};
use crate::queues::fifo::WorkerFifo;
use crate::queues::job::{JobRef, Runner};
use crate::queues::lent::LentSlot;
use crate::queues::mailbox::Mailbox;
use crate::queues::proxy::{Proxy, Taken};
use crate::queues::shared_queue::SharedQueue;
use crate::worker::group::Group;
use crate::worker::sleep::Sleep;
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::any::Any;
use std::ptr;
use std::sync::Arc;

/// The owner's end of a worker's deque.
pub(crate) type Deque<W> = Worker<JobRef<W>>;

pub(crate) type PanicHandler = Box<dyn Fn(Box<dyn Any + Send>) + Send + Sync>;
pub(crate) type ThreadHandler = Box<dyn Fn(usize) + Send + Sync>;

/// Per-slot shared state.
struct ThreadInfo<W> {
    stealer: Stealer<JobRef<W>>,
    mailbox: Mailbox<W>,
    /// Work the worker lends out around a pipeline stage body (`lent.rs`).
    lent: CachePadded<LentSlot<JobRef<W>>>,
    /// The pool-level FIFO of `Pool::spawn_fifo` from this worker.
    fifo: WorkerFifo<W>,
    /// On a line of its own: the owner writes it per task, while thieves
    /// read `stealer` per steal attempt.
    counters: CachePadded<WorkerCounters>,
    /// A hazard pointer: the shared object (a pipeline engine) whose code
    /// this slot's thread runs, innermost, or null. The object's owner
    /// frees nothing while a slot names it (`wait_until_none_inside`).
    /// Written by the slot's thread only.
    busy_inside: CachePadded<AtomicPtr<()>>,
    /// Set when the pool shuts down; the worker's main loop waits on it.
    terminate: CoreLatch,
    /// This worker's trace records (with `Builder::trace(true)`).
    trace: TraceBuffer,
}

/// What `Builder` hands to `Registry::start`.
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
    /// Slot 0 is the building thread's (`Builder::use_current_thread`): no
    /// thread is started for it.
    pub(crate) adopt_current_thread: bool,
}

pub(crate) struct Registry<W: Runner> {
    thread_infos: Box<[CachePadded<ThreadInfo<W>>]>,
    pub(crate) shared: SharedQueue<W>,
    pub(crate) sleep: Sleep,
    pub(crate) static_group: Group,
    pub(super) num_threads: usize,
    /// The deque of the guest slot of a zero-thread pool, while no thread
    /// holds the slot.
    pub(super) guest: Mutex<Option<Worker<JobRef<W>>>>,
    /// What a drainer thread runs (`lifecycle.rs`).
    drainer: fn(Arc<Registry<W>>),
    pub(super) drainer_active: AtomicBool,
    unhandled_panics: AtomicU64,
    panic_handler: Option<PanicHandler>,
    pub(super) start_handler: Option<ThreadHandler>,
    pub(super) exit_handler: Option<ThreadHandler>,
    pub(super) stack_size: Option<usize>,
    topology: Topology,
    pinning: Pinning,
    /// Tracing on, and the clock trace records count in.
    trace: bool,
    clock: TraceClock,
    /// Per worker slot: the other workers, nearest first.
    victims: Box<[VictimTiers]>,
}

impl<W: Runner> Registry<W> {
    /// The registry for `config`, and the deques of the worker threads to
    /// start (a zero-thread pool keeps its guest deque). `drainer` is what
    /// a drainer thread of a zero-thread pool runs.
    pub(crate) fn new(
        config: &mut RegistryConfig,
        drainer: fn(Arc<Registry<W>>),
    ) -> Result<(Arc<Self>, Vec<Deque<W>>), BuildError> {
        let max = crate::worker::sleep::counters::MAX_THREADS;
        if config.num_threads > max {
            return Err(BuildError::TooManyThreads {
                requested: config.num_threads,
                max,
            });
        }
        let num_slots = config.num_threads.max(1);
        // One slot: no other worker's rule 6 ever visits its deque (the
        // victims are the other slots), so it pops without a fence.
        let deques: Vec<Worker<JobRef<W>>> = (0..num_slots)
            .map(|_| match num_slots {
                1 => Worker::new_lifo_unshared(),
                _ => Worker::new_lifo(),
            })
            .collect();
        let thread_infos = deques
            .iter()
            .enumerate()
            .map(|(index, deque)| {
                CachePadded::new(ThreadInfo {
                    stealer: deque.stealer(),
                    mailbox: Mailbox::default(),
                    lent: CachePadded::new(LentSlot::new()),
                    fifo: WorkerFifo::new(index),
                    counters: CachePadded::new(WorkerCounters::default()),
                    busy_inside: CachePadded::new(AtomicPtr::new(ptr::null_mut())),
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
            drainer,
            num_threads: config.num_threads,
            guest: Mutex::new(guest),
            drainer_active: AtomicBool::new(false),
            unhandled_panics: AtomicU64::new(0),
            panic_handler: config.panic_handler.take(),
            start_handler: config.start_handler.take(),
            exit_handler: config.exit_handler.take(),
            stack_size: config.stack_size,
            victims: VictimTiers::for_pool(&config.topology, config.pinning, num_slots).into(),
            topology: config.topology.clone(),
            pinning: config.pinning,
            trace: config.trace,
            clock: TraceClock::new(),
        });

        Ok((registry, deques.take(config.num_threads).collect()))
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

    /// Mark slot `index`'s thread busy inside `object` (a pipeline
    /// engine whose job it runs) until the guard drops; a nested mark (a
    /// run inside a stage body of another) restores the outer one. No
    /// ordering needed on this store: the thread holds a share of the
    /// object's work now (a token of the run), and gives it away only by
    /// release operations that the object's owner acquires before it looks.
    pub(crate) fn busy_inside(&self, index: usize, object: *const ()) -> BusyInside<'_> {
        let slot = &self.thread_infos[index].busy_inside;
        let outer = slot.load(Ordering::Relaxed);
        slot.store(object.cast_mut(), Ordering::Relaxed);
        BusyInside { slot, outer }
    }

    /// For the owner of `object` whose last share of work came back: wait
    /// until no thread is still inside its code (a thread that handed
    /// back the last share returns from that code a moment later; until
    /// it has, the object must not be freed).
    pub(crate) fn wait_until_none_inside(&self, object: *const ()) {
        for info in self.thread_infos.iter() {
            let mut spins = 0u32;
            while ptr::eq(info.busy_inside.load(Ordering::Acquire), object) {
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
    pub(crate) fn mailbox(&self, index: usize) -> &Mailbox<W> {
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

    /// Now, in trace-clock ticks (`observe/clock.rs`).
    #[inline]
    pub(crate) fn trace_now(&self) -> u64 {
        self.clock.ticks()
    }

    pub(crate) fn trace_buffer(&self, index: usize) -> &TraceBuffer {
        &self.thread_infos[index].trace
    }

    /// Take every worker's records.
    /// `blocking_outside`: the caller is no worker of this pool.
    pub(crate) fn take_trace(&self, from_outside: bool) -> Trace {
        trace::collect(
            self.thread_infos.iter().map(|info| &info.trace),
            self.num_slots(),
            from_outside,
            &self.clock,
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

    /// Worker `index`'s lent work (`lent.rs`).
    #[inline]
    pub(crate) fn lent(&self, index: usize) -> &LentSlot<JobRef<W>> {
        &self.thread_infos[index].lent
    }

    #[inline]
    pub(crate) fn stealer(&self, index: usize) -> &Stealer<JobRef<W>> {
        &self.thread_infos[index].stealer
    }

    /// Send a ready job where its placement says: the mailbox of its
    /// affinity, else the shared queue (enqueue dispatch, or from outside
    /// the pool), else `here`'s deque. `before_shared` runs just before a
    /// push to the shared queue (a waiter's flag, see `worker::WaitAccess`).
    #[inline]
    pub(crate) fn route(
        self: &Arc<Self>,
        job: JobRef<W>,
        dispatch: Dispatch,
        affinity: Option<usize>,
        here: Option<&W>,
        before_shared: impl FnOnce() -> SharedPlace,
    ) {
        let here_index = here.map(W::index);
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
                        let place = before_shared();
                        self.inject_at(proxy, None, place);
                    }
                }
            }
            _ => match (dispatch, here) {
                (Dispatch::Spawn, Some(worker)) => worker.push(job),
                _ => {
                    let place = before_shared();
                    self.inject_at(job, here_index, place)
                }
            },
        }
    }

    /// Send `job` to worker `target` alone: its mailbox, no proxy, so no
    /// other worker ever takes it (a broadcast's job for that worker, a
    /// task with strict affinity). Wakes `target` if it sleeps.
    pub(crate) fn route_strict(&self, job: JobRef<W>, target: usize) {
        self.mailbox(target).push_strict(job);
        self.sleep.new_mailbox_job(target);
    }

    /// `route_strict` if `target` is a worker thread of this pool; false
    /// (nothing done) otherwise: an index out of range (rejected when the
    /// task was submitted, but a node may be made ready by another pool),
    /// or the guest slot of a pool without threads, whose mailbox only its
    /// callers look at; the caller then routes as with a soft affinity.
    pub(crate) fn route_strict_if_possible(&self, job: JobRef<W>, target: usize) -> bool {
        if target >= self.num_threads() {
            return false;
        }
        self.route_strict(job, target);
        true
    }

    /// Worker `index`'s FIFO of `Pool::spawn_fifo` jobs.
    pub(crate) fn fifo(&self, index: usize) -> &WorkerFifo<W> {
        &self.thread_infos[index].fifo
    }

    /// Push to the shared queue and make sure someone will see it: fence F1
    /// and the wake logic, and, from outside a zero-thread pool, a drainer.
    pub(crate) fn inject(self: &Arc<Self>, job: JobRef<W>, here: Option<usize>) {
        self.inject_at(job, here, SharedPlace::PLAIN);
    }

    /// `inject` into the lane `place` names: a nested wait's kept-apart
    /// lane, or the lane of a priority.
    pub(crate) fn inject_at(
        self: &Arc<Self>,
        job: JobRef<W>,
        here: Option<usize>,
        place: SharedPlace,
    ) {
        let was_empty = self.shared.push(job, here, place);
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
    pub(crate) fn inject_entry(self: &Arc<Self>, job: JobRef<W>) {
        self.inject_entry_waking(job, 1);
    }

    /// `inject_entry`, waking up to `workers` sleepers: for an entry that
    /// will cut work for them all (a loop's).
    pub(crate) fn inject_entry_waking(self: &Arc<Self>, job: JobRef<W>, workers: usize) {
        let was_empty = self.shared.push_entry(job);
        self.sleep.new_injected_jobs(workers.max(1), was_empty);
        self.start_drainer_if_needed();
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

    /// The latch worker `index`'s main loop waits on: set at shutdown.
    pub(crate) fn terminate_latch(&self, index: usize) -> &CoreLatch {
        &self.thread_infos[index].terminate
    }

    /// Ask every worker to exit once its work is done. The caller joins
    /// them (or, from the stopper thread, ends): a sleeper is woken on the
    /// caller's CPU, which frees up when the caller blocks.
    pub(crate) fn terminate(&self) {
        for (index, info) in self.thread_infos.iter().enumerate() {
            // SAFETY: the registry owns the latch; it outlives this call.
            let sleeping = unsafe { CoreLatch::set(&info.terminate) };
            self.sleep.notify_worker_to_exit(index, sleeping);
        }
    }

    /// On a zero-thread pool, make sure a drainer thread will take what was
    /// just injected.
    pub(super) fn start_drainer_if_needed(self: &Arc<Self>) {
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
        let drainer = self.drainer;
        if let Err(e) = builder.spawn(move || drainer(registry)) {
            self.drainer_active.store(false, Ordering::SeqCst);
            eprintln!(
                "sixfold: could not start a drainer thread ({e}); queued tasks run at the next install, run, wait_idle or drop"
            );
        }
    }

    pub(super) fn guest_has_work(&self) -> bool {
        !self.shared.is_empty() || !self.mailbox(0).is_empty() || !self.stealer(0).is_empty()
    }
}

impl<W: Runner> Drop for Registry<W> {
    /// Give back proxy entries left in the shared queue, the mailboxes and a
    /// guest deque: their tasks ran through the other entry (the pool only
    /// stops once its tasks are done), so each take finds them claimed.
    fn drop(&mut self) {
        let guest = self.guest.get_mut().take();
        let mut leftovers: Vec<JobRef<W>> = std::iter::from_fn(|| self.shared.pop(0)).collect();
        for info in self.thread_infos.iter() {
            leftovers.extend(std::iter::from_fn(|| info.mailbox.pop()));
        }
        if let Some(deque) = guest {
            leftovers.extend(std::iter::from_fn(|| deque.pop()));
        }
        for job in leftovers {
            if job.is_proxy() {
                // SAFETY: the entry came out of a queue; nobody else holds it.
                let taken = unsafe { Proxy::<W>::take(job) };
                debug_assert!(
                    matches!(taken, Taken::Nothing),
                    "a task was lost at pool drop"
                );
            }
        }
    }
}

/// A slot's thread busy inside an object (`Registry::busy_inside`): on
/// drop, it is inside the outer one again. Release: its last touches of
/// the object happen before its owner frees it.
pub(crate) struct BusyInside<'r> {
    slot: &'r AtomicPtr<()>,
    outer: *mut (),
}

impl Drop for BusyInside<'_> {
    fn drop(&mut self) {
        self.slot.store(self.outer, Ordering::Release);
    }
}
