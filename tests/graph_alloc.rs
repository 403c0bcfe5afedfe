//! A graph run allocates nothing once warm: not from a thread outside the
//! pool, not from inside a worker. Nor does a continuation-passing run:
//! every continuation's block goes back to the node allocator, whatever
//! its body (with drop glue or without, which frees by another path).
//!
//! Graph nodes run on the pool's workers, so the counting allocator counts
//! on every thread while `COUNTING` is on. That would also count whatever
//! another test did meanwhile, so this binary has a single `#[test]`.
//!
//! The first allocation counted is captured with a backtrace, so a failure
//! says what allocated instead of only how often.

use sixfold::{Context, Graph, NodeId, Pool, Task, TaskRef};
use std::alloc::{GlobalAlloc, Layout, System};
use std::backtrace::Backtrace;
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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

/// fib(n) in continuation-passing style, with continuations of type `S`.
struct Fib<S> {
    n: u64,
    slot: usize,
    sum: PhantomData<fn() -> S>,
}

impl<S> Fib<S> {
    fn new(n: u64, slot: usize) -> Self {
        Fib {
            n,
            slot,
            sum: PhantomData,
        }
    }
}

/// A continuation of `Fib`: two parts, and its own slot in the next one.
trait Sum: Task + Sync {
    fn new(slot: usize) -> Self;
    fn parts(&self) -> &[AtomicU64; 2];
    fn slot(&self) -> usize;
}

/// No drop glue.
struct PlainSum([AtomicU64; 2], usize);
/// With drop glue, as a continuation that owns something has.
struct GuardedSum([AtomicU64; 2], Guard);

/// Counts its drops.
struct Guard(usize);

static GUARD_DROPS: AtomicUsize = AtomicUsize::new(0);

impl Drop for Guard {
    fn drop(&mut self) {
        GUARD_DROPS.fetch_add(1, Ordering::Relaxed);
    }
}

impl Sum for PlainSum {
    fn new(slot: usize) -> Self {
        PlainSum(Default::default(), slot)
    }
    fn parts(&self) -> &[AtomicU64; 2] {
        &self.0
    }
    fn slot(&self) -> usize {
        self.1
    }
}

impl Sum for GuardedSum {
    fn new(slot: usize) -> Self {
        GuardedSum(Default::default(), Guard(slot))
    }
    fn parts(&self) -> &[AtomicU64; 2] {
        &self.0
    }
    fn slot(&self) -> usize {
        self.1.0
    }
}

/// Where the top continuation of `fib_cps` leaves its total.
static TOTAL: AtomicU64 = AtomicU64::new(0);

/// Hand `value` to part `slot` of the successor, or to `TOTAL` at the top.
fn deliver<S: Sum>(cx: &Context<'_>, slot: usize, value: u64) {
    match cx.successor::<S>() {
        Some(sum) => sum.parts()[slot].store(value, Ordering::Relaxed),
        None => TOTAL.store(value, Ordering::Relaxed),
    }
}

impl<S: Sum> Task for Fib<S> {
    fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
        if self.n < 2 {
            deliver::<S>(cx, self.slot, self.n);
            return None;
        }
        let sum = cx.continuation(S::new(self.slot));
        cx.spawn(sum.child(Fib::<S>::new(self.n - 2, 1)));
        self.n -= 1;
        self.slot = 0;
        cx.recycle();
        None
    }
}

macro_rules! sum_task {
    ($t:ty) => {
        impl Task for $t {
            fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
                let [a, b] = self.parts();
                let total = a.load(Ordering::Relaxed) + b.load(Ordering::Relaxed);
                deliver::<$t>(cx, self.slot(), total);
                None
            }
        }
    };
}
sum_task!(PlainSum);
sum_task!(GuardedSum);

/// fib(`n`) by continuation passing on `pool`, with `S` continuations.
fn fib_cps<S: Sum>(pool: &Pool, n: u64) -> u64 {
    let mut root = TaskRef::new(Fib::<S>::new(n, 0));
    let top = TaskRef::new(S::new(0));
    root.precede(&top).unwrap();
    pool.run([root, top]);
    TOTAL.load(Ordering::Relaxed)
}

/// Allocations made for the nodes of `RUNS` warm continuation-passing
/// runs of fib(15) (986 continuations each) on a one-worker pool, from
/// inside its worker: one thread allocates and frees every node, so warm
/// runs take every block from that thread's cache, and a block not given
/// back shows as allocations. A run's own bookkeeping (its list of tasks)
/// is the same for fib(2), one continuation: that count is subtracted.
fn continuation_node_allocations<S: Sum>() -> (usize, String) {
    let pool = Pool::builder().num_threads(1).build().unwrap();
    let runs = |n, expect| {
        count_allocations(|| {
            for _ in 0..RUNS {
                assert_eq!(fib_cps::<S>(&pool, n), expect);
            }
        })
    };
    let (large, small) = pool.install(|| {
        for _ in 0..3 {
            fib_cps::<S>(&pool, 15);
        }
        (runs(15, 610), runs(2, 1))
    });
    let first = first_allocation();
    CAPTURED.store(false, Ordering::SeqCst);
    (large.saturating_sub(small), first)
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

    CAPTURED.store(false, Ordering::SeqCst);
    let (plain, plain_first) = continuation_node_allocations::<PlainSum>();
    let drops_before = GUARD_DROPS.load(Ordering::Relaxed);
    let (guarded, guarded_first) = continuation_node_allocations::<GuardedSum>();
    // fib(15) makes 986 continuations a run and fib(2) one, and each
    // run has a top sum: each dropped once.
    assert_eq!(
        GUARD_DROPS.load(Ordering::Relaxed) - drops_before,
        (RUNS + 3) * 987 + RUNS * 2
    );

    assert_eq!(
        ran.load(Ordering::SeqCst),
        (2 * RUNS + 3 + warm_up_runs) * n
    );
    // One assertion for all, so that a failure reports all.
    assert!(
        outside == 0 && inside == 0 && plain == 0 && guarded == 0,
        "{RUNS} runs of a {n}-node graph allocated {outside} times from outside the pool \
         and {inside} times from inside a worker; the nodes of {RUNS} continuation-passing \
         runs allocated {plain} times with plain continuations and {guarded} times with \
         continuations that have drop glue.\n\
         Outside, {outside_first}\n\
         Inside, {inside_first}\n\
         Plain, {plain_first}\n\
         With drop glue, {guarded_first}"
    );
}
