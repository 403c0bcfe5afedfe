//! The planned partitioners (`Static`, a replaying `Affinity`): the range
//! is cut into `n` parts up front, and part `k` goes to the worker the plan
//! names, through that worker's mailbox (rule 4) with a proxy on the
//! caller's deque (`Registry::route`): the target takes it when free, and
//! another worker only when the target is stuck (`queues/proxy.rs`). The
//! caller runs its own parts in place, then waits by working until every
//! part has run.
//!
//! Under `Placement::Balanced` (the affinity partitioner) a worker that has
//! run its own parts takes the unstarted parts of the share furthest
//! behind, from that share's end, as oneTBB's affinity partitioner lets a
//! thief take a piece: a worker slowed by other load (a shared machine's
//! vCPU) no longer holds the whole step back. Each part is claimed once
//! (`claimed_by`), so it runs exactly once however many workers reach for
//! it. The affinity plan moves a helped part to its helper only when the
//! part's own share ran through its proxy, that is when its worker was
//! stuck (as it moves a part a proxy's taker ran); a worker merely slower
//! this time keeps its parts. A plan that followed every help could
//! collapse onto one worker: a worker that starts late loses all its
//! parts, is sent none the next time, and never gets them back.
//!
//! The parts live in one array owned by this call; the parts for one
//! worker travel as one job (a *share*), which releases one unit of the
//! call's latch as its very last act: the caller returns (and frees the
//! arrays) only once the latch is set, so no job outlives its memory. A
//! panic in a part is kept (the first one) and resumed once every part has
//! run: rayon's contract, as for the recursive partitioners.

use super::range::LoopRange;
use crate::platform::latch::CountLatch;
use crate::platform::unwind;
use crate::queues::dispatch::{Dispatch, SharedPlace};
use crate::worker::thread::{JobRef, Next, WorkerThread};
use parking_lot::Mutex;
use std::any::Any;
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What every part of one call shares (on the caller's stack).
struct Shared<'c, R, L> {
    range: &'c R,
    parts: usize,
    leaf: &'c L,
    /// Told where part `k` ran (the affinity partitioner's record).
    ran: &'c (dyn Fn(usize, usize, Note) + Sync),
    /// Every part, grouped by the worker it is sent to, each share in order.
    order: &'c [usize],
    /// Share `s` is `order[bounds[s]..bounds[s + 1]]`.
    bounds: &'c [usize],
    /// Whether a worker out of parts takes others' unstarted ones.
    balanced: bool,
    latch: CountLatch,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

/// Marks a part nobody has claimed.
const UNCLAIMED: usize = usize::MAX;

/// One part of the range.
struct Part<'c, R, T, L> {
    shared: &'c Shared<'c, R, L>,
    index: usize,
    /// The worker the part is sent to.
    home: usize,
    /// The worker that runs the part (`UNCLAIMED`: none yet); set once.
    claimed_by: AtomicUsize,
    /// Written once by the worker that claimed the part, read by the
    /// caller after the latch.
    result: UnsafeCell<Option<T>>,
}

impl<R, T, L> Part<'_, R, T, L>
where
    R: LoopRange,
    T: Send,
    L: Fn(R) -> T + Sync,
{
    /// Claim the part for `worker`, or learn which worker had.
    fn claim(&self, worker: usize) -> Result<(), usize> {
        // Relaxed: the exchange alone makes the claim exclusive; the part's
        // inputs were published with its job (or are the caller's own), and
        // its result reaches the caller through the latch, released by
        // whoever ran it after the write.
        self.claimed_by
            .compare_exchange(UNCLAIMED, worker, Ordering::Relaxed, Ordering::Relaxed)
            .map(|_| ())
    }

    fn is_claimed(&self) -> bool {
        self.claimed_by.load(Ordering::Relaxed) != UNCLAIMED
    }

    /// Run the part, as the worker it was sent with (its share's, or the
    /// caller's own), and tell the plan; or, if a helper had claimed it,
    /// say which worker that was.
    fn run_as_sent(&self, worker: &WorkerThread) -> Result<(), usize> {
        self.claim(worker.index())?;
        (self.shared.ran)(self.index, worker.index(), Note::Ran);
        self.run_claimed(worker);
        Ok(())
    }

    /// Run the part this worker claimed; keep a panic.
    fn run_claimed(&self, worker: &WorkerThread) {
        debug_assert_eq!(self.claimed_by.load(Ordering::Relaxed), worker.index());
        let shared = self.shared;
        let range = shared.range.part(self.index, shared.parts);
        match unwind::halt_unwinding(|| (shared.leaf)(range)) {
            // SAFETY: only the worker that claimed the part writes the cell,
            // and the caller reads it only after the latch said every part
            // has run.
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
        let shared = share.parts[share.indices[0]].shared;
        // Not on its worker: taken through its proxy, its worker stuck.
        let through_proxy = worker.index() != share.parts[share.indices[0]].home;
        for &index in share.indices {
            if let Err(helper) = share.parts[index].run_as_sent(worker) {
                // A helper ran it. From a stuck worker, the part moves to
                // its helper, as it would to the proxy's taker.
                if through_proxy {
                    (shared.ran)(index, helper, Note::Moved);
                }
            }
        }
        help_others(share.parts, worker);
        worker.note_loop_share();
        // SAFETY: the latch counts this share's unit; the last touch of the
        // call's memory (the caller may return the moment it is set).
        unsafe { CountLatch::release(&shared.latch) };
        None
    }
}

/// Under `Placement::Balanced`, while some share has parts nobody has
/// started, run the last of them in the share with the most (its worker is
/// the furthest behind, and works from the front: the two meet in the
/// middle). A no-op otherwise.
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
    loop {
        // (unstarted parts, the last of them) of the share furthest behind.
        let mut furthest: Option<(usize, usize)> = None;
        for bounds in shared.bounds.windows(2) {
            let share = &shared.order[bounds[0]..bounds[1]];
            let mut unstarted = share.iter().filter(|&&k| !parts[k].is_claimed());
            let Some(&last) = unstarted.next_back() else {
                continue;
            };
            let count = 1 + unstarted.count();
            if furthest.is_none_or(|(most, _)| count > most) {
                furthest = Some((count, last));
            }
        }
        let Some((_, index)) = furthest else { return };
        let part = &parts[index];
        if part.claim(worker.index()).is_ok() {
            if part.home == worker.index() {
                // Our own part, reached before our share (we ran another's
                // share through its proxy first): no help.
                (shared.ran)(index, worker.index(), Note::Ran);
            } else {
                worker.counters().loop_part_helped();
                (shared.ran)(index, worker.index(), Note::Helped);
            }
            part.run_claimed(worker);
        }
    }
}

/// What `run_placed`'s `ran` is told about a part, with its index and a
/// worker.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Note {
    /// The part ran on this worker as sent, or through its proxy: send it
    /// here next time.
    Ran,
    /// This worker helped with the part; its plan stays.
    Helped,
    /// The part's worker was stuck and this worker had helped with it:
    /// send it here next time (it was told `Helped` already).
    Moved,
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

/// Run `range` cut into `parts` parts, part `k` sent to worker
/// `target(k)` (under `Balanced`, a faster worker may run it), `ran(k,
/// worker, note)` told where each ran, and combine the results left to
/// right (`None` for no parts).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_placed<R, T, L, C>(
    worker: &WorkerThread,
    range: &R,
    parts: usize,
    target: impl Fn(usize) -> usize,
    placement: Placement,
    ran: &(dyn Fn(usize, usize, Note) + Sync),
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
    let mut bounds = vec![0];
    bounds.extend(
        order
            .chunk_by(|&a, &b| target(a) % workers == target(b) % workers)
            .scan(0, |end, share| {
                *end += share.len();
                Some(*end)
            }),
    );
    let shared = Shared {
        range,
        parts,
        leaf,
        ran,
        order: &order,
        bounds: &bounds,
        balanced: placement == Placement::Balanced,
        latch: CountLatch::for_worker(registry.wake_owner(worker.index())),
        panic: Mutex::new(None),
    };
    let all: Box<[Part<'_, R, T, L>]> = (0..parts)
        .map(|index| Part {
            shared: &shared,
            index,
            home: target(index) % workers,
            claimed_by: AtomicUsize::new(UNCLAIMED),
            result: UnsafeCell::new(None),
        })
        .collect();
    let here = worker.index();
    // A strict part for us goes through our mailbox too: we take it after
    // our own deque (rule 3 before rule 4), as the others do theirs.
    let inline = |to: usize| to == here && placement != Placement::Strict;
    let shares: Vec<(usize, Share<'_, R, T, L>)> = bounds
        .windows(2)
        .map(|share| {
            let indices = &order[share[0]..share[1]];
            (
                all[indices[0]].home,
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
            // A part a helper took from us stays ours in the plan: we were
            // busy with the others.
            let _ = all[index].run_as_sent(worker);
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
