//! A tour of sixfold in a few seconds: a dependency graph of task nodes, a
//! reusable `Graph`, a continuation-passing fork-join and `join`, spawn
//! versus enqueue, tasks with affinity, the table of which of the six rules
//! supplied each task, and an execution trace to open in Perfetto.
//!
//! Run: `cargo run --release --example tour`

#[path = "support/cps_fib.rs"]
mod cps_fib;

use sixfold::{Dispatch, Graph, Pool, Rule, TaskRef};
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
