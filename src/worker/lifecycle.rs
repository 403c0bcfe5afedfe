//! A pool's threads from start to end: starting the workers
//! (`Registry::start`), their main loop, the drainer thread of a
//! zero-thread pool, the building thread adopted as worker 0, and waking
//! a latch's owner across pools. Above `registry.rs` and `thread/`: it is
//! where the two meet. (How a blocking call enters a pool, the guest slot
//! included, is `entry.rs`.)
//!
//! A pool built with `num_threads(0)` has one *guest* slot and no threads:
//! `install`, `run` and `wait_idle` from a thread outside every pool make
//! the calling thread worker 0 for their duration (from a worker of
//! another pool they go to the drainer instead, which keeps that worker
//! free for its own pool). Work injected from outside, or left on the slot
//! when a guest call returns, starts a *drainer* thread that takes the
//! slot, runs by the six rules until no rule yields a task, and exits; a
//! flag plus a SeqCst fence on both sides make sure work pushed while the
//! drainer decides to exit is not stranded.
//!
//! `Builder::use_current_thread` makes the building thread worker 0 for
//! good (`adopt_current_thread`): no thread and no main loop for slot 0;
//! the thread works for the pool while it waits in a call, and dropping
//! the pool on it runs what is left and gives the slot up
//! (`release_adopted`).
//!
//! Waits across pools: a worker of *another* pool that waits for a job
//! of ours owns the job's latch, waits by working on its own pool and
//! sleeps on the latch; setting it wakes the owner across the pools
//! (`wake_owner`: `WakeOwner` keeps its registry alive across the wake).

use crate::error::BuildError;
use crate::platform::latch::{CoreLatch, WakeOwner};
use crate::platform::sync::{Ordering, fence};
use crate::platform::unwind;
use crate::queues::deque::Worker;
use crate::worker::registry::{self as shared, RegistryConfig};
use crate::worker::sleep;
use crate::worker::thread::{
    GUEST_STACK_BUDGET, JobRef, Registry, WorkerGuard, WorkerThread, default_thread_stack_size,
};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What `Registry::start` hands to `Pool::build`.
pub(crate) struct Started {
    pub(crate) registry: Arc<Registry>,
    pub(crate) handles: Vec<JoinHandle<()>>,
    /// Slot 0's deque, for the building thread (`use_current_thread`).
    pub(crate) adopted: Option<Worker<JobRef>>,
}

thread_local! {
    /// The pool slot this thread was made worker of by
    /// `Builder::use_current_thread`, until the pool is dropped here.
    static ADOPTED: std::cell::RefCell<Option<WorkerGuard>> = const { std::cell::RefCell::new(None) };
}

/// Make the calling thread worker 0 of `registry` for good (until
/// `release_adopted` on this thread): its own joins, scopes and calls into
/// the pool run as that worker, and it takes part in the pool's work only
/// while it waits in such a call (it runs no main loop), as rayon's
/// `use_current_thread`. No start or exit handler runs for it, and it is
/// not pinned.
pub(crate) fn adopt_current_thread(registry: &Arc<Registry>, deque: Worker<JobRef>) {
    sleep::prepare_thread();
    let guard = WorkerThread::enter(deque, 0, registry.clone(), GUEST_STACK_BUDGET);
    // The thread goes back to its own code, not to a search: tasks with
    // affinity for slot 0 are claimed by others once it looks stuck, as for
    // any busy worker. (A mailbox starts "idle", which tells others its
    // owner comes for its proxies soon; this owner may never.)
    registry.mailbox(0).set_busy();
    ADOPTED.with(|slot| *slot.borrow_mut() = Some(guard));
}

/// Is the calling thread `registry`'s adopted worker 0?
pub(crate) fn is_adopted_here(registry: &Arc<Registry>) -> bool {
    ADOPTED.with(|slot| {
        slot.borrow()
            .as_ref()
            .is_some_and(|guard| Arc::ptr_eq(guard.registry(), registry))
    })
}

/// If the calling thread is `registry`'s adopted worker 0, outside every
/// task of it: run the pool's work until no `'static` task is left (its
/// mailbox's strict tasks included), then make the thread an outside
/// thread again. True if it was.
pub(crate) fn release_adopted(registry: &Arc<Registry>) -> bool {
    let ours = ADOPTED.with(|slot| {
        slot.borrow()
            .as_ref()
            .is_some_and(|guard| Arc::ptr_eq(guard.registry(), registry) && !guard.in_a_wait())
    });
    if !ours {
        return false;
    }
    let idle = registry.static_group.idle_counter();
    ADOPTED.with(|slot| {
        if let Some(guard) = slot.borrow().as_ref() {
            guard.help_until(
                || idle.is_zero(),
                || {
                    idle.wait_zero(Some(std::time::Duration::from_millis(1)));
                },
            );
        }
    });
    if let Some(guard) = ADOPTED.with(|slot| slot.borrow_mut().take()) {
        // Nothing of the pool's is left on it: every `'static` task ran,
        // and no structured wait is open on this thread.
        drop(guard.leave());
    }
    true
}

impl Registry {
    /// Build the registry for `config` and start its worker threads; with
    /// `adopt_current_thread`, slot 0's deque comes back instead of a
    /// thread (`adopt_current_thread` below makes the caller its worker).
    pub(crate) fn start(mut config: RegistryConfig) -> Result<Started, BuildError> {
        if config.adopt_current_thread && WorkerThread::current().is_some() {
            return Err(BuildError::CurrentThreadIsAWorker);
        }
        let (registry, deques) = shared::Registry::new(&mut config, drainer_main)?;
        let mut handles = Vec::with_capacity(config.num_threads);
        let mut deques = deques.into_iter().enumerate();
        let adopted = if config.adopt_current_thread {
            deques.next().map(|(_, deque)| deque)
        } else {
            None
        };
        // On a busy machine, the threads start on this thread's CPU
        // (`sleep::StartingHere`); dropped, giving this thread its CPUs
        // back, when the loop ends by any path. (A naming closure runs
        // narrowed meanwhile: it names threads, it runs no task.)
        let starting_here = sleep::StartingHere::begin();
        let own_cpus = starting_here.as_ref().map(sleep::StartingHere::own_cpus);
        for (index, deque) in deques {
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
            if name.contains('\0') {
                // `std::thread::Builder::spawn` would panic on it, past
                // the stop of the threads already started.
                registry.stop_started(handles);
                return Err(BuildError::ThreadSpawn(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("the name of worker {index} contains a NUL byte: {name:?}"),
                )));
            }
            let mut builder = std::thread::Builder::new().name(name);
            if let Some(size) = config.stack_size {
                builder = builder.stack_size(size);
            }
            let registry_for_thread = registry.clone();
            match builder.spawn(move || main_loop(registry_for_thread, index, deque, own_cpus)) {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    registry.stop_started(handles);
                    return Err(BuildError::ThreadSpawn(e));
                }
            }
        }
        drop(starting_here);
        Ok(Started {
            registry,
            handles,
            adopted,
        })
    }

    /// A build failed part way: stop the threads already started and join
    /// them (each runs its exit handler), so nothing outlives the build.
    fn stop_started(&self, handles: Vec<JoinHandle<()>>) {
        self.terminate();
        for handle in handles {
            let _ = handle.join();
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
/// exit handler. `own_cpus`: the CPUs to allow itself first, if it was
/// started narrowed to its builder's CPU (`sleep::StartingHere`).
fn main_loop(
    registry: Arc<Registry>,
    index: usize,
    deque: Worker<JobRef>,
    own_cpus: Option<sleep::ThreadCpus>,
) {
    // Task panics are caught per task; a panic out here is a scheduler bug,
    // and a silently dead worker would hang its pool. Fail loudly instead.
    let abort_guard = unwind::AbortIfPanic;
    let started_here = own_cpus.is_some();
    if let Some(cpus) = own_cpus {
        cpus.restore();
    }
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
    sleep::prepare_thread();
    let worker = WorkerThread::enter(deque, index, registry.clone(), stack_budget);
    if let Some(handler) = &registry.start_handler
        && let Err(payload) = unwind::halt_unwinding(|| handler(index))
    {
        eprintln!(
            "sixfold: start handler of worker {index} panicked: {}",
            unwind::payload_message(&*payload)
        );
    }
    // After the start handler: from here a pool's drop may narrow this
    // thread to its own CPU (`Sleep::notify_worker_to_exit`), and the
    // handler must see every CPU the worker was allowed. A worker started
    // on its builder's CPU also moves off it here if a pool-mate runs there.
    registry.sleep.worker_started(index, started_here);
    worker.serve_until(registry.terminate_latch(index));
    registry.sleep.worker_exiting(index);
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
