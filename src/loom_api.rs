//! The sleep protocol, the core latch, the deque, the pipeline gates, the
//! mailbox proxies and a task node's pending count, opened up for the
//! loom models in `tests/loom_*.rs`.
//! Only compiled under `--cfg loom`; not part of the API.
#![doc(hidden)]
#![allow(missing_docs)]

use crate::platform::latch::{CoreLatch, LockLatch};
use crate::queues::deque::{Steal, Stealer, Worker};
use crate::worker::sleep::{IdleState, Sleep};

/// A worker's deque as the scheduler sees it under loom (the facade's
/// stand-in), for models that push, pop and steal.
pub struct LoomDeque(Worker<u32>);
/// A thief's end of a `LoomDeque`.
pub struct LoomStealer(Stealer<u32>);

impl LoomDeque {
    pub fn new() -> Self {
        LoomDeque(Worker::new_lifo())
    }
    pub fn push(&self, job: u32) {
        self.0.push(job)
    }
    pub fn pop(&self) -> Option<u32> {
        self.0.pop()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn stealer(&self) -> LoomStealer {
        LoomStealer(self.0.stealer())
    }
}

impl Default for LoomDeque {
    fn default() -> Self {
        Self::new()
    }
}

impl LoomStealer {
    /// Steal from the front; `Retry` is turned into another attempt.
    pub fn steal(&self) -> Option<u32> {
        loop {
            match self.0.steal() {
                Steal::Success(job) => return Some(job),
                Steal::Empty => return None,
                Steal::Retry => {}
            }
        }
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The real Chase-Lev deque (`queues/chase_lev.rs`), with its fast and
/// fenced pop modes, for `tests/loom_deque.rs`. Items are `u32`s.
pub struct LoomChaseLev(crate::queues::chase_lev::Worker<ChaseLevItem>);
/// A thief's end of a `LoomChaseLev`.
pub struct LoomChaseLevStealer(crate::queues::chase_lev::Stealer<ChaseLevItem>);

#[derive(Clone, Copy)]
pub struct ChaseLevItem(u32);

impl crate::queues::deque::Words for ChaseLevItem {
    fn into_words(self) -> [*mut (); 2] {
        [
            std::ptr::without_provenance_mut(self.0 as usize),
            std::ptr::null_mut(),
        ]
    }
    unsafe fn from_words(words: [*mut (); 2]) -> Self {
        ChaseLevItem(words[0].addr() as u32)
    }
}

impl LoomChaseLev {
    /// A shared LIFO deque, in the fast mode.
    pub fn new() -> Self {
        LoomChaseLev(crate::queues::chase_lev::Worker::new_lifo())
    }
    /// `new`, in the fenced mode (as after a steal).
    pub fn new_fenced() -> Self {
        LoomChaseLev(crate::queues::chase_lev::Worker::new_lifo_fenced())
    }
    pub fn push(&self, item: u32) {
        self.0.push(ChaseLevItem(item))
    }
    pub fn pop(&self) -> Option<u32> {
        self.0.pop().map(|item| item.0)
    }
    pub fn stealer(&self) -> LoomChaseLevStealer {
        LoomChaseLevStealer(self.0.stealer())
    }
}

impl Default for LoomChaseLev {
    fn default() -> Self {
        Self::new()
    }
}

impl LoomChaseLevStealer {
    /// One attempt: `None` if empty or if it lost a race.
    pub fn steal(&self) -> Option<u32> {
        match self.0.steal() {
            Steal::Success(item) => Some(item.0),
            Steal::Empty | Steal::Retry => None,
        }
    }
}

pub struct LoomSleep(Sleep);
pub struct LoomIdle(IdleState);
pub struct LoomLatch(CoreLatch);

/// The latch an outside thread blocks on (`platform/latch.rs`), for
/// `tests/loom_latch.rs`.
pub struct LoomLockLatch(LockLatch);

impl LoomLockLatch {
    pub fn new() -> Self {
        LoomLockLatch(LockLatch::new())
    }
    pub fn set(&self) {
        self.0.set()
    }
    pub fn wait(&self) {
        self.0.wait()
    }
    pub fn reset(&self) {
        self.0.reset()
    }
}

impl Default for LoomLockLatch {
    fn default() -> Self {
        Self::new()
    }
}

impl LoomSleep {
    pub fn new(workers: usize) -> Self {
        LoomSleep(Sleep::new(workers))
    }
    pub fn start_looking(&self, worker: usize) -> LoomIdle {
        LoomIdle(self.0.start_looking(worker))
    }
    pub fn work_found(&self) {
        self.0.work_found(|| false)
    }
    /// True if the worker blocked.
    pub fn no_work_found(
        &self,
        idle: &mut LoomIdle,
        latch: &LoomLatch,
        has_injected_work: impl FnOnce() -> bool,
    ) -> bool {
        self.0
            .no_work_found(&mut idle.0, &latch.0, has_injected_work)
    }
    pub fn new_injected_jobs(&self, jobs: usize, queue_was_empty: bool) -> usize {
        self.0.new_injected_jobs(jobs, queue_was_empty)
    }
    pub fn new_internal_jobs(&self, jobs: usize, queue_was_empty: bool) -> usize {
        self.0.new_internal_jobs(jobs, queue_was_empty)
    }
    pub fn notify_worker_latch_is_set(&self, worker: usize) {
        self.0.notify_worker_latch_is_set(worker)
    }
    pub fn sleeping_threads(&self) -> usize {
        self.0.sleeping_threads()
    }
}

impl LoomLatch {
    pub fn new() -> Self {
        LoomLatch(CoreLatch::new())
    }
    pub fn probe(&self) -> bool {
        self.0.probe()
    }
    /// True if the owner was asleep and must be woken.
    pub fn set(&self) -> bool {
        // SAFETY: `self` outlives the call (the model owns it in an Arc).
        unsafe { CoreLatch::set(&self.0) }
    }
}

impl Default for LoomLatch {
    fn default() -> Self {
        Self::new()
    }
}

/// A pipeline's in-order gate (`pipeline/gate.rs`).
pub struct LoomInOrderGate(crate::pipeline::gate::InOrderGate);
/// A pipeline's any-order gate.
pub struct LoomAnyOrderGate(crate::pipeline::gate::AnyOrderGate);

/// What `arrive` gave: entered, parked, or switched to another
/// parked slot (which the caller now holds the gate for).
#[derive(Debug, PartialEq, Eq)]
pub enum LoomArrival {
    Enter,
    Parked,
    Switch(u32),
}

fn arrival(a: crate::pipeline::gate::Arrival) -> LoomArrival {
    match a {
        crate::pipeline::gate::Arrival::Enter => LoomArrival::Enter,
        crate::pipeline::gate::Arrival::Parked => LoomArrival::Parked,
        crate::pipeline::gate::Arrival::Switch(slot) => LoomArrival::Switch(slot),
    }
}

impl LoomInOrderGate {
    pub fn new(tokens: usize) -> Self {
        LoomInOrderGate(crate::pipeline::gate::InOrderGate::new(tokens))
    }
    pub fn arrive(&self, sequence: u64, slot: u32) -> LoomArrival {
        arrival(self.0.arrive(sequence, slot))
    }
    pub fn finish(&self, sequence: u64) -> Option<u32> {
        self.0.finish(sequence)
    }
}

impl LoomAnyOrderGate {
    pub fn new(tokens: usize) -> Self {
        LoomAnyOrderGate(crate::pipeline::gate::AnyOrderGate::new(tokens))
    }
    pub fn arrive(&self, slot: u32) -> LoomArrival {
        arrival(self.0.arrive(slot))
    }
    pub fn finish(&self) -> Option<u32> {
        self.0.finish()
    }
}

/// One entry of a mailbox proxy (`proxy.rs`), around a dummy task.
pub struct LoomProxyEntry(crate::queues::job::JobRef<NoWorker>);

/// The proxy models claim entries but never run them: no worker needed
/// (the queues take the worker as a parameter).
pub struct NoWorker;

impl crate::queues::job::Runner for NoWorker {
    fn index(&self) -> usize {
        0
    }
    fn region(&self) -> crate::queues::region::Region {
        crate::queues::region::Region::NONE
    }
    fn set_region(&self, _: crate::queues::region::Region) {}
    fn push(&self, _: crate::queues::job::JobRef<Self>) {
        unreachable!("the proxy models push nothing")
    }
}

/// The two entries of a new proxy.
pub fn loom_proxy_pair() -> (LoomProxyEntry, LoomProxyEntry) {
    static TASK: u64 = 0;
    unsafe fn never_run(
        _: std::ptr::NonNull<()>,
        _: &NoWorker,
    ) -> Option<crate::queues::job::Next<NoWorker>> {
        unreachable!("the model only claims")
    }
    // SAFETY: the dummy task is a static and is never run.
    let job = unsafe {
        crate::queues::job::JobRef::new(
            std::ptr::NonNull::from(&TASK).cast(),
            never_run,
            crate::queues::region::Region::NONE,
        )
    };
    let entry = crate::queues::proxy::Proxy::new_pair(job, 0, 0);
    (LoomProxyEntry(entry), LoomProxyEntry(entry))
}

/// Proxies freed so far in this process (each must be freed once).
pub fn loom_proxy_frees() -> usize {
    crate::queues::proxy::FREES.load(std::sync::atomic::Ordering::SeqCst)
}

impl LoomProxyEntry {
    /// Take this entry: true if it claimed the task.
    pub fn take(self) -> bool {
        // SAFETY: each entry is consumed once (by value).
        matches!(
            unsafe { crate::queues::proxy::Proxy::take(self.0) },
            crate::queues::proxy::Taken::Run(_)
        )
    }
}

/// A graph node's predecessor count as a run decrements it
/// (`graph/pending.rs`): one predecessor arrives; true if it was the last,
/// so that the node is ready.
pub fn loom_arrive(count: &loom::sync::atomic::AtomicU32) -> bool {
    crate::graph::pending::arrive(count, false)
}

/// A worker's lent-work slot (`queues/lent.rs`) offering a loom cell, so
/// that the model sees the thief's read of what the owner wrote.
pub struct LoomLent(crate::queues::lent::LentSlot<loom::cell::UnsafeCell<u32>>);

impl LoomLent {
    pub fn new() -> Self {
        LoomLent(crate::queues::lent::LentSlot::new())
    }
    /// # Safety
    /// As `LentSlot::offer`: owner only; `item` outlives the offer.
    pub unsafe fn offer(&self, item: &loom::cell::UnsafeCell<u32>) -> bool {
        // SAFETY: forwarded.
        unsafe { self.0.offer(std::ptr::NonNull::from(item)) }
    }
    /// # Safety
    /// As `LentSlot::withdraw`.
    pub unsafe fn withdraw(&self) -> bool {
        // SAFETY: forwarded.
        unsafe { self.0.withdraw() }
    }
    pub fn take_if_stale(
        &self,
        seen: &std::cell::Cell<u64>,
    ) -> Option<std::ptr::NonNull<loom::cell::UnsafeCell<u32>>> {
        self.0.take_if_stale(seen)
    }
}

impl Default for LoomLent {
    fn default() -> Self {
        Self::new()
    }
}

/// Release one unit of a task node's pending count (`task/node/run.rs`):
/// true if it was the last.
pub fn loom_release_count(pending: &crate::platform::sync::AtomicU32) -> bool {
    crate::task::node::release_count(pending)
}

/// Release one unit of a task node's pending count, beside its other
/// holder, the job `sibling`, if the count is 2 and that job is the
/// newest on `deque` (it is popped then; any other job popped goes back).
pub fn loom_release_or_sibling(
    pending: &crate::platform::sync::AtomicU32,
    deque: &LoomDeque,
    sibling: u32,
) -> LoomRelease {
    /// `sibling` on top of `deque`.
    struct OnTop<'d> {
        deque: &'d LoomDeque,
        sibling: u32,
    }
    impl crate::task::node::TakeSibling for OnTop<'_> {
        type Job = u32;
        fn take(self) -> Option<u32> {
            let job = self.deque.pop()?;
            if job == self.sibling {
                Some(job)
            } else {
                self.deque.push(job);
                None
            }
        }
    }
    let released = crate::task::node::release_or_sibling(pending, OnTop { deque, sibling });
    match released {
        crate::task::node::Release::Last => LoomRelease::Last,
        crate::task::node::Release::NotLast => LoomRelease::NotLast,
        crate::task::node::Release::Sibling(_) => LoomRelease::Sibling,
    }
}

/// What `loom_release_or_sibling` did: our unit was the last; others are
/// left; or the sibling was popped and runs next.
#[derive(Debug, PartialEq, Eq)]
pub enum LoomRelease {
    Last,
    NotLast,
    Sibling,
}
