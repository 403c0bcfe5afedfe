//! The one door to atomics, locks and threads.
//!
//! Every module that takes part in a protocol with a race window (latches,
//! the sleep counters, group accounting) imports its atomics, `Mutex`,
//! `Condvar` and `thread` from here. Under `cfg(loom)` they are loom's
//! model-checked types, so `tests/loom_*.rs` can explore every interleaving
//! of the real protocol code; otherwise they are std's atomics and
//! parking_lot's locks. The lock API is parking_lot's shape in both worlds:
//! `lock()` returns the guard directly and `Condvar::wait(&mut guard)`.

#[cfg(not(loom))]
#[allow(unused_imports)]
mod imp {
    pub(crate) use parking_lot::{Condvar, Mutex, MutexGuard};
    pub(crate) use std::sync::Arc;
    pub(crate) use std::sync::atomic::{
        AtomicBool, AtomicIsize, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
    };
    pub(crate) use std::{hint, thread};
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
        pub(crate) fn notify_one(&self) -> bool {
            self.0.notify_one();
            true
        }
        pub(crate) fn notify_all(&self) -> usize {
            self.0.notify_all();
            0
        }
    }
}

pub(crate) use imp::*;
