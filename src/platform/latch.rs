//! Latches: one-shot signals that a waiter blocks or works on until set.
//!
//! * [`CoreLatch`] is the state machine a worker thread sleeps on:
//!   `UNSET -> SLEEPY -> SLEEPING -> SET`. Only the owner moves it through
//!   SLEEPY and SLEEPING; anyone may set it. `set` reports whether the owner
//!   was SLEEPING, and only then does the setter pay for a wake-up, which is
//!   targeted at the owner alone (`Sleep::wake_specific_thread`).
//! * [`LockLatch`] is for a thread outside the pool: a mutex-protected flag and
//!   a condvar.
//! * [`CountLatch`] counts outstanding pieces of work (a `run`, a group of
//!   tasks) and sets its inner latch when the count reaches zero. Its waiter
//!   is either a worker of a pool (the inner latch is a `CoreLatch` the
//!   worker sleeps on) or an outside thread (a `LockLatch`).
//!
//! Invariant shared by all kinds: once `set` returns, the setter never touches
//! the latch again, because the waiter may free it (latches live on the
//! waiter's stack). Setters therefore read everything they need (the owner's
//! registry, its index) before the final store.

use crate::platform::sync::{AtomicUsize, Condvar, Mutex, Ordering};
use std::sync::Arc;

const UNSET: usize = 0;
const SLEEPY: usize = 1;
const SLEEPING: usize = 2;
const SET: usize = 3;

/// The latch state a worker thread waits and sleeps on.
#[derive(Debug)]
pub(crate) struct CoreLatch {
    state: AtomicUsize,
}

impl CoreLatch {
    pub(crate) fn new() -> Self {
        CoreLatch {
            state: AtomicUsize::new(UNSET),
        }
    }

    /// Owner only: announce that we are about to sleep. False if the latch
    /// was set meanwhile (then the owner must not sleep).
    pub(crate) fn get_sleepy(&self) -> bool {
        self.state
            .compare_exchange(UNSET, SLEEPY, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// Owner only: commit to sleeping. False if the latch was set since
    /// `get_sleepy`, in which case the setter saw SLEEPY (not SLEEPING) and
    /// will not send a wake-up, so the owner must not block.
    pub(crate) fn fall_asleep(&self) -> bool {
        self.state
            .compare_exchange(SLEEPY, SLEEPING, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// Owner only: back to UNSET after waking, unless the latch was set.
    pub(crate) fn wake_up(&self) {
        if !self.probe() {
            let _ =
                self.state
                    .compare_exchange(SLEEPING, UNSET, Ordering::SeqCst, Ordering::Relaxed);
            let _ = self
                .state
                .compare_exchange(SLEEPY, UNSET, Ordering::SeqCst, Ordering::Relaxed);
        }
    }

    /// Set the latch. Returns true if the owner was SLEEPING, so the caller
    /// must wake it. AcqRel: the waiter's `probe` acquires everything the
    /// setter wrote before (results, panics).
    ///
    /// # Safety
    /// `this` points at a live latch. It takes a raw pointer, not `&self`,
    /// because the waiter may free the latch as soon as it is set, while a
    /// `&self` argument would still be required to stay valid.
    pub(crate) unsafe fn set(this: *const Self) -> bool {
        // SAFETY: live per the contract; nothing touches it after the swap.
        unsafe { (*this).state.swap(SET, Ordering::AcqRel) == SLEEPING }
    }

    /// Is the latch set? Acquire pairs with the Release half of `set`.
    #[inline]
    pub(crate) fn probe(&self) -> bool {
        self.state.load(Ordering::Acquire) == SET
    }
}

/// A latch for a thread that is not a worker of the pool: it blocks on a
/// condvar until `set`.
#[derive(Debug)]
pub(crate) struct LockLatch {
    state: Mutex<LockState>,
    condvar: Condvar,
}

/// A [`LockLatch`]'s flag and whether a thread blocks on it, both only
/// read and written under its mutex.
#[derive(Debug, Default)]
struct LockState {
    is_set: bool,
    waiting: bool,
}

impl LockLatch {
    pub(crate) fn new() -> Self {
        LockLatch {
            state: Mutex::new(LockState::default()),
            condvar: Condvar::new(),
        }
    }

    /// Set and wake every waiter. The flag is written under the mutex, so a
    /// waiter that checked it and is about to wait cannot miss the notify.
    /// No waiter yet (work that finished before its caller blocked): no
    /// notify, which would be a system call for nobody.
    ///
    /// The notify comes after the lock is let go (a waiter woken while we
    /// held it would block on the lock and need a second wake-up), which
    /// needs the caller to keep the latch alive across `set`, as every
    /// caller does (an `Arc`): the waiter may return and drop its share as
    /// soon as the lock is free.
    pub(crate) fn set(&self) {
        let mut state = self.state.lock();
        state.is_set = true;
        let waiting = state.waiting;
        drop(state);
        if waiting {
            self.condvar.notify_all();
        }
    }

    /// Make a set latch unset again, for reuse. Only when nobody waits on
    /// it and its last setter has returned from `set` (the setter may still
    /// hold an `Arc` to it, which is harmless).
    pub(crate) fn reset(&self) {
        *self.state.lock() = LockState::default();
    }

    /// Block until set.
    pub(crate) fn wait(&self) {
        let mut state = self.state.lock();
        while !state.is_set {
            state.waiting = true;
            self.condvar.wait(&mut state);
        }
        state.waiting = false;
    }
}

/// A counter of outstanding work; reaching zero sets the latch.
///
/// The count starts at one, the waiter's own hold, so that work finishing
/// while more is still being added cannot set the latch early; the waiter
/// drops its hold with [`CountLatch::release`] once it has added everything.
pub(crate) struct CountLatch {
    count: AtomicUsize,
    waiter: CountWaiterRef,
}

/// The waiter, stored by value but with its wake function kept behind a
/// pointer the setter copies before setting.
pub(crate) enum CountWaiterRef {
    Worker {
        core: CoreLatch,
        owner: WakeOwner,
    },
    /// Shared with the setter, which keeps its own reference alive across
    /// `set` (the waiter frees the `CountLatch` as soon as it wakes).
    Thread(Arc<LockLatch>),
}

/// What a setter needs to set a worker's core latch and wake that worker:
/// the registry (type-erased, so this module does not depend on it), the
/// worker's index and the registry's set-and-wake function. Copied out of
/// the latch before setting, because the latch may be freed the moment it is
/// set.
#[derive(Clone, Copy)]
pub(crate) struct WakeOwner {
    pub(crate) registry: *const (),
    pub(crate) index: usize,
    /// Sets the core latch and, if its owner was asleep, wakes that owner.
    /// It must keep the registry alive across the wake, since the woken
    /// owner may return and drop the pool at once.
    pub(crate) set_and_wake: unsafe fn(*const (), usize, *const CoreLatch),
}

// SAFETY: `registry` points at a registry kept alive by the waiting worker;
// `set_and_wake` only calls thread-safe methods on it.
unsafe impl Send for WakeOwner {}
// SAFETY: as above.
unsafe impl Sync for WakeOwner {}

impl CountLatch {
    pub(crate) fn for_worker(owner: WakeOwner) -> Self {
        CountLatch {
            count: AtomicUsize::new(1),
            waiter: CountWaiterRef::Worker {
                core: CoreLatch::new(),
                owner,
            },
        }
    }

    pub(crate) fn for_thread() -> Self {
        Self::for_thread_with(Arc::new(LockLatch::new()))
    }

    /// A thread waiter blocking on `lock` (unset), which the caller reuses
    /// from one wait to the next.
    pub(crate) fn for_thread_with(lock: Arc<LockLatch>) -> Self {
        CountLatch {
            count: AtomicUsize::new(1),
            waiter: CountWaiterRef::Thread(lock),
        }
    }

    /// Add `n` outstanding pieces. Relaxed: an increment is always made by a
    /// thread that holds another unit of the count, so the count cannot reach
    /// zero in between.
    #[inline]
    pub(crate) fn add(&self, n: usize) {
        self.count.fetch_add(n, Ordering::Relaxed);
    }

    /// One piece finished. The last one sets the latch.
    ///
    /// # Safety
    /// `this` points at a live latch whose count includes the caller's unit.
    /// A raw pointer, because the waiter may free the latch the moment it is
    /// set; nothing here touches it after that.
    #[inline]
    pub(crate) unsafe fn release(this: *const Self) {
        // SAFETY: forwarded.
        unsafe { Self::release_many(this, 1) }
    }

    /// `n` pieces finished at once (a unit holder and its unused credit).
    ///
    /// # Safety
    /// As for [`release`](Self::release), with `n` units the caller's.
    #[inline]
    pub(crate) unsafe fn release_many(this: *const Self, n: usize) {
        // SAFETY: live until the count reaches zero and the latch is set.
        unsafe {
            if (*this).count.fetch_sub(n, Ordering::AcqRel) == n {
                Self::set_now(this);
            }
        }
    }

    #[cold]
    unsafe fn set_now(this: *const Self) {
        // SAFETY: the waiter is still blocked (the latch is not set yet), so
        // `this` is live until the set below.
        match unsafe { &(*this).waiter } {
            CountWaiterRef::Worker { core, owner } => {
                let owner = *owner;
                // SAFETY: `owner.registry` is the registry of the waiting
                // worker, alive at least until the latch is set (the worker
                // holds it); `set_and_wake` keeps it alive past the set.
                unsafe { (owner.set_and_wake)(owner.registry, owner.index, core) }
            }
            CountWaiterRef::Thread(lock) => {
                let lock = Arc::clone(lock);
                lock.set();
            }
        }
    }

    /// The core latch a worker waiter sleeps on (None for a thread waiter).
    pub(crate) fn as_core(&self) -> Option<&CoreLatch> {
        match &self.waiter {
            CountWaiterRef::Worker { core, .. } => Some(core),
            CountWaiterRef::Thread(_) => None,
        }
    }

    /// Block an outside thread until the count reached zero.
    pub(crate) fn wait_blocking(&self) {
        match &self.waiter {
            CountWaiterRef::Thread(lock) => lock.wait(),
            CountWaiterRef::Worker { .. } => unreachable!("a worker waits by working"),
        }
    }
}
