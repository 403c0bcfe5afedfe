//! Parallel loop benchmarks: sixfold's loops against the rayon program a
//! rayon user would write for the same loop (`par_iter`, `par_chunks_mut`),
//! in the same run. Each line's last field is sixfold / rayon unless its
//! name says `vs_sequential` (sixfold / the plain loop on one thread) or
//! `vs_ideal` (sixfold / half the sequential time), or it is a share.
//!
//! * `loop_saxpy/10000000`: `y = a*x + y` over f32 (memory-bound).
//! * `loop_fine/1000000`: about 10 ns of work per index, written to a slice.
//! * `loop_unbalanced/100000`: index `i` costs work proportional to `i`.
//! * `reduce_sum/10000000`: a u64 sum, against rayon's `.sum()` and the
//!   sequential sum.
//! * `reduce_deterministic/10000000`: an f64 sum with a fixed split tree,
//!   against rayon's (non-deterministic) `.sum()`.
//! * `matmul/512`: f32 512x512 in 2-D tiles, against rayon's
//!   `par_chunks_mut` over rows; both sides run one shared kernel
//!   (`matmul_row`), so the line measures the loops, not code layout.
//! * `stencil_replay/98304x2000`: a three-point stencil over two 768 KiB
//!   f64 arrays, 2,000 steps of one loop each: the affinity partitioner
//!   against rayon, against auto and against the sequential loop, and the
//!   share of pieces that ran on the worker of the previous step;
//!   `stencil_replay_floor`, plain threads with a fixed share each and a
//!   spinning barrier a step, against rayon (what any two-way split of
//!   this body can reach on the machine); and
//!   `stencil_replay_vectorised`, the same with a body that vectorises
//!   (a fifth of the work a step), which shows what a step's fixed cost
//!   weighs when the body is short.
//! * `loop_empty_call`: the fixed cost of a loop: an empty body over two
//!   pieces, called from a worker.

use super::{compare, median, ms, side};
use rayon::prelude::*;
use sixfold::{AffinityPartitioner, Partitioner, Pool, Range2d};
use std::hint::black_box;
use std::ops::Range;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Samples of each side for the lines whose runs take a few
/// milliseconds (memory-bound or short): nine of them moved a median by up
/// to half between two runs of the bench on these shared machines.
const SHORT_RUNS: usize = 31;

/// How long the sequential version of `f` takes (median of `runs`).
fn sequential(runs: usize, mut f: impl FnMut()) -> Duration {
    f();
    median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

fn line(name: &str, ratio: f64, what: &str) {
    println!("{name} {ratio:.3}");
    println!("#   {name}: {what}");
}

pub(super) fn bench_saxpy(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 10_000_000;
    let a = 1.5f32;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.001).collect();
    let (y1, y2) = (Mutex::new(vec![1.0f32; n]), Mutex::new(vec![1.0f32; n]));
    let (mine, _) = compare(
        "loop_saxpy/10000000",
        SHORT_RUNS,
        side(|| {
            || {
                ours.for_chunks_mut(&mut y1.lock().unwrap(), |ys, off| {
                    let xs = &x[off..off + ys.len()];
                    for (y, x) in ys.iter_mut().zip(xs) {
                        *y += a * x;
                    }
                })
            }
        }),
        side(|| {
            || {
                theirs.install(|| {
                    y2.lock()
                        .unwrap()
                        .par_iter_mut()
                        .zip(x.par_iter())
                        .for_each(|(y, x)| *y += a * x)
                })
            }
        }),
    );
    let mut y3 = vec![1.0f32; n];
    let seq = sequential(SHORT_RUNS, || {
        for (y, x) in y3.iter_mut().zip(&x) {
            *y += a * x;
        }
    });
    println!(
        "#   loop_saxpy/10000000: sixfold {:.2} ms, sequential {:.2} ms (target <= 1.0 of rayon)",
        ms(mine),
        ms(seq)
    );
    black_box((&y1, &y2, &y3));
}

/// About 10 ns of work.
fn fine_work(i: usize) -> u64 {
    let mut v = i as u64 | 1;
    for _ in 0..6 {
        v ^= v << 13;
        v ^= v >> 7;
        v ^= v << 17;
    }
    v
}

pub(super) fn bench_fine(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 1_000_000;
    let (a, b) = (Mutex::new(vec![0u64; n]), Mutex::new(vec![0u64; n]));
    compare(
        "loop_fine/1000000",
        SHORT_RUNS,
        side(|| {
            || {
                ours.for_chunks_mut(&mut a.lock().unwrap(), |out, off| {
                    for (j, x) in out.iter_mut().enumerate() {
                        *x = fine_work(off + j);
                    }
                })
            }
        }),
        side(|| {
            || {
                theirs.install(|| {
                    b.lock()
                        .unwrap()
                        .par_iter_mut()
                        .enumerate()
                        .for_each(|(i, x)| *x = fine_work(i))
                })
            }
        }),
    );
    assert_eq!(*a.lock().unwrap(), *b.lock().unwrap());
    println!("#   loop_fine/1000000: target <= 1.0 (partitioning overhead)");
}

/// Work proportional to `i`: about `i / 64` rounds.
fn triangle_work(i: usize) -> u64 {
    let mut v = i as u64 | 1;
    for _ in 0..i / 64 {
        v ^= v << 13;
        v ^= v >> 7;
        v ^= v << 17;
    }
    v
}

pub(super) fn bench_unbalanced(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 100_000;
    let (a, b) = (Mutex::new(vec![0u64; n]), Mutex::new(vec![0u64; n]));
    let (mine, _) = compare(
        "loop_unbalanced/100000",
        9,
        side(|| {
            || {
                ours.for_chunks_mut(&mut a.lock().unwrap(), |out, off| {
                    for (j, x) in out.iter_mut().enumerate() {
                        *x = triangle_work(off + j);
                    }
                })
            }
        }),
        side(|| {
            || {
                theirs.install(|| {
                    b.lock()
                        .unwrap()
                        .par_iter_mut()
                        .enumerate()
                        .for_each(|(i, x)| *x = triangle_work(i))
                })
            }
        }),
    );
    assert_eq!(*a.lock().unwrap(), *b.lock().unwrap());
    let mut c = vec![0u64; n];
    let seq = sequential(5, || {
        for (i, x) in c.iter_mut().enumerate() {
            *x = triangle_work(i);
        }
    });
    let ideal = seq / super::threads() as u32;
    line(
        "loop_unbalanced_vs_ideal",
        mine.as_secs_f64() / ideal.as_secs_f64(),
        &format!(
            "sixfold {:.2} ms against a perfect split of the sequential {:.2} ms",
            ms(mine),
            ms(seq)
        ),
    );
}

pub(super) fn bench_reduce_sum(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 10_000_000;
    let data: Vec<u64> = (0..n as u64).map(|i| i % 977).collect();
    let expect: u64 = data.iter().sum();
    let (mine, _) = compare(
        "reduce_sum/10000000",
        SHORT_RUNS,
        side(|| {
            || {
                let sum = ours.reduce(
                    0..data.len(),
                    0u64,
                    |r, acc| acc + data[r].iter().sum::<u64>(),
                    |a, b| a + b,
                );
                assert_eq!(sum, expect);
            }
        }),
        side(|| || assert_eq!(theirs.install(|| data.par_iter().sum::<u64>()), expect)),
    );
    let seq = sequential(SHORT_RUNS, || {
        assert_eq!(black_box(&data).iter().sum::<u64>(), expect)
    });
    line(
        "reduce_sum_vs_sequential",
        mine.as_secs_f64() / seq.as_secs_f64(),
        &format!(
            "sixfold {:.2} ms, sequential {:.2} ms (target < 1.0)",
            ms(mine),
            ms(seq)
        ),
    );
}

pub(super) fn bench_reduce_deterministic(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 10_000_000;
    let data: Vec<f64> = (0..n).map(|i| 1.0 / (1.0 + (i % 4093) as f64)).collect();
    let grain = n / 64;
    let reference = ours.reduce_deterministic(
        0..n,
        grain,
        0.0f64,
        |r, acc| data[r].iter().fold(acc, |s, x| s + x),
        |a, b| a + b,
    );
    compare(
        "reduce_deterministic/10000000",
        SHORT_RUNS,
        side(|| {
            || {
                let sum = ours.reduce_deterministic(
                    0..n,
                    grain,
                    0.0f64,
                    |r, acc| data[r].iter().fold(acc, |s, x| s + x),
                    |a, b| a + b,
                );
                assert_eq!(sum.to_bits(), reference.to_bits());
            }
        }),
        side(|| {
            || {
                black_box(theirs.install(|| data.par_iter().sum::<f64>()));
            }
        }),
    );
    println!(
        "#   reduce_deterministic/10000000: bit-identical every run; target <= 1.3 of rayon's non-deterministic sum"
    );
}

/// `c_row[cols] += a[i, :] * b[:, cols]` for row `i` of `n` x `n`
/// row-major matrices, `c_row` being row `i` of `c`. The one kernel both
/// sides run, and never inlined: both then run the same machine code, so
/// the line compares how each cuts and places the work, not how the
/// compiler laid out two copies of the loop (an inlined copy on each side
/// moved this ratio by up to 30% between builds of the same source).
#[inline(never)]
fn matmul_row(a: &[f32], b: &[f32], c_row: &mut [f32], n: usize, i: usize, cols: Range<usize>) {
    let c_row = &mut c_row[cols.clone()];
    for k in 0..n {
        let aik = a[i * n + k];
        let b_row = &b[k * n + cols.start..k * n + cols.end];
        for (c, b) in c_row.iter_mut().zip(b_row) {
            *c += aik * b;
        }
    }
}

/// One tile: `matmul_row` for each of its rows, on its columns.
fn matmul_tile(a: &[f32], b: &[f32], c: &mut [f32], n: usize, tile: Range2d) {
    for i in tile.rows.clone() {
        matmul_row(a, b, &mut c[i * n..(i + 1) * n], n, i, tile.cols.clone());
    }
}

/// A matrix whose disjoint tiles the loop's pieces write.
struct Shared(*mut f32, usize);
// SAFETY: each tile writes only its own cells; the loop visits each once.
unsafe impl Sync for Shared {}

pub(super) fn bench_matmul(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 512;
    let a: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..n * n).map(|i| (i % 5) as f32 - 2.0).collect();
    let (c1, c2) = (
        Mutex::new(vec![0.0f32; n * n]),
        Mutex::new(vec![0.0f32; n * n]),
    );
    let (a, b) = (&a, &b);
    compare(
        "matmul/512",
        7,
        side(|| {
            c1.lock().unwrap().fill(0.0);
            || {
                let mut c1 = c1.lock().unwrap();
                let c = Shared(c1.as_mut_ptr(), c1.len());
                let c = &c;
                ours.for_tiles(Range2d::new(0..n, 0..n).grain(16, 128), |tile| {
                    // SAFETY: tiles are disjoint; the matrix outlives the loop.
                    let c = unsafe { std::slice::from_raw_parts_mut(c.0, c.1) };
                    matmul_tile(a, b, c, n, tile);
                })
            }
        }),
        side(|| {
            c2.lock().unwrap().fill(0.0);
            || {
                theirs.install(|| {
                    c2.lock()
                        .unwrap()
                        .par_chunks_mut(n)
                        .enumerate()
                        .for_each(|(i, row)| matmul_row(a, b, row, n, i, 0..n))
                })
            }
        }),
    );
    assert_eq!(*c1.lock().unwrap(), *c2.lock().unwrap());
    println!("#   matmul/512: 2-D tiles of 16x128, target <= 1.0 of rayon's rows");
}

/// One stencil step for the cells `out` of the field, starting at `off`,
/// each cell clamping its neighbours' indices: the loop stays scalar (1.5
/// to 2.1 ns a cell here), about 100 us of work a step on one worker. The
/// target line runs this body. Not inlined, here and below: every side
/// calls one copy of the machine code (as `matmul` shares its kernel), so
/// the line compares the loops, not how each closure's copy compiled.
#[inline(never)]
fn stencil(cur: &[f64], out: &mut [f64], off: usize) {
    let n = cur.len();
    for (j, o) in out.iter_mut().enumerate() {
        let i = off + j;
        let left = cur[i.saturating_sub(1)];
        let right = cur[(i + 1).min(n - 1)];
        *o = (left + cur[i] + right) * (1.0 / 3.0);
    }
}

/// The same step with the field's two end cells apart, so that the
/// interior is a zip of three shifted slices, which vectorises (about 0.4
/// ns a cell here): the same results bit for bit, a fifth of the work a
/// step, so each step's fork, join and placement weigh five times more.
#[inline(never)]
fn stencil_vectorised(cur: &[f64], out: &mut [f64], off: usize) {
    let (n, len) = (cur.len(), out.len());
    let lo = usize::from(off == 0).min(len);
    let hi = len.saturating_sub(usize::from(off + len == n)).max(lo);
    stencil(cur, &mut out[..lo], off);
    stencil(cur, &mut out[hi..], off + hi);
    let (a, b) = (off + lo, off + hi);
    if a < b {
        let neighbours = cur[a - 1..b - 1]
            .iter()
            .zip(&cur[a..b])
            .zip(&cur[a + 1..b + 1]);
        for (o, ((l, c), r)) in out[lo..hi].iter_mut().zip(neighbours) {
            *o = (l + c + r) * (1.0 / 3.0);
        }
    }
}

const STENCIL_CELLS: usize = 98_304;
const STENCIL_STEPS: usize = 2_000;

fn field() -> Vec<f64> {
    (0..STENCIL_CELLS).map(|i| (i % 100) as f64).collect()
}

/// One step's body: `(cur, out, off)`.
type StencilBody = fn(&[f64], &mut [f64], usize);

/// Median times of five runs of the stencil with `body`, and the median
/// share of pieces kept on their worker by the affinity partitioner.
struct StencilTimes {
    affinity: Duration,
    auto: Duration,
    rayon: Duration,
    sequential: Duration,
    /// No scheduler at all: see `static_split_floor`.
    floor: Duration,
    kept_share: f64,
}

/// The stencil on plain threads, one per pool thread, each with a fixed
/// contiguous share of the cells, meeting at a spinning barrier after
/// every step: no scheduler, no fork, no sleep, no wake-up. This is the
/// floor a two-way loop can reach on this machine for this body (a
/// scheduler can only add to it, or win back an uneven split), which
/// tells whether a target against rayon is reachable at all.
fn static_split_floor(threads: usize, body: StencilBody) -> Duration {
    use std::sync::atomic::{AtomicUsize, Ordering};
    /// The two fields, shared by the threads; each step writes disjoint
    /// shares of one field and reads the other.
    struct Fields([*mut f64; 2]);
    // SAFETY: the threads touch the fields only as `share` below says.
    unsafe impl Sync for Fields {}
    let (mut cur, mut next) = (field(), field());
    let fields = Fields([cur.as_mut_ptr(), next.as_mut_ptr()]);
    let arrived = AtomicUsize::new(0);
    let n = STENCIL_CELLS;
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (fields, arrived) = (&fields, &arrived);
            s.spawn(move || {
                let share = n * t / threads..n * (t + 1) / threads;
                for step in 0..STENCIL_STEPS {
                    let (from, to) = (fields.0[step % 2], fields.0[(step + 1) % 2]);
                    // SAFETY: during a step every thread reads `from`
                    // whole and writes only its own share of `to`; the
                    // barrier below (AcqRel on `arrived`) orders each
                    // step's writes before the next step's reads, and the
                    // two vectors outlive the scope.
                    let (cur, out) = unsafe {
                        (
                            std::slice::from_raw_parts(from, n),
                            std::slice::from_raw_parts_mut(to.add(share.start), share.len()),
                        )
                    };
                    body(cur, out, share.start);
                    arrived.fetch_add(1, Ordering::AcqRel);
                    while arrived.load(Ordering::Acquire) < threads * (step + 1) {
                        std::hint::spin_loop();
                    }
                }
            });
        }
    });
    let took = start.elapsed();
    black_box((&mut cur, &mut next));
    took
}

fn time_stencil(ours: &Pool, theirs: &rayon::ThreadPool, body: StencilBody) -> StencilTimes {
    let threads = super::threads();
    let chunk = STENCIL_CELLS / (4 * threads);
    let mut affinity = AffinityPartitioner::new();
    let mut kept = Vec::new();
    // Every step is one loop, all steps inside one entry into the pool (as
    // the rayon side does): what is timed is each step's loop.
    let run_ours = |step: &mut (dyn FnMut(&mut [f64], &[f64]) + Send)| {
        let (mut cur, mut next) = (field(), field());
        let start = Instant::now();
        ours.install(|| {
            for _ in 0..STENCIL_STEPS {
                step(&mut next, &cur);
                std::mem::swap(&mut cur, &mut next);
            }
        });
        let took = start.elapsed();
        black_box(&cur);
        took
    };
    let mut aff_times = Vec::new();
    let mut auto_times = Vec::new();
    let mut rayon_times = Vec::new();
    let mut seq_times = Vec::new();
    let mut floor_times = Vec::new();
    for _ in 0..5 {
        // The share of every step's pieces, not only the last step's.
        let mut kept_sum = 0.0;
        aff_times.push(run_ours(&mut |next, cur| {
            sixfold::for_chunks_mut_with(next, &mut affinity, |out, off| body(cur, out, off));
            kept_sum += affinity.kept_share();
        }));
        kept.push(kept_sum / STENCIL_STEPS as f64);
        auto_times.push(run_ours(&mut |next, cur| {
            sixfold::for_chunks_mut(next, |out, off| body(cur, out, off))
        }));
        let (mut cur, mut next) = (field(), field());
        let start = Instant::now();
        theirs.install(|| {
            for _ in 0..STENCIL_STEPS {
                next.par_chunks_mut(chunk)
                    .enumerate()
                    .for_each(|(k, out)| body(&cur, out, k * chunk));
                std::mem::swap(&mut cur, &mut next);
            }
        });
        rayon_times.push(start.elapsed());
        let (mut cur, mut next) = (field(), field());
        let start = Instant::now();
        for _ in 0..STENCIL_STEPS {
            body(&cur, &mut next, 0);
            std::mem::swap(&mut cur, &mut next);
        }
        seq_times.push(start.elapsed());
        black_box(&cur);
        floor_times.push(static_split_floor(threads, body));
    }
    kept.sort_by(f64::total_cmp);
    StencilTimes {
        affinity: median(aff_times),
        auto: median(auto_times),
        rayon: median(rayon_times),
        sequential: median(seq_times),
        floor: median(floor_times),
        kept_share: kept[kept.len() / 2],
    }
}

fn ns_a_cell(d: Duration) -> f64 {
    d.as_secs_f64() * 1e9 / (STENCIL_CELLS * STENCIL_STEPS) as f64
}

pub(super) fn bench_stencil_replay(ours: &Pool, theirs: &rayon::ThreadPool) {
    let t = time_stencil(ours, theirs, stencil);
    println!(
        "stencil_replay/98304x2000 {:.3} {:.3} {:.3}",
        ms(t.affinity),
        ms(t.rayon),
        t.affinity.as_secs_f64() / t.rayon.as_secs_f64()
    );
    println!(
        "#   stencil_replay: ns a cell: affinity {:.3}, auto {:.3}, rayon par_chunks_mut {:.3}, sequential {:.3} (targets: <= 0.75 of rayon, <= 0.8 of sequential)",
        ns_a_cell(t.affinity),
        ns_a_cell(t.auto),
        ns_a_cell(t.rayon),
        ns_a_cell(t.sequential)
    );
    line(
        "stencil_replay_vs_sequential",
        t.affinity.as_secs_f64() / t.sequential.as_secs_f64(),
        "affinity partitioner / sequential loop",
    );
    line(
        "stencil_replay_floor",
        t.floor.as_secs_f64() / t.rayon.as_secs_f64(),
        &format!(
            "plain threads with a fixed share each and a spinning barrier a step (no scheduler) / rayon: \
             what a two-way split of this body can reach here, {:.3} ns a cell (no target)",
            ns_a_cell(t.floor)
        ),
    );
    line(
        "stencil_replay_auto",
        t.auto.as_secs_f64() / t.rayon.as_secs_f64(),
        "auto partitioner / rayon",
    );
    line(
        "stencil_replay_kept_share",
        t.kept_share,
        "share of pieces on the worker that ran them the step before, over all steps (target >= 0.95)",
    );
    let v = time_stencil(ours, theirs, stencil_vectorised);
    line(
        "stencil_replay_vectorised",
        v.affinity.as_secs_f64() / v.rayon.as_secs_f64(),
        &format!(
            "the vectorised body, affinity / rayon (no target); ns a cell: affinity {:.3}, auto {:.3}, rayon {:.3}, sequential {:.3}; kept share {:.3}",
            ns_a_cell(v.affinity),
            ns_a_cell(v.auto),
            ns_a_cell(v.rayon),
            ns_a_cell(v.sequential),
            v.kept_share
        ),
    );
}

pub(super) fn bench_empty_call(ours: &Pool, theirs: &rayon::ThreadPool) {
    let calls = 20_000;
    let (mine, theirs_t) = compare(
        "loop_empty_call",
        9,
        side(|| {
            || {
                ours.install(|| {
                    for _ in 0..calls {
                        sixfold::for_range_with(0..2, Partitioner::Simple { grain: 1 }, |r| {
                            black_box(r);
                        });
                    }
                })
            }
        }),
        side(|| {
            || {
                theirs.install(|| {
                    for _ in 0..calls {
                        (0..2usize).into_par_iter().with_max_len(1).for_each(|i| {
                            black_box(i);
                        });
                    }
                })
            }
        }),
    );
    println!(
        "#   loop_empty_call: ns a call: sixfold {:.0}, rayon {:.0} (two pieces, from a worker)",
        mine.as_secs_f64() * 1e9 / calls as f64,
        theirs_t.as_secs_f64() * 1e9 / calls as f64
    );
}
