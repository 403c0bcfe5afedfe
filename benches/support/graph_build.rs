//! Graphs built on the fly: build + one run + drop, and the orders edges
//! are added in.
//!
//! - `graph_build/<shape>`: `Graph::add` per node, `precede` per edge, one
//!   run, drop; against rayon filling a CSR array of the same shape, one
//!   run (last ready successor inline), drop. Both sides start from the
//!   shape's edge list and the nodes' counters, made untimed.
//! - `graph_build_reverse/chain`: a million-node chain whose edges are added
//!   back to front, against the same chain added front to back (both
//!   sixfold: the ratio is reverse / forward).
//! - `graph_wavefront_down_first`: the 1024 x 1024 grid with each cell's
//!   edges added "down, then right", against "right, then down" (both
//!   prebuilt, sixfold on 2 workers); then on 1 worker each order against
//!   a sequential stack walk of the same graph, the floor.

use super::graph_shapes::{Csr, Shape, sequential, sixfold_graph, work};
use super::{Side, compare, median, side};
use sixfold::{Graph, Pool};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const RUNS: usize = 7;

fn per_node(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e9 / n as f64
}

/// Every counter ran `runs` times.
fn check(counters: &[AtomicU64], runs: usize) {
    assert!(
        counters
            .iter()
            .all(|c| c.load(Ordering::Relaxed) == runs as u64),
        "a node ran the wrong number of times"
    );
}

/// Build `shape` as a sixfold graph, run it once on `pool`, drop it.
fn build_and_run(pool: &Pool, shape: &Shape, counters: &[AtomicU64]) {
    let g = sixfold_graph(shape, counters);
    run_once(pool, g);
}

fn run_once(pool: &Pool, mut g: Graph<'_>) {
    pool.run_graph(&mut g).expect("graph run");
}

fn bench_build(name: &str, shape: Shape, ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = shape.nodes;
    let ours_counters: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let theirs_counters: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let ours_side: Side<'_> = side(|| {
        let (shape, counters) = (&shape, &ours_counters);
        move || build_and_run(ours, shape, counters)
    });
    let theirs_side: Side<'_> = side(|| {
        let (shape, counters) = (&shape, &theirs_counters);
        move || {
            let csr = Csr::new(shape);
            csr.run(theirs, counters, true);
        }
    });
    let (a, b) = compare(name, RUNS, ours_side, theirs_side);
    check(&ours_counters, RUNS + 1);
    check(&theirs_counters, RUNS + 1);
    println!(
        "#   {name}: ns/node built+run+dropped: sixfold {:.1}, rayon CSR {:.1} (target ratio <= 2)",
        per_node(a, n),
        per_node(b, n)
    );
}

/// `graph_build/chain`: 10^6 nodes.
pub(super) fn bench_build_chain(ours: &Pool, theirs: &rayon::ThreadPool) {
    bench_build("graph_build/chain", Shape::chain(1_000_000), ours, theirs);
}

/// `graph_build/binary_tree`: 2^20 - 1 nodes.
pub(super) fn bench_build_binary_tree(ours: &Pool, theirs: &rayon::ThreadPool) {
    bench_build(
        "graph_build/binary_tree",
        Shape::binary_tree(20),
        ours,
        theirs,
    );
}

/// `graph_build/wavefront`: 1024 x 1024.
pub(super) fn bench_build_wavefront(ours: &Pool, theirs: &rayon::ThreadPool) {
    bench_build(
        "graph_build/wavefront",
        Shape::wavefront(1024),
        ours,
        theirs,
    );
}

/// `graph_build/embarrassing`: one root, 10^6 nodes, one sink.
pub(super) fn bench_build_embarrassing(ours: &Pool, theirs: &rayon::ThreadPool) {
    bench_build(
        "graph_build/embarrassing",
        Shape::embarrassing(1_000_000),
        ours,
        theirs,
    );
}

/// `graph_build_reverse/chain`: edges added back to front, against front
/// to back.
pub(super) fn bench_build_reverse(ours: &Pool, _: &rayon::ThreadPool) {
    let n = 1_000_000;
    let forward = Shape::chain(n);
    let reverse = Shape {
        nodes: n,
        edges: forward.edges.iter().rev().copied().collect(),
    };
    let reverse_counters: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let forward_counters: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let (a, b) = compare(
        "graph_build_reverse/chain",
        RUNS,
        side(|| {
            let (shape, counters) = (&reverse, &reverse_counters);
            move || build_and_run(ours, shape, counters)
        }),
        side(|| {
            let (shape, counters) = (&forward, &forward_counters);
            move || build_and_run(ours, shape, counters)
        }),
    );
    check(&reverse_counters, RUNS + 1);
    check(&forward_counters, RUNS + 1);
    println!(
        "#   graph_build_reverse/chain: sixfold both sides, back-to-front / front-to-back (target <= 2); ns/node {:.1} and {:.1}",
        per_node(a, n),
        per_node(b, n)
    );
}

/// A sequential depth-first walk of `csr` from its roots: pending counts
/// in a plain array, ready successors pushed in order, the last popped
/// first. Median of `RUNS`.
fn stack_walk(shape: &Shape, counters: &[AtomicU64]) -> Duration {
    let csr = Csr::new(shape);
    let in_degree: Vec<u32> = {
        let mut d = vec![0u32; shape.nodes];
        for &(_, b) in &shape.edges {
            d[b] += 1;
        }
        d
    };
    let samples = (0..RUNS)
        .map(|_| {
            let mut pending = in_degree.clone();
            let start = Instant::now();
            let mut stack: Vec<usize> = csr.roots().collect();
            while let Some(i) = stack.pop() {
                work(&counters[i]);
                for &s in csr.successors(i) {
                    let p = &mut pending[s as usize];
                    *p -= 1;
                    if *p == 0 {
                        stack.push(s as usize);
                    }
                }
            }
            start.elapsed()
        })
        .collect();
    median(samples)
}

/// Median time of `RUNS` runs of a prebuilt graph (after one warm-up).
fn prebuilt_runs(pool: &Pool, g: &mut Graph<'_>) -> Duration {
    pool.run_graph(g).expect("graph run");
    median(
        (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                pool.run_graph(g).expect("graph run");
                start.elapsed()
            })
            .collect(),
    )
}

/// `graph_wavefront_down_first`: see the module documentation.
pub(super) fn bench_wavefront_down_first(ours: &Pool, _: &rayon::ThreadPool) {
    let side_len = 1024;
    let n = side_len * side_len;
    let down = Shape::wavefront_down_first(side_len);
    let right = Shape::wavefront(side_len);
    let down_counters: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let right_counters: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let mut down_graph = sixfold_graph(&down, &down_counters);
    let mut right_graph = sixfold_graph(&right, &right_counters);
    {
        let down_cell = std::cell::RefCell::new(&mut down_graph);
        let right_cell = std::cell::RefCell::new(&mut right_graph);
        let (a, b) = compare(
            "graph_wavefront_down_first/1024",
            RUNS,
            side(|| {
                let g = &down_cell;
                move || ours.run_graph(&mut g.borrow_mut()).expect("graph run")
            }),
            side(|| {
                let g = &right_cell;
                move || ours.run_graph(&mut g.borrow_mut()).expect("graph run")
            }),
        );
        println!(
            "#   graph_wavefront_down_first/1024: sixfold both sides, down-first / right-first (target <= 1.3); ns/node {:.1} and {:.1}",
            per_node(a, n),
            per_node(b, n)
        );
    }
    let one = Pool::builder()
        .num_threads(1)
        .build()
        .expect("one-worker pool");
    let down_one = prebuilt_runs(&one, &mut down_graph);
    let right_one = prebuilt_runs(&one, &mut right_graph);
    let down_floor = stack_walk(&down, &down_counters);
    let right_floor = stack_walk(&right, &right_counters);
    let touch = sequential(&down_counters, RUNS);
    println!(
        "#   graph_wavefront_down_first/1024 on 1 worker: ns/node down-first {:.1} (stack walk {:.1}, ratio {:.2}), right-first {:.1} (stack walk {:.1}, ratio {:.2}) (target ratios <= 1.5); the node work alone {:.1}",
        per_node(down_one, n),
        per_node(down_floor, n),
        down_one.as_secs_f64() / down_floor.as_secs_f64(),
        per_node(right_one, n),
        per_node(right_floor, n),
        right_one.as_secs_f64() / right_floor.as_secs_f64(),
        per_node(touch, n),
    );
}
