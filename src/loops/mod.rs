//! Parallel loops: oneTBB's `parallel_for` and `parallel_reduce`, rayon's
//! `par_iter`, on the six rules.
//!
//! A loop is a range (indices, a slice, a 2-D block of rows by columns)
//! cut into pieces by a [`Partitioner`]; the body runs on a piece's whole
//! subrange, so its inner loop vectorises. How the pieces map onto the six
//! rules:
//!
//! * **Auto** (default) and **Simple** (`split.rs`): recursive halving as
//!   in `join`. A piece runs its left half and offers its right half as a
//!   stack job on its own deque (rule 3 for itself, rule 6 for a thief);
//!   no allocation a piece. Auto cuts a few pieces per worker and cuts a
//!   stolen piece further; Simple cuts down to its grain.
//! * **Static** and **Affinity** (`placed.rs`): parts planned up front,
//!   each sent to its worker's mailbox (rule 4) with a proxy on the
//!   caller's deque, which another worker claims only if the target is
//!   stuck. An [`AffinityPartitioner`] remembers who ran each part, so a
//!   repeated loop finds its data in the same core's cache (its first plan
//!   is `Static`'s blocks, four parts a worker).
//! * **reduce**: every piece folds its subrange from the identity; values
//!   combine up the split tree (placed parts: left to right). The
//!   deterministic reduce fixes the tree by the grain alone and combines
//!   left before right, whoever ran what: bit-identical results across
//!   runs and pool sizes.
//!
//! The caller takes part, as in `join`: on a worker it runs pieces and
//! waits by working; from outside every pool a loop enters the global pool
//! (the `Pool` methods: that pool) once, as `install` does.
//!
//! Failure: rayon's contract, for every partitioner. Every piece runs,
//! even after another panicked; the first panic is resumed once all have
//! finished, and the pool is unharmed.
//!
//! Invariant: every index (or cell) of the range reaches the body exactly
//! once (`range.rs`, `split.rs`, `placed.rs` each keep it for their part);
//! the slice loops rely on it to hand out disjoint sub-slices.

mod broadcast;
mod partitioner;
pub(crate) mod placed;
mod range;
mod split;

pub(crate) use broadcast::broadcast_on;
pub use broadcast::{BroadcastContext, broadcast};
pub use partitioner::{AffinityPartitioner, Partitioner};
pub use range::Range2d;

use crate::worker::global::global_registry;
use crate::worker::thread::WorkerThread;
use range::LoopRange;
use split::{Auto, Fixed, split_and_run};
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// Run `f` on a worker: this thread, if it is one (a loop inside a task
/// runs in its worker's pool, at once: the fixed cost of a loop), else one
/// of the global pool's, entered once as `install` does.
#[inline]
fn on_a_worker<R: Send>(f: impl FnOnce(&WorkerThread) -> R + Send) -> R {
    match WorkerThread::current() {
        Some(worker) => f(worker),
        None => global_registry().in_worker_for_loop(f),
    }
}

/// The trace name of a task that ran loop pieces.
fn piece_name() -> Arc<str> {
    static NAME: OnceLock<Arc<str>> = OnceLock::new();
    NAME.get_or_init(|| Arc::from("loop piece")).clone()
}

/// The engine of every loop: `leaf` over the pieces `partitioner` cuts,
/// combined by `combine` (`None` for an empty range).
pub(crate) fn run_loop<R, T, L, C>(
    worker: &WorkerThread,
    range: R,
    partitioner: Partitioner<'_>,
    leaf: &L,
    combine: &C,
) -> Option<T>
where
    R: LoopRange,
    T: Send,
    L: Fn(R) -> T + Sync,
    C: Fn(T, T) -> T + Sync,
{
    let len = range.elements();
    if len == 0 {
        return None;
    }
    if worker.tracing() {
        // Each task that runs a piece is named for the trace.
        let named = |piece: R| {
            if let Some(here) = WorkerThread::current() {
                here.set_trace_name(Some(piece_name()));
            }
            leaf(piece)
        };
        return run_pieces(worker, range, partitioner, &named, combine);
    }
    run_pieces(worker, range, partitioner, leaf, combine)
}

/// `run_loop` for a range with something in it.
fn run_pieces<R, T, L, C>(
    worker: &WorkerThread,
    range: R,
    partitioner: Partitioner<'_>,
    leaf: &L,
    combine: &C,
) -> Option<T>
where
    R: LoopRange,
    T: Send,
    L: Fn(R) -> T + Sync,
    C: Fn(T, T) -> T + Sync,
{
    let len = range.elements();
    let workers = worker.registry().num_slots();
    match partitioner {
        Partitioner::Auto { min_grain } => Some(split_and_run(
            worker,
            range,
            Auto::new(workers, min_grain, len),
            false,
            leaf,
            combine,
        )),
        Partitioner::Simple { grain } => Some(split_and_run(
            worker,
            range,
            Fixed::new(grain),
            false,
            leaf,
            combine,
        )),
        Partitioner::Static => placed::run_placed(
            worker,
            &range,
            workers.min(range.max_parts()),
            |k| k,
            placed::Placement::Preferred,
            &|_, _, _| {},
            leaf,
            combine,
        ),
        Partitioner::Affinity(affinity) => {
            affinity.prepare(len, range.max_parts(), workers);
            let affinity = &*affinity;
            placed::run_placed(
                worker,
                &range,
                affinity.pieces(),
                |k| affinity.planned(k),
                placed::Placement::Balanced,
                &|k, w, note| affinity.note(k, w, note),
                leaf,
                combine,
            )
        }
    }
}

/// A `Send` and `Sync` base pointer of a slice whose disjoint parts the
/// loop's pieces take.
struct SliceBase<T>(*mut T);

// SAFETY: pieces reach disjoint parts only (the loop's invariant), and the
// elements are `Send` (`&mut` slices) or `Sync` (shared slices) as the
// callers require.
unsafe impl<T: Send> Send for SliceBase<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SliceBase<T> {}

/// A loop over `range` whose body gets each piece's subrange (oneTBB's
/// `parallel_for` over a `blocked_range`), cut by the default partitioner.
/// In a worker, the worker's pool runs it; elsewhere the global pool.
///
/// ```
/// let data: Vec<u64> = (0..10_000).collect();
/// let mut out = vec![0u64; data.len()];
/// let out_ptr = std::sync::Mutex::new(&mut out);
/// sixfold::for_range(0..data.len(), |r| {
///     let doubled: Vec<u64> = data[r.clone()].iter().map(|x| x * 2).collect();
///     out_ptr.lock().unwrap()[r].copy_from_slice(&doubled);
/// });
/// assert_eq!(out[9_999], 19_998);
/// ```
pub fn for_range<F>(range: Range<usize>, body: F)
where
    F: Fn(Range<usize>) + Sync + Send,
{
    for_range_with(range, Partitioner::default(), body)
}

/// [`for_range`] with a [`Partitioner`] of your choice.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// let sum = AtomicU64::new(0);
/// sixfold::for_range_with(0..1000, sixfold::Partitioner::Static, |r| {
///     sum.fetch_add(r.map(|i| i as u64).sum(), Ordering::Relaxed);
/// });
/// assert_eq!(sum.into_inner(), 999 * 1000 / 2);
/// ```
pub fn for_range_with<'p, F>(range: Range<usize>, partitioner: impl Into<Partitioner<'p>>, body: F)
where
    F: Fn(Range<usize>) + Sync + Send,
{
    let partitioner = partitioner.into();
    on_a_worker(|worker| run_loop(worker, range, partitioner, &body, &|(), ()| ()));
}

/// A loop that calls `body` once for every index of `range` (the pieces
/// as [`for_range`] cuts them).
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let hits: Vec<AtomicUsize> = (0..100).map(|_| AtomicUsize::new(0)).collect();
/// sixfold::for_each_index(0..100, |i| {
///     hits[i].fetch_add(1, Ordering::Relaxed);
/// });
/// assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
/// ```
pub fn for_each_index<F>(range: Range<usize>, body: F)
where
    F: Fn(usize) + Sync + Send,
{
    for_range(range, |r| r.for_each(&body))
}

/// A loop over a slice whose body gets each piece as a sub-slice and its
/// offset in `slice`.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// let data: Vec<u64> = (1..=100).collect();
/// let sum = AtomicU64::new(0);
/// sixfold::for_chunks(&data, |chunk, offset| {
///     assert_eq!(chunk[0], offset as u64 + 1);
///     sum.fetch_add(chunk.iter().sum(), Ordering::Relaxed);
/// });
/// assert_eq!(sum.into_inner(), 5050);
/// ```
pub fn for_chunks<T, F>(slice: &[T], body: F)
where
    T: Sync,
    F: Fn(&[T], usize) + Sync + Send,
{
    for_chunks_with(slice, Partitioner::default(), body)
}

/// [`for_chunks`] with a [`Partitioner`] of your choice.
///
/// ```
/// let data = vec![1u8; 4096];
/// sixfold::for_chunks_with(&data, sixfold::Partitioner::Simple { grain: 512 }, |chunk, _| {
///     assert!(chunk.len() <= 512);
/// });
/// ```
pub fn for_chunks_with<'p, T, F>(slice: &[T], partitioner: impl Into<Partitioner<'p>>, body: F)
where
    T: Sync,
    F: Fn(&[T], usize) + Sync + Send,
{
    for_range_with(0..slice.len(), partitioner, |r| {
        let offset = r.start;
        body(&slice[r], offset)
    })
}

/// A loop over a mutable slice whose body gets each piece as a disjoint
/// mutable sub-slice and its offset (rayon's `par_chunks_mut`, with the
/// chunk size chosen by the partitioner).
///
/// ```
/// let mut squares = vec![0u64; 1000];
/// sixfold::for_chunks_mut(&mut squares, |chunk, offset| {
///     for (i, x) in chunk.iter_mut().enumerate() {
///         let n = (offset + i) as u64;
///         *x = n * n;
///     }
/// });
/// assert_eq!(squares[999], 998_001);
/// ```
pub fn for_chunks_mut<T, F>(slice: &mut [T], body: F)
where
    T: Send,
    F: Fn(&mut [T], usize) + Sync + Send,
{
    for_chunks_mut_with(slice, Partitioner::default(), body)
}

/// [`for_chunks_mut`] with a [`Partitioner`] of your choice; with an
/// [`AffinityPartitioner`] kept across calls, a repeated loop over the same
/// slice finds each chunk in the cache of the core that touched it last.
///
/// ```
/// let mut v = vec![1u32; 1 << 12];
/// let mut affinity = sixfold::AffinityPartitioner::new();
/// for _ in 0..3 {
///     sixfold::for_chunks_mut_with(&mut v, &mut affinity, |chunk, _| {
///         chunk.iter_mut().for_each(|x| *x += 1);
///     });
/// }
/// assert!(v.iter().all(|&x| x == 4));
/// ```
pub fn for_chunks_mut_with<'p, T, F>(
    slice: &mut [T],
    partitioner: impl Into<Partitioner<'p>>,
    body: F,
) where
    T: Send,
    F: Fn(&mut [T], usize) + Sync + Send,
{
    let base = SliceBase(slice.as_mut_ptr());
    let base = &base;
    for_range_with(0..slice.len(), partitioner, move |r| {
        // Not `r.len()`: its saturating subtraction is cheap enough that
        // the compiler recomputes it in the body's vectorised loop (five
        // scalar instructions per vector step, which a cache-resident
        // saxpy pays for); a piece's range is never reversed.
        let len = r.end - r.start;
        // SAFETY: the pieces' ranges are disjoint and within the slice
        // (the loop's invariant), and the slice is borrowed mutably for
        // the whole loop.
        let chunk = unsafe { std::slice::from_raw_parts_mut(base.0.add(r.start), len) };
        body(chunk, r.start)
    })
}

/// A loop over a 2-D block whose body gets tiles of it (oneTBB's
/// `parallel_for` over a `blocked_range2d`): for matrices, images and
/// stencils.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let cells = AtomicUsize::new(0);
/// sixfold::for_tiles(sixfold::Range2d::new(0..64, 0..48), |tile| {
///     cells.fetch_add(tile.cells(), Ordering::Relaxed);
/// });
/// assert_eq!(cells.into_inner(), 64 * 48);
/// ```
pub fn for_tiles<F>(range: Range2d, body: F)
where
    F: Fn(Range2d) + Sync + Send,
{
    for_tiles_with(range, Partitioner::default(), body)
}

/// [`for_tiles`] with a [`Partitioner`] of your choice.
///
/// ```
/// sixfold::for_tiles_with(
///     sixfold::Range2d::new(0..64, 0..64),
///     sixfold::Partitioner::Simple { grain: 256 },
///     |tile| assert!(tile.cells() <= 256),
/// );
/// ```
pub fn for_tiles_with<'p, F>(range: Range2d, partitioner: impl Into<Partitioner<'p>>, body: F)
where
    F: Fn(Range2d) + Sync + Send,
{
    let partitioner = partitioner.into();
    on_a_worker(|worker| run_loop(worker, range, partitioner, &body, &|(), ()| ()));
}

/// Map each piece of `range` to a value and combine the values with an
/// associative `combine` (oneTBB's functional `parallel_reduce`): `map`
/// gets a piece's subrange and a clone of `identity` to fold it into.
/// The result for an empty range is `identity`.
///
/// ```
/// let data: Vec<u64> = (1..=1_000).collect();
/// let sum = sixfold::reduce(
///     0..data.len(),
///     0u64,
///     |r, acc| acc + data[r].iter().sum::<u64>(),
///     |a, b| a + b,
/// );
/// assert_eq!(sum, 500_500);
/// ```
pub fn reduce<T, M, C>(range: Range<usize>, identity: T, map: M, combine: C) -> T
where
    T: Clone + Send + Sync,
    M: Fn(Range<usize>, T) -> T + Sync + Send,
    C: Fn(T, T) -> T + Sync + Send,
{
    reduce_with(range, Partitioner::default(), identity, map, combine)
}

/// [`reduce`] with a [`Partitioner`] of your choice. (The combination
/// order follows the split tree, which with `Auto` depends on who stole
/// what: use [`reduce_deterministic`] for results that must not depend on
/// scheduling, such as float sums.)
///
/// ```
/// let max = sixfold::reduce_with(
///     0..1000,
///     sixfold::Partitioner::Static,
///     0usize,
///     |r, acc| r.fold(acc, |m, i| m.max(i * 7 % 1000)),
///     |a, b| a.max(b),
/// );
/// assert_eq!(max, 999);
/// ```
pub fn reduce_with<'p, T, M, C>(
    range: Range<usize>,
    partitioner: impl Into<Partitioner<'p>>,
    identity: T,
    map: M,
    combine: C,
) -> T
where
    T: Clone + Send + Sync,
    M: Fn(Range<usize>, T) -> T + Sync + Send,
    C: Fn(T, T) -> T + Sync + Send,
{
    let partitioner = partitioner.into();
    let leaf = |r: Range<usize>| map(r, identity.clone());
    on_a_worker(|worker| run_loop(worker, range, partitioner, &leaf, &combine))
        .unwrap_or_else(|| identity.clone())
}

/// [`reduce`] with a split tree fixed by `grain` alone (halves down to
/// pieces of at most `grain`) and combination left before right, whoever
/// ran what (oneTBB's `parallel_deterministic_reduce`): the result is
/// bit-identical across runs and pool sizes, even for a float sum.
///
/// ```
/// let data: Vec<f64> = (0..100_000).map(|i| 1.0 / (i as f64 + 1.0)).collect();
/// let sum = |pool: &sixfold::Pool| pool.reduce_deterministic(
///     0..data.len(),
///     4096,
///     0.0f64,
///     |r, acc| data[r].iter().fold(acc, |s, x| s + x),
///     |a, b| a + b,
/// );
/// let one = sixfold::Pool::builder().num_threads(1).build().unwrap();
/// let two = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// assert_eq!(sum(&one).to_bits(), sum(&two).to_bits());
/// ```
pub fn reduce_deterministic<T, M, C>(
    range: Range<usize>,
    grain: usize,
    identity: T,
    map: M,
    combine: C,
) -> T
where
    T: Clone + Send + Sync,
    M: Fn(Range<usize>, T) -> T + Sync + Send,
    C: Fn(T, T) -> T + Sync + Send,
{
    reduce_with(range, Partitioner::Simple { grain }, identity, map, combine)
}
