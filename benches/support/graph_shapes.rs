//! The Taskflow benchmark shapes, as `sixfold::Graph`s against rayon with
//! atomic predecessor counters in a `rayon::scope`.
//!
//! Each node's work is a trivial increment of its own counter (a relaxed
//! load and store: one writer per node and run, so no read-modify-write and
//! no shared cache line to fight over). Both sides build their graph once,
//! outside the timed region, and reset nothing inside it: the rayon side's
//! counters are reset untimed before each run, sixfold's graph resets its
//! own counts as it runs. After the timed runs, every node's counter is
//! checked against the number of runs.
//!
//! Each shape prints the usual line, then a comment line with the cost per
//! node of both sides and of the sequential floor: the same node work in
//! topological order on one thread.

use super::{Side, compare, ms, side};
use sixfold::{Graph, Pool};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A shape: node count and edges, nodes numbered in a topological order.
struct Shape {
    nodes: usize,
    edges: Vec<(usize, usize)>,
}

impl Shape {
    fn chain(n: usize) -> Shape {
        Shape {
            nodes: n,
            edges: (1..n).map(|i| (i - 1, i)).collect(),
        }
    }

    /// A complete binary tree of `depth` levels, each node before its two
    /// children (numbered breadth first).
    fn binary_tree(depth: u32) -> Shape {
        let n = (1usize << depth) - 1;
        Shape {
            nodes: n,
            edges: (1..n).map(|i| ((i - 1) / 2, i)).collect(),
        }
    }

    /// A `side x side` grid, each cell after its left and upper neighbour.
    fn wavefront(side: usize) -> Shape {
        let mut edges = Vec::with_capacity(2 * side * side);
        for i in 0..side {
            for j in 0..side {
                let cell = i * side + j;
                if j > 0 {
                    edges.push((cell - 1, cell));
                }
                if i > 0 {
                    edges.push((cell - side, cell));
                }
            }
        }
        Shape {
            nodes: side * side,
            edges,
        }
    }

    /// One root, `n` independent nodes, one sink.
    fn embarrassing(n: usize) -> Shape {
        let mut edges = Vec::with_capacity(2 * n);
        for i in 1..=n {
            edges.push((0, i));
            edges.push((i, n + 1));
        }
        Shape {
            nodes: n + 2,
            edges,
        }
    }
}

/// A node's work: bump its own counter.
#[inline(always)]
fn work(counter: &AtomicU64) {
    let c = black_box(counter);
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

fn sixfold_graph<'a>(shape: &Shape, counters: &'a [AtomicU64]) -> Graph<'a> {
    let mut g = Graph::new();
    let ids: Vec<_> = counters.iter().map(|c| g.add(move || work(c))).collect();
    for &(a, b) in &shape.edges {
        g.precede(ids[a], ids[b]).expect("the shapes are acyclic");
    }
    g
}

/// The rayon side: a node with an atomic count of pending predecessors.
struct RayonNode {
    pending: AtomicUsize,
    in_degree: usize,
    successors: Vec<usize>,
}

fn rayon_graph(shape: &Shape) -> Vec<RayonNode> {
    let mut nodes: Vec<RayonNode> = (0..shape.nodes)
        .map(|_| RayonNode {
            pending: AtomicUsize::new(0),
            in_degree: 0,
            successors: Vec::new(),
        })
        .collect();
    for &(a, b) in &shape.edges {
        nodes[a].successors.push(b);
        nodes[b].in_degree += 1;
    }
    nodes
}

fn rayon_reset(nodes: &[RayonNode]) {
    for node in nodes {
        node.pending.store(node.in_degree, Ordering::Relaxed);
    }
}

fn rayon_visit<'s>(
    s: &rayon::Scope<'s>,
    nodes: &'s [RayonNode],
    counters: &'s [AtomicU64],
    i: usize,
) {
    work(&counters[i]);
    for &succ in &nodes[i].successors {
        if nodes[succ].pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            s.spawn(move |s| rayon_visit(s, nodes, counters, succ));
        }
    }
}

/// The floor: the node work in topological order on this thread, median of
/// `runs`.
fn sequential(counters: &[AtomicU64], runs: usize) -> Duration {
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            for c in counters {
                work(c);
            }
            start.elapsed()
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

fn bench_shape(name: &str, shape: Shape, ours: &Pool, theirs: &rayon::ThreadPool) {
    const RUNS: usize = 7;
    let n = shape.nodes;
    let ours_counters: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let theirs_counters: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let mut graph = sixfold_graph(&shape, &ours_counters);
    let rayon_nodes = rayon_graph(&shape);
    let roots: Vec<usize> = (0..n).filter(|&i| rayon_nodes[i].in_degree == 0).collect();
    let graph = std::cell::RefCell::new(&mut graph);
    let ours_side: Side<'_> = side(|| {
        let graph = &graph;
        move || {
            ours.run_graph(&mut graph.borrow_mut()).expect("graph run");
        }
    });
    let theirs_side: Side<'_> = side(|| {
        rayon_reset(&rayon_nodes);
        let (nodes, counters, roots) = (&rayon_nodes, &theirs_counters, &roots);
        move || {
            theirs.scope(|s| {
                for &r in roots {
                    s.spawn(move |s| rayon_visit(s, nodes, counters, r));
                }
            });
        }
    });
    let (a, b) = compare(name, RUNS, ours_side, theirs_side);
    // One warm-up and RUNS timed runs on each side: every node ran that often.
    let expected = RUNS as u64 + 1;
    assert!(
        ours_counters
            .iter()
            .all(|c| c.load(Ordering::Relaxed) == expected)
    );
    assert!(
        theirs_counters
            .iter()
            .all(|c| c.load(Ordering::Relaxed) == expected)
    );
    let floor = sequential(&ours_counters, RUNS);
    let per_node = |d: Duration| d.as_secs_f64() * 1e9 / n as f64;
    println!(
        "#   {name}: ns/node sixfold {:.1}, rayon {:.1}, sequential {:.1} ({:.3} ms); sixfold/sequential {:.1}",
        per_node(a),
        per_node(b),
        per_node(floor),
        ms(floor),
        a.as_secs_f64() / floor.as_secs_f64()
    );
}

/// `graph_chain/1000000`.
pub(super) fn bench_graph_chain(ours: &Pool, theirs: &rayon::ThreadPool) {
    bench_shape("graph_chain/1000000", Shape::chain(1_000_000), ours, theirs);
}

/// `graph_binary_tree/20`: 2^20 - 1 nodes.
pub(super) fn bench_graph_binary_tree(ours: &Pool, theirs: &rayon::ThreadPool) {
    bench_shape("graph_binary_tree/20", Shape::binary_tree(20), ours, theirs);
}

/// `graph_wavefront/1024`: a 1024 x 1024 grid.
pub(super) fn bench_graph_wavefront(ours: &Pool, theirs: &rayon::ThreadPool) {
    bench_shape("graph_wavefront/1024", Shape::wavefront(1024), ours, theirs);
}

/// `graph_embarrassing/1000000`: one root, a million nodes, one sink.
pub(super) fn bench_graph_embarrassing(ours: &Pool, theirs: &rayon::ThreadPool) {
    bench_shape(
        "graph_embarrassing/1000000",
        Shape::embarrassing(1_000_000),
        ours,
        theirs,
    );
}
