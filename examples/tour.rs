//! A tour of sixfold in a few seconds: a dependency graph of task nodes, a
//! reusable `Graph`, a continuation-passing fork-join and `join`, spawn
//! versus enqueue, tasks with affinity, a pipeline with a stage pinned to
//! a worker, parallel loops (a replayed affinity partitioner and a
//! deterministic reduce), the table of which of the six rules supplied
//! each task, and an execution trace to open in Perfetto.
//!
//! Run: `cargo run --release --example tour`

#[path = "support/cps_fib.rs"]
mod cps_fib;

use sixfold::{AffinityPartitioner, Dispatch, Graph, Pipeline, Pool, Rule, TaskRef};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn main() {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    let pool = Pool::builder()
        .num_threads(threads)
        .trace(true)
        .build()
        .expect("pool");
    println!("sixfold tour: a pool of {} workers\n", pool.num_threads());

    dependency_graph(&pool);
    reusable_graph(&pool);
    fork_join(&pool);
    spawn_versus_enqueue(&pool);
    affinity(&pool);
    pipeline(&pool);
    parallel_loops(&pool);

    println!("\nWhich rule supplied each task, per worker:");
    print!("{}", pool.stats());
    let used = Rule::ALL
        .iter()
        .filter(|&&rule| pool.stats().by_rule(rule) > 0)
        .count();
    println!("({used} of the 6 rules were used)");

    let trace = pool.take_trace();
    println!("\nThe execution trace, per worker:\n{}", trace.summary());
    let path = "tour-trace.json";
    match std::fs::File::create(path)
        .and_then(|f| trace.write_chrome_json(std::io::BufWriter::new(f)))
    {
        Ok(()) => println!(
            "Wrote {path} ({} task events, {} sleeps): open it at https://ui.perfetto.dev\n\
             (\"Open trace file\") or in chrome://tracing, one track per worker.",
            trace.tasks.len(),
            trace.sleeps.len()
        ),
        Err(e) => println!("could not write {path}: {e}"),
    }
}

/// A `Graph`: built once, run again and again, nodes borrowing local data;
/// a test step enqueued for fairness; printed as GraphViz.
fn reusable_graph(pool: &Pool) {
    println!("2. A reusable graph: built once, run 100 times");
    let inputs: Vec<u64> = (1..=1000).collect();
    let (left, right) = inputs.split_at(500);
    let sums = [AtomicU64::new(0), AtomicU64::new(0)];
    let checked = AtomicU64::new(0);
    let mut g = Graph::new();
    let a = g.add_named("sum left", || {
        sums[0].store(left.iter().sum(), Ordering::Relaxed);
    });
    let b = g.add_named("sum right", || {
        sums[1].store(right.iter().sum(), Ordering::Relaxed);
    });
    let check = g.add_named("check", || {
        let total = sums[0].load(Ordering::Relaxed) + sums[1].load(Ordering::Relaxed);
        assert_eq!(total, 500_500);
        checked.fetch_add(1, Ordering::Relaxed);
    });
    g.precede(a, check).unwrap();
    g.precede(b, check).unwrap();
    g.set_dispatch(check, Dispatch::Enqueue).unwrap();
    let start = Instant::now();
    pool.run_graph_n(&mut g, 100).expect("the graph runs");
    println!(
        "   {} checked runs in {:.2} ms; an edge back is refused: \"{}\"",
        checked.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64() * 1e3,
        g.precede(check, a).unwrap_err()
    );
    for line in g.to_dot().lines() {
        println!("   {line}");
    }
    println!();
}

/// A diamond and a tail, built from task nodes with explicit edges:
/// fetch -> {parse, index} -> merge -> report.
fn dependency_graph(pool: &Pool) {
    println!("1. A dependency graph of task nodes");
    let log = Arc::new(Mutex::new(Vec::new()));
    let step = |name: &'static str| {
        let log = log.clone();
        TaskRef::from_fn(move |cx| {
            std::thread::sleep(Duration::from_millis(2));
            log.lock().unwrap().push((name, cx.worker_index()));
        })
    };
    let (mut fetch, mut parse, mut index, mut merge, report) = (
        step("fetch"),
        step("parse"),
        step("index"),
        step("merge"),
        step("report"),
    );
    fetch.precede(&parse).unwrap();
    fetch.precede(&index).unwrap();
    parse.precede(&merge).unwrap();
    index.precede(&merge).unwrap();
    merge.precede(&report).unwrap();
    // A cycle is refused, not run into a hang.
    let refused = {
        let mut a = TaskRef::from_fn(|_| {});
        let mut b = TaskRef::from_fn(|_| {});
        a.precede(&b).unwrap();
        b.precede(&a).unwrap_err()
    };
    pool.run([fetch, parse, index, merge, report]);
    for (name, worker) in log.lock().unwrap().iter() {
        println!("   {name:<7} ran on worker {worker}");
    }
    println!("   closing a cycle is an error: \"{refused}\"\n");
}

fn fork_join(pool: &Pool) {
    println!("3. Fork-join: continuation passing (no thread blocks) and join");
    let n = 20;
    let before = pool.stats();
    let start = Instant::now();
    let value = cps_fib::fib(pool, n);
    let took = start.elapsed();
    let stats = pool.stats().since(&before);
    println!(
        "   fib({n}) = {} in {:.1} ms: {} tasks, {} by rule 1 (recycled), {} by rule 2 (continuations), {} stolen\n",
        value,
        took.as_secs_f64() * 1e3,
        stats.total(),
        stats.by_rule(Rule::Returned),
        stats.by_rule(Rule::Successor),
        stats.by_rule(Rule::Steal),
    );
    fn fib(n: u64) -> u64 {
        if n < 2 {
            return n;
        }
        let (a, b) = sixfold::join(|| fib(n - 1), || fib(n - 2));
        a + b
    }
    let start = Instant::now();
    let value = pool.install(|| fib(n));
    println!(
        "   the same with join (both halves on the stack): {value} in {:.1} ms\n",
        start.elapsed().as_secs_f64() * 1e3
    );
}

/// Spawned tasks run newest-first on their worker (locality); enqueued ones
/// oldest-first from the shared queue (fairness).
fn spawn_versus_enqueue(pool: &Pool) {
    println!("4. spawn (own deque, LIFO) versus enqueue (shared queue, FIFO)");
    let single = Pool::builder().num_threads(1).build().expect("pool");
    for (label, use_enqueue) in [("spawn  ", false), ("enqueue", true)] {
        let order = Arc::new(Mutex::new(Vec::new()));
        let o = order.clone();
        single.run(TaskRef::from_fn(move |cx| {
            for i in 1..=5 {
                let o = o.clone();
                let task = TaskRef::from_fn(move |_| o.lock().unwrap().push(i));
                if use_enqueue {
                    cx.enqueue(task);
                } else {
                    cx.spawn(task);
                }
            }
        }));
        println!(
            "   {label} 1..=5 on one worker runs as {:?}",
            order.lock().unwrap()
        );
    }
    // And on the tour's pool, a burst of each, for the table.
    let done = Arc::new(AtomicU64::new(0));
    for _ in 0..1000 {
        let d = done.clone();
        pool.enqueue(move || {
            d.fetch_add(1, Ordering::Relaxed);
        });
    }
    pool.wait_idle();
    println!(
        "   1000 enqueued from outside: {} ran\n",
        done.load(Ordering::Relaxed)
    );
}

fn affinity(pool: &Pool) {
    println!("5. Tasks with affinity go to their worker's mailbox (and a proxy)");
    let target = pool.num_workers() - 1;
    let hits = Arc::new(AtomicU64::new(0));
    for _ in 0..100 {
        let hits = hits.clone();
        pool.spawn_with_affinity(target, move || {
            if sixfold::current_worker() == Some(target) {
                hits.fetch_add(1, Ordering::Relaxed);
            }
        })
        .expect("a valid worker index");
    }
    pool.wait_idle();
    println!(
        "   100 tasks for worker {target}: {} ran there",
        hits.load(Ordering::Relaxed)
    );
    let err = pool.spawn_with_affinity(99, || {}).unwrap_err();
    println!("   an out-of-range worker is an error: \"{err}\"");
}

/// A pipeline: a serial source, a parallel stage, and a serial in-order
/// sink pinned to the last worker, with at most 8 items in flight.
fn pipeline(pool: &Pool) {
    println!(
        "\n6. A pipeline: read (serial) -> square (parallel) -> sum (serial, in order, pinned)"
    );
    let sink_worker = pool.num_workers() - 1;
    let mut next = 0u64;
    let mut total = 0u64;
    let mut order_kept = true;
    let mut last = None;
    let mut sink_on_its_worker = 0u64;
    let start = Instant::now();
    let mut line = Pipeline::new(|| {
        next += 1;
        (next <= 10_000).then_some(next)
    })
    .name("read")
    .parallel(|x: u64| (x, x * x))
    .name("square")
    .serial_in_order(|(x, square): (u64, u64)| {
        order_kept &= last.is_none_or(|prev| prev + 1 == x);
        last = Some(x);
        total += square;
        if sixfold::current_worker() == Some(sink_worker) {
            sink_on_its_worker += 1;
        }
    })
    .name("sum")
    .pin(sink_worker);
    pool.run_pipeline(&mut line, 8).expect("a valid pipeline");
    drop(line);
    println!(
        "   10,000 items, at most 8 in flight, in {:.2} ms: sum of squares {total}, \
         in order: {order_kept}, sink on worker {sink_worker}: {sink_on_its_worker} of 10000",
        start.elapsed().as_secs_f64() * 1e3
    );
    let err = pool
        .run_pipeline(&mut Pipeline::new(|| None::<u32>), 0)
        .unwrap_err();
    println!("   zero tokens is an error: \"{err}\"");
}

/// Parallel loops: a stencil-like loop run 50 times with an affinity
/// partitioner (each piece goes back to the worker that ran it last time),
/// and a floating-point sum that is bit-identical on any number of workers.
fn parallel_loops(pool: &Pool) {
    println!("\n7. Parallel loops: a replayed affinity partitioner, a deterministic reduce");
    let mut field = vec![1.0f64; 1 << 16];
    let mut affinity = AffinityPartitioner::new();
    let start = Instant::now();
    let mut kept = 0.0;
    for step in 0..50 {
        pool.for_chunks_mut_with(&mut field, &mut affinity, |chunk, offset| {
            for (i, x) in chunk.iter_mut().enumerate() {
                *x = 0.5 * *x + ((offset + i) % 7) as f64;
            }
        });
        if step > 0 {
            kept += affinity.kept_share();
        }
    }
    println!(
        "   50 loops over {} elements in {:.2} ms, {} pieces; on average {:.0}% of the \
         pieces ran where they ran the step before",
        field.len(),
        start.elapsed().as_secs_f64() * 1e3,
        affinity.pieces(),
        100.0 * kept / 49.0
    );
    let sum_on = |workers: usize| {
        let pool = Pool::builder().num_threads(workers).build().expect("pool");
        pool.reduce_deterministic(
            0..field.len(),
            1024,
            0.0f64,
            |r, acc| field[r].iter().fold(acc, |s, x| s + x.sqrt()),
            |a, b| a + b,
        )
    };
    let (one, many) = (sum_on(1), sum_on(pool.num_threads()));
    println!(
        "   deterministic sum of square roots: {one} on 1 worker, {many} on {}: identical bits: {}",
        pool.num_threads(),
        one.to_bits() == many.to_bits()
    );
}
