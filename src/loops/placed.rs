//! The planned partitioners (`Static`, a replaying `Affinity`): the range
//! is cut into `n` parts up front, and part `k` goes to the worker the plan
//! names, through that worker's mailbox (rule 4) with a proxy on the
//! caller's deque (`Registry::route`): the target takes it when free, and
//! another worker only when the target is stuck (`queues/proxy.rs`). The
//! caller runs its own parts in place, then waits by working until every
//! part has run.
//!
//! Under `Placement::Balanced` (the affinity partitioner) a worker that has
//! run its own parts takes the parts of another share that nobody has
//! started yet, from that share's end, as oneTBB's affinity partitioner
//! lets a thief take a piece: a worker slowed by other load (a shared
//! machine's vCPU) no longer holds the whole step back. Each part has a
//! claim flag, set once by whichever worker runs it, so a part runs exactly
//! once however many workers reach for it. The affinity plan does not
//! record such a help: one slow step must not move the plan, and a plan
//! that followed every help could collapse onto one worker (a worker that
//! starts late loses all its parts, is sent none the next time, and never
//! gets them back).
//!
//! The parts live in one array owned by this call; the parts for one
//! worker travel as one job (a *share*), which releases one unit of the
//! call's latch as its very last act: the caller returns (and frees the
//! arrays) only once the latch is set, so no job outlives its memory. A panic in a part is kept (the first one) and resumed once every
//! part has run: rayon's contract, as for the recursive partitioners.

use super::range::LoopRange;
use crate::platform::latch::CountLatch;
use crate::platform::unwind;
use crate::queues::dispatch::{Dispatch, SharedPlace};
use crate::worker::thread::{JobRef, Next, WorkerThread};
use parking_lot::Mutex;
use std::any::Any;
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

/// What every part of one call shares (on the caller's stack).
struct Shared<'c, R, L> {
    range: &'c R,
    parts: usize,
    leaf: &'c L,
    /// Told which worker ran part `k` (the affinity partitioner's record),
    /// unless a helper ran it.
    ran: &'c (dyn Fn(usize, usize) + Sync),
    /// Every part, grouped by the worker it is sent to, each share in order.
    order: &'c [usize],
    /// Whether a worker out of parts takes others' unstarted ones.
    balanced: bool,
    latch: CountLatch,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

/// One part: a job of its own.
struct Part<'c, R, T, L> {
    shared: &'c Shared<'c, R, L>,
    index: usize,
    /// Set by the one worker that runs the part.
    claimed: AtomicBool,
    /// Written once by the part's job, read by the caller after the latch.
    result: UnsafeCell<Option<T>>,
}

impl<R, T, L> Part<'_, R, T, L>
where
    R: LoopRange,
    T: Send,
    L: Fn(R) -> T + Sync,
{
    /// Run the part on `worker` unless another worker has claimed it; catch
    /// a panic. `helping`: `worker` is not the one the part was sent to.
    fn run(&self, worker: &WorkerThread, helping: bool) {
        // Relaxed: the swap's atomicity alone makes the claim exclusive; the
        // part's inputs were published with its job (or are the caller's
        // own), and its result reaches the caller through the latch.
        if self.claimed.swap(true, Ordering::Relaxed) {
            return;
        }
        let shared = self.shared;
        if helping {
            worker.counters().loop_part_helped();
        } else {
            (shared.ran)(self.index, worker.index());
        }
        let range = shared.range.part(self.index, shared.parts);
        match unwind::halt_unwinding(|| (shared.leaf)(range)) {
            // SAFETY: only this part's single run writes the cell, and the
            // caller reads it only after the latch said the run is over.
            Ok(value) => unsafe { *self.result.get() = Some(value) },
            Err(payload) => {
                let mut first = shared.panic.lock();
                if first.is_none() {
                    *first = Some(payload);
                }
            }
        }
    }
}

/// The parts sent to one worker, in order: one job (one mailbox entry, one
/// proxy) however many parts, so that a step of a repeated loop costs one
/// hand-over per worker.
struct Share<'c, R, T, L> {
    parts: &'c [Part<'c, R, T, L>],
    /// Indices into `parts`.
    indices: &'c [usize],
}

impl<R, T, L> Share<'_, R, T, L>
where
    R: LoopRange,
    T: Send,
    L: Fn(R) -> T + Sync,
{
    /// The `JobRef` entry point of a share sent to a worker.
    ///
    /// # Safety
    /// `this` points at a `Share` of a call that waits for its latch.
    unsafe fn execute(this: NonNull<()>, worker: &WorkerThread) -> Option<Next> {
        // SAFETY: per the contract, live until the release below.
        let share = unsafe { this.cast::<Self>().as_ref() };
        for &index in share.indices {
            share.parts[index].run(worker, false);
        }
        help_others(share.parts, worker);
        worker.note_loop_share();
        let latch = &share.parts[share.indices[0]].shared.latch;
        // SAFETY: the latch counts this share's unit; the last touch of the
        // call's memory (the caller may return the moment it is set).
        unsafe { CountLatch::release(latch) };
        None
    }
}

/// Under `Placement::Balanced`, run the parts of other shares that nobody
/// has started, each share's last part first (its owner works from the
/// front, so the two meet in the middle). A no-op otherwise.
fn help_others<R, T, L>(parts: &[Part<'_, R, T, L>], worker: &WorkerThread)
where
    R: LoopRange,
    T: Send,
    L: Fn(R) -> T + Sync,
{
    let Some(first) = parts.first() else { return };
    let shared = first.shared;
    if !shared.balanced {
        return;
    }
    for &index in shared.order.iter().rev() {
        parts[index].run(worker, true);
    }
}

/// How a planned part reaches its worker.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Mailbox plus a proxy: another worker takes it if its worker is stuck.
    Preferred,
    /// As `Preferred`, and a worker that has run its own parts runs others'
    /// unstarted ones (the affinity partitioner).
    Balanced,
    /// Mailbox only: it runs on its worker and nowhere else, after the
    /// tasks in that worker's deque, the caller's own part too (a
    /// broadcast).
    Strict,
}

/// Run `range` cut into `parts` parts, part `k` on worker `target(k)`,
/// `ran(k, worker)` told where each ran, and combine the results left to
/// right (`None` for no parts).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_placed<R, T, L, C>(
    worker: &WorkerThread,
    range: &R,
    parts: usize,
    target: impl Fn(usize) -> usize,
    placement: Placement,
    ran: &(dyn Fn(usize, usize) + Sync),
    leaf: &L,
    combine: &C,
) -> Option<T>
where
    R: LoopRange,
    T: Send,
    L: Fn(R) -> T + Sync,
    C: Fn(T, T) -> T + Sync,
{
    let registry = worker.registry();
    let workers = registry.num_slots();
    // The parts by worker, each worker's in order.
    let mut order: Vec<usize> = (0..parts).collect();
    order.sort_by_key(|&k| target(k) % workers);
    let shared = Shared {
        range,
        parts,
        leaf,
        ran,
        order: &order,
        balanced: placement == Placement::Balanced,
        latch: CountLatch::for_worker(registry.wake_owner(worker.index())),
        panic: Mutex::new(None),
    };
    let all: Box<[Part<'_, R, T, L>]> = (0..parts)
        .map(|index| Part {
            shared: &shared,
            index,
            claimed: AtomicBool::new(false),
            result: UnsafeCell::new(None),
        })
        .collect();
    let here = worker.index();
    // A strict part for us goes through our mailbox too: we take it after
    // our own deque (rule 3 before rule 4), as the others do theirs.
    let inline = |to: usize| to == here && placement != Placement::Strict;
    let shares: Vec<(usize, Share<'_, R, T, L>)> = order
        .chunk_by(|&a, &b| target(a) % workers == target(b) % workers)
        .map(|indices| {
            let to = target(indices[0]) % workers;
            (
                to,
                Share {
                    parts: &all,
                    indices,
                },
            )
        })
        .collect();
    // Others' shares first, so they start while we run ours.
    let mut sent = 0;
    for (to, share) in shares.iter().filter(|(to, _)| !inline(*to)) {
        sent += 1;
        shared.latch.add(1);
        // SAFETY: the share and its parts live on this frame until the
        // latch is set, which its job's release contributes to; it runs
        // once.
        let job = unsafe {
            JobRef::new(
                NonNull::from(share).cast(),
                Share::<R, T, L>::execute,
                worker.region(),
            )
        };
        match placement {
            Placement::Preferred | Placement::Balanced => {
                registry.route(job, Dispatch::Spawn, Some(*to), Some(worker), || {
                    SharedPlace::PLAIN
                })
            }
            Placement::Strict => registry.route_strict(job, *to),
        }
    }
    for (_, share) in shares.iter().filter(|(to, _)| inline(*to)) {
        for &index in share.indices {
            all[index].run(worker, false);
        }
    }
    help_others(&all, worker);
    if sent > 0 {
        // Our own unit: the latch is set when the others' are released too.
        // SAFETY: the latch lives on this frame until after the wait.
        unsafe { CountLatch::release(&shared.latch) };
        // The other shares end within a step's time of ours: wait awake a
        // while (a woken sleeper pays tens of microseconds a step).
        worker.note_loop_share();
        worker.wait_until(shared.latch.as_core().expect("a worker's latch"), None);
    }
    if let Some(payload) = shared.panic.lock().take() {
        unwind::resume_unwinding(payload);
    }
    Vec::from(all)
        .into_iter()
        .filter_map(|part| part.result.into_inner())
        .reduce(combine)
}
