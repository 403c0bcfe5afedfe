//! A graph run allocates nothing once warm: not from a thread outside the
//! pool, not from inside a worker.
//!
//! Graph nodes run on the pool's workers, so the counting allocator counts
//! on every thread while `COUNTING` is on. That would also count whatever
//! another test did meanwhile, so this binary has a single `#[test]`.
//!
//! The first allocation counted is captured with a backtrace, so a failure
//! says what allocated instead of only how often.

use sixfold::{Graph, NodeId, Pool};
use std::alloc::{GlobalAlloc, Layout, System};
use std::backtrace::Backtrace;
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

struct CountingAllocator;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
/// The first counted allocation: its thread, size and where it came from.
static FIRST: Mutex<Option<(String, usize, Backtrace)>> = Mutex::new(None);
static CAPTURED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while this thread records an allocation: capturing allocates,
    /// and those allocations must neither recurse nor count.
    static RECORDING: Cell<bool> = const { Cell::new(false) };
}

fn record(layout: Layout) {
    let Ok(reentered) = RECORDING.try_with(|r| r.replace(true)) else {
        // Thread-locals already torn down (a thread exiting): count only.
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        return;
    };
    if reentered {
        return;
    }
    ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
    if !CAPTURED.swap(true, Ordering::SeqCst) {
        // Only the frames here; symbols are resolved when printed, after
        // counting stopped.
        let trace = Backtrace::force_capture();
        let thread = std::thread::current()
            .name()
            .unwrap_or("<unnamed>")
            .to_string();
        *FIRST.lock().unwrap() = Some((thread, layout.size(), trace));
    }
    RECORDING.with(|r| r.set(false));
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::SeqCst) {
            record(layout);
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::SeqCst) {
            record(layout);
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::SeqCst) {
            record(layout);
        }
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Count the allocations of every thread during `f`.
fn count_allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    f();
    COUNTING.store(false, Ordering::SeqCst);
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

/// What allocated first, for the failure message.
fn first_allocation() -> String {
    match FIRST.lock().unwrap().take() {
        Some((thread, size, trace)) => {
            format!("first: {size} bytes on thread {thread}, at\n{trace}")
        }
        None => "no backtrace captured".to_string(),
    }
}

const RUNS: usize = 100;

/// A few hundred spawn nodes, with fan-out at most 8 so that deques stay
/// within their initial buffers: one root, four chains of 25, then 20
/// layers of 8 nodes where each node waits for 2 or 3 of the layer before
/// (diamonds), then a sink. Every node bumps `ran`.
fn build<'a>(ran: &'a AtomicUsize) -> Graph<'a> {
    let mut g = Graph::new();
    let node = |g: &mut Graph<'a>| {
        g.add(move || {
            ran.fetch_add(1, Ordering::Relaxed);
        })
    };
    let root = node(&mut g);
    let mut chain_ends = Vec::new();
    for _ in 0..4 {
        let mut prev = root;
        for _ in 0..25 {
            let next = node(&mut g);
            g.precede(prev, next).unwrap();
            prev = next;
        }
        chain_ends.push(prev);
    }
    let mut layer: Vec<NodeId> = (0..8).map(|_| node(&mut g)).collect();
    for (k, &n) in layer.iter().enumerate() {
        g.precede(chain_ends[k % 4], n).unwrap();
    }
    for _ in 0..20 {
        let next: Vec<NodeId> = (0..8).map(|_| node(&mut g)).collect();
        for (k, &n) in next.iter().enumerate() {
            g.precede(layer[k], n).unwrap();
            g.precede(layer[(k + 1) % 8], n).unwrap();
            if k % 2 == 0 {
                g.precede(layer[(k + 3) % 8], n).unwrap();
            }
        }
        layer = next;
    }
    let sink = node(&mut g);
    for &n in &layer {
        g.precede(n, sink).unwrap();
    }
    g
}

/// Run the graph until every worker is warm: it ran tasks and it slept
/// (and woke) at least once, so its thread has started (starting a thread
/// allocates), its thread-locals exist and it has parked before. A fixed
/// number of runs does not establish this: on a loaded machine they can
/// all finish before a worker thread is first scheduled, and its start then
/// falls into the counted runs. Returns the number of runs.
fn warm_up(pool: &Pool, g: &mut Graph<'_>) -> usize {
    let before = pool.stats();
    let start = Instant::now();
    let mut runs = 0;
    loop {
        pool.run_graph_n(g, 3).unwrap();
        runs += 3;
        let stats = pool.stats().since(&before);
        if stats.workers.iter().all(|w| w.total() > 0 && w.sleeps > 0) {
            return runs;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "after {runs} runs some worker has not run a task and slept:\n{stats}"
        );
        // Let the workers fall asleep before the next run wakes them.
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn graph_runs_allocate_nothing_once_warm() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let ran = AtomicUsize::new(0);
    let mut g = build(&ran);
    let n = g.len();
    assert!(n > 250, "{n} nodes");

    // From outside the pool. Warm up first: thread-locals, deque buffers
    // and parking state are set up on first use.
    let warm_up_runs = warm_up(&pool, &mut g);
    let outside = count_allocations(|| {
        for _ in 0..RUNS {
            pool.run_graph(&mut g).unwrap();
        }
    });
    let outside_first = first_allocation();
    CAPTURED.store(false, Ordering::SeqCst);

    // From inside a worker: `install` itself may allocate, so counting is
    // switched on and off inside the one `install` call.
    let inside = pool.install(|| {
        pool.run_graph_n(&mut g, 3).unwrap();
        count_allocations(|| {
            for _ in 0..RUNS {
                pool.run_graph(&mut g).unwrap();
            }
        })
    });
    let inside_first = first_allocation();

    assert_eq!(
        ran.load(Ordering::SeqCst),
        (2 * RUNS + 3 + warm_up_runs) * n
    );
    // One assertion for both, so that a failure reports both.
    assert!(
        outside == 0 && inside == 0,
        "{RUNS} runs of a {n}-node graph allocated {outside} times from outside the pool \
         and {inside} times from inside a worker.\n\
         Outside, {outside_first}\n\
         Inside, {inside_first}"
    );
}
