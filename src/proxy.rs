//! Mailbox proxies: a task with affinity in two places at once.
//!
//! A task with affinity for worker k goes into k's mailbox and, as oneTBB's
//! `task_proxy` does, into a second queue any worker can reach: the
//! spawner's own deque, or the shared queue when it comes from outside the
//! pool. Both entries are the same proxy. Whoever takes it first claims it
//! with one atomic swap and runs the task; the other finds it claimed and
//! drops it. So k gets it by rule 4 when it is free, and a long-busy k
//! cannot strand it.
//!
//! A worker other than k that finds a proxy first asks whether k will come
//! for it soon (`Mailbox::will_come_soon`): k is idle (searching or
//! asleep, and the push woke it) or has taken something from its mailbox
//! since the proxy was pushed. If so it leaves the proxy to k (dropping its
//! own entry). If k is busy and has not moved since, k may be on a short
//! task or stuck on a long one: the finder puts the entry back on the shared
//! queue and claims it only once `PATIENCE` has passed with k still stuck.
//! So only a k that sits on one long task loses its work.
//!
//! Invariants: exactly one taker claims (the swap); the proxy is freed
//! exactly once, by whichever of its two entries is dropped last (a count
//! of two references); the task inside is run at most once and, because
//! both entries are eventually taken or dropped by workers, exactly once.

use crate::job::{JobRef, Next};
use crate::node_alloc;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::worker::WorkerThread;
use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a busy target that takes nothing from its mailbox keeps its
/// proxies before other workers claim them. (Under Miri, whose threads run
/// a hundred times slower, a millisecond is a few steps.)
const PATIENCE: Duration = if cfg!(miri) {
    Duration::from_secs(1)
} else {
    Duration::from_millis(1)
};

pub(crate) struct Proxy {
    claimed: AtomicBool,
    /// Entries still holding the proxy: 2, then 1, then freed.
    refs: AtomicUsize,
    job: JobRef,
    target: usize,
    /// The target's mailbox progress when the proxy was pushed.
    stamp: u64,
    /// When another worker first found the target busy and stuck
    /// (nanoseconds since `epoch()`, plus one; 0: not yet).
    first_stuck: AtomicU64,
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// What taking one entry of a proxy gave.
pub(crate) enum Taken {
    /// We claimed it: run this.
    Run(JobRef),
    /// The other entry was first, or we left it to its target.
    Nothing,
}

impl Proxy {
    /// A proxy for `job` with affinity for `target`: push the returned
    /// `JobRef` to exactly two places.
    pub(crate) fn new_pair(job: JobRef, target: usize, stamp: u64) -> JobRef {
        let memory = node_alloc::allocate(Layout::new::<Proxy>()).cast::<Proxy>();
        // SAFETY: fresh memory with the layout of `Proxy`.
        unsafe {
            memory.as_ptr().write(Proxy {
                claimed: AtomicBool::new(false),
                refs: AtomicUsize::new(2),
                job,
                target,
                stamp,
                first_stuck: AtomicU64::new(0),
            })
        };
        // SAFETY: the proxy lives until both entries were taken or dropped.
        unsafe { JobRef::new_proxy(memory.cast(), execute) }
    }

    /// The worker the task has affinity for, and the stamp to compare with
    /// its mailbox's progress.
    ///
    /// # Safety
    /// `entry` is a proxy entry the caller holds (not yet taken or dropped).
    pub(crate) unsafe fn target(entry: &JobRef) -> (usize, u64) {
        // SAFETY: the caller's entry keeps the proxy alive.
        let proxy = unsafe { entry.pointer().cast::<Proxy>().as_ref() };
        (proxy.target, proxy.stamp)
    }

    /// The target was found busy and stuck: has it been so for `PATIENCE`
    /// since the first time a worker saw it so?
    ///
    /// # Safety
    /// `entry` is a proxy entry the caller holds.
    pub(crate) unsafe fn stuck_long_enough(entry: &JobRef) -> bool {
        // SAFETY: the caller's entry keeps the proxy alive.
        let proxy = unsafe { entry.pointer().cast::<Proxy>().as_ref() };
        let now = epoch().elapsed().as_nanos() as u64 + 1;
        match proxy
            .first_stuck
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => false,
            Err(first) => now - first >= PATIENCE.as_nanos() as u64,
        }
    }

    /// Take one entry: claim the task if nobody did, and drop the entry.
    ///
    /// # Safety
    /// `entry` is a proxy entry the caller holds; it is consumed.
    pub(crate) unsafe fn take(entry: JobRef) -> Taken {
        let memory = entry.pointer().cast::<Proxy>();
        // SAFETY: our entry keeps the proxy alive until `release`.
        let proxy = unsafe { memory.as_ref() };
        let taken = if proxy.claimed.swap(true, Ordering::AcqRel) {
            Taken::Nothing
        } else {
            Taken::Run(proxy.job)
        };
        // SAFETY: our entry, given up once.
        unsafe { Self::release(memory) };
        taken
    }

    /// Drop one entry without claiming (left to the target).
    ///
    /// # Safety
    /// `entry` is a proxy entry the caller holds; it is consumed.
    pub(crate) unsafe fn drop_entry(entry: JobRef) {
        // SAFETY: forwarded.
        unsafe { Self::release(entry.pointer().cast()) }
    }

    /// # Safety
    /// The caller gives up one of the two references, once.
    unsafe fn release(memory: NonNull<Proxy>) {
        // SAFETY: alive while a reference remains, ours included.
        let last = unsafe { memory.as_ref() }
            .refs
            .fetch_sub(1, Ordering::AcqRel)
            == 1;
        if last {
            #[cfg(loom)]
            FREES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            // SAFETY: the last reference: nobody touches it again.
            unsafe {
                memory.as_ptr().drop_in_place();
                node_alloc::release(memory.cast(), Layout::new::<Proxy>());
            }
        }
    }
}

/// Proxies freed, for the loom model (a plain std counter: loom runs one
/// model thread at a time).
#[cfg(loom)]
pub(crate) static FREES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A proxy entry run as a plain job (by a path that does not look at
/// proxies): claim and run, or do nothing.
unsafe fn execute(entry: NonNull<()>, worker: &WorkerThread) -> Option<Next> {
    // SAFETY: made by `new_pair`; this entry is being consumed.
    let entry = unsafe { JobRef::new_proxy(entry, execute) };
    // SAFETY: as above.
    match unsafe { Proxy::take(entry) } {
        // SAFETY: claimed once, so run once.
        Taken::Run(job) => unsafe { job.execute(worker) },
        Taken::Nothing => None,
    }
}
