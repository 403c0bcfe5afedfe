//! The one door to atomics, locks and threads.
//!
//! Every module that takes part in a protocol with a race window (latches,
//! the sleep counters, group accounting) imports its atomics, `Mutex`,
//! `Condvar` and `thread` from here. Under `cfg(loom)` they are loom's
//! model-checked types, so `tests/loom_*.rs` can explore every interleaving
//! of the real protocol code; otherwise they are std's atomics and std's
//! locks (not parking_lot's: see `Mutex`). The lock API is parking_lot's
//! shape in both worlds: `lock()` returns the guard directly and
//! `Condvar::wait(&mut guard)`.

#[cfg(not(loom))]
#[allow(unused_imports)]
mod imp {
    pub(crate) use std::sync::Arc;
    use std::sync::PoisonError;
    pub(crate) use std::sync::atomic::{
        AtomicBool, AtomicIsize, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
    };
    use std::time::Instant;
    pub(crate) use std::{hint, thread};

    /// std's mutex, with parking_lot's shape. Not parking_lot's own: a
    /// contended parking_lot lock spins with `sched_yield` before it
    /// parks, and beside a busy neighbour each such yield waits out the
    /// neighbour's time slice (about 4 ms here). The locks here are the
    /// sleep protocol's and the latches', taken by a waker while the
    /// sleeper may hold it and have lost its core: a pool dropped on a
    /// loaded machine spent most of its time in those yields. std's lock
    /// spins briefly without yielding, then blocks in the kernel, which
    /// runs it as soon as the holder lets go. (Poisoning is ignored: no
    /// code of ours panics while holding these locks.)
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

    /// The guard of a [`Mutex`]; `None` only inside [`Condvar`]'s waits.
    pub(crate) struct MutexGuard<'a, T>(Option<std::sync::MutexGuard<'a, T>>);

    impl<T> Mutex<T> {
        pub(crate) const fn new(value: T) -> Self {
            Mutex(std::sync::Mutex::new(value))
        }
        #[inline]
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(self.0.lock().unwrap_or_else(PoisonError::into_inner)))
        }
    }

    impl<T> std::ops::Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.0
                .as_ref()
                .expect("a guard outside a wait holds its lock")
        }
    }

    impl<T> std::ops::DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.0
                .as_mut()
                .expect("a guard outside a wait holds its lock")
        }
    }

    /// std's condvar with parking_lot's `wait(&mut guard)` signature.
    #[derive(Debug, Default)]
    pub(crate) struct Condvar(std::sync::Condvar);

    /// Whether a timed wait ended by its deadline.
    pub(crate) struct WaitTimeoutResult(bool);

    impl WaitTimeoutResult {
        pub(crate) fn timed_out(&self) -> bool {
            self.0
        }
    }

    impl Condvar {
        pub(crate) const fn new() -> Self {
            Condvar(std::sync::Condvar::new())
        }
        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let inner = guard.0.take().expect("a guard holds its lock");
            guard.0 = Some(self.0.wait(inner).unwrap_or_else(PoisonError::into_inner));
        }
        /// Wait until notified or until `deadline`.
        pub(crate) fn wait_until<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            deadline: Instant,
        ) -> WaitTimeoutResult {
            self.wait_for(guard, deadline.saturating_duration_since(Instant::now()))
        }
        /// Wait until notified or for `timeout`.
        pub(crate) fn wait_for<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            timeout: std::time::Duration,
        ) -> WaitTimeoutResult {
            let inner = guard.0.take().expect("a guard holds its lock");
            let (inner, result) = self
                .0
                .wait_timeout(inner, timeout)
                .unwrap_or_else(PoisonError::into_inner);
            guard.0 = Some(inner);
            WaitTimeoutResult(result.timed_out())
        }
        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }
        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}

#[cfg(loom)]
#[allow(unused_imports, dead_code)]
mod imp {
    pub(crate) use loom::sync::Arc;
    pub(crate) use loom::sync::atomic::{
        AtomicBool, AtomicIsize, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
    };
    pub(crate) use loom::{hint, thread};

    /// loom's mutex, reshaped so `lock()` returns the guard like parking_lot.
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    /// A guard that the condvar can take out and put back while waiting.
    pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(self.0.lock().unwrap()))
        }
    }

    impl<T> std::ops::Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.0.as_ref().unwrap()
        }
    }

    impl<T> std::ops::DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.0.as_mut().unwrap()
        }
    }

    /// loom's condvar with parking_lot's `wait(&mut guard)` signature.
    #[derive(Debug, Default)]
    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(loom::sync::Condvar::new())
        }
        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let inner = guard.0.take().unwrap();
            guard.0 = Some(self.0.wait(inner).unwrap());
        }
        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }
        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}

pub(crate) use imp::*;
