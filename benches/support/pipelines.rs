//! Pipeline benchmarks.
//!
//! * `pipeline_empty/1000000`: source -> parallel stage with no work ->
//!   serial in-order sink, 4 tokens per worker: the cost of the machinery,
//!   printed in ns per item; the rayon column is the idiom rayon users
//!   write today (a parallel map collected into a `Vec`, then folded in
//!   order).
//! * `pipeline_work/100000`: the same with ~0.6 us of work per item in the
//!   parallel stage, against the same rayon idiom (which needs all items in
//!   memory at once; the pipeline streams with 8 in flight).
//! * `pipeline_work_floor/100000`: the same stream with no scheduler at
//!   all (see `streaming_floor`) against rayon, and
//!   `pipeline_work_vs_floor`, sixfold against that floor: how close a
//!   pipeline with as many items in flight can come to rayon's unbounded
//!   collect on this machine, and how far sixfold is from it.
//! * `pipeline_many_tokens/100000`: the same with 1,024 tokens against
//!   `4 * workers` (sixfold both sides): many tokens must not cost.
//! * `pipeline_pinned/3x20000`: three serial stages, each updating its own
//!   256 KiB table for every item, with the stages pinned to workers
//!   against not pinned (sixfold against itself); `pipeline_pinned/2x20000`
//!   the same with two stages, one a worker on two workers.
//! * `pipeline_idle_cpu`: a run waiting on a slow source (1 ms per item):
//!   the CPU the pool uses beyond the work, as a fraction of one core.

use super::{Side, compare, median, ms, side, threads};
use rayon::prelude::*;
use sixfold::{Pinning, Pipeline, Pool, current_worker};
use std::cell::UnsafeCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The rayon idiom: map in parallel into a `Vec`, fold it in order.
fn rayon_map_fold(theirs: &rayon::ThreadPool, n: u64, work: fn(u64) -> u64) -> u64 {
    theirs.install(|| {
        let mapped: Vec<u64> = (0..n).into_par_iter().map(work).collect();
        mapped
            .iter()
            .fold(0u64, |acc, &x| acc.wrapping_mul(31).wrapping_add(x))
    })
}

/// The same as a sixfold pipeline: count, map in parallel, fold in order.
fn pipeline_map_fold(ours: &Pool, n: u64, work: fn(u64) -> u64, tokens: usize) -> u64 {
    let mut next = 0u64;
    let mut acc = 0u64;
    let mut p = Pipeline::new(|| {
        (next < n).then(|| {
            next += 1;
            next - 1
        })
    })
    .parallel(work)
    .serial_in_order(|x| acc = acc.wrapping_mul(31).wrapping_add(x));
    ours.run_pipeline(&mut p, tokens).expect("pipeline");
    drop(p);
    acc
}

fn no_work(x: u64) -> u64 {
    black_box(x)
}

/// About 0.6 us: 400 rounds of xorshift.
fn some_work(x: u64) -> u64 {
    let mut v = x | 1;
    for _ in 0..400 {
        v ^= v << 13;
        v ^= v >> 7;
        v ^= v << 17;
    }
    black_box(v)
}

fn map_fold_pair<'a>(
    ours: &'a Pool,
    theirs: &'a rayon::ThreadPool,
    n: u64,
    work: fn(u64) -> u64,
) -> (Side<'a>, Side<'a>) {
    let tokens = 4 * threads();
    let expect = (0..n)
        .map(work)
        .fold(0u64, |acc, x| acc.wrapping_mul(31).wrapping_add(x));
    (
        side(move || move || assert_eq!(pipeline_map_fold(ours, n, work, tokens), expect)),
        side(move || move || assert_eq!(rayon_map_fold(theirs, n, work), expect)),
    )
}

/// `pipeline_empty/1000000`.
pub(super) fn bench_pipeline_empty(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 1_000_000;
    let (a, b) = map_fold_pair(ours, theirs, n, no_work);
    let (mine, rayon) = compare("pipeline_empty/1000000", 7, a, b);
    println!(
        "#   pipeline_empty/1000000: ns/item sixfold {:.1} (target <= 40), rayon collect+fold {:.1}; {} tokens",
        mine.as_secs_f64() * 1e9 / n as f64,
        rayon.as_secs_f64() * 1e9 / n as f64,
        4 * threads()
    );
}

/// `pipeline_work/100000`.
pub(super) fn bench_pipeline_work(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 100_000;
    let (a, b) = map_fold_pair(ours, theirs, n, some_work);
    let (mine, rayon) = compare("pipeline_work/100000", 7, a, b);
    let start = Instant::now();
    let sequential = (0..n)
        .map(some_work)
        .fold(0u64, |acc, x| acc.wrapping_mul(31).wrapping_add(x));
    let seq = start.elapsed();
    black_box(sequential);
    println!(
        "#   pipeline_work/100000: ns/item sixfold {:.1}, rayon {:.1}, sequential {:.1}; speed-up over sequential: sixfold {:.2}x, rayon {:.2}x",
        mine.as_secs_f64() * 1e9 / n as f64,
        rayon.as_secs_f64() * 1e9 / n as f64,
        seq.as_secs_f64() * 1e9 / n as f64,
        seq.as_secs_f64() / mine.as_secs_f64(),
        seq.as_secs_f64() / rayon.as_secs_f64(),
    );
}

/// A turn word and the state of the serial stage it guards, on one cache
/// line of their own: handing a stage to the other thread moves one line.
#[repr(align(128))]
struct Turn {
    turn: AtomicU64,
    state: UnsafeCell<u64>,
}

/// The source's and the sink's turns, shared by the floor's threads.
struct Turns {
    source: Turn,
    sink: Turn,
}

// SAFETY: a turn's `state` is touched only by the thread whose batch
// number the turn word holds (Acquire to take it, Release to pass it on).
unsafe impl Sync for Turns {}

/// About the least a streaming pipeline with `tokens` items in flight
/// costs on `threads` plain threads, with no scheduler: batches of
/// `tokens / threads` items go to the threads in a fixed rotation; a
/// thread takes its batch's turn at the source (a counter, as the bench's
/// source closure), runs `work` on the batch, then takes its turn at the
/// in-order sink and folds the batch. Each thread holds at most one batch,
/// so at most `tokens` items are in flight, as in the pipeline. Threads
/// spin for their turn (no sleep, no wake-up), and the only cost left is
/// the two turns' cache lines moving between cores once a batch: a
/// scheduler can only add to it. (The threads start with each run, as
/// the stencil's floor's do: about 75 us for two here, a quarter of a
/// percent of a run, which a pool's wake-up costs too.) Returns the time
/// and the fold.
fn streaming_floor(n: u64, work: fn(u64) -> u64, tokens: usize, threads: usize) -> (Duration, u64) {
    let batch = (tokens / threads).max(1);
    let batches = n.div_ceil(batch as u64);
    let turns = Turns {
        source: Turn {
            turn: AtomicU64::new(0),
            state: UnsafeCell::new(0),
        },
        sink: Turn {
            turn: AtomicU64::new(0),
            state: UnsafeCell::new(0),
        },
    };
    let wait_for = |turn: &Turn, number: u64| {
        while turn.turn.load(Ordering::Acquire) != number {
            std::hint::spin_loop();
        }
    };
    let start = Instant::now();
    std::thread::scope(|s| {
        for first in 0..threads as u64 {
            let turns = &turns;
            s.spawn(move || {
                let mut items = vec![0u64; batch];
                for number in (first..batches).step_by(threads) {
                    wait_for(&turns.source, number);
                    // SAFETY: the source's turn is ours (see `Turns`).
                    let next = unsafe { &mut *turns.source.state.get() };
                    let mut len = 0;
                    while len < batch && *next < n {
                        items[len] = *next;
                        *next += 1;
                        len += 1;
                    }
                    turns.source.turn.store(number + 1, Ordering::Release);
                    for item in &mut items[..len] {
                        *item = work(*item);
                    }
                    wait_for(&turns.sink, number);
                    // SAFETY: the sink's turn is ours.
                    let acc = unsafe { &mut *turns.sink.state.get() };
                    for &item in &items[..len] {
                        *acc = acc.wrapping_mul(31).wrapping_add(item);
                    }
                    turns.sink.turn.store(number + 1, Ordering::Release);
                }
            });
        }
    });
    (start.elapsed(), turns.sink.state.into_inner())
}

/// `pipeline_work_floor/100000` and `pipeline_work_vs_floor`: the floor,
/// rayon and sixfold on `pipeline_work`, alternated in one loop so that
/// both ratios come from the same phase of the machine.
pub(super) fn bench_pipeline_work_floor(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 100_000;
    let tokens = 4 * threads();
    let expect = (0..n)
        .map(some_work)
        .fold(0u64, |acc, x| acc.wrapping_mul(31).wrapping_add(x));
    let floor = || {
        let (took, fold) = streaming_floor(n, some_work, tokens, threads());
        assert_eq!(fold, expect);
        took
    };
    let rayon = || {
        let start = Instant::now();
        assert_eq!(rayon_map_fold(theirs, n, some_work), expect);
        start.elapsed()
    };
    let sixfold = || {
        let start = Instant::now();
        assert_eq!(pipeline_map_fold(ours, n, some_work, tokens), expect);
        start.elapsed()
    };
    // Warm-up.
    floor();
    rayon();
    sixfold();
    let (mut f, mut r, mut o) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..7 {
        f.push(floor());
        r.push(rayon());
        o.push(sixfold());
    }
    let (f, r, o) = (median(f), median(r), median(o));
    println!(
        "pipeline_work_floor/100000 {:.3} {:.3} {:.3}",
        ms(f),
        ms(r),
        f.as_secs_f64() / r.as_secs_f64()
    );
    println!(
        "#   pipeline_work_floor/100000: plain spinning threads, {tokens} items in flight, batches of {} in a fixed rotation, no scheduler / rayon collect+fold (no target: about the least a pipeline with {tokens} in flight can cost here)",
        (tokens / threads()).max(1)
    );
    println!(
        "pipeline_work_vs_floor {:.3}",
        o.as_secs_f64() / f.as_secs_f64()
    );
    println!(
        "#   pipeline_work_vs_floor: sixfold {:.3} ms / the floor, same loop (sixfold / rayon in this loop: {:.3})",
        ms(o),
        o.as_secs_f64() / r.as_secs_f64()
    );
}

/// `pipeline_many_tokens/100000`: `pipeline_work` with 1,024 tokens
/// against the same with four a worker (both sixfold). More tokens buy a
/// looser memory bound, and must not cost speed: a run once walked the
/// items waiting behind an in-order gate once per item, and 4,096 tokens
/// took ten times as long as eight.
pub(super) fn bench_pipeline_many_tokens(ours: &Pool, _: &rayon::ThreadPool) {
    let n = 100_000;
    let expect = (0..n)
        .map(some_work)
        .fold(0u64, |acc, x| acc.wrapping_mul(31).wrapping_add(x));
    let with = |tokens: usize| {
        side(move || move || assert_eq!(pipeline_map_fold(ours, n, some_work, tokens), expect))
    };
    compare(
        "pipeline_many_tokens/100000",
        5,
        with(1024),
        with(4 * threads()),
    );
    println!(
        "#   pipeline_many_tokens/100000: sixfold with 1024 tokens / with {} (target <= 1.2)",
        4 * threads()
    );
}

/// Entries of a stage's table: 256 KiB of u64.
const TABLE: usize = 32 * 1024;

/// One stage's update of its table for item `x`: every cache line of the
/// table read and written once (a compressor's model, a symbol table).
fn update(table: &mut [u64], x: u64) -> u64 {
    let mut h = x;
    for line in (0..TABLE).step_by(8) {
        let slot = line + (h as usize & 7);
        table[slot] = table[slot].wrapping_add(h);
        h = h.rotate_left(5) ^ table[slot];
    }
    h
}

/// Run the pipeline of one serial stage a table once; `pins` puts stage k
/// on `pins[k]`. Returns (elapsed, checksum, share of the first stage's
/// runs on its worker).
fn table_stages(
    pool: &Pool,
    tables: &mut [Vec<u64>],
    items: u64,
    pins: Option<&[usize]>,
) -> (Duration, u64, f64) {
    let mut next = 0u64;
    let mut checksum = 0u64;
    let mut on_pin = 0u64;
    let first_worker = pins.map_or(0, |p| p[0]);
    fn pin<'a>(p: Pipeline<'a, u64>, pins: Option<&[usize]>, stage: usize) -> Pipeline<'a, u64> {
        match pins {
            Some(pins) => p.pin(pins[stage]),
            None => p,
        }
    }
    let (first, rest) = tables.split_first_mut().expect("a stage at least");
    let mut p = Pipeline::new(|| {
        (next < items).then(|| {
            next += 1;
            next
        })
    })
    .serial_in_order(|x| {
        if current_worker() == Some(first_worker) {
            on_pin += 1;
        }
        x ^ update(first, x)
    });
    p = pin(p, pins, 0);
    for (k, table) in rest.iter_mut().enumerate() {
        p = pin(
            p.serial_in_order(move |x| x ^ update(table, x)),
            pins,
            k + 1,
        );
    }
    let mut p = p.serial_in_order(|x| checksum = checksum.wrapping_add(x));
    let start = Instant::now();
    pool.run_pipeline(&mut p, 4 * pool.num_workers())
        .expect("pipeline");
    let elapsed = start.elapsed();
    drop(p);
    (elapsed, checksum, on_pin as f64 / items as f64)
}

/// `pipeline_pinned/<stages>x20000`: `stages` table stages pinned to
/// workers `k % workers` against not pinned, on one pool.
fn pinned_against_free(pool: &Pool, stages: usize) {
    let workers = pool.num_workers();
    let pins: Vec<usize> = (0..stages).map(|k| k % workers).collect();
    const ITEMS: u64 = 20_000;
    let fresh = || -> Vec<Vec<u64>> { (1..=stages as u64).map(|k| vec![k; TABLE]).collect() };
    // Warm up.
    table_stages(pool, &mut fresh(), ITEMS / 10, Some(&pins));
    table_stages(pool, &mut fresh(), ITEMS / 10, None);
    let (mut on, mut off, mut shares) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..7 {
        let (a, sum_a, share) = table_stages(pool, &mut fresh(), ITEMS, Some(&pins));
        let (b, sum_b, _) = table_stages(pool, &mut fresh(), ITEMS, None);
        assert_eq!(sum_a, sum_b, "the same items come out");
        on.push(a);
        off.push(b);
        shares.push(share);
    }
    let (a, b) = (median(on), median(off));
    shares.sort_by(f64::total_cmp);
    let name = format!("pipeline_pinned/{stages}x{ITEMS}");
    println!(
        "{name} {:.3} {:.3} {:.3}",
        ms(a),
        ms(b),
        a.as_secs_f64() / b.as_secs_f64()
    );
    println!(
        "#   {name}: pinned / not pinned (target <= 0.8 where each worker holds as many stages), stages on workers {pins:?}; median {:.1}% of the first stage's runs on its worker",
        100.0 * shares[shares.len() / 2]
    );
}

/// `pipeline_pinned/3x20000`, and `pipeline_pinned/2x20000`: pinned
/// against not pinned, same pool. Three stages on two workers put two of
/// them on worker 0, which then does two thirds of the work: the pinned
/// run can be faster only if a table that moves between cores costs more
/// than that imbalance. Two stages on two workers are balanced, and
/// measure what pinning buys by itself.
pub(super) fn bench_pipeline_pinned(_: &Pool, _: &rayon::ThreadPool) {
    let pool = Pool::builder()
        .num_threads(threads())
        .pinning(Pinning::Cores)
        .build()
        .expect("pool");
    pinned_against_free(&pool, 3);
    pinned_against_free(&pool, 2);
}

/// Process CPU time (user + system) so far.
fn cpu_time() -> Duration {
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// `pipeline_idle_cpu`: a source that sleeps 1 ms per item, 300 items,
/// through a parallel stage and an in-order sink: CPU used per wall time.
pub(super) fn bench_pipeline_idle(ours: &Pool, _: &rayon::ThreadPool) {
    let mut fractions = Vec::new();
    let mut walls = Vec::new();
    for _ in 0..3 {
        let mut next = 0u32;
        let mut sum = 0u64;
        let mut p = Pipeline::new(|| {
            std::thread::sleep(Duration::from_millis(1));
            next += 1;
            (next <= 300).then_some(u64::from(next))
        })
        .parallel(|x| x * 2)
        .serial_in_order(|x| sum += x);
        let (cpu0, wall0) = (cpu_time(), Instant::now());
        ours.run_pipeline(&mut p, 4 * threads()).expect("pipeline");
        let (cpu, wall) = (cpu_time() - cpu0, wall0.elapsed());
        drop(p);
        assert_eq!(sum, 300 * 301);
        fractions.push(cpu.as_secs_f64() / wall.as_secs_f64());
        walls.push(wall);
    }
    fractions.sort_by(f64::total_cmp);
    println!(
        "pipeline_idle_cpu {:.4} {:.1}",
        fractions[1],
        ms(median(walls))
    );
    println!(
        "#   pipeline_idle_cpu: CPU per wall time (one core = 1.0) while a run waits on a 1 ms-per-item source, and the run's wall ms (300 items)"
    );
}
