//! The Taskflow benchmark shapes, as prebuilt `sixfold::Graph`s against
//! the best rayon program: the graph in a CSR array with atomic
//! predecessor counters, run in a `rayon::scope` that spawns every ready
//! successor but the last and runs that one inline (the spawn-only
//! program's cost is printed on the comment line).
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
//! topological order on one thread. The binary tree and the wavefront also
//! print `<shape>_two_vs_one`: the prebuilt graph on the bench's pool
//! against a pool of one worker (two workers must never be slower), and
//! `<shape>_two_vs_one_rayon`, the same for rayon's program.

use super::{Side, compare, ms, side};
use sixfold::{Graph, Pool};
use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A shape: node count and edges, nodes numbered in a topological order.
pub(super) struct Shape {
    pub(super) nodes: usize,
    pub(super) edges: Vec<(usize, usize)>,
}

impl Shape {
    pub(super) fn chain(n: usize) -> Shape {
        Shape {
            nodes: n,
            edges: (1..n).map(|i| (i - 1, i)).collect(),
        }
    }

    /// A complete binary tree of `depth` levels, each node before its two
    /// children (numbered breadth first).
    pub(super) fn binary_tree(depth: u32) -> Shape {
        let n = (1usize << depth) - 1;
        Shape {
            nodes: n,
            edges: (1..n).map(|i| ((i - 1) / 2, i)).collect(),
        }
    }

    /// A `side x side` grid, each cell after its left and upper neighbour.
    pub(super) fn wavefront(side: usize) -> Shape {
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

    /// The same grid, each cell's edges added "down, then right" (the
    /// other shapes add a cell's right edge before its down edge).
    pub(super) fn wavefront_down_first(side: usize) -> Shape {
        let mut edges = Vec::with_capacity(2 * side * side);
        for i in 0..side {
            for j in 0..side {
                let cell = i * side + j;
                if i + 1 < side {
                    edges.push((cell, cell + side));
                }
                if j + 1 < side {
                    edges.push((cell, cell + 1));
                }
            }
        }
        Shape {
            nodes: side * side,
            edges,
        }
    }

    /// One root, `n` independent nodes, one sink.
    pub(super) fn embarrassing(n: usize) -> Shape {
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
pub(super) fn work(counter: &AtomicU64) {
    let c = black_box(counter);
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// The shape as a sixfold graph, sized up front as the rayon side sizes
/// its arrays.
pub(super) fn sixfold_graph<'a>(shape: &Shape, counters: &'a [AtomicU64]) -> Graph<'a> {
    let mut g = Graph::with_capacity(shape.nodes, shape.edges.len());
    let ids: Vec<_> = counters.iter().map(|c| g.add(move || work(c))).collect();
    for &(a, b) in &shape.edges {
        g.precede(ids[a], ids[b]).expect("the shapes are acyclic");
    }
    g
}

/// The rayon side: the graph in compressed sparse rows, with an atomic
/// count of pending predecessors per node.
pub(super) struct Csr {
    offsets: Vec<u32>,
    targets: Vec<u32>,
    in_degree: Vec<u32>,
    pending: Vec<AtomicU32>,
}

impl Csr {
    /// What a rayon user writes: count, prefix-sum, scatter.
    pub(super) fn new(shape: &Shape) -> Csr {
        let n = shape.nodes;
        let mut offsets = vec![0u32; n + 1];
        let mut in_degree = vec![0u32; n];
        for &(a, b) in &shape.edges {
            offsets[a + 1] += 1;
            in_degree[b] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut targets = vec![0u32; shape.edges.len()];
        for &(a, b) in &shape.edges {
            targets[fill[a] as usize] = b as u32;
            fill[a] += 1;
        }
        let pending = in_degree.iter().map(|&d| AtomicU32::new(d)).collect();
        Csr {
            offsets,
            targets,
            in_degree,
            pending,
        }
    }

    pub(super) fn reset(&self) {
        for (p, &d) in self.pending.iter().zip(&self.in_degree) {
            p.store(d, Ordering::Relaxed);
        }
    }

    pub(super) fn roots(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.in_degree.len()).filter(|&i| self.in_degree[i] == 0)
    }

    pub(super) fn successors(&self, i: usize) -> &[u32] {
        &self.targets[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// Run the graph on `pool` from its roots.
    pub(super) fn run(&self, pool: &rayon::ThreadPool, counters: &[AtomicU64], inline: bool) {
        pool.scope(|s| {
            for r in self.roots() {
                s.spawn(move |s| self.visit(s, counters, r, inline));
            }
        });
    }

    /// Run node `i` and what it readies. With `inline`, the best program a
    /// rayon user writes (as oneTBB's flow graph and Taskflow do): spawn
    /// every ready successor but the last and go on with that one here.
    /// Without, spawn them all.
    fn visit<'s>(
        &'s self,
        s: &rayon::Scope<'s>,
        counters: &'s [AtomicU64],
        i: usize,
        inline: bool,
    ) {
        let mut at = i;
        loop {
            work(&counters[at]);
            let mut next = None;
            for &succ in self.successors(at) {
                if self.pending[succ as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
                    let succ = succ as usize;
                    if !inline {
                        s.spawn(move |s| self.visit(s, counters, succ, inline));
                    } else if let Some(earlier) = next.replace(succ) {
                        s.spawn(move |s| self.visit(s, counters, earlier, inline));
                    }
                }
            }
            match next {
                Some(n) => at = n,
                None => return,
            }
        }
    }
}

/// The floor: the node work in topological order on this thread, median of
/// `runs`.
pub(super) fn sequential(counters: &[AtomicU64], runs: usize) -> Duration {
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

/// Median times of `time` on pool `one` and on pool `two`, alternated
/// `runs` times after a warm-up on `one`.
fn one_and_two<P>(
    runs: usize,
    one: &P,
    two: &P,
    mut time: impl FnMut(&P) -> Duration,
) -> (Duration, Duration) {
    time(one);
    let (mut on_one, mut on_two) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        on_one.push(time(one));
        on_two.push(time(two));
    }
    (super::median(on_one), super::median(on_two))
}

/// `two_vs_one`: also time the prebuilt graph on a pool of one worker
/// (alternating with `ours`), and print the two-worker / one-worker ratio.
fn bench_shape(
    name: &str,
    shape: Shape,
    ours: &Pool,
    theirs: &rayon::ThreadPool,
    two_vs_one: bool,
) {
    const RUNS: usize = 7;
    let n = shape.nodes;
    let ours_counters: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let theirs_counters: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let mut graph = sixfold_graph(&shape, &ours_counters);
    let csr = Csr::new(&shape);
    let graph = std::cell::RefCell::new(&mut graph);
    let ours_side: Side<'_> = side(|| {
        let graph = &graph;
        move || {
            ours.run_graph(&mut graph.borrow_mut()).expect("graph run");
        }
    });
    let theirs_side: Side<'_> = side(|| {
        csr.reset();
        let (csr, counters) = (&csr, &theirs_counters);
        move || csr.run(theirs, counters, true)
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
    // The spawn-only rayon program, for reference.
    let spawn_only = super::median(
        (0..RUNS)
            .map(|_| {
                csr.reset();
                let start = Instant::now();
                csr.run(theirs, &theirs_counters, false);
                start.elapsed()
            })
            .collect(),
    );
    let floor = sequential(&ours_counters, RUNS);
    let per_node = |d: Duration| d.as_secs_f64() * 1e9 / n as f64;
    println!(
        "#   {name}: ns/node sixfold {:.1}, rayon (last ready inline) {:.1}, rayon (spawn only) {:.1}, sequential {:.1} ({:.3} ms); sixfold/sequential {:.1}",
        per_node(a),
        per_node(b),
        per_node(spawn_only),
        per_node(floor),
        ms(floor),
        a.as_secs_f64() / floor.as_secs_f64()
    );
    if two_vs_one {
        let one = Pool::builder()
            .num_threads(1)
            .build()
            .expect("sixfold pool");
        let mut graph = graph.borrow_mut();
        let (on_one, on_two) = one_and_two(RUNS, &one, ours, |pool| {
            let start = Instant::now();
            pool.run_graph(&mut graph).expect("graph run");
            start.elapsed()
        });
        // The same question for rayon's program: does this shape gain from
        // a second worker on this machine at all?
        let rayon_one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("rayon pool");
        let (rayon_on_one, rayon_on_two) = one_and_two(RUNS, &rayon_one, theirs, |pool| {
            csr.reset();
            let start = Instant::now();
            csr.run(pool, &theirs_counters, true);
            start.elapsed()
        });
        let short = name.split('/').next().unwrap_or(name);
        println!(
            "{short}_two_vs_one {:.3}",
            on_two.as_secs_f64() / on_one.as_secs_f64()
        );
        println!(
            "#   {short}_two_vs_one: the prebuilt graph on {} workers {:.3} ms, on one worker {:.3} ms (target <= 1.0: two workers never slower than one)",
            super::threads(),
            ms(on_two),
            ms(on_one)
        );
        println!(
            "{short}_two_vs_one_rayon {:.3}",
            rayon_on_two.as_secs_f64() / rayon_on_one.as_secs_f64()
        );
        println!(
            "#   {short}_two_vs_one_rayon: rayon's program on {} workers {:.3} ms, on one {:.3} ms (no target: whether the shape gains from a second core here)",
            super::threads(),
            ms(rayon_on_two),
            ms(rayon_on_one)
        );
    }
}

/// `graph_chain/1000000`.
pub(super) fn bench_graph_chain(ours: &Pool, theirs: &rayon::ThreadPool) {
    bench_shape(
        "graph_chain/1000000",
        Shape::chain(1_000_000),
        ours,
        theirs,
        false,
    );
}

/// `graph_binary_tree/20`: 2^20 - 1 nodes.
pub(super) fn bench_graph_binary_tree(ours: &Pool, theirs: &rayon::ThreadPool) {
    bench_shape(
        "graph_binary_tree/20",
        Shape::binary_tree(20),
        ours,
        theirs,
        true,
    );
}

/// `graph_wavefront/1024`: a 1024 x 1024 grid.
pub(super) fn bench_graph_wavefront(ours: &Pool, theirs: &rayon::ThreadPool) {
    bench_shape(
        "graph_wavefront/1024",
        Shape::wavefront(1024),
        ours,
        theirs,
        true,
    );
}

/// About 10 ns of a node's work: a counter bump behind 8 dependent rounds
/// of xorshift.
#[inline(always)]
fn ten_ns_of_work(counter: &AtomicU64) {
    let mut v = black_box(counter.load(Ordering::Relaxed)) | 1;
    for _ in 0..8 {
        v ^= v << 13;
        v ^= v >> 7;
        v ^= v << 17;
    }
    black_box(v);
    work(counter);
}

/// `graph_wavefront_work/1024`: the 1024 x 1024 grid with about 10 ns of
/// work a node, on the bench's pool against a pool of one worker (sixfold
/// both sides). With near-empty nodes (`graph_wavefront_two_vs_one`) a
/// second worker brings nothing: a node with two predecessors costs a
/// locked decrement when two workers may race for it, which a pool of one
/// does with a plain load and store, and that instruction is most of such
/// a node's cost. This line shows what two workers make of the same shape
/// once a node carries work of its own.
pub(super) fn bench_graph_wavefront_work(ours: &Pool, _: &rayon::ThreadPool) {
    const RUNS: usize = 7;
    let shape = Shape::wavefront(1024);
    let counters: Vec<AtomicU64> = (0..shape.nodes).map(|_| AtomicU64::new(0)).collect();
    let mut graph = Graph::with_capacity(shape.nodes, shape.edges.len());
    let ids: Vec<_> = counters
        .iter()
        .map(|c| graph.add(move || ten_ns_of_work(c)))
        .collect();
    for &(a, b) in &shape.edges {
        graph.precede(ids[a], ids[b]).expect("the grid is acyclic");
    }
    let one = Pool::builder()
        .num_threads(1)
        .build()
        .expect("sixfold pool");
    let (on_one, on_two) = one_and_two(RUNS, &one, ours, |pool| {
        let start = Instant::now();
        pool.run_graph(&mut graph).expect("graph run");
        start.elapsed()
    });
    drop(graph);
    // A warm-up and RUNS timed runs on each pool.
    let expected = 2 * RUNS as u64 + 1;
    assert!(
        counters
            .iter()
            .all(|c| c.load(Ordering::Relaxed) == expected)
    );
    println!(
        "graph_wavefront_work_two_vs_one {:.3}",
        on_two.as_secs_f64() / on_one.as_secs_f64()
    );
    println!(
        "#   graph_wavefront_work_two_vs_one: the grid with ~10 ns a node on {} workers {:.3} ms, on one worker {:.3} ms (no target: what a second worker gains once nodes carry work)",
        super::threads(),
        ms(on_two),
        ms(on_one)
    );
}

/// `graph_embarrassing/1000000`: one root, a million nodes, one sink.
pub(super) fn bench_graph_embarrassing(ours: &Pool, theirs: &rayon::ThreadPool) {
    bench_shape(
        "graph_embarrassing/1000000",
        Shape::embarrassing(1_000_000),
        ours,
        theirs,
        false,
    );
}
