//! sixfold against rayon, workload by workload, in the same process.
//!
//! Each workload runs on sixfold and on rayon alternately, `RUNS` times
//! each after a warm-up, and prints one line:
//!
//! ```text
//! name  sixfold_median_ms  rayon_median_ms  ratio
//! ```
//!
//! with `ratio = sixfold / rayon` (lower is better). Both pools have two
//! threads unless the name says otherwise. Setup that both sides need (the
//! node structures of the chain, for example) is built outside the timed
//! region; what is timed is the scheduling of the work.
//!
//! `cargo bench --bench compare -- NAME` runs only the workloads whose name
//! contains NAME.
//!
//! Two workloads measure idleness instead (`support/idle.rs`) and print
//! their own columns:
//! `idle_cpu <sixfold cpu fraction> <rayon cpu fraction> <sixfold p50 us>
//! <rayon p50 us> <sixfold p99 us> <rayon p99 us> <ratio of cpu fractions>`
//! (one tiny task every millisecond for two seconds, submit-to-start
//! latency) and `wake_latency <sixfold us> <rayon us> <ratio>` (the first
//! task after 100 ms of sleep, median of nine, and a `#` line counting
//! each side's wakes in the machine's slow wake mode).

#[path = "../examples/support/cps_fib.rs"]
mod cps_fib;
#[path = "support/graph_build.rs"]
mod graph_build;
#[path = "support/graph_shapes.rs"]
mod graph_shapes;
#[path = "support/idle.rs"]
mod idle;
#[path = "support/lifecycle.rs"]
mod lifecycle;
#[path = "support/loops.rs"]
mod loops;
#[path = "support/pipelines.rs"]
mod pipelines;
#[path = "support/placement.rs"]
mod placement;
#[path = "../tests/common/process_cpu.rs"]
mod process_cpu;

use sixfold::{Pool, TaskRef};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Threads per pool: 2, or `SIXFOLD_BENCH_THREADS` (for profiling runs).
pub(crate) fn threads() -> usize {
    std::env::var("SIXFOLD_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

/// Median of the samples.
pub(crate) fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A timed workload: `prepare` runs untimed and returns the timed closure.
struct Side<'a> {
    run: Box<dyn FnMut() -> Duration + 'a>,
}

fn side<'a, P, R>(mut prepare: P) -> Side<'a>
where
    P: FnMut() -> R + 'a,
    R: FnOnce(),
{
    Side {
        run: Box::new(move || {
            let timed = prepare();
            let start = Instant::now();
            timed();
            start.elapsed()
        }),
    }
}

/// Alternate the two sides `runs` times (after one warm-up each) and print
/// the line. Returns (sixfold median, rayon median).
fn compare(
    name: &str,
    runs: usize,
    mut ours: Side<'_>,
    mut theirs: Side<'_>,
) -> (Duration, Duration) {
    (ours.run)();
    (theirs.run)();
    let mut a = Vec::with_capacity(runs);
    let mut b = Vec::with_capacity(runs);
    for _ in 0..runs {
        a.push((ours.run)());
        b.push((theirs.run)());
    }
    let (a, b) = (median(a), median(b));
    println!(
        "{name} {:.3} {:.3} {:.3}",
        ms(a),
        ms(b),
        a.as_secs_f64() / b.as_secs_f64()
    );
    (a, b)
}

// ---------------------------------------------------------------- fib_cps

fn fib_rayon(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1), || fib_rayon(n - 2));
    a + b
}

fn fib_join(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = sixfold::join(|| fib_join(n - 1), || fib_join(n - 2));
    a + b
}

fn bench_fib_join(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 30;
    let expect = fib_seq(n);
    compare(
        "fib_join/30",
        9,
        side(|| || assert_eq!(ours.install(|| fib_join(black_box(n))), expect)),
        side(|| || assert_eq!(theirs.install(|| fib_rayon(black_box(n))), expect)),
    );
}

/// `fib_join_cutoff/40`: joins above n = 19, sequential below (speed-up,
/// not overhead).
fn fib_join_cutoff(n: u64) -> u64 {
    if n < 20 {
        return fib_seq(n);
    }
    let (a, b) = sixfold::join(|| fib_join_cutoff(n - 1), || fib_join_cutoff(n - 2));
    a + b
}

fn fib_rayon_cutoff(n: u64) -> u64 {
    if n < 20 {
        return fib_seq(n);
    }
    let (a, b) = rayon::join(|| fib_rayon_cutoff(n - 1), || fib_rayon_cutoff(n - 2));
    a + b
}

fn bench_fib_join_cutoff(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 40;
    let expect = 102_334_155;
    compare(
        "fib_join_cutoff/40",
        5,
        side(|| || assert_eq!(ours.install(|| fib_join_cutoff(black_box(n))), expect)),
        side(|| || assert_eq!(theirs.install(|| fib_rayon_cutoff(black_box(n))), expect)),
    );
}

fn fib_seq(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_seq(n - 1) + fib_seq(n - 2)
    }
}

fn bench_fib_cps(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 30;
    let expect = fib_seq(n);
    compare(
        "fib_cps/30",
        9,
        side(|| || assert_eq!(cps_fib::fib(ours, black_box(n)), expect)),
        side(|| || assert_eq!(theirs.install(|| fib_rayon(black_box(n))), expect)),
    );
}

/// `fib_cps/30/1worker`: the same on pools of one worker each.
fn bench_fib_cps_one_worker(_: &Pool, _: &rayon::ThreadPool) {
    let ours = Pool::builder()
        .num_threads(1)
        .build()
        .expect("sixfold pool");
    let theirs = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("rayon pool");
    let n = 30;
    let expect = fib_seq(n);
    compare(
        "fib_cps/30/1worker",
        9,
        side(|| || assert_eq!(cps_fib::fib(&ours, black_box(n)), expect)),
        side(|| || assert_eq!(theirs.install(|| fib_rayon(black_box(n))), expect)),
    );
}

// ---------------------------------------------------------------- chain

/// A node of the rayon side's hand-made task graph.
struct RayonNode {
    pending: AtomicUsize,
    in_degree: usize,
    successors: Vec<usize>,
}

fn rayon_graph_reset(nodes: &[RayonNode]) {
    for node in nodes {
        node.pending.store(node.in_degree, Ordering::Relaxed);
    }
}

/// Run node `i` of the rayon graph and spawn the successors it readies.
fn rayon_graph_visit<'s>(s: &rayon::Scope<'s>, nodes: &'s [RayonNode], i: usize) {
    tick();
    for &succ in &nodes[i].successors {
        if nodes[succ].pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            s.spawn(move |s| rayon_graph_visit(s, nodes, succ));
        }
    }
}

fn rayon_chain(n: usize) -> Vec<RayonNode> {
    (0..n)
        .map(|i| RayonNode {
            pending: AtomicUsize::new(0),
            in_degree: usize::from(i > 0),
            successors: if i + 1 < n { vec![i + 1] } else { vec![] },
        })
        .collect()
}

/// The counter every benchmark task bumps: a static, so that neither side
/// pays for reference counting in its closures.
static TICKS: AtomicU64 = AtomicU64::new(0);

fn tick() {
    black_box(&TICKS).fetch_add(1, Ordering::Relaxed);
}

fn ticks() -> u64 {
    TICKS.load(Ordering::Relaxed)
}

fn sixfold_chain(n: usize) -> Vec<TaskRef> {
    let mut nodes: Vec<TaskRef> = (0..n).map(|_| TaskRef::from_fn(|_| tick())).collect();
    for i in 1..n {
        let (head, tail) = nodes.split_at_mut(i);
        head[i - 1].precede(&tail[0]).unwrap();
    }
    nodes
}

fn bench_chain(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 1_000_000;
    let rayon_nodes = rayon_chain(n);
    compare(
        "chain/1000000",
        7,
        side(|| {
            let nodes = sixfold_chain(n);
            move || {
                let before = ticks();
                ours.run(nodes);
                assert_eq!(ticks() - before, n as u64);
            }
        }),
        side(|| {
            rayon_graph_reset(&rayon_nodes);
            let nodes = &rayon_nodes;
            move || {
                let before = ticks();
                theirs.scope(|s| rayon_graph_visit(s, nodes, 0));
                assert_eq!(ticks() - before, n as u64);
            }
        }),
    );
}

// ---------------------------------------------------------------- flat

fn bench_spawn_flat(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 1_000_000u64;
    compare(
        "spawn_flat/1000000",
        7,
        side(|| {
            || {
                let before = ticks();
                ours.run(TaskRef::from_fn(move |cx| {
                    for _ in 0..n {
                        cx.spawn(TaskRef::from_fn(|_| tick()));
                    }
                }));
                assert_eq!(ticks() - before, n);
            }
        }),
        side(|| {
            || {
                let before = ticks();
                theirs.scope(|s| {
                    for _ in 0..n {
                        s.spawn(|_| tick());
                    }
                });
                assert_eq!(ticks() - before, n);
            }
        }),
    );
}

fn bench_enqueue_flat(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 1_000_000u64;
    compare(
        "enqueue_flat/1000000",
        7,
        side(|| {
            || {
                let before = ticks();
                ours.run(TaskRef::from_fn(move |cx| {
                    for _ in 0..n {
                        cx.enqueue(TaskRef::from_fn(|_| tick()));
                    }
                }));
                assert_eq!(ticks() - before, n);
            }
        }),
        side(|| {
            || {
                let before = ticks();
                theirs.scope_fifo(|s| {
                    for _ in 0..n {
                        s.spawn_fifo(|_| tick());
                    }
                });
                assert_eq!(ticks() - before, n);
            }
        }),
    );
}

// ---------------------------------------------------------------- scopes

/// A binary tree of spawns, 2^(depth+1) - 1 tasks.
fn sixfold_tree<'s>(s: &sixfold::Scope<'s>, depth: u32) {
    tick();
    if depth > 0 {
        s.spawn(move |s| sixfold_tree(s, depth - 1));
        s.spawn(move |s| sixfold_tree(s, depth - 1));
    }
}

fn rayon_tree<'s>(s: &rayon::Scope<'s>, depth: u32) {
    tick();
    if depth > 0 {
        s.spawn(move |s| rayon_tree(s, depth - 1));
        s.spawn(move |s| rayon_tree(s, depth - 1));
    }
}

/// `scope_tree/1000000`: 2^20 - 1 = 1,048,575 spawns in a binary tree.
fn bench_scope_tree(ours: &Pool, theirs: &rayon::ThreadPool) {
    let depth = 19;
    let tasks = (1u64 << (depth + 1)) - 1;
    compare(
        "scope_tree/1000000",
        7,
        side(|| {
            || {
                let before = ticks();
                ours.scope(|s| sixfold_tree(s, depth));
                assert_eq!(ticks() - before, tasks);
            }
        }),
        side(|| {
            || {
                let before = ticks();
                theirs.scope(|s| rayon_tree(s, depth));
                assert_eq!(ticks() - before, tasks);
            }
        }),
    );
}

fn sixfold_fifo_tree<'s>(s: &sixfold::ScopeFifo<'s>, depth: u32) {
    tick();
    if depth > 0 {
        s.spawn_fifo(move |s| sixfold_fifo_tree(s, depth - 1));
        s.spawn_fifo(move |s| sixfold_fifo_tree(s, depth - 1));
    }
}

fn rayon_fifo_tree<'s>(s: &rayon::ScopeFifo<'s>, depth: u32) {
    tick();
    if depth > 0 {
        s.spawn_fifo(move |s| rayon_fifo_tree(s, depth - 1));
        s.spawn_fifo(move |s| rayon_fifo_tree(s, depth - 1));
    }
}

/// `scope_fifo_tree/1000000`: the same tree through FIFO scopes.
fn bench_scope_fifo_tree(ours: &Pool, theirs: &rayon::ThreadPool) {
    let depth = 19;
    let tasks = (1u64 << (depth + 1)) - 1;
    compare(
        "scope_fifo_tree/1000000",
        7,
        side(|| {
            || {
                let before = ticks();
                ours.scope_fifo(|s| sixfold_fifo_tree(s, depth));
                assert_eq!(ticks() - before, tasks);
            }
        }),
        side(|| {
            || {
                let before = ticks();
                theirs.scope_fifo(|s| rayon_fifo_tree(s, depth));
                assert_eq!(ticks() - before, tasks);
            }
        }),
    );
}

/// `scope_fifo_flat/1000000`: one task spawns a million FIFO jobs in a
/// `scope_fifo` (the body runs on a worker: both sides `install` first).
fn bench_scope_fifo_flat(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 1_000_000u64;
    compare(
        "scope_fifo_flat/1000000",
        7,
        side(|| {
            || {
                let before = ticks();
                ours.scope_fifo(|s| {
                    for _ in 0..n {
                        s.spawn_fifo(|_| tick());
                    }
                });
                assert_eq!(ticks() - before, n);
            }
        }),
        side(|| {
            || {
                let before = ticks();
                theirs.scope_fifo(|s| {
                    for _ in 0..n {
                        s.spawn_fifo(|_| tick());
                    }
                });
                assert_eq!(ticks() - before, n);
            }
        }),
    );
}

/// Wait until `ticks()` reached `target` (for detached `'static` tasks).
fn wait_ticks(target: u64) {
    while ticks() < target {
        std::thread::yield_now();
    }
}

/// `spawn_fifo_flat/1000000`: a worker spawns a million `'static` tasks
/// in FIFO order (`Pool::spawn_fifo` vs `rayon::spawn_fifo`).
fn bench_spawn_fifo_flat(ours: &Pool, theirs: &rayon::ThreadPool) {
    let n = 1_000_000u64;
    compare(
        "spawn_fifo_flat/1000000",
        7,
        side(|| {
            || {
                let target = ticks() + n;
                ours.install(|| {
                    for _ in 0..n {
                        ours.spawn_fifo(tick);
                    }
                });
                wait_ticks(target);
            }
        }),
        side(|| {
            || {
                let target = ticks() + n;
                theirs.install(|| {
                    for _ in 0..n {
                        rayon::spawn_fifo(tick);
                    }
                });
                wait_ticks(target);
            }
        }),
    );
}

type Bench = fn(&Pool, &rayon::ThreadPool);

fn main() {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let ours = Pool::builder()
        .num_threads(threads())
        .build()
        .expect("sixfold pool");
    let theirs = rayon::ThreadPoolBuilder::new()
        .num_threads(threads())
        .build()
        .expect("rayon pool");
    let benches: [(&str, Bench); 42] = [
        ("fib_cps/30", bench_fib_cps),
        ("fib_cps/30/1worker", bench_fib_cps_one_worker),
        ("fib_join/30", bench_fib_join),
        ("fib_join_cutoff/40", bench_fib_join_cutoff),
        ("chain/1000000", bench_chain),
        ("spawn_flat/1000000", bench_spawn_flat),
        ("enqueue_flat/1000000", bench_enqueue_flat),
        ("scope_tree/1000000", bench_scope_tree),
        ("scope_fifo_tree/1000000", bench_scope_fifo_tree),
        ("scope_fifo_flat/1000000", bench_scope_fifo_flat),
        ("spawn_fifo_flat/1000000", bench_spawn_fifo_flat),
        ("graph_chain/1000000", graph_shapes::bench_graph_chain),
        (
            "graph_binary_tree/20",
            graph_shapes::bench_graph_binary_tree,
        ),
        ("graph_wavefront/1024", graph_shapes::bench_graph_wavefront),
        (
            "graph_wavefront_work/1024",
            graph_shapes::bench_graph_wavefront_work,
        ),
        (
            "graph_embarrassing/1000000",
            graph_shapes::bench_graph_embarrassing,
        ),
        ("graph_build/chain", graph_build::bench_build_chain),
        (
            "graph_build/binary_tree",
            graph_build::bench_build_binary_tree,
        ),
        ("graph_build/wavefront", graph_build::bench_build_wavefront),
        (
            "graph_build/embarrassing",
            graph_build::bench_build_embarrassing,
        ),
        (
            "graph_build_reverse/chain",
            graph_build::bench_build_reverse,
        ),
        (
            "graph_wavefront_down_first/1024",
            graph_build::bench_wavefront_down_first,
        ),
        (
            "graph_wavefront_replay/1024",
            placement::bench_graph_wavefront_replay,
        ),
        ("pipeline_empty/1000000", pipelines::bench_pipeline_empty),
        ("pipeline_work/100000", pipelines::bench_pipeline_work),
        (
            "pipeline_work_floor/100000",
            pipelines::bench_pipeline_work_floor,
        ),
        (
            "pipeline_many_tokens/100000",
            pipelines::bench_pipeline_many_tokens,
        ),
        ("pipeline_pinned", pipelines::bench_pipeline_pinned),
        ("pipeline_idle_cpu", pipelines::bench_pipeline_idle),
        ("loop_saxpy/10000000", loops::bench_saxpy),
        ("loop_fine/1000000", loops::bench_fine),
        ("loop_unbalanced/100000", loops::bench_unbalanced),
        ("reduce_sum/10000000", loops::bench_reduce_sum),
        (
            "reduce_deterministic/10000000",
            loops::bench_reduce_deterministic,
        ),
        ("matmul/512", loops::bench_matmul),
        ("stencil_replay/98304x2000", loops::bench_stencil_replay),
        ("loop_empty_call", loops::bench_empty_call),
        ("trace_cost", placement::bench_trace_cost),
        ("idle_cpu", idle::bench_idle_cpu),
        ("wake_latency", idle::bench_wake_latency),
        ("burst_after_idle/2x500us", idle::bench_burst_after_idle),
        ("pool_lifecycle", lifecycle::bench_pool_lifecycle),
    ];
    println!(
        "# name sixfold_ms rayon_ms ratio(sixfold/rayon)  [{} threads, medians]",
        threads()
    );
    for (name, bench) in benches {
        if filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())) {
            bench(&ours, &theirs);
        }
    }
}
