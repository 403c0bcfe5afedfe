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
//! A worker other than k that finds an unclaimed proxy first asks whether
//! k is stuck (`Proxy::should_claim`). While k is idle (searching or
//! asleep: the push woke it) or takes things from its mailbox, it is not,
//! and each look restarts the clock. Only when k has been busy without
//! taking anything from its mailbox for `PATIENCE` does the finder claim the
//! task. Until then it puts its entry back on the shared queue: an entry is
//! never given up unclaimed on a guess, so a k that stops moving loses its
//! tasks after `PATIENCE` at the latest, however it got there.
//!
//! Invariants: exactly one taker claims (the swap); the proxy is freed
//! exactly once, by whichever of its two entries is dropped last (a count
//! of two references); the task inside is run at most once and, because
//! both entries are eventually taken or dropped by workers, exactly once.

use crate::platform::node_alloc;
use crate::platform::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::queues::job::{JobRef, Next, Runner};
use crate::queues::mailbox::MailboxState;
use crate::queues::region::Region;
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

// repr(C), `region` first: `JobRef::region` reads it without knowing the
// type (see `queues/job.rs`).
#[repr(C)]
pub(crate) struct Proxy<W> {
    /// `job`'s isolation region, readable after `job` ran.
    region: Region,
    claimed: AtomicBool,
    /// Entries still holding the proxy: 2, then 1, then freed.
    refs: AtomicUsize,
    job: JobRef<W>,
    target: usize,
    /// The target's mailbox progress when a finder last looked (at first,
    /// when the proxy was pushed).
    seen_progress: AtomicU64,
    /// When a finder first saw the target busy at `seen_progress`
    /// (nanoseconds since `epoch()`, plus one; 0: not yet). The entry that
    /// is not in the mailbox is held by one thread at a time, handed on
    /// through the queues, so these two fields have one writer at a time.
    stuck_since: AtomicU64,
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// What taking one entry of a proxy gave.
pub(crate) enum Taken<W> {
    /// We claimed it: run this.
    Run(JobRef<W>),
    /// The other entry was first, or we left it to its target.
    Nothing,
}

impl<W: Runner> Proxy<W> {
    /// A proxy for `job` with affinity for `target`: push the returned
    /// `JobRef` to exactly two places.
    pub(crate) fn new_pair(job: JobRef<W>, target: usize, stamp: u64) -> JobRef<W> {
        let memory = node_alloc::allocate(Layout::new::<Proxy<W>>()).cast::<Proxy<W>>();
        // SAFETY: fresh memory with the layout of `Proxy`.
        unsafe {
            memory.as_ptr().write(Proxy {
                claimed: AtomicBool::new(false),
                refs: AtomicUsize::new(2),
                job,
                region: job.region(),
                target,
                seen_progress: AtomicU64::new(stamp),
                stuck_since: AtomicU64::new(0),
            })
        };
        // SAFETY: the proxy lives until both entries were taken or dropped.
        unsafe { JobRef::new_proxy(memory.cast(), execute::<W>) }
    }

    /// The worker the task has affinity for.
    ///
    /// # Safety
    /// `entry` is a proxy entry the caller holds (not yet taken or dropped).
    pub(crate) unsafe fn target(entry: &JobRef<W>) -> usize {
        // SAFETY: the caller's entry keeps the proxy alive.
        unsafe { entry.pointer().cast::<Proxy<W>>().as_ref() }.target
    }

    /// Should a worker other than the target claim the task now? Yes if it
    /// is claimed already (taking the entry just gives it up), or if the
    /// target has been busy, taking nothing from its mailbox, for
    /// `PATIENCE`. No (put the entry back) while the target is idle or
    /// moving through its mailbox: it will come for its own entry.
    ///
    /// # Safety
    /// `entry` is the non-mailbox entry of a proxy, held by the caller.
    pub(crate) unsafe fn should_claim(entry: &JobRef<W>, target: MailboxState) -> bool {
        // SAFETY: the caller's entry keeps the proxy alive.
        let proxy = unsafe { entry.pointer().cast::<Proxy<W>>().as_ref() };
        if proxy.claimed.load(Ordering::Acquire) {
            return true;
        }
        let progress = target.progress;
        if target.idle || progress != proxy.seen_progress.load(Ordering::Relaxed) {
            proxy.seen_progress.store(progress, Ordering::Relaxed);
            proxy.stuck_since.store(0, Ordering::Relaxed);
            return false;
        }
        let now = epoch().elapsed().as_nanos() as u64 + 1;
        let since = proxy.stuck_since.load(Ordering::Relaxed);
        if since == 0 {
            proxy.stuck_since.store(now, Ordering::Relaxed);
            return false;
        }
        now.saturating_sub(since) >= PATIENCE.as_nanos() as u64
    }

    /// Take one entry: claim the task if nobody did, and drop the entry.
    ///
    /// # Safety
    /// `entry` is a proxy entry the caller holds; it is consumed.
    pub(crate) unsafe fn take(entry: JobRef<W>) -> Taken<W> {
        let memory = entry.pointer().cast::<Proxy<W>>();
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

    /// # Safety
    /// The caller gives up one of the two references, once.
    unsafe fn release(memory: NonNull<Proxy<W>>) {
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
                node_alloc::release(memory.cast(), Layout::new::<Proxy<W>>());
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
unsafe fn execute<W: Runner>(entry: NonNull<()>, worker: &W) -> Option<Next<W>> {
    // SAFETY: made by `new_pair`; this entry is being consumed.
    let entry = unsafe { JobRef::new_proxy(entry, execute::<W>) };
    // SAFETY: as above.
    match unsafe { Proxy::<W>::take(entry) } {
        // SAFETY: claimed once, so run once.
        Taken::Run(job) => unsafe { job.execute(worker) },
        Taken::Nothing => None,
    }
}
