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
//! Invariant: every element of the range reaches exactly one leaf.

use super::range::LoopRange;
use crate::fork_join::join::join_on_worker;
use crate::worker::thread::WorkerThread;

/// When to cut a range in halves.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Splitter {
    /// Adaptive: `cuts` left in the budget, pieces of at least `min_grain`.
    Auto {
        cuts: usize,
        workers: usize,
        min_grain: usize,
    },
    /// Down to pieces of at most `grain`, whoever runs what (the same tree
    /// for every run: what the deterministic reduce relies on).
    Fixed { grain: usize },
}

impl Splitter {
    pub(crate) fn auto(workers: usize, min_grain: usize) -> Splitter {
        Splitter::Auto {
            cuts: workers,
            workers,
            min_grain: min_grain.max(1),
        }
    }

    pub(crate) fn fixed(grain: usize) -> Splitter {
        Splitter::Fixed {
            grain: grain.max(1),
        }
    }

    /// Cut `range`? If so, the splitter each half carries on with.
    #[inline]
    fn cut<R: LoopRange>(self, range: &R, stolen: bool) -> Option<Splitter> {
        if !range.divisible() {
            return None;
        }
        match self {
            Splitter::Auto {
                cuts,
                workers,
                min_grain,
            } => {
                if range.elements() / 2 < min_grain {
                    return None;
                }
                let cuts = if stolen {
                    workers.max(cuts / 2)
                } else if cuts > 0 {
                    cuts / 2
                } else {
                    return None;
                };
                Some(Splitter::Auto {
                    cuts,
                    workers,
                    min_grain,
                })
            }
            Splitter::Fixed { grain } => (range.elements() > grain).then_some(self),
        }
    }
}

/// Run `leaf` over pieces of `range` on `worker` and whoever steals, and
/// combine their results left before right.
pub(crate) fn split_and_run<R, T, L, C>(
    worker: &WorkerThread,
    range: R,
    splitter: Splitter,
    stolen: bool,
    leaf: &L,
    combine: &C,
) -> T
where
    R: LoopRange,
    T: Send,
    L: Fn(R) -> T + Sync,
    C: Fn(T, T) -> T + Sync,
{
    let Some(next) = splitter.cut(&range, stolen) else {
        return leaf(range);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Range;

    /// The leaves an undisturbed run (nothing stolen) would cut.
    fn leaves(range: Range<usize>, splitter: Splitter, out: &mut Vec<Range<usize>>) {
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
        leaves(0..1000, Splitter::auto(4, 1), &mut out);
        assert_eq!(out.len(), 8, "{out:?}");
        out.clear();
        leaves(0..1000, Splitter::auto(4, 300), &mut out);
        assert_eq!(out.len(), 2, "{out:?}");
    }

    #[test]
    fn fixed_cuts_down_to_the_grain() {
        let mut out = Vec::new();
        leaves(0..1000, Splitter::fixed(100), &mut out);
        assert!(out.iter().all(|r| r.len() <= 100 && r.len() > 50));
        assert_eq!(out.iter().map(|r| r.len()).sum::<usize>(), 1000);
    }
}
