//! How a loop's range is cut into pieces and where the pieces go: oneTBB's
//! partitioners, on the six rules.
//!
//! * `Auto` (the default) and `Simple` cut recursively in halves: a piece
//!   keeps its left half and offers the right one on its own deque (rule
//!   3), where an idle worker steals the oldest (rule 6). `Auto` stops after
//!   a few pieces per worker and cuts a stolen piece further (a thief's
//!   work is evidence of imbalance), and a running piece offers half of
//!   what it has left when a worker goes idle; `Simple` cuts down to a
//!   grain.
//! * `Static` and `Affinity` plan the pieces up front and send each to a
//!   worker's mailbox (rule 4), with a proxy on the caller's deque, so that
//!   an idle worker takes a piece whose worker is stuck (`queues/proxy.rs`).
//!
//! Invariant of [`AffinityPartitioner`]: its plan names a worker for each
//! piece of a range of `len` elements on a pool of `workers`; a call with
//! another length or pool size plans afresh.

use super::placed::Note;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How a parallel loop cuts its range and where the pieces run (oneTBB's
/// partitioners). Pass one to the `*_with` loops; the plain loops use
/// [`Partitioner::default()`], which is `Auto` with a grain of one.
///
/// A grain of 0 means 1: the smallest piece is one element.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let pieces = AtomicUsize::new(0);
/// pool.for_range_with(0..1000, sixfold::Partitioner::Simple { grain: 100 }, |r| {
///     assert!(r.len() <= 100);
///     pieces.fetch_add(1, Ordering::Relaxed);
/// });
/// assert!(pieces.into_inner() >= 10);
/// ```
#[derive(Debug)]
pub enum Partitioner<'a> {
    /// A few pieces per worker, a stolen piece cut further, never below
    /// `min_grain` elements (oneTBB's `auto_partitioner`, rayon's adaptive
    /// splitter). A piece runs in up to 16 consecutive calls of the body
    /// (fewer if `min_grain`, a 2-D range's row grain or the loop's length
    /// says so; these calls cut a 2-D piece across its rows only, so its
    /// rows stay whole); when a worker of the pool is idle between two
    /// calls, half of the rest is offered to it, cut as a stolen piece is,
    /// as oneTBB's auto partitioner does for demand. That evens out the
    /// end of an unbalanced loop.
    Auto {
        /// The smallest piece worth cutting off.
        min_grain: usize,
    },
    /// Cut in halves down to pieces of at most `grain` elements (and at
    /// least half that, unless the range is smaller), whatever the load
    /// (oneTBB's `simple_partitioner`).
    Simple {
        /// The largest piece left uncut.
        grain: usize,
    },
    /// One contiguous share per worker, share `k` sent to worker `k`'s
    /// mailbox; an idle worker takes it only through its proxy, when
    /// worker `k` is stuck (oneTBB's `static_partitioner`).
    Static,
    /// Pieces sent where they ran last time, kept in a value the caller
    /// keeps across calls (oneTBB's `affinity_partitioner`); a worker done
    /// with its pieces runs a slower worker's unstarted ones.
    Affinity(&'a mut AffinityPartitioner),
}

impl Default for Partitioner<'_> {
    fn default() -> Self {
        Partitioner::Auto { min_grain: 1 }
    }
}

impl<'a> From<&'a mut AffinityPartitioner> for Partitioner<'a> {
    fn from(affinity: &'a mut AffinityPartitioner) -> Self {
        Partitioner::Affinity(affinity)
    }
}

/// Pieces per worker an affinity plan cuts a range into: enough for a
/// proxy to move one piece of a skewed load, few enough that each piece is
/// worth a mailbox trip.
const PIECES_PER_WORKER: usize = 4;

/// Where the pieces of a repeated loop ran, so that the next call sends
/// each piece to the same worker's mailbox (rule 4), where its data still
/// sits in that core's cache (oneTBB's `affinity_partitioner`).
///
/// The first call (and any call after the range's length or the pool's
/// size changed) plans contiguous blocks of pieces, one block per worker,
/// as `Static` would; every call sends piece `k` to the worker that ran it
/// last, with a proxy on the caller's deque so that a piece whose worker is
/// stuck is still taken, and a piece taken that way is sent to its taker
/// next time. A worker that has run its own pieces also runs pieces of a
/// slower worker that it has not started yet (counted in
/// `WorkerStats::loop_parts_helped`); those go home next time, so one slow
/// call does not move the plan, unless their worker was stuck (their
/// proxy was taken): then they go to the workers that ran them. (oneTBB's
/// first call runs as `auto` and records: on an idle pool that often runs
/// every piece on the caller before a sleeper wakes, and a plan made of
/// that never spreads.)
///
/// ```
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// let mut field = vec![1.0f64; 10_000];
/// let mut affinity = sixfold::AffinityPartitioner::new();
/// for _step in 0..10 {
///     pool.for_chunks_mut_with(&mut field, &mut affinity, |chunk, _offset| {
///         for x in chunk.iter_mut() {
///             *x *= 0.5;
///         }
///     });
/// }
/// assert!(affinity.pieces() > 0);
/// assert_eq!(field[0], 1.0 / 1024.0);
/// ```
#[derive(Debug, Default)]
pub struct AffinityPartitioner {
    /// The worker each piece goes to: the one that ran it last time, or,
    /// if a worker helped with it, the one it went to then.
    plan: Vec<AtomicUsize>,
    /// The worker that ran each piece last time, whoever it was sent to
    /// (`usize::MAX`: none yet).
    last: Vec<AtomicUsize>,
    /// The range length and pool size the plan is for.
    len: usize,
    workers: usize,
    /// Of the last call's pieces, how many ran on the worker that ran them
    /// the time before.
    kept: AtomicUsize,
    /// Whether the last call replayed a plan (false: it made one).
    replayed: bool,
}

impl AffinityPartitioner {
    /// No plan yet: the first loop makes one.
    ///
    /// ```
    /// let affinity = sixfold::AffinityPartitioner::new();
    /// assert_eq!(affinity.pieces(), 0);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Pieces in the current plan (0 before the first loop): four per
    /// worker, or one per element of a shorter range.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut affinity = sixfold::AffinityPartitioner::new();
    /// pool.for_range_with(0..3, &mut affinity, |_| {});
    /// assert_eq!(affinity.pieces(), 3);
    /// ```
    pub fn pieces(&self) -> usize {
        self.plan.len()
    }

    /// The share of the last loop's pieces that ran on the worker that ran
    /// them the time before, whether it was sent them or helped with them
    /// (1.0 for a perfect replay; 0.0 when the last loop made a new plan,
    /// having no previous worker to compare with). A piece whose data
    /// stayed in one core's cache counts as kept.
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let mut affinity = sixfold::AffinityPartitioner::new();
    /// pool.for_range_with(0..1000, &mut affinity, |_| {});
    /// assert_eq!(affinity.kept_share(), 0.0); // a new plan
    /// pool.for_range_with(0..1000, &mut affinity, |_| {});
    /// assert!((0.0..=1.0).contains(&affinity.kept_share()));
    /// ```
    pub fn kept_share(&self) -> f64 {
        if !self.replayed || self.plan.is_empty() {
            return 0.0;
        }
        self.kept.load(Ordering::Relaxed) as f64 / self.plan.len() as f64
    }

    /// Make the plan fit a range of `len` elements (cut into at most
    /// `max_parts`) on `workers` workers: the one of the last call, or a
    /// new one of contiguous blocks, one per worker.
    pub(crate) fn prepare(&mut self, len: usize, max_parts: usize, workers: usize) {
        self.kept.store(0, Ordering::Relaxed);
        let pieces = (workers * PIECES_PER_WORKER).min(max_parts.max(1));
        if self.len == len && self.workers == workers && self.plan.len() == pieces {
            self.replayed = true;
            return;
        }
        self.len = len;
        self.workers = workers;
        self.plan = (0..pieces)
            .map(|k| AtomicUsize::new(k * workers / pieces))
            .collect();
        self.last = (0..pieces).map(|_| AtomicUsize::new(usize::MAX)).collect();
        self.replayed = false;
    }

    /// The worker piece `k` goes to.
    pub(crate) fn planned(&self, k: usize) -> usize {
        self.plan[k].load(Ordering::Relaxed)
    }

    /// Piece `k` ran on `worker` (`Ran`, `Helped`), or is to go there next
    /// time (`Moved`): count whether it ran where it ran last, and move
    /// the plan unless a helper ran it.
    pub(crate) fn note(&self, k: usize, worker: usize, note: Note) {
        if note != Note::Moved && self.last[k].swap(worker, Ordering::Relaxed) == worker {
            self.kept.fetch_add(1, Ordering::Relaxed);
        }
        if note != Note::Helped {
            self.plan[k].store(worker, Ordering::Relaxed);
        }
    }
}
