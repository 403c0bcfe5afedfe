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
//! Two workloads measure idleness instead and print their own columns:
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
#[path = "support/lifecycle.rs"]
mod lifecycle;
#[path = "support/loops.rs"]
mod loops;
#[path = "support/pipelines.rs"]
mod pipelines;
#[path = "support/placement.rs"]
mod placement;

use sixfold::{Pool, TaskRef};
use std::hint::black_box;
use std::sync::Arc;
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

// ---------------------------------------------------------------- idle

/// User + system CPU time of this process so far.
fn process_cpu_time() -> Duration {
    // SAFETY: getrusage fills the zeroed plain C struct we pass.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Submit-to-start latencies of tasks submitted from this thread at a fixed
/// interval, and the process CPU fraction meanwhile.
struct Sporadic {
    cpu_fraction: f64,
    latencies_us: Vec<f64>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// One tiny task every `interval` for `total`, through `submit`.
fn sporadic(
    interval: Duration,
    total: Duration,
    submit: &dyn Fn(Box<dyn FnOnce() + Send>),
) -> Sporadic {
    let count = (total.as_nanos() / interval.as_nanos()) as usize;
    let started: Arc<Vec<AtomicU64>> = Arc::new((0..count).map(|_| AtomicU64::new(0)).collect());
    let origin = Instant::now();
    let mut submitted = Vec::with_capacity(count);
    let cpu_before = process_cpu_time();
    for i in 0..count {
        std::thread::sleep(interval);
        let started = started.clone();
        submitted.push(origin.elapsed());
        submit(Box::new(move || {
            started[i].store(origin.elapsed().as_nanos() as u64, Ordering::Release);
        }));
    }
    // Let the last task run before the clocks stop.
    while started[count - 1].load(Ordering::Acquire) == 0 {
        std::thread::yield_now();
    }
    let wall = origin.elapsed();
    let cpu = process_cpu_time() - cpu_before;
    let mut latencies_us: Vec<f64> = (0..count)
        .map(|i| {
            let start = started[i].load(Ordering::Acquire) as f64;
            (start - submitted[i].as_nanos() as f64).max(0.0) / 1e3
        })
        .collect();
    latencies_us.sort_by(f64::total_cmp);
    Sporadic {
        cpu_fraction: cpu.as_secs_f64() / wall.as_secs_f64(),
        latencies_us,
    }
}

/// `idle_cpu`: fresh 2-thread pools, one tiny task every millisecond for two
/// seconds from this thread.
fn bench_idle_cpu(_: &Pool, _: &rayon::ThreadPool) {
    let interval = Duration::from_millis(1);
    let total = Duration::from_secs(2);
    let ours = {
        let pool = Pool::builder().num_threads(threads()).build().unwrap();
        sporadic(interval, total, &|f| pool.spawn(f))
    };
    let theirs = {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads())
            .build()
            .unwrap();
        sporadic(interval, total, &|f| pool.spawn(f))
    };
    println!(
        "idle_cpu {:.4} {:.4} {:.1} {:.1} {:.1} {:.1} {:.3}",
        ours.cpu_fraction,
        theirs.cpu_fraction,
        percentile(&ours.latencies_us, 0.5),
        percentile(&theirs.latencies_us, 0.5),
        percentile(&ours.latencies_us, 0.99),
        percentile(&theirs.latencies_us, 0.99),
        ours.cpu_fraction / theirs.cpu_fraction
    );
}

/// A wake slower than this came in the slow one of this machine's two
/// wake modes (see `bench_wake_latency`).
const SLOW_WAKE_US: f64 = 100.0;

/// `wake_latency`: the first task after the pool slept for 100 ms; median
/// of several, in microseconds. The task starts on the submitter's CPU on
/// both sides (the kernel's choice), queued behind the submitter's yield
/// loop, in about 20 - 60 us or, some of the time, 100 - 400 us; with half
/// of the wakes or so in the slow mode, the median of nine lands in either
/// and the ratio with it. The `#` line counts each side's slow wakes, the
/// figure to compare between builds.
fn bench_wake_latency(ours: &Pool, theirs: &rayon::ThreadPool) {
    let gap = Duration::from_millis(100);
    let mut a = Vec::new();
    let mut b = Vec::new();
    for _ in 0..9 {
        a.extend(sporadic(gap, gap, &|f| ours.spawn(f)).latencies_us);
        b.extend(sporadic(gap, gap, &|f| theirs.spawn(f)).latencies_us);
    }
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let slow = |wakes: &[f64]| wakes.iter().filter(|&&us| us > SLOW_WAKE_US).count();
    println!(
        "#   wake_latency: wakes over {SLOW_WAKE_US} us: sixfold {} of {}, rayon {} of {}; p25 sixfold {:.1} us, rayon {:.1} us",
        slow(&a),
        a.len(),
        slow(&b),
        b.len(),
        percentile(&a, 0.25),
        percentile(&b, 0.25),
    );
    let (a, b) = (percentile(&a, 0.5), percentile(&b, 0.5));
    println!("wake_latency {a:.1} {b:.1} {:.3}", a / b);
}

/// Busy-wait `d` (a stand-in for a burst's work that no sleep can skip).
fn spin_for(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// `burst_after_idle/2x500us`: the pool sleeps (2 ms, untimed), then one
/// `join` of two 500 us halves from outside: periodic work, as a frame
/// loop or a request handler gives it. The woken workers must end up on
/// both CPUs: with both on one, the halves run one after the other
/// (about 1 ms instead of 0.5).
fn bench_burst_after_idle(ours: &Pool, theirs: &rayon::ThreadPool) {
    let half = Duration::from_micros(500);
    let idle = Duration::from_millis(2);
    let (a, b) = compare(
        "burst_after_idle/2x500us",
        21,
        side(|| {
            std::thread::sleep(idle);
            || {
                ours.install(|| sixfold::join(|| spin_for(half), || spin_for(half)));
            }
        }),
        side(|| {
            std::thread::sleep(idle);
            || {
                theirs.install(|| rayon::join(|| spin_for(half), || spin_for(half)));
            }
        }),
    );
    println!(
        "#   burst_after_idle/2x500us: sixfold {:.3} ms, rayon {:.3} ms; both halves at once take 0.5 ms, one after the other 1.0",
        ms(a),
        ms(b)
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
        ("idle_cpu", bench_idle_cpu),
        ("wake_latency", bench_wake_latency),
        ("burst_after_idle/2x500us", bench_burst_after_idle),
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
