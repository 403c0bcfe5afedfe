//! Placement benchmarks, sixfold against itself: the wavefront graph with
//! affinity replay on and off (`name on_ms off_ms ratio(on/off)` and a
//! comment line with the affinity hit rate), and the cost of tracing.
//! (The pinned pipeline is in `pipelines.rs`.)

use super::{median, ms};
use sixfold::{Graph, Pinning, Pool, current_worker};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const RUNS: usize = 5;

/// `graph_wavefront_replay/1024`: the 1024 x 1024 wavefront (each cell
/// after its left and upper neighbour, each touching its own 64-byte
/// cell of state), with affinity replay on and off.
pub(super) fn bench_graph_wavefront_replay(ours: &Pool, _: &rayon::ThreadPool) {
    const SIDE: usize = 1024;
    let cells: Vec<[AtomicU64; 8]> = (0..SIDE * SIDE).map(|_| Default::default()).collect();
    let same_worker = AtomicUsize::new(0);
    let last: Vec<AtomicUsize> = (0..SIDE * SIDE)
        .map(|_| AtomicUsize::new(usize::MAX))
        .collect();
    let mut g = Graph::new();
    let ids: Vec<_> = cells
        .iter()
        .zip(&last)
        .map(|(cell, last)| {
            let same_worker = &same_worker;
            g.add(move || {
                for word in cell {
                    word.store(word.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                }
                let here = current_worker().unwrap_or(usize::MAX);
                if last.swap(here, Ordering::Relaxed) == here {
                    same_worker.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for i in 0..SIDE {
        for j in 0..SIDE {
            let c = i * SIDE + j;
            if j > 0 {
                g.precede(ids[c - 1], ids[c]).unwrap();
            }
            if i > 0 {
                g.precede(ids[c - SIDE], ids[c]).unwrap();
            }
        }
    }
    let mut time = |replay: bool| -> (Duration, f64) {
        g.set_affinity_replay(replay);
        ours.run_graph(&mut g).unwrap();
        same_worker.store(0, Ordering::Relaxed);
        let samples: Vec<Duration> = (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                ours.run_graph(&mut g).unwrap();
                start.elapsed()
            })
            .collect();
        let share = same_worker.load(Ordering::Relaxed) as f64 / (RUNS * SIDE * SIDE) as f64;
        (median(samples), share)
    };
    let (on, on_share) = time(true);
    let (off, off_share) = time(false);
    println!(
        "graph_wavefront_replay/1024 {:.3} {:.3} {:.3}",
        ms(on),
        ms(off),
        on.as_secs_f64() / off.as_secs_f64()
    );
    println!(
        "#   graph_wavefront_replay/1024: replay on / off; cells on the worker of their previous run: {:.1}% on, {:.1}% off",
        100.0 * on_share,
        100.0 * off_share
    );
}

/// `trace_cost`: `fib_join/30` and `graph_chain/1000000` on a pool that
/// records a trace, against the same pool kind without (ratio on / off).
/// Traced and untraced runs alternate, so both see the same machine phase;
/// the records are taken (and dropped) after every run, untimed.
///
/// `fib_join/30/pinned` is the same pair with both pools' workers pinned
/// (`Pinning::Cores`). Unpinned, the kernel now and then wakes the second
/// worker onto the first one's core and leaves it there for a whole run
/// (`perf sched` shows both workers taking turns on one core for 17 ms
/// while the other core idles), which doubles that run; a take between
/// runs (40 ms of decoding on the caller's thread) makes this likelier
/// for the traced pool. Pinned, the ratio is what a record costs.
pub(super) fn bench_trace_cost(_: &Pool, _: &rayon::ThreadPool) {
    let threads = super::threads();
    let pool = |trace: bool, pinning: Pinning| {
        Pool::builder()
            .num_threads(threads)
            .trace(trace)
            .pinning(pinning)
            .build()
            .expect("pool")
    };
    let (traced, plain) = (pool(true, Pinning::None), pool(false, Pinning::None));
    fn fib(n: u64) -> u64 {
        if n < 2 {
            return n;
        }
        let (a, b) = sixfold::join(|| fib(n - 1), || fib(n - 2));
        a + b
    }
    // Medians of (on, off), runs alternating.
    let time = |on: &Pool, off: &Pool, run: &mut dyn FnMut(&Pool)| -> (Duration, Duration) {
        let mut sample = |pool: &Pool| {
            let start = Instant::now();
            run(pool);
            let took = start.elapsed();
            let _ = pool.take_trace();
            took
        };
        sample(on);
        sample(off);
        let (mut ons, mut offs) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            ons.push(sample(on));
            offs.push(sample(off));
        }
        (median(ons), median(offs))
    };
    let report = |name: &str, (on, off): (Duration, Duration)| {
        println!(
            "{name} {:.3} {:.3} {:.3}",
            ms(on),
            ms(off),
            on.as_secs_f64() / off.as_secs_f64()
        );
    };
    let mut fib_run = |pool: &Pool| assert_eq!(pool.install(|| fib(30)), 832_040);
    report(
        "trace_cost/fib_join/30",
        time(&traced, &plain, &mut fib_run),
    );
    {
        let (traced, plain) = (pool(true, Pinning::Cores), pool(false, Pinning::Cores));
        report(
            "trace_cost/fib_join/30/pinned",
            time(&traced, &plain, &mut fib_run),
        );
    }
    let counters: Vec<AtomicU64> = (0..1_000_000).map(|_| AtomicU64::new(0)).collect();
    let mut g = Graph::new();
    let ids: Vec<_> = counters
        .iter()
        .map(|c| {
            g.add(move || {
                c.fetch_add(1, Ordering::Relaxed);
            })
        })
        .collect();
    for pair in ids.windows(2) {
        g.precede(pair[0], pair[1]).unwrap();
    }
    let g = std::cell::RefCell::new(g);
    let mut chain_run = |pool: &Pool| pool.run_graph(&mut g.borrow_mut()).unwrap();
    report(
        "trace_cost/graph_chain/1000000",
        time(&traced, &plain, &mut chain_run),
    );
    println!("#   trace_cost: tracing on / off, same pool size; records taken between runs");
}
