//! The recursive partitioners (`Auto`, `Simple`, and the fixed tree of the
//! deterministic reduce): a piece keeps its left half and offers the right
//! half to thieves, exactly as `join` does (the right half is a stack job
//! on the worker's own deque: rule 3 for this worker, rule 6 for a thief),
//! so cutting a range allocates nothing. Results combine up the split
//! tree, left before right.
//!
//! `Auto` follows rayon's adaptive splitter: a budget of cuts, halved at
//! each level, starts at the number of workers (so a few pieces per
//! worker), and a half that was stolen gets the budget back (a thief's work
//! is evidence of imbalance: cut it further so that others can help).
//!
//! On top of that, as oneTBB's auto partitioner does, a running piece can
//! still be cut: an `Auto` leaf runs its range in up to `PROBE_PARTS`
//! consecutive parts (cut by `LoopRange::split_outer_at`, which keeps the
//! body's inner loop whole), and after each part it looks for demand
//! (`WorkerThread::sees_demand`: a worker of the pool is idle and this
//! worker's deque is empty). On demand the rest is cut as a stolen
//! piece would be, so the idle worker gets half of it at once instead of
//! waiting for the piece to end: that is what evens out the end of an
//! unbalanced loop. Looking costs two loads a part. Two bounds keep the
//! cutting in check when idle workers are always there (a pool with more
//! threads than the work keeps busy, or an idle worker that cannot take
//! the work because it waits in another isolated region): a part is at
//! least `1 / (2 * PROBE_PARTS * workers)` of the whole loop (a leaf of
//! an undisturbed loop, `1 / (2 * workers)` of it, still gets its 16
//! parts; the many small pieces of a pool with many idle workers get few
//! or none), and a budget of demand cuts (`probes`), spent along each
//! chain of pieces, stops a chain from being cut down to its grain.
//!
//! Invariant: every element of the range reaches exactly one leaf, and the
//! leaves combine in range order.

use super::range::LoopRange;
use crate::fork_join::join::join_on_worker;
use crate::platform::unwind;
use crate::worker::thread::WorkerThread;

/// Into how many parts a leaf of `Auto` cuts itself to look for demand
/// between them (fewer if the grain says so).
const PROBE_PARTS: usize = 16;

/// Demand cuts along one chain of pieces (a loop's pieces and the pieces
/// cut from them, stolen or not).
const PROBE_BUDGET: u8 = 6;

/// When to cut a range in halves, and how a piece left uncut runs. Two
/// kinds, each its own type, so that a loop's code holds only its own
/// kind's (the `Auto` leaf's demand cut would otherwise grow every
/// `Simple` loop past what the compiler inlines).
pub(crate) trait Splitter: Copy + Send + Sync {
    /// Cut `range`? If so, the splitter each half carries on with.
    fn cut<R: LoopRange>(self, range: &R, stolen: bool) -> Option<Self>;

    /// Run a piece `cut` left whole: by default, the leaf on all of it.
    #[inline]
    fn run_leaf<R, T, L, C>(self, worker: &WorkerThread, range: R, leaf: &L, combine: &C) -> T
    where
        R: LoopRange,
        T: Send,
        L: Fn(R) -> T + Sync,
        C: Fn(T, T) -> T + Sync,
    {
        let _ = (worker, combine);
        leaf(range)
    }
}

/// Adaptive: `cuts` left in the budget, pieces of at least `min_grain`,
/// parts of a leaf of at least `min_part` elements, `probes` demand cuts
/// left.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Auto {
    cuts: usize,
    workers: usize,
    min_grain: usize,
    min_part: usize,
    probes: u8,
}

impl Auto {
    /// The splitter of a loop over `len` elements on `workers` workers.
    pub(crate) fn new(workers: usize, min_grain: usize, len: usize) -> Auto {
        Auto {
            cuts: workers,
            workers,
            min_grain: min_grain.max(1),
            min_part: len / (2 * PROBE_PARTS * workers.max(1)),
            probes: PROBE_BUDGET,
        }
    }
}

impl Splitter for Auto {
    #[inline]
    fn cut<R: LoopRange>(self, range: &R, stolen: bool) -> Option<Auto> {
        if !range.divisible() || range.elements() / 2 < self.min_grain {
            return None;
        }
        let cuts = if stolen {
            self.workers.max(self.cuts / 2)
        } else if self.cuts > 0 {
            self.cuts / 2
        } else {
            return None;
        };
        Some(Auto { cuts, ..self })
    }

    #[inline]
    fn run_leaf<R, T, L, C>(self, worker: &WorkerThread, range: R, leaf: &L, combine: &C) -> T
    where
        R: LoopRange,
        T: Send,
        L: Fn(R) -> T + Sync,
        C: Fn(T, T) -> T + Sync,
    {
        if self.probes == 0 {
            return leaf(range);
        }
        let demand_cut = Auto {
            cuts: self.workers,
            probes: self.probes - 1,
            ..self
        };
        run_probing(worker, range, demand_cut, leaf, combine)
    }
}

/// Down to pieces of at most `grain`, whoever runs what (the same tree for
/// every run: what the deterministic reduce relies on).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fixed {
    grain: usize,
}

impl Fixed {
    pub(crate) fn new(grain: usize) -> Fixed {
        Fixed {
            grain: grain.max(1),
        }
    }
}

impl Splitter for Fixed {
    #[inline]
    fn cut<R: LoopRange>(self, range: &R, _stolen: bool) -> Option<Fixed> {
        (range.divisible() && range.elements() > self.grain).then_some(self)
    }
}

/// Run `leaf` over pieces of `range` on `worker` and whoever steals, and
/// combine their results left before right.
pub(crate) fn split_and_run<S, R, T, L, C>(
    worker: &WorkerThread,
    range: R,
    splitter: S,
    stolen: bool,
    leaf: &L,
    combine: &C,
) -> T
where
    S: Splitter,
    R: LoopRange,
    T: Send,
    L: Fn(R) -> T + Sync,
    C: Fn(T, T) -> T + Sync,
{
    let Some(next) = splitter.cut(&range, stolen) else {
        return splitter.run_leaf(worker, range, leaf, combine);
    };
    let (left, right) = range.split();
    let home = worker.index();
    // Each half finds its worker again (a thread-local read): a worker
    // reference is not `Send`, and the right half may run on a thief.
    let here = || WorkerThread::current().expect("a join half runs on a worker");
    let (a, b) = join_on_worker(
        worker,
        || split_and_run(here(), left, next, false, leaf, combine),
        || {
            let thief = here();
            split_and_run(thief, right, next, thief.index() != home, leaf, combine)
        },
    );
    combine(a, b)
}

/// An `Auto` leaf: `range` in consecutive parts of about
/// `1 / PROBE_PARTS` of it, front to back, results combined in order.
/// After each part, if another worker wants work, the rest goes back to
/// `split_and_run` with `demand_cut`, whose first cut offers half of it on
/// the deque.
fn run_probing<R, T, L, C>(
    worker: &WorkerThread,
    range: R,
    demand_cut: Auto,
    leaf: &L,
    combine: &C,
) -> T
where
    R: LoopRange,
    T: Send,
    L: Fn(R) -> T + Sync,
    C: Fn(T, T) -> T + Sync,
{
    let outer = range.outer_len();
    // A part: a sixteenth of the leaf, but no less than the grain along
    // the outer dimension, nor than `min_grain` or `min_part` elements.
    let per_outer = (range.elements() / outer.max(1)).max(1);
    let step = (outer / PROBE_PARTS)
        .max(range.outer_grain())
        .max(demand_cut.min_grain.div_ceil(per_outer))
        .max(demand_cut.min_part.div_ceil(per_outer))
        .max(1);
    let mut rest = range;
    let mut done: Option<T> = None;
    // Rayon's contract, as for the pieces: after a part panicked the rest
    // still runs, and the first panic is resumed at the end.
    let mut panic = None;
    let mut add = |result: std::thread::Result<T>| match result {
        Ok(t) => {
            done = Some(match done.take() {
                None => t,
                Some(d) => combine(d, t),
            })
        }
        Err(payload) => {
            panic.get_or_insert(payload);
        }
    };
    // Every part, the last included, is at least `step` long.
    while rest.outer_len() >= 2 * step {
        let (part, after) = rest.split_outer_at(step);
        add(unwind::halt_unwinding(|| leaf(part)));
        rest = after;
        if worker.sees_demand() {
            add(unwind::halt_unwinding(|| {
                split_and_run(worker, rest, demand_cut, false, leaf, combine)
            }));
            return finish(done, panic);
        }
    }
    add(unwind::halt_unwinding(|| leaf(rest)));
    finish(done, panic)
}

/// The leaf's combined result, or its first panic resumed.
fn finish<T>(done: Option<T>, panic: Option<Box<dyn std::any::Any + Send>>) -> T {
    match panic {
        Some(payload) => unwind::resume_unwinding(payload),
        None => done.expect("a leaf ran at least one part"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Range;

    /// The leaves an undisturbed run (nothing stolen) would cut.
    fn leaves<S: Splitter>(range: Range<usize>, splitter: S, out: &mut Vec<Range<usize>>) {
        match splitter.cut(&range, false) {
            None => out.push(range),
            Some(next) => {
                let (l, r) = range.split();
                leaves(l, next, out);
                leaves(r, next, out);
            }
        }
    }

    #[test]
    fn auto_cuts_a_few_pieces_per_worker_and_no_piece_below_the_grain() {
        let mut out = Vec::new();
        leaves(0..1000, Auto::new(4, 1, 1000), &mut out);
        assert_eq!(out.len(), 8, "{out:?}");
        out.clear();
        leaves(0..1000, Auto::new(4, 300, 1000), &mut out);
        assert_eq!(out.len(), 2, "{out:?}");
    }

    #[test]
    fn fixed_cuts_down_to_the_grain() {
        let mut out = Vec::new();
        leaves(0..1000, Fixed::new(100), &mut out);
        assert!(out.iter().all(|r| r.len() <= 100 && r.len() > 50));
        assert_eq!(out.iter().map(|r| r.len()).sum::<usize>(), 1000);
    }
}
