//! Where a worker runs when it wakes: the CPU notes the workers of one
//! pool keep for each other, and the two ways a woken worker is kept off
//! a CPU another awake worker runs on (`platform/cpu_spread.rs`).
//!
//! - A waker that goes on running steers the sleeper before it wakes it
//!   (`steer`): the sleeper may run only outside the waker's CPU and the
//!   CPUs the awake workers noted. Left to the kernel, it was often
//!   queued behind its waker and ran only when the waker's time slice
//!   ended, milliseconds later, while another CPU idled.
//! - A worker that wakes up gives itself back what a waker narrowed, then
//!   moves off its CPU if another awake worker noted it, and notes where
//!   it runs (`after_wake`).
//!
//! Invariants: a worker's note is `UNKNOWN` from before it blocks until
//! it runs again; a steered worker restores its allowed CPUs before it
//! looks for work, so no task runs under a narrowed set; a waker steers
//! only a worker it is waking (under that worker's sleep lock, while it
//! is blocked), once per wake. All of it is a placement hint, outside the
//! protocol the loom models check.

use crate::platform::cpu_spread::{self, CpuSet};
use crate::platform::sync::Mutex;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::Ordering::Relaxed;

/// One worker's placement state.
pub(super) struct WorkerPlacement {
    /// The CPU the worker woke up on last, `UNKNOWN` while it sleeps.
    /// Written by the worker, read by the others.
    cpu: AtomicI32,
    /// The worker's thread (`cpu_spread::thread_id`), noted before it
    /// blocks, for a waker to steer it.
    thread: AtomicI32,
    /// The CPUs a waker narrowed the worker from, for the worker to
    /// restore once it runs.
    steered: Mutex<Option<CpuSet>>,
}

impl WorkerPlacement {
    pub(super) fn new() -> Self {
        WorkerPlacement {
            cpu: AtomicI32::new(cpu_spread::UNKNOWN),
            thread: AtomicI32::new(cpu_spread::UNKNOWN),
            steered: Mutex::new(None),
        }
    }

    /// The worker is about to block: it runs nowhere, and a waker may
    /// steer its thread.
    pub(super) fn before_block(&self) {
        self.cpu.store(cpu_spread::UNKNOWN, Relaxed);
        self.thread.store(cpu_spread::thread_id(), Relaxed);
    }

    /// A waker that goes on running is waking this worker (holding its
    /// sleep lock): keep it off the waker's CPU and the CPUs noted in
    /// `others` (the pool's other workers), when an allowed CPU is left.
    pub(super) fn steer<'a>(&self, others: impl Iterator<Item = &'a WorkerPlacement>) {
        let avoid =
            std::iter::once(cpu_spread::current_cpu()).chain(others.map(WorkerPlacement::noted));
        if let Some(cpus) = cpu_spread::steer(self.thread.load(Relaxed), avoid) {
            *self.steered.lock() = Some(cpus);
        }
    }

    /// The worker woke up: allow it what a waker narrowed; if one of
    /// `others` noted the CPU it runs on, move to an allowed CPU none of
    /// them noted; then note where it runs.
    pub(super) fn after_wake<'a>(&self, others: impl Iterator<Item = &'a WorkerPlacement> + Clone) {
        if let Some(cpus) = self.steered.lock().take() {
            cpu_spread::restore(cpus);
        }
        let noted = || others.clone().map(WorkerPlacement::noted);
        let mut here = cpu_spread::current_cpu();
        if cpu_spread::crowded(here, noted()) {
            here = cpu_spread::move_off(std::iter::once(here).chain(noted())).unwrap_or(here);
        }
        self.cpu.store(here, Relaxed);
    }

    /// The CPU the worker noted (`UNKNOWN` while it sleeps).
    fn noted(&self) -> i32 {
        self.cpu.load(Relaxed)
    }
}
