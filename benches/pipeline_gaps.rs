//! `pipeline_work_gaps`: where the compare bench's `pipeline_work` spends
//! its time besides the work, measured without a profiler:
//! `cargo bench --bench pipeline_gaps` (under `under-load` for a loaded
//! machine).
//!
//! A program of its own, not a line of `compare`: in that binary this
//! code moved how the crate was split for code generation, and `fib_cps`'s
//! `Task::execute` stopped being inlined (see `core_to_core.rs`).
//!
//! `perf` changes what it measures here: its sampling delays a worker by a
//! few microseconds, and with eight items in flight and an in-order sink
//! the other worker then runs out of items. Under `perf record -F 4000`
//! the pool's workers slept 139 times a run, against 3 to 15 without it,
//! and the run took 1.4 times rayon's time instead of 1.2. Instead, each side's body notes when it
//! starts and ends, and every gap between two bodies on one thread (the
//! scheduler's time on that thread: fetching, gates, hand-overs, searching,
//! sleeping) lands in a bucket by its length. The same closure runs on
//! both sides, so the two clock reads it adds are paid by both.
//!
//! Prints `pipeline_work_gaps <sixfold ns> <rayon ns> <ratio>`, the gaps of
//! both workers summed and divided by the items (median of the runs), and
//! a `#` line per side splitting the sum by gap length:
//!
//! * under 0.25 us: mostly from one item to the next inside a job's chain;
//! * 0.25 to 2 us: mostly a batch's boundary (the source gate, the
//!   in-order gate turning over to the other worker, parking, hand-overs);
//! * 2 to 40 us: mostly searches that found work (steals, lent chains);
//! * over 40 us: stalls (a sleep and its wake-up, a worker left without
//!   items while its partner is descheduled, the machine's own pauses,
//!   which rayon's column shows too).

use rayon::prelude::*;
use sixfold::{Pipeline, Pool};
use std::cell::Cell;
use std::hint::black_box;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Upper bounds of the gap buckets, in nanoseconds (the last is open).
const BUCKET_BOUNDS_NS: [u64; 3] = [250, 2_000, 40_000];
const BUCKET_NAMES: [&str; 4] = ["<0.25us", "0.25-2us", "2-40us", ">40us"];

/// Per thread: the end of its last body (none before the first), and the
/// gaps so far, summed by bucket (ns).
struct ThreadGaps {
    last_end: Cell<Option<Instant>>,
    sums: [Cell<u64>; 4],
}

thread_local! {
    static GAPS: ThreadGaps = const {
        ThreadGaps {
            last_end: Cell::new(None),
            sums: [const { Cell::new(0) }; 4],
        }
    };
}

/// Threads per pool: 2, or `SIXFOLD_BENCH_THREADS`, as in `compare`.
fn threads() -> usize {
    std::env::var("SIXFOLD_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

/// A common origin, so that instants become plain numbers.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// `pipeline_work`'s body (about 0.6 us), noting the gap before it.
fn timed_work(x: u64) -> u64 {
    let start = Instant::now();
    GAPS.with(|g| {
        if let Some(end) = g.last_end.get() {
            let gap = start.saturating_duration_since(end).as_nanos() as u64;
            let bucket = BUCKET_BOUNDS_NS
                .iter()
                .position(|&bound| gap < bound)
                .unwrap_or(BUCKET_BOUNDS_NS.len());
            g.sums[bucket].set(g.sums[bucket].get() + gap);
        }
    });
    let mut v = x | 1;
    for _ in 0..400 {
        v ^= v << 13;
        v ^= v >> 7;
        v ^= v << 17;
    }
    let v = black_box(v);
    GAPS.with(|g| g.last_end.set(Some(Instant::now())));
    v
}

/// Forget the calling thread's gaps and its last body.
fn reset_thread() {
    let _ = origin();
    GAPS.with(|g| {
        g.last_end.set(None);
        for sum in &g.sums {
            sum.set(0);
        }
    });
}

/// The calling thread's gap sums.
fn thread_sums() -> [u64; 4] {
    GAPS.with(|g| std::array::from_fn(|i| g.sums[i].get()))
}

fn add(total: &mut [u64; 4], part: [u64; 4]) {
    for (t, p) in total.iter_mut().zip(part) {
        *t += p;
    }
}

/// One run of the pipeline: the gap sums of every worker.
fn sixfold_run(ours: &Pool, n: u64, tokens: usize, expect: u64) -> [u64; 4] {
    ours.broadcast(|_| reset_thread());
    let mut next = 0u64;
    let mut acc = 0u64;
    let mut p = Pipeline::new(|| {
        (next < n).then(|| {
            next += 1;
            next - 1
        })
    })
    .parallel(timed_work)
    .serial_in_order(|x| acc = acc.wrapping_mul(31).wrapping_add(x));
    ours.run_pipeline(&mut p, tokens).expect("pipeline");
    drop(p);
    assert_eq!(acc, expect);
    let mut total = [0; 4];
    for part in ours.broadcast(|_| thread_sums()) {
        add(&mut total, part);
    }
    total
}

/// One run of rayon's collect-then-fold: the gap sums of every worker.
fn rayon_run(theirs: &rayon::ThreadPool, n: u64, expect: u64) -> [u64; 4] {
    theirs.broadcast(|_| reset_thread());
    let fold = theirs.install(|| {
        let mapped: Vec<u64> = (0..n).into_par_iter().map(timed_work).collect();
        mapped
            .iter()
            .fold(0u64, |acc, &x| acc.wrapping_mul(31).wrapping_add(x))
    });
    assert_eq!(fold, expect);
    let mut total = [0; 4];
    for part in theirs.broadcast(|_| thread_sums()) {
        add(&mut total, part);
    }
    total
}

/// The run whose total is the median, and that total per item (ns).
fn median_run(mut runs: Vec<[u64; 4]>, n: u64) -> ([u64; 4], f64) {
    runs.sort_by_key(|r| r.iter().sum::<u64>());
    let run = runs[runs.len() / 2];
    (run, run.iter().sum::<u64>() as f64 / n as f64)
}

fn describe(side: &str, run: [u64; 4], n: u64) -> String {
    let parts: Vec<String> = BUCKET_NAMES
        .iter()
        .zip(run)
        .map(|(name, ns)| format!("{name} {:.1}", ns as f64 / n as f64))
        .collect();
    format!("{side} {}", parts.join(", "))
}

fn main() {
    let ours = Pool::builder()
        .num_threads(threads())
        .build()
        .expect("sixfold pool");
    let theirs = rayon::ThreadPoolBuilder::new()
        .num_threads(threads())
        .build()
        .expect("rayon pool");
    bench_pipeline_work_gaps(&ours, &theirs);
}

/// `pipeline_work_gaps` (see the module documentation).
fn bench_pipeline_work_gaps(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 100_000u64;
    let tokens = 4 * threads();
    let expect = (0..n)
        .map(timed_work)
        .fold(0u64, |acc, x| acc.wrapping_mul(31).wrapping_add(x));
    sixfold_run(ours, n, tokens, expect);
    rayon_run(theirs, n, expect);
    let (mut mine, mut rayon) = (Vec::new(), Vec::new());
    let mut wall = (Vec::new(), Vec::new());
    for _ in 0..7 {
        let start = Instant::now();
        mine.push(sixfold_run(ours, n, tokens, expect));
        wall.0.push(start.elapsed());
        let start = Instant::now();
        rayon.push(rayon_run(theirs, n, expect));
        wall.1.push(start.elapsed());
    }
    let (mine, mine_ns) = median_run(mine, n);
    let (rayon, rayon_ns) = median_run(rayon, n);
    println!(
        "pipeline_work_gaps {mine_ns:.1} {rayon_ns:.1} {:.3}",
        mine_ns / rayon_ns.max(f64::MIN_POSITIVE)
    );
    let median = |mut runs: Vec<Duration>| {
        runs.sort();
        runs[runs.len() / 2]
    };
    let wall_ratio =
        |(a, b): (Vec<Duration>, Vec<Duration>)| median(a).as_secs_f64() / median(b).as_secs_f64();
    println!(
        "#   pipeline_work_gaps: ns an item between two bodies on one worker, both workers summed ({tokens} tokens; the runs' sixfold / rayon time {:.3}): {}; {}",
        wall_ratio(wall),
        describe("sixfold", mine, n),
        describe("rayon", rayon, n),
    );
}
