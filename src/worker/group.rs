//! Groups: who waits for a set of task nodes, and what happens on a panic.
//!
//! Every submitted task node belongs to one group. A `run` call owns a
//! *structured* group on its stack and returns when the group is empty; the
//! pool owns one *static* group for `'static` tasks (`spawn`, `enqueue`,
//! `spawn_with_affinity`), which `wait_idle` and the pool's drop wait for.
//!
//! Accounting by units, not by nodes: a node holds a unit of its group only
//! if it may be the last of its group to finish. A node submitted while it
//! already has a successor in the same group holds none (the successor
//! finishes after it); a continuation takes over the unit of the task that
//! created it; a child made by `Continuation::child` holds none. So a
//! continuation-passing tree touches the group counter once, not once per
//! task, and workers do not fight over one cache line.
//!
//! Two failure contracts (`OnPanic`): the task-graph constructs (`run` with
//! task nodes) keep oneTBB's, where the first panic cancels the nodes that
//! have not started; `scope` and `scope_fifo` keep rayon's, where every
//! spawned job still runs and the first panic is only recorded.
//!
//! A structured group also knows the isolation region (`region.rs`) it
//! was made in: its jobs carry it, so an isolated wait for the group can
//! run every one of them.
//!
//! Invariants: the count is never zero while a node that holds no unit is
//! unfinished, because that node has a unit-holding descendant; a node
//! touches its group only before it decrements its successors or, if it
//! holds a unit, when releasing that unit as its very last action (the
//! group may be freed right after).

use crate::platform::latch::CountLatch;
use crate::platform::sync::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Condvar, Mutex, Ordering, fence,
};
use crate::queues::region::Region;
use crate::queues::shared_queue::SharedQueueFlag;
use crossbeam_utils::CachePadded;
use std::any::Any;

/// `Group::watch`: the group itself was cancelled.
const CANCELLED: u32 = 1;
/// `Group::watch`: it has a parent or an external cancel to ask as well.
const ASK_FURTHER: u32 = 2;

/// What a group's waiter blocks on.
pub(crate) enum Completion {
    /// A `run`: the latch is set when the last unit is released.
    Structured(CountLatch),
    /// The pool's `'static` tasks: may drop to zero and rise again.
    Static(IdleCounter),
}

/// What the first panic in a group does to the jobs that have not started.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum OnPanic {
    /// oneTBB's contract: skip them (task graphs, `run`).
    Cancel,
    /// rayon's contract: run them all anyway (`scope`, `scope_fifo`).
    RunAll,
}

pub(crate) struct Group {
    /// Padded away from `watch`: every unit holder writes the count,
    /// every node start reads `watch`.
    completion: CachePadded<Completion>,
    /// `CANCELLED`, set by the first panic (or a cancel): not-started nodes
    /// are skipped; and `ASK_FURTHER`, set before the group is shared if
    /// it has a parent or an external cancel to ask too. Zero, the usual
    /// case, answers `is_cancelled` with one load (every node start asks).
    watch: AtomicU32,
    /// Set when a node was dropped unrun over a failed predecessor
    /// (`node_dropped`).
    dropped_nodes: AtomicBool,
    /// The structured group whose task or body made this one (null if
    /// none): cancelling it cancels this one too (oneTBB's nested
    /// contexts). It outlives this group: this group's waiter runs inside
    /// one of its tasks. Written once, before the group is shared.
    parent: AtomicPtr<Group>,
    /// A cancel from outside the group's tasks (a run given a token:
    /// `Pool::run_cancellable_with`), asked with the flag. Set before the
    /// group is shared.
    external: Option<Box<dyn Fn() -> bool + Send + Sync>>,
    /// The first panic of a structured group, resumed by its waiter.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// Whether the group's work went to the shared queue (`WaitAccess`).
    used_shared_queue: SharedQueueFlag,
    on_panic: OnPanic,
    /// The isolation region its jobs run in (structured groups).
    region: Region,
}

impl Group {
    /// The group of a wait in isolation region `region`.
    pub(crate) fn structured(latch: CountLatch, on_panic: OnPanic, region: Region) -> Self {
        Group {
            completion: CachePadded::new(Completion::Structured(latch)),
            watch: AtomicU32::new(0),
            dropped_nodes: AtomicBool::new(false),
            parent: AtomicPtr::new(std::ptr::null_mut()),
            external: None,
            panic: Mutex::new(None),
            used_shared_queue: SharedQueueFlag::new(),
            on_panic,
            region,
        }
    }

    pub(crate) fn new_static() -> Self {
        Group {
            completion: CachePadded::new(Completion::Static(IdleCounter::new())),
            watch: AtomicU32::new(0),
            dropped_nodes: AtomicBool::new(false),
            parent: AtomicPtr::new(std::ptr::null_mut()),
            external: None,
            panic: Mutex::new(None),
            used_shared_queue: SharedQueueFlag::new(),
            on_panic: OnPanic::RunAll,
            region: Region::NONE,
        }
    }

    /// The region a job of this group runs in, when submitted from a
    /// context in region `current`: a structured group's own (its waiter
    /// must be able to run it), a `'static` task's submitter's.
    #[inline]
    pub(crate) fn region_for(&self, current: Region) -> Region {
        match *self.completion {
            Completion::Structured(_) => self.region,
            Completion::Static(_) => current,
        }
    }

    /// The region a structured group's jobs run in.
    pub(crate) fn region(&self) -> Region {
        self.region
    }

    pub(crate) fn is_static(&self) -> bool {
        matches!(*self.completion, Completion::Static(_))
    }

    /// A node now holds a unit.
    #[inline]
    pub(crate) fn add_unit(&self) {
        match &*self.completion {
            Completion::Structured(latch) => latch.add(1),
            Completion::Static(idle) => idle.add(),
        }
    }

    /// `n` more units of a scope's (structured) group at once: a credit
    /// batch (`credit.rs`).
    #[inline]
    pub(crate) fn add_units(&self, n: usize) {
        self.latch().add(n);
    }

    /// A unit holder of a scope's (structured) group finished and gives
    /// back `n` units (its own and its unused credit). Must be the caller's
    /// last touch of the group.
    ///
    /// # Safety
    /// As for [`release_unit`](Self::release_unit), for `n` units.
    #[inline]
    pub(crate) unsafe fn release_units(this: *const Group, n: usize) {
        // SAFETY: as in `release_unit`; the latch is released through a
        // raw pointer, since it may be freed once the count reaches zero.
        unsafe { CountLatch::release_many((*this).latch(), n) }
    }

    /// A unit holder finished. Must be the caller's last touch of the group.
    ///
    /// # Safety
    /// `this` is live and the caller holds a unit. A raw pointer, because a
    /// structured group's waiter frees it as soon as the last unit is gone.
    #[inline]
    pub(crate) unsafe fn release_unit(this: *const Group) {
        // SAFETY: live until the last unit is released, which is ours at
        // the earliest, and the latch takes over from there.
        unsafe {
            match &*(*this).completion {
                Completion::Structured(latch) => CountLatch::release(latch),
                Completion::Static(idle) => idle.release(),
            }
        }
    }

    /// Whether the group's work went to the shared queue, for its waiter
    /// and for whoever pushes there (`SharedQueueFlag::note`).
    #[inline]
    pub(crate) fn used_shared_queue(&self) -> &SharedQueueFlag {
        &self.used_shared_queue
    }

    /// Cancelled, itself, by its external cancel, or through a parent
    /// (`set_parent`)?
    #[inline]
    pub(crate) fn is_cancelled(&self) -> bool {
        let watch = self.watch.load(Ordering::Relaxed);
        watch != 0 && (watch & CANCELLED != 0 || self.asks_further())
    }

    /// The external cancel and the parents of a group that has some.
    #[cold]
    fn asks_further(&self) -> bool {
        if self.external.as_ref().is_some_and(|fired| fired()) {
            return true;
        }
        // SAFETY: a parent outlives its children (see `parent`).
        unsafe { self.parent.load(Ordering::Relaxed).as_ref() }
            .is_some_and(|parent| parent.is_cancelled())
    }

    /// Also cancelled when `fired` says so (a token fired from anywhere).
    pub(crate) fn with_external_cancel(
        mut self,
        fired: Box<dyn Fn() -> bool + Send + Sync>,
    ) -> Self {
        self.external = Some(fired);
        self.watch.fetch_or(ASK_FURTHER, Ordering::Relaxed);
        self
    }

    /// Make this (new, not yet shared) structured group a child of
    /// `parent`, the structured group of the task or body that makes it
    /// (`WorkerThread::cancel_context`); a static parent is no parent (the
    /// pool's `'static` tasks are never cancelled as a whole).
    ///
    /// # Safety
    /// `parent` outlives this group (it does when this group's waiter runs
    /// inside one of `parent`'s tasks or its body).
    pub(crate) unsafe fn set_parent(&self, parent: *const Group) {
        // SAFETY: live per the contract.
        if let Some(parent) = unsafe { parent.as_ref() }
            && !parent.is_static()
        {
            self.parent
                .store(std::ptr::from_ref(parent).cast_mut(), Ordering::Relaxed);
            self.watch.fetch_or(ASK_FURTHER, Ordering::Relaxed);
        }
    }

    pub(crate) fn cancel(&self) {
        self.watch.fetch_or(CANCELLED, Ordering::Relaxed);
    }

    /// A node of this group was dropped unrun because a node it waited
    /// for failed or was dropped, perhaps in another run (an edge between
    /// two runs). The run then says so (`run_cancellable`:
    /// `Err(Cancelled)`) instead of `Ok` for work that never ran; its
    /// other nodes are not cancelled by it.
    pub(crate) fn node_dropped(&self) {
        self.dropped_nodes.store(true, Ordering::Relaxed);
    }

    /// Did a node of this group get dropped unrun (`node_dropped`)? Read
    /// by the waiter after the group is done.
    pub(crate) fn dropped_nodes(&self) -> bool {
        self.dropped_nodes.load(Ordering::Relaxed)
    }

    /// Keep the first panic and, under oneTBB's contract, cancel the nodes
    /// that have not started.
    pub(crate) fn record_panic(&self, payload: Box<dyn Any + Send>) {
        let mut slot = self.panic.lock();
        if slot.is_none() {
            *slot = Some(payload);
        }
        if self.on_panic == OnPanic::Cancel {
            self.cancel();
        }
    }

    pub(crate) fn take_panic(&self) -> Option<Box<dyn Any + Send>> {
        self.panic.lock().take()
    }

    pub(crate) fn latch(&self) -> &CountLatch {
        match &*self.completion {
            Completion::Structured(latch) => latch,
            Completion::Static(_) => unreachable!("the static group has no latch"),
        }
    }

    pub(crate) fn idle_counter(&self) -> &IdleCounter {
        match &*self.completion {
            Completion::Static(idle) => idle,
            Completion::Structured(_) => unreachable!("a structured group has no idle counter"),
        }
    }
}

/// A count of outstanding `'static` units that threads can wait to see at
/// zero.
///
/// Lost-wake-up argument: a waiter registers itself (SeqCst increment of
/// `waiters`) and then re-reads `count` under `lock`; a releaser that takes
/// the count to zero fences (SeqCst) and then reads `waiters`. One of them
/// sees the other's write. If the releaser sees a waiter it takes `lock`
/// before notifying, so it cannot notify between the waiter's check and its
/// wait.
pub(crate) struct IdleCounter {
    count: AtomicUsize,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    condvar: Condvar,
}

impl IdleCounter {
    fn new() -> Self {
        IdleCounter {
            count: AtomicUsize::new(0),
            waiters: AtomicUsize::new(0),
            lock: Mutex::new(()),
            condvar: Condvar::new(),
        }
    }

    #[inline]
    fn add(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    #[inline]
    fn release(&self) {
        if self.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            fence(Ordering::SeqCst);
            if self.waiters.load(Ordering::SeqCst) > 0 {
                // Taken and let go before the notify: a waiter that saw a
                // non-zero count under the lock is then waiting (its wait
                // let the lock go), and woken outside the lock it needs
                // no second wake-up to take it back.
                drop(self.lock.lock());
                self.condvar.notify_all();
            }
        }
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.count.load(Ordering::SeqCst) == 0
    }

    /// Block until the count is zero. With `timeout`, give up after it and
    /// return whether zero was reached.
    pub(crate) fn wait_zero(&self, timeout: Option<std::time::Duration>) -> bool {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.lock.lock();
        let reached = loop {
            if self.count.load(Ordering::SeqCst) == 0 {
                break true;
            }
            match timeout {
                None => self.condvar.wait(&mut guard),
                #[cfg(not(loom))]
                Some(t) => {
                    if self.condvar.wait_for(&mut guard, t).timed_out() {
                        break self.count.load(Ordering::SeqCst) == 0;
                    }
                }
                #[cfg(loom)]
                Some(_) => self.condvar.wait(&mut guard),
            }
        };
        drop(guard);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        reached
    }
}
