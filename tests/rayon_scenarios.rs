//! rayon-core's own test scenarios, re-expressed in sixfold's API.
//!
//! rayon-core checks its scheduler with a set of small scenarios: scopes
//! (`scope/test.rs`), `join` (`join/test.rs`), thread pools
//! (`thread_pool/test.rs`), `spawn` (`spawn/test.rs`) and a few
//! integration tests (`tests/*.rs`). sixfold promises the same contract for
//! `join`, `scope`, `scope_fifo`, `spawn` and `spawn_fifo`, so the same
//! scenarios, with the same expected values and execution orders, apply
//! here. Each test is written anew against sixfold's API; where sixfold's
//! contract differs from rayon's, a comment at the test says how and why.
//!
//! Order tests run on one-worker pools, as rayon's do: with a single worker
//! there is no stealing, so the order is fully determined by the queues.
//! Anything that could hang on a scheduler bug (cross-pool installs, nested
//! scopes through pools, barriers) runs under the `within` watchdog.
//!
//! `broadcast`, `yield_now` / `yield_local`, `join_context` and the
//! in-place scopes are at the end of the file, after rayon-core's
//! broadcast, yield and in-place-scope tests.
//!
//! Not re-expressed, because they test rayon-only API or mechanisms:
//! - `spawn_handler`: sixfold's builder always starts its own threads
//!   (`use_current_thread` is re-expressed, counting the started threads
//!   with a start handler instead).
//! - `stack_overflow_crash`: needs a child-process harness (a crash takes
//!   down the whole test binary); `stack_size` is exercised by
//!   `failed_thread_stack_fails_the_build_and_starts_at_most_one_thread`.
//! - `static_scope` / `mixed_lifetime_scope` are kept (compile-time lifetime
//!   checks of `Scope<'scope>`), `init_zero_threads` is re-expressed (see
//!   the comment there).

mod common;

use common::{panic_message, pool, within};
use sixfold::{
    BuildError, Pool, Scope, ScopeFifo, current_num_threads, current_worker, join, scope,
    scope_fifo, spawn, spawn_fifo,
};
use std::any::Any;
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Barrier, Mutex, Once};
use std::thread;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A generous watchdog limit: everything here finishes in well under it.
const LIMIT: Duration = Duration::from_secs(60);

/// The messages of the panics these tests cause on purpose (rayon's own).
fn is_intentional(message: &str) -> bool {
    matches!(
        message,
        "Hello, world!" | "Goodbye, world!" | "should panic"
    ) || message.starts_with("[intentional]")
}

/// Keep the panic hook quiet about intentional panics (they happen on
/// worker threads, so a thread-local flag would not do), and only those.
fn quiet_intentional_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !is_intentional(&panic_message(info.payload())) {
                default(info);
            }
        }));
    });
}

/// Run `f`, which must panic, and return the panic's message.
fn expect_panic<R>(f: impl FnOnce() -> R) -> String {
    quiet_intentional_panics();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(_) => panic!("expected a panic, but the call returned"),
        Err(payload) => panic_message(&*payload),
    }
}

/// A small deterministic PRNG (xorshift64*), instead of rayon's `rand`.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        XorShift(seed | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_u32s(seed: u64, n: usize) -> Vec<u32> {
    let mut rng = XorShift::new(seed);
    (0..n).map(|_| rng.next() as u32).collect()
}

/// Lomuto partition around the last element; the pivot's final index.
fn partition<T: PartialOrd>(v: &mut [T]) -> usize {
    let pivot = v.len() - 1;
    let mut store = 0;
    for k in 0..pivot {
        if v[k] <= v[pivot] {
            v.swap(store, k);
            store += 1;
        }
    }
    v.swap(store, pivot);
    store
}

/// A counter shared with a handler, and the handler that bumps it.
fn counting_handler() -> (Arc<AtomicUsize>, impl Fn(usize) + Send + Sync + 'static) {
    let count = Arc::new(AtomicUsize::new(0));
    let handler_count = count.clone();
    (count, move |_| {
        handler_count.fetch_add(1, Ordering::SeqCst);
    })
}

/// Wait (bounded) until `counter` is no longer shared, i.e. the handler
/// that held it was dropped, and return its value.
fn released_count(mut counter: Arc<AtomicUsize>) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        counter = match Arc::try_unwrap(counter) {
            Ok(count) => return count.into_inner(),
            Err(shared) => shared,
        };
        assert!(
            Instant::now() < deadline,
            "the pool still holds its handler (the counter is still shared)"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------
// Scope (rayon-core/src/scope/test.rs)
// ---------------------------------------------------------------------------

#[test]
fn scope_with_an_empty_body_returns() {
    scope(|_| {});
}

#[test]
fn scope_returns_the_bodys_result() {
    let x = scope(|_| 22);
    assert_eq!(x, 22);
}

#[test]
fn scope_waits_for_both_spawns() {
    let counter = &AtomicUsize::new(0);
    scope(|s| {
        s.spawn(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        s.spawn(move |_| {
            counter.fetch_add(10, Ordering::SeqCst);
        });
    });
    assert_eq!(counter.load(Ordering::SeqCst), 11);
}

fn count_leaves_in_scope<'scope>(s: &Scope<'scope>, leaves: &'scope AtomicUsize, size: usize) {
    if size > 1 {
        s.spawn(move |s| count_leaves_in_scope(s, leaves, size / 2));
        s.spawn(move |s| count_leaves_in_scope(s, leaves, size / 2));
    } else {
        leaves.fetch_add(1, Ordering::SeqCst);
    }
}

fn count_leaves_sequentially(leaves: &AtomicUsize, size: usize) {
    if size > 1 {
        count_leaves_sequentially(leaves, size / 2);
        count_leaves_sequentially(leaves, size / 2);
    } else {
        leaves.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn scope_divide_and_conquer_reaches_every_leaf() {
    let parallel = &AtomicUsize::new(0);
    scope(|s| s.spawn(move |s| count_leaves_in_scope(s, parallel, 1024)));
    let sequential = AtomicUsize::new(0);
    count_leaves_sequentially(&sequential, 1024);
    assert_eq!(sequential.load(Ordering::SeqCst), 1024);
    assert_eq!(
        parallel.load(Ordering::SeqCst),
        sequential.load(Ordering::SeqCst)
    );
}

struct Tree<T> {
    value: T,
    children: Vec<Tree<T>>,
}

impl<T: Send + Copy> Tree<T> {
    fn values(&self) -> Vec<T> {
        let mut out = vec![self.value];
        for child in &self.children {
            out.extend(child.values());
        }
        out
    }

    /// Apply `op` to every node, in parallel, through `&mut` borrows that
    /// spawned tasks carry into the scope.
    fn update<OP>(&mut self, op: OP)
    where
        OP: Fn(&mut T) + Sync,
    {
        scope(|s| self.update_in_scope(&op, s));
    }

    fn update_in_scope<'scope, OP>(&'scope mut self, op: &'scope OP, s: &Scope<'scope>)
    where
        OP: Fn(&mut T) + Sync,
    {
        let Tree { value, children } = self;
        s.spawn(move |s| {
            for child in children {
                s.spawn(move |s| child.update_in_scope(op, s));
            }
        });
        op(value);
    }
}

fn random_tree(depth: usize, rng: &mut XorShift) -> Tree<u32> {
    let children = if depth == 0 {
        Vec::new()
    } else {
        // Between 0 and 3 children per node, as rayon's test.
        (0..rng.below(4))
            .map(|_| random_tree(depth - 1, rng))
            .collect()
    };
    Tree {
        value: rng.below(1_000_000) as u32,
        children,
    }
}

#[test]
fn scope_updates_a_tree_through_mut_borrows() {
    let mut rng = XorShift::new(0x0123_4567_89ab_cdef);
    // Retry seeds until the tree is not trivially small.
    let mut tree = random_tree(10, &mut rng);
    while tree.values().len() < 50 {
        tree = random_tree(10, &mut rng);
    }
    let before = tree.values();
    tree.update(|v| *v += 1);
    let after = tree.values();
    assert_eq!(before.len(), after.len());
    for (old, new) in before.iter().zip(&after) {
        assert_eq!(old + 1, *new);
    }
}

/// Record how far this frame is from `bottom`, then continue the chain with
/// one more spawn: each link runs from the scope's wait loop, not on top of
/// the previous one.
fn countdown<'scope>(s: &Scope<'scope>, bottom: &'scope i32, max: &'scope Mutex<usize>, n: usize) {
    let top = 0i32;
    let top = std::hint::black_box(&top);
    let diff = (bottom as *const i32 as usize).abs_diff(top as *const i32 as usize);
    {
        let mut max = max.lock().unwrap();
        *max = (*max).max(diff);
    }
    if n > 0 {
        s.spawn(move |s| countdown(s, bottom, max, n - 1));
    }
}

#[test]
fn scope_spawn_chain_runs_at_constant_stack_depth() {
    let pool = pool(1);
    pool.install(|| {
        let mut max = Mutex::new(0usize);
        let bottom = 0i32;
        let bottom = std::hint::black_box(&bottom);
        scope(|s| countdown(s, bottom, &max, 5));
        let diff_5 = *max.get_mut().unwrap() as f64;
        // Not reset: the chain of 500 may only match the chain of 5.
        scope(|s| countdown(s, bottom, &max, 500));
        let diff_500 = *max.get_mut().unwrap() as f64;
        let ratio = diff_5 / diff_500;
        assert!(
            ratio > 0.9 && ratio < 1.1,
            "stack grew with the chain: {diff_5} bytes for 5 links, {diff_500} for 500"
        );
    });
}

#[test]
fn scope_resumes_a_panic_of_its_body() {
    let msg = expect_panic(|| scope(|_| panic!("Hello, world!")));
    assert_eq!(msg, "Hello, world!");
}

#[test]
fn scope_resumes_a_panic_of_a_spawn() {
    let msg = expect_panic(|| scope(|s| s.spawn(|_| panic!("Hello, world!"))));
    assert_eq!(msg, "Hello, world!");
}

#[test]
fn scope_resumes_a_panic_of_a_nested_spawn() {
    let msg =
        expect_panic(|| scope(|s| s.spawn(|s| s.spawn(|s| s.spawn(|_| panic!("Hello, world!"))))));
    assert_eq!(msg, "Hello, world!");
}

#[test]
fn scope_resumes_a_panic_of_a_spawn_in_a_nested_scope() {
    let msg =
        expect_panic(|| scope(|s| s.spawn(|_| scope(|s| s.spawn(|_| panic!("Hello, world!"))))));
    assert_eq!(msg, "Hello, world!");
}

#[test]
fn scope_still_runs_a_spawn_after_an_earlier_spawn_panicked() {
    let mut x = false;
    let msg = expect_panic(|| {
        scope(|s| {
            s.spawn(|_| panic!("Hello, world!")); // job A
            s.spawn(|_| x = true); // job B, runs although A panics
        })
    });
    assert_eq!(msg, "Hello, world!");
    assert!(x, "job B did not run");
}

#[test]
fn scope_still_runs_a_spawn_before_a_panicking_spawn() {
    let mut x = false;
    let msg = expect_panic(|| {
        scope(|s| {
            s.spawn(|_| x = true); // job B first
            s.spawn(|_| panic!("Hello, world!")); // then job A
        })
    });
    assert_eq!(msg, "Hello, world!");
    assert!(x, "job B did not run");
}

#[test]
fn scope_still_runs_a_spawn_when_the_body_panics() {
    let mut x = false;
    let msg = expect_panic(|| {
        scope(|s| {
            s.spawn(|_| x = true);
            panic!("Hello, world!");
        })
    });
    assert_eq!(msg, "Hello, world!");
    assert!(x, "the spawned job did not run");
}

#[test]
fn scope_body_finishes_after_a_spawn_panicked() {
    let mut x = false;
    let msg = expect_panic(|| {
        scope(|s| {
            s.spawn(|_| panic!("Hello, world!"));
            x = true;
        })
    });
    assert_eq!(msg, "Hello, world!");
    assert!(x, "the body did not finish");
}

#[test]
fn scope_accepts_static_spawns_with_a_borrowing_body() {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let mut range = 0..100;
    let sum: usize = range.clone().sum();
    let iter = &mut range;
    // `Scope<'static>`: the body may borrow locally, the spawns must not.
    scope(|s: &Scope<'static>| {
        for i in iter {
            s.spawn(move |_| {
                COUNTER.fetch_add(i, Ordering::Relaxed);
            });
        }
    });
    assert_eq!(COUNTER.load(Ordering::Relaxed), sum);
}

#[test]
fn scope_accepts_spawns_borrowing_for_a_longer_lifetime() {
    fn increment<'slice, 'counter>(counters: &'slice [&'counter AtomicUsize]) {
        scope(move |s: &Scope<'counter>| {
            for &c in counters {
                s.spawn(move |_| {
                    c.fetch_add(1, Ordering::Relaxed);
                });
            }
        });
    }
    let counter = AtomicUsize::new(0);
    increment(&[&counter; 100]);
    assert_eq!(counter.into_inner(), 100);
}

// Order tests on one worker. sixfold's queue model is rayon's: `Scope::spawn`
// pushes onto the worker's deque (LIFO); `ScopeFifo::spawn_fifo` pushes the
// job onto a per-scope, per-worker FIFO and an indirect job onto the deque,
// and running an indirect job runs the front of its FIFO; a scope's wait
// pops the worker's deque, including other scopes' entries. So the vectors
// are rayon's exactly.

/// Ten outer spawns, each spawning ten jobs into the same scope.
fn same_scope_order_lifo() -> Vec<i32> {
    pool(1).install(|| {
        let log = Mutex::new(Vec::new());
        scope(|s| {
            let log = &log;
            for i in 0..10 {
                s.spawn(move |s| {
                    for j in 0..10 {
                        s.spawn(move |_| log.lock().unwrap().push(i * 10 + j));
                    }
                });
            }
        });
        log.into_inner().unwrap()
    })
}

fn same_scope_order_fifo() -> Vec<i32> {
    pool(1).install(|| {
        let log = Mutex::new(Vec::new());
        scope_fifo(|s| {
            let log = &log;
            for i in 0..10 {
                s.spawn_fifo(move |s| {
                    for j in 0..10 {
                        s.spawn_fifo(move |_| log.lock().unwrap().push(i * 10 + j));
                    }
                });
            }
        });
        log.into_inner().unwrap()
    })
}

#[test]
fn scope_on_one_worker_runs_spawns_lifo() {
    let expected: Vec<i32> = (0..100).rev().collect();
    assert_eq!(same_scope_order_lifo(), expected);
}

#[test]
fn scope_fifo_on_one_worker_runs_spawns_fifo() {
    let expected: Vec<i32> = (0..100).collect();
    assert_eq!(same_scope_order_fifo(), expected);
}

/// Each of ten outer spawns opens a new inner scope with ten spawns.
/// `Outer`/`Inner` pick LIFO (`scope`) or FIFO (`scope_fifo`) for each.
macro_rules! nested_order {
    (outer: $outer:ident . $outer_spawn:ident, inner: $inner:ident . $inner_spawn:ident) => {{
        pool(1).install(|| {
            let log = Mutex::new(Vec::new());
            $outer(|s| {
                let log = &log;
                for i in 0..10 {
                    s.$outer_spawn(move |_| {
                        $inner(|s| {
                            for j in 0..10 {
                                s.$inner_spawn(move |_| log.lock().unwrap().push(i * 10 + j));
                            }
                        });
                    });
                }
            });
            log.into_inner().unwrap()
        })
    }};
}

#[test]
fn nested_lifo_scopes_run_lifo() {
    let got: Vec<i32> = nested_order!(outer: scope.spawn, inner: scope.spawn);
    let expected: Vec<i32> = (0..100).rev().collect();
    assert_eq!(got, expected);
}

#[test]
fn nested_fifo_scopes_run_fifo() {
    let got: Vec<i32> = nested_order!(outer: scope_fifo.spawn_fifo, inner: scope_fifo.spawn_fifo);
    let expected: Vec<i32> = (0..100).collect();
    assert_eq!(got, expected);
}

#[test]
fn fifo_scope_nested_in_lifo_scope_runs_outer_lifo_inner_fifo() {
    let got: Vec<i32> = nested_order!(outer: scope.spawn, inner: scope_fifo.spawn_fifo);
    let expected: Vec<i32> = (0..10)
        .rev()
        .flat_map(|i| (0..10).map(move |j| i * 10 + j))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn lifo_scope_nested_in_fifo_scope_runs_outer_fifo_inner_lifo() {
    let got: Vec<i32> = nested_order!(outer: scope_fifo.spawn_fifo, inner: scope.spawn);
    let expected: Vec<i32> = (0..10)
        .flat_map(|i| (0..10).rev().map(move |j| i * 10 + j))
        .collect();
    assert_eq!(got, expected);
}

/// outer 0; inner scope { inner -1, outer 1, inner -2, outer 2, inner -3 };
/// outer 3: the inner scope's wait also runs the outer spawns above its own.
macro_rules! mixed_order {
    (outer: $outer:ident . $outer_spawn:ident, inner: $inner:ident . $inner_spawn:ident) => {{
        pool(1).install(|| {
            let log = Mutex::new(Vec::new());
            $outer(|outer| {
                let log = &log;
                outer.$outer_spawn(move |_| log.lock().unwrap().push(0));
                $inner(|inner| {
                    inner.$inner_spawn(move |_| log.lock().unwrap().push(-1));
                    outer.$outer_spawn(move |_| log.lock().unwrap().push(1));
                    inner.$inner_spawn(move |_| log.lock().unwrap().push(-2));
                    outer.$outer_spawn(move |_| log.lock().unwrap().push(2));
                    inner.$inner_spawn(move |_| log.lock().unwrap().push(-3));
                });
                outer.$outer_spawn(move |_| log.lock().unwrap().push(3));
            });
            log.into_inner().unwrap()
        })
    }};
}

#[test]
fn mixed_lifo_scopes_interleave_in_rayons_order() {
    let got: Vec<i32> = mixed_order!(outer: scope.spawn, inner: scope.spawn);
    assert_eq!(got, [-3, 2, -2, 1, -1, 3, 0]);
}

#[test]
fn mixed_fifo_scopes_interleave_in_rayons_order() {
    let got: Vec<i32> = mixed_order!(outer: scope_fifo.spawn_fifo, inner: scope_fifo.spawn_fifo);
    assert_eq!(got, [-1, 0, -2, 1, -3, 2, 3]);
}

#[test]
fn mixed_lifo_outer_fifo_inner_interleave_in_rayons_order() {
    let got: Vec<i32> = mixed_order!(outer: scope.spawn, inner: scope_fifo.spawn_fifo);
    assert_eq!(got, [-1, 2, -2, 1, -3, 3, 0]);
}

#[test]
fn mixed_fifo_outer_lifo_inner_interleave_in_rayons_order() {
    let got: Vec<i32> = mixed_order!(outer: scope_fifo.spawn_fifo, inner: scope.spawn);
    assert_eq!(got, [-3, 0, -2, 1, -1, 2, 3]);
}

// rayon's `scope_spawn_broadcast` runs one job on every worker of the pool;
// sixfold has no broadcast. Emulated: n spawns that all wait on a
// Barrier(n) can only finish if n distinct workers run them at once.
#[test]
fn scope_spawns_blocked_on_a_barrier_run_on_every_worker() {
    const N: usize = 3;
    let workers = within("n barrier-blocked spawns on n workers", LIMIT, || {
        let pool = pool(N);
        let barrier = Barrier::new(N);
        let seen = Mutex::new(Vec::new());
        let n = pool.scope(|s| {
            for _ in 0..N {
                s.spawn(|_| {
                    barrier.wait();
                    seen.lock().unwrap().push(current_worker());
                });
            }
            current_num_threads()
        });
        assert_eq!(n, N);
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        seen
    });
    let expected: Vec<Option<usize>> = (0..N).map(Some).collect();
    assert_eq!(workers, expected);
}

// ---------------------------------------------------------------------------
// Join (rayon-core/src/join/test.rs)
// ---------------------------------------------------------------------------

fn quick_sort_by_join<T: PartialOrd + Send>(v: &mut [T]) {
    if v.len() <= 1 {
        return;
    }
    let mid = partition(v);
    let (lo, hi) = v.split_at_mut(mid);
    join(|| quick_sort_by_join(lo), || quick_sort_by_join(hi));
}

#[test]
fn join_quicksort_outside_every_pool_sorts() {
    let mut data = random_u32s(1, 6 * 1024);
    let mut expected = data.clone();
    expected.sort();
    quick_sort_by_join(&mut data);
    assert_eq!(data, expected);
}

#[test]
fn join_quicksort_in_a_pool_sorts() {
    let mut data = random_u32s(2, 12 * 1024);
    let mut expected = data.clone();
    expected.sort();
    let pool = pool(2);
    pool.install(|| quick_sort_by_join(&mut data));
    assert_eq!(data, expected);
}

#[test]
fn join_resumes_a_panic_of_a() {
    let msg = expect_panic(|| join(|| panic!("Hello, world!"), || 1));
    assert_eq!(msg, "Hello, world!");
}

#[test]
fn join_resumes_a_panic_of_b() {
    let msg = expect_panic(|| join(|| 1, || panic!("Hello, world!")));
    assert_eq!(msg, "Hello, world!");
}

#[test]
fn join_resumes_as_panic_when_both_panic() {
    let msg = expect_panic(|| {
        join(
            || -> () { panic!("Hello, world!") },
            || -> () { panic!("Goodbye, world!") },
        )
    });
    assert_eq!(msg, "Hello, world!");
}

#[test]
fn join_still_runs_b_when_a_panics() {
    let mut x = false;
    let msg = expect_panic(|| join(|| panic!("Hello, world!"), || x = true));
    assert_eq!(msg, "Hello, world!");
    assert!(x, "closure B did not run");
}

// rayon's `join_context_second` asserts `!a.migrated() && b.migrated()`;
// sixfold's `join` has no context, so the same fact is stated with worker
// indices: A runs on the joining worker, B (forced onto a thief by the
// barrier both wait on) on the other one.
#[test]
fn join_runs_b_on_another_worker_when_a_barrier_forces_it() {
    let (caller, a, b) = within("join with a Barrier(2) in both halves", LIMIT, || {
        let pool = pool(2);
        let barrier = Barrier::new(2);
        pool.install(|| {
            let caller = current_worker();
            let (a, b) = join(
                || {
                    barrier.wait();
                    current_worker()
                },
                || {
                    barrier.wait();
                    current_worker()
                },
            );
            (caller, a, b)
        })
    });
    assert!(caller.is_some());
    assert_eq!(a, caller, "A left the joining worker");
    assert!(b.is_some());
    assert_ne!(b, a, "B ran on the same worker as A");
}

// rayon #797: 500,000 joins from outside overflowed the (16-bit, on
// 32-bit targets) jobs event counter of the sleep protocol. Each
// `pool.join` from outside injects an entry job and blocks on a latch;
// rayon's 500,000 took about 9.4 s alone in a debug build here, so this
// runs 100,000: still more than 2^16 round trips through the sleep
// counters (sixfold's counter is 32 bits wide and may wrap by design).
#[test]
fn pool_join_from_outside_many_times_counts_exactly() {
    const MAX: u32 = 100_000;
    let (i, j) = within("100,000 pool.join calls from outside", LIMIT, || {
        let pool = pool(2);
        let (mut i, mut j) = (0u32, 0u32);
        for _ in 0..MAX {
            pool.join(|| i += 1, || j += 1);
        }
        (i, j)
    });
    assert_eq!(i, MAX);
    assert_eq!(j, MAX);
}

// ---------------------------------------------------------------------------
// Thread pool (rayon-core/src/thread_pool/test.rs)
// ---------------------------------------------------------------------------

#[test]
fn pool_install_resumes_a_panic() {
    let pool = pool(2);
    let msg = expect_panic(|| pool.install(|| panic!("Hello, world!")));
    assert_eq!(msg, "Hello, world!");
}

fn join_a_lot(n: usize) {
    if n > 0 {
        join(|| join_a_lot(n - 1), || join_a_lot(n - 1));
    }
}

// rayon checks `registry.wait_until_stopped()`; sixfold's drop joins its
// workers, so the exit-handler count is exact as soon as the drop returns.
#[test]
fn dropping_a_pool_stops_all_its_workers() {
    let (starts, start_handler) = counting_handler();
    let (exits, exit_handler) = counting_handler();
    let pool = Pool::builder()
        .num_threads(22)
        .start_handler(start_handler)
        .exit_handler(exit_handler)
        .build()
        .expect("a pool of 22");
    assert_eq!(pool.num_threads(), 22);
    pool.install(|| join_a_lot(22));
    drop(pool);
    assert_eq!(starts.load(Ordering::SeqCst), 22);
    assert_eq!(exits.load(Ordering::SeqCst), 22);
    assert_eq!(released_count(exits), 22);
}

#[test]
fn dropping_a_pool_of_sleeping_workers_stops_them() {
    let (exits, exit_handler) = counting_handler();
    let pool = Pool::builder()
        .num_threads(22)
        .exit_handler(exit_handler)
        .build()
        .expect("a pool of 22");
    // Let the workers fall asleep.
    thread::sleep(Duration::from_secs(1));
    assert_eq!(exits.load(Ordering::SeqCst), 0);
    drop(pool);
    assert_eq!(exits.load(Ordering::SeqCst), 22);
    assert_eq!(released_count(exits), 22);
}

// sixfold documents that a failed build has stopped and joined the threads
// it started, so the counts are exact when `build` returns (rayon polls).
#[test]
fn failed_thread_stack_fails_the_build_and_starts_at_most_one_thread() {
    let (starts, start_handler) = counting_handler();
    let (exits, exit_handler) = counting_handler();
    let result = Pool::builder()
        .num_threads(10)
        .stack_size(isize::MAX as usize)
        .start_handler(start_handler)
        .exit_handler(exit_handler)
        .build();
    match result {
        Err(BuildError::ThreadSpawn(_)) => {}
        Err(other) => panic!("expected ThreadSpawn, got {other:?}"),
        Ok(_) => panic!("a pool with isize::MAX-byte stacks was built"),
    }
    let started = starts.load(Ordering::SeqCst);
    assert!(started <= 1, "{started} threads started");
    assert_eq!(exits.load(Ordering::SeqCst), started);
    // The handlers were released with the failed pool.
    let started = released_count(starts);
    assert_eq!(released_count(exits), started);
}

#[test]
fn panicking_thread_name_fails_the_build_after_five_threads() {
    quiet_intentional_panics();
    let (starts, start_handler) = counting_handler();
    let (exits, exit_handler) = counting_handler();
    let names = Arc::new(Mutex::new(Vec::new()));
    let names_in_handler = names.clone();
    let builder = Pool::builder()
        .num_threads(10)
        .start_handler(move |i| {
            names_in_handler
                .lock()
                .unwrap()
                .push((i, thread::current().name().map(str::to_owned)));
            start_handler(i);
        })
        .exit_handler(exit_handler)
        .thread_name(|i| {
            if i >= 5 {
                panic!("[intentional] no name for thread {i}");
            }
            format!("panic_thread_name#{i}")
        });
    let msg = expect_panic(move || builder.build());
    assert_eq!(msg, "[intentional] no name for thread 5");
    // Threads 0..5 were started, then stopped and joined by the build.
    assert_eq!(starts.load(Ordering::SeqCst), 5);
    assert_eq!(exits.load(Ordering::SeqCst), 5);
    assert_eq!(released_count(starts), 5);
    assert_eq!(released_count(exits), 5);
    let mut names = names.lock().unwrap().clone();
    names.sort();
    let expected: Vec<(usize, Option<String>)> = (0..5)
        .map(|i| (i, Some(format!("panic_thread_name#{i}"))))
        .collect();
    assert_eq!(names, expected);
}

#[test]
fn install_inside_the_same_one_worker_pool_runs_inline() {
    let ok = within("self install", LIMIT, || {
        let pool = pool(1);
        // If the inner install blocked, nothing would ever run it.
        pool.install(|| pool.install(|| true))
    });
    assert!(ok);
}

#[test]
fn mutual_installs_between_one_worker_pools_do_not_deadlock() {
    let ok = within("pool1 -> pool2 -> pool1 installs", LIMIT, || {
        let pool1 = pool(1);
        let pool2 = pool(1);
        // pool1's only worker waits on pool2, whose only worker waits on
        // pool1: the first must keep running pool1's work while it waits.
        pool1.install(|| pool2.install(|| pool1.install(|| true)))
    });
    assert!(ok);
}

// rayon sleeps 1 s at each step; 100 ms is plenty for a worker to go to
// sleep in sixfold's protocol (the same as rayon's), and keeps the test short.
#[test]
fn mutual_installs_survive_the_waiting_workers_falling_asleep() {
    let ok = within("sleepy pool1 -> pool2 -> pool1 installs", LIMIT, || {
        let pool1 = pool(1);
        let pool2 = pool(1);
        pool1.install(|| {
            pool2.install(|| {
                // Give pool1's worker time to fall asleep.
                thread::sleep(Duration::from_millis(100));
                pool1.install(|| {
                    // Give pool2's worker time to fall asleep.
                    thread::sleep(Duration::from_millis(100));
                    true
                })
            })
        })
    });
    assert!(ok);
}

#[test]
fn pool_scope_on_one_worker_runs_spawns_lifo() {
    let pool = pool(1);
    let got = pool.install(|| {
        let log = Mutex::new(Vec::new());
        pool.scope(|s| {
            let log = &log;
            for i in 0..10 {
                s.spawn(move |_| log.lock().unwrap().push(i));
            }
        });
        log.into_inner().unwrap()
    });
    let expected: Vec<i32> = (0..10).rev().collect();
    assert_eq!(got, expected);
}

#[test]
fn pool_scope_fifo_on_one_worker_runs_spawns_fifo() {
    let pool = pool(1);
    let got = pool.install(|| {
        let log = Mutex::new(Vec::new());
        pool.scope_fifo(|s| {
            let log = &log;
            for i in 0..10 {
                s.spawn_fifo(move |_| log.lock().unwrap().push(i));
            }
        });
        log.into_inner().unwrap()
    });
    let expected: Vec<i32> = (0..10).collect();
    assert_eq!(got, expected);
}

#[test]
fn pool_spawn_from_its_one_worker_runs_lifo() {
    let pool = pool(1);
    let (tx, rx) = channel();
    pool.install(|| {
        for i in 0..10 {
            let tx = tx.clone();
            pool.spawn(move || tx.send(i).unwrap());
        }
    });
    drop(tx);
    let got: Vec<i32> = rx.iter().collect();
    let expected: Vec<i32> = (0..10).rev().collect();
    assert_eq!(got, expected);
}

#[test]
fn pool_spawn_fifo_from_its_one_worker_runs_fifo() {
    let pool = pool(1);
    let (tx, rx) = channel();
    pool.install(|| {
        for i in 0..10 {
            let tx = tx.clone();
            pool.spawn_fifo(move || tx.send(i).unwrap());
        }
    });
    drop(tx);
    let got: Vec<i32> = rx.iter().collect();
    let expected: Vec<i32> = (0..10).collect();
    assert_eq!(got, expected);
}

/// Open `pools[k].scope` inside the previous pool's scope body, collecting
/// the scopes; the innermost body gets all of them.
fn nest_scopes<'scope, OP>(pools: &[Pool], scopes: Vec<&Scope<'scope>>, op: OP)
where
    OP: FnOnce(&[&Scope<'scope>]) + Send,
{
    match pools.split_first() {
        Some((pool, rest)) => pool.scope(move |s| {
            // Moving shortens the references to match `s`; the scopes
            // themselves keep the invariant 'scope.
            let mut scopes = scopes;
            scopes.push(s);
            nest_scopes(rest, scopes, op)
        }),
        None => op(&scopes),
    }
}

fn nest_fifo_scopes<'scope, OP>(pools: &[Pool], scopes: Vec<&ScopeFifo<'scope>>, op: OP)
where
    OP: FnOnce(&[&ScopeFifo<'scope>]) + Send,
{
    match pools.split_first() {
        Some((pool, rest)) => pool.scope_fifo(move |s| {
            let mut scopes = scopes;
            scopes.push(s);
            nest_fifo_scopes(rest, scopes, op)
        }),
        None => op(&scopes),
    }
}

// Spawning into a scope of pool k from a worker of pool 9 goes to pool k's
// shared queue (sixfold's counterpart of rayon's injector); pool k's only
// worker is itself waiting in its install into pool k+1 at that moment,
// and the job must still run before pool k's scope ends.
#[test]
fn spawning_into_scopes_nested_through_ten_pools_runs_every_job() {
    let count = within("scopes nested through 10 one-worker pools", LIMIT, || {
        let pools: Vec<Pool> = (0..10).map(|_| pool(1)).collect();
        let counter = AtomicUsize::new(0);
        nest_scopes(&pools, Vec::new(), |scopes| {
            for &s in scopes {
                s.spawn(|_| {
                    counter.fetch_add(1, Ordering::Relaxed);
                });
            }
        });
        counter.into_inner()
    });
    assert_eq!(count, 10);
}

#[test]
fn spawning_into_fifo_scopes_nested_through_ten_pools_runs_every_job() {
    let count = within(
        "fifo scopes nested through 10 one-worker pools",
        LIMIT,
        || {
            let pools: Vec<Pool> = (0..10).map(|_| pool(1)).collect();
            let counter = AtomicUsize::new(0);
            nest_fifo_scopes(&pools, Vec::new(), |scopes| {
                for &s in scopes {
                    s.spawn_fifo(|_| {
                        counter.fetch_add(1, Ordering::Relaxed);
                    });
                }
            });
            counter.into_inner()
        },
    );
    assert_eq!(count, 10);
}

// ---------------------------------------------------------------------------
// Spawn (rayon-core/src/spawn/test.rs)
// ---------------------------------------------------------------------------

#[test]
fn free_spawn_from_a_worker_runs() {
    let (tx, rx) = channel();
    scope(move |_| spawn(move || tx.send(22).unwrap()));
    assert_eq!(rx.recv_timeout(LIMIT), Ok(22));
}

#[test]
fn free_spawn_from_outside_every_pool_runs() {
    let (tx, rx) = channel();
    spawn(move || tx.send(22).unwrap());
    assert_eq!(rx.recv_timeout(LIMIT), Ok(22));
}

/// 1 for a "Hello, world!" payload, 2 for another string, 3 otherwise.
fn classify(payload: &(dyn Any + Send)) -> u8 {
    match payload.downcast_ref::<&str>() {
        Some(&"Hello, world!") => 1,
        Some(_) => 2,
        None => 3,
    }
}

#[test]
fn panic_of_a_spawned_task_goes_to_the_panic_handler() {
    quiet_intentional_panics();
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let pool = Pool::builder()
        .num_threads(2)
        .panic_handler(move |payload| tx.lock().unwrap().send(classify(&*payload)).unwrap())
        .build()
        .unwrap();
    pool.spawn(|| panic!("Hello, world!"));
    // sixfold's drop waits for the spawned task, so the handler has run.
    drop(pool);
    assert_eq!(rx.recv_timeout(LIMIT), Ok(1));
}

// rayon: a pool dropped while a spawned job still runs stays alive until
// the job (and what it spawns) is done, and drop returns at once.
// sixfold's contract differs: `Pool::drop` itself waits until every task
// already spawned has run (then joins the workers). So rayon's sequence
// (drop, then unblock the job) would deadlock on one thread; the drop runs
// on a thread of its own, and the test also checks it is still waiting.
#[test]
fn dropped_pool_keeps_running_a_blocked_job_and_what_it_spawns() {
    let (tx0, rx0) = channel::<i32>();
    let (tx1, rx1) = channel();
    let pool = pool(2);
    pool.spawn(move || {
        let data = rx0.recv().unwrap();
        // The pool's handle is being dropped: spawn one more.
        spawn(move || tx1.send(data).unwrap());
    });
    let dropped = Arc::new(AtomicBool::new(false));
    let dropper = {
        let dropped = dropped.clone();
        thread::spawn(move || {
            drop(pool);
            dropped.store(true, Ordering::SeqCst);
        })
    };
    thread::sleep(Duration::from_millis(50));
    assert!(
        !dropped.load(Ordering::SeqCst),
        "the drop returned while a spawned task was still blocked"
    );
    tx0.send(22).unwrap();
    assert_eq!(rx1.recv_timeout(LIMIT), Ok(22));
    common::poll_until("the pool's drop to return", LIMIT, || {
        dropped.load(Ordering::SeqCst)
    });
    dropper.join().unwrap();
}

#[test]
fn panics_of_nested_free_spawns_reach_the_pools_handler() {
    quiet_intentional_panics();
    const PANICS: usize = 3;
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let pool = Pool::builder()
        .num_threads(2)
        .panic_handler(move |payload| tx.lock().unwrap().send(payload).unwrap())
        .build()
        .unwrap();
    pool.spawn(|| {
        // Free spawns from a worker go to the same pool, so its handler.
        for _ in 0..PANICS {
            spawn(|| panic!("Hello, world!"));
        }
    });
    drop(pool);
    for _ in 0..PANICS {
        let payload = rx.recv_timeout(LIMIT).expect("a panic payload");
        assert_eq!(panic_message(&*payload), "Hello, world!");
    }
    assert!(rx.try_recv().is_err(), "more panics than spawned");
}

/// Free spawns inside `install` on one worker: ten outer, each with ten
/// inner, sending `i * 10 + j`. Returns when every sender is gone.
macro_rules! free_spawn_order {
    ($outer_spawn:ident, $inner_spawn:ident) => {{
        let pool = pool(1);
        let (tx, rx) = channel();
        pool.install(move || {
            for i in 0..10 {
                let tx = tx.clone();
                $outer_spawn(move || {
                    for j in 0..10 {
                        let tx = tx.clone();
                        $inner_spawn(move || tx.send(i * 10 + j).unwrap());
                    }
                });
            }
        });
        rx.iter().collect::<Vec<i32>>()
    }};
}

#[test]
fn free_spawn_on_one_worker_runs_lifo() {
    let expected: Vec<i32> = (0..100).rev().collect();
    assert_eq!(free_spawn_order!(spawn, spawn), expected);
}

#[test]
fn free_spawn_fifo_on_one_worker_runs_fifo() {
    let expected: Vec<i32> = (0..100).collect();
    assert_eq!(free_spawn_order!(spawn_fifo, spawn_fifo), expected);
}

#[test]
fn free_spawn_fifo_inside_spawn_runs_outer_lifo_inner_fifo() {
    let expected: Vec<i32> = (0..10)
        .rev()
        .flat_map(|i| (0..10).map(move |j| i * 10 + j))
        .collect();
    assert_eq!(free_spawn_order!(spawn, spawn_fifo), expected);
}

#[test]
fn free_spawn_inside_spawn_fifo_runs_outer_fifo_inner_lifo() {
    let expected: Vec<i32> = (0..10)
        .flat_map(|i| (0..10).rev().map(move |j| i * 10 + j))
        .collect();
    assert_eq!(free_spawn_order!(spawn_fifo, spawn), expected);
}

/// On one worker: pos 0, neg -1, pos 1, neg -2, pos 2, neg -3, pos 3.
macro_rules! free_spawn_mixed_order {
    ($pos_spawn:ident, $neg_spawn:ident) => {{
        let pool = pool(1);
        let (tx, rx) = channel();
        pool.install(move || {
            for k in 0..4 {
                let pos = tx.clone();
                $pos_spawn(move || pos.send(k).unwrap());
                if k < 3 {
                    let neg = tx.clone();
                    $neg_spawn(move || neg.send(-(k + 1)).unwrap());
                }
            }
        });
        rx.iter().collect::<Vec<i32>>()
    }};
}

#[test]
fn mixed_free_spawn_and_spawn_fifo_interleave_in_rayons_order() {
    assert_eq!(
        free_spawn_mixed_order!(spawn, spawn_fifo),
        [3, -1, 2, -2, 1, -3, 0]
    );
}

#[test]
fn mixed_free_spawn_fifo_and_spawn_interleave_in_rayons_order() {
    assert_eq!(
        free_spawn_mixed_order!(spawn_fifo, spawn),
        [0, -3, 1, -2, 2, -1, 3]
    );
}

// ---------------------------------------------------------------------------
// rayon-core/tests/*.rs
// ---------------------------------------------------------------------------

/// `join` emulated with a scope: spawn `g`, run `f` in the body.
fn pseudo_join<F, G>(f: F, g: G)
where
    F: FnOnce() + Send,
    G: FnOnce() + Send,
{
    scope(|s| {
        s.spawn(|_| g());
        f();
    });
}

fn quick_sort_by_pseudo_join<T: PartialOrd + Send>(v: &mut [T]) {
    if v.len() <= 1 {
        return;
    }
    let mid = partition(v);
    let (lo, hi) = v.split_at_mut(mid);
    pseudo_join(
        || quick_sort_by_pseudo_join(lo),
        || quick_sort_by_pseudo_join(hi),
    );
}

#[test]
fn quicksort_by_scope_pseudo_join_sorts() {
    // Reversed input: the last-element pivot nests 256 scopes deep.
    let mut v: Vec<i32> = (0..256).rev().collect();
    quick_sort_by_pseudo_join(&mut v);
    assert!(v.windows(2).all(|w| w[0] <= w[1]), "not sorted: {v:?}");
}

#[test]
fn join_with_a_panicking_b_panics_with_its_message() {
    let msg = expect_panic(|| join(|| {}, || panic!("should panic")));
    assert_eq!(msg, "should panic");
}

thread_local! {
    static CALLER_LOCAL: Cell<Option<i32>> = const { Cell::new(None) };
}

#[test]
fn thread_local_of_the_caller_is_not_set_inside_install() {
    let inside = within("install with a caller thread-local", LIMIT, || {
        CALLER_LOCAL.with(|l| l.set(Some(42)));
        let pool = pool(2);
        let inside = pool.install(|| CALLER_LOCAL.with(Cell::get));
        assert_eq!(CALLER_LOCAL.with(Cell::get), Some(42));
        inside
    });
    assert_eq!(inside, None);
}

// rayon's `init_zero_threads` builds the global pool with `num_threads(0)`
// and expects the default thread count: in rayon, 0 means "the default".
// sixfold differs: `num_threads(0)` is a pool with no threads of its own,
// whose callers run the tasks (so, unlike the test above, `install` runs on
// the calling thread). The global pool is shared by this whole file, so
// this is checked on a pool of its own.
#[test]
fn zero_threads_means_the_caller_runs_the_work() {
    let (caller, ran_on, workers, sum) = within("a zero-thread pool", LIMIT, || {
        let pool = pool(0);
        assert_eq!(pool.num_threads(), 0);
        let caller = thread::current().id();
        let (ran_on, workers, sum) = pool.install(|| {
            let (a, b) = join(|| (1..=50).sum::<u32>(), || (51..=100).sum::<u32>());
            (thread::current().id(), current_num_threads(), a + b)
        });
        (caller, ran_on, workers, sum)
    });
    assert_eq!(ran_on, caller);
    assert_eq!(workers, 1);
    assert_eq!(sum, 5050);
}

// rayon's `double_init_fail` builds the global pool twice. The global pool
// is per process and other tests in this file use it (in any order), so
// only the second half is checked: once it exists, `build_global` errors.
#[test]
fn build_global_after_the_global_pool_exists_is_an_error() {
    let global = Pool::global();
    assert!(global.num_threads() >= 1);
    for _ in 0..2 {
        match Pool::builder().num_threads(1).build_global() {
            Err(e @ BuildError::GlobalPoolAlreadyInitialized) => {
                assert!(e.to_string().contains("already been initialized"), "{e}");
            }
            other => panic!("expected GlobalPoolAlreadyInitialized, got {other:?}"),
        }
    }
    // The global pool is unchanged and still works.
    assert!(std::ptr::eq(Pool::global(), global));
    assert_eq!(global.install(|| 6 * 7), 42);
}

// ---------------------------------------------------------------------
// broadcast (rayon-core's broadcast/test.rs), yield (its tests of
// yield_now and yield_local) and join_context.

#[test]
fn broadcast_global_runs_once_on_every_worker_in_order() {
    let v = sixfold::broadcast(|ctx| ctx.index());
    assert!(v.into_iter().eq(0..sixfold::current_num_threads()));
}

#[test]
fn broadcast_pool_and_self() {
    let pool = Pool::builder().num_threads(7).build().unwrap();
    assert!(pool.broadcast(|ctx| ctx.index()).into_iter().eq(0..7));
    // From one of the pool's own workers: every worker, that one included.
    let v = pool.install(|| sixfold::broadcast(|ctx| (ctx.index(), ctx.num_threads())));
    assert!(v.iter().map(|&(i, _)| i).eq(0..7));
    assert!(v.iter().all(|&(_, n)| n == 7));
}

#[test]
fn broadcast_mutual_across_pools() {
    within("mutual broadcasts", Duration::from_secs(120), || {
        let count = AtomicUsize::new(0);
        let pool1 = Pool::builder().num_threads(3).build().unwrap();
        let pool2 = Pool::builder().num_threads(7).build().unwrap();
        pool1.install(|| {
            pool2.broadcast(|_| {
                pool1.broadcast(|_| {
                    count.fetch_add(1, Ordering::Relaxed);
                })
            })
        });
        assert_eq!(count.into_inner(), 3 * 7);
    });
}

/// rayon's version sleeps 1 s, 1 s and 100 ms; shorter sleeps keep the
/// same shape (every worker of both pools blocked at some point while the
/// other pool's broadcast waits on it).
#[test]
fn broadcast_mutual_sleepy() {
    within("sleepy mutual broadcasts", Duration::from_secs(120), || {
        let count = AtomicUsize::new(0);
        let pool1 = Pool::builder().num_threads(3).build().unwrap();
        let pool2 = Pool::builder().num_threads(7).build().unwrap();
        pool1.install(|| {
            std::thread::sleep(Duration::from_millis(100));
            pool2.broadcast(|_| {
                std::thread::sleep(Duration::from_millis(100));
                pool1.broadcast(|_| {
                    std::thread::sleep(Duration::from_millis(10));
                    count.fetch_add(1, Ordering::Relaxed);
                })
            })
        });
        assert_eq!(count.into_inner(), 3 * 7);
    });
}

#[test]
fn broadcast_panic_one_and_many_run_everywhere_then_propagate() {
    quiet_intentional_panics();
    let pool = Pool::builder().num_threads(7).build().unwrap();
    for panics_at in [|i: usize| i == 3, |i: usize| i.is_multiple_of(2)] {
        let count = AtomicUsize::new(0);
        let result = catch_unwind(AssertUnwindSafe(|| {
            pool.broadcast(|ctx| {
                count.fetch_add(1, Ordering::Relaxed);
                if panics_at(ctx.index()) {
                    panic!("Hello, world!");
                }
            })
        }));
        assert_eq!(count.into_inner(), 7);
        assert!(result.is_err(), "the broadcast's panic propagates");
    }
}

#[test]
fn broadcast_sleep_race() {
    let pool = Pool::builder().num_threads(7).build().unwrap();
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_millis(500) {
        pool.broadcast(|ctx| {
            // A spread of sleeps makes some worker race into its idle
            // sleep just as the next broadcast arrives.
            std::thread::sleep(Duration::from_micros(ctx.index() as u64));
        });
    }
}

// rayon-core's spawn_broadcast tests: the same shapes, without waiting;
// the calls report through channels.

#[test]
fn spawn_broadcast_global_and_pool_run_once_on_every_worker() {
    let (tx, rx) = std::sync::mpsc::channel();
    sixfold::spawn_broadcast(move |ctx| tx.send(ctx.index()).unwrap());
    let mut v: Vec<usize> = rx.into_iter().collect();
    v.sort_unstable();
    assert!(v.into_iter().eq(0..sixfold::current_num_threads()));

    let pool = Pool::builder().num_threads(7).build().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    pool.spawn_broadcast(move |ctx| tx.send((ctx.index(), ctx.num_threads())).unwrap());
    // The sender is dropped with the last call: the receiver then ends.
    let mut v: Vec<(usize, usize)> = rx.into_iter().collect();
    v.sort_unstable();
    assert_eq!(v, (0..7).map(|i| (i, 7)).collect::<Vec<_>>());
}

#[test]
fn spawn_broadcast_self_reaches_the_calling_worker_too() {
    let pool = Pool::builder().num_threads(7).build().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    pool.spawn(move || sixfold::spawn_broadcast(move |ctx| tx.send(ctx.index()).unwrap()));
    let mut v: Vec<usize> = rx.into_iter().collect();
    v.sort_unstable();
    assert!(v.into_iter().eq(0..7));
}

#[test]
fn spawn_broadcast_mutual_across_pools() {
    within("mutual spawn_broadcasts", Duration::from_secs(120), || {
        let (tx, rx) = std::sync::mpsc::channel();
        let pool1 = Arc::new(Pool::builder().num_threads(3).build().unwrap());
        let pool2 = Pool::builder().num_threads(7).build().unwrap();
        let p1 = pool1.clone();
        pool2.spawn_broadcast(move |_| {
            let tx = tx.clone();
            p1.spawn_broadcast(move |_| tx.send(()).unwrap());
        });
        assert_eq!(rx.into_iter().count(), 3 * 7);
        // Dropping the pools from here: no task of theirs is left.
        pool2.wait_idle();
        pool1.wait_idle();
    });
}

#[test]
fn spawn_broadcast_panic_runs_everywhere_and_goes_to_the_panic_handler() {
    quiet_intentional_panics();
    let (panics_tx, panics_rx) = std::sync::mpsc::channel::<()>();
    let panics_tx = std::sync::Mutex::new(panics_tx);
    let pool = Pool::builder()
        .num_threads(7)
        .panic_handler(move |_| panics_tx.lock().unwrap().send(()).unwrap())
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    pool.spawn_broadcast(move |ctx| {
        tx.send(()).unwrap();
        if ctx.index().is_multiple_of(2) {
            panic!("Hello, world!");
        }
    });
    // Every worker ran its call, the panicking ones included.
    assert_eq!(rx.into_iter().count(), 7);
    pool.wait_idle();
    // Four of them (workers 0, 2, 4, 6) panicked, each reported once.
    assert_eq!(panics_rx.try_iter().count(), 4);
}

/// rayon: "broadcast runs after the local deque is empty". A worker takes
/// its broadcast job from its mailbox (rule 4), after its own deque (rule
/// 3), the calling worker's included.
#[test]
fn broadcast_after_spawn_runs_after_the_local_deque() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let ran = pool.install(|| {
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        sixfold::spawn(move || r.store(true, Ordering::SeqCst));
        sixfold::broadcast(|_| {});
        // The spawn sat on this worker's deque: it ran first.
        ran.load(Ordering::SeqCst)
    });
    assert!(ran, "the spawn ran before the broadcast returned");
}

/// A worker blocked in a nested wait still runs its broadcast job: `a`
/// returns once `b` started on the other worker, so this worker then waits
/// in the join for `b`, which broadcasts and needs this worker's share.
#[test]
fn broadcast_reaches_a_worker_blocked_in_a_join() {
    within("a broadcast during a join", Duration::from_secs(60), || {
        let pool = Pool::builder().num_threads(2).build().unwrap();
        let b_started = AtomicBool::new(false);
        let seen = pool.install(|| {
            sixfold::join(
                || {
                    while !b_started.load(Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                },
                || {
                    b_started.store(true, Ordering::Release);
                    sixfold::broadcast(|ctx| ctx.index())
                },
            )
            .1
        });
        assert_eq!(seen, [0, 1]);
    });
}

/// rayon-core's yield tests: outside a pool there is nothing to yield to;
/// inside, a pending task runs at the yield (on one worker: exactly then),
/// and with nothing pending the yield reports idle. An enqueued task is
/// not local: `yield_local` leaves it, `yield_now` takes it.
#[test]
fn yield_now_and_yield_local_run_one_pending_task() {
    use sixfold::Yield;
    assert_eq!(sixfold::yield_now(), None);
    assert_eq!(sixfold::yield_local(), None);
    let pool = Pool::builder().num_threads(1).build().unwrap();
    pool.install(|| {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        sixfold::spawn(move || {
            r.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(sixfold::yield_local(), Some(Yield::Executed));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert_eq!(sixfold::yield_local(), Some(Yield::Idle));
        assert_eq!(sixfold::yield_now(), Some(Yield::Idle));
        let r = ran.clone();
        sixfold::enqueue(move || {
            r.fetch_add(10, Ordering::SeqCst);
        });
        assert_eq!(sixfold::yield_local(), Some(Yield::Idle));
        assert_eq!(sixfold::yield_now(), Some(Yield::Executed));
        assert_eq!(ran.load(Ordering::SeqCst), 11);
    });
}

/// `join_context`: the first closure never migrates; the second migrates
/// exactly when another worker ran it; from outside every pool both do.
#[test]
fn join_context_reports_migration() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let (a, b) = pool.install(|| {
        sixfold::join_context(
            |ctx| (ctx.migrated(), sixfold::current_thread_index()),
            |ctx| {
                // Keep `b` around long enough for the idle worker to steal.
                std::thread::sleep(Duration::from_millis(20));
                (ctx.migrated(), sixfold::current_thread_index())
            },
        )
    });
    assert!(!a.0);
    assert_eq!(b.0, a.1 != b.1, "migrated exactly when it ran elsewhere");
    let (x, y) = sixfold::join_context(|c| c.migrated(), |c| c.migrated());
    assert!(x && y);
    assert!(sixfold::max_num_threads() >= 1 << 10);
    assert_eq!(
        pool.install(sixfold::current_thread_has_pending_tasks),
        Some(false)
    );
}

thread_local! {
    static CALLERS_VALUE: Cell<u32> = const { Cell::new(0) };
}

/// rayon's `in_place_scope_tls` and `in_place_scope_fifo_tls`: the body
/// runs on the calling thread, so it sees that thread's thread-locals; the
/// spawned tasks run on the pool's workers.
#[test]
fn in_place_scopes_run_the_body_on_the_calling_thread() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    CALLERS_VALUE.with(|v| v.set(42));
    let caller = thread::current().id();
    let spawned_on_worker = AtomicUsize::new(0);
    pool.in_place_scope(|s| {
        assert_eq!(CALLERS_VALUE.with(Cell::get), 42);
        assert_eq!(thread::current().id(), caller);
        for _ in 0..4 {
            s.spawn(|_| {
                assert!(current_worker().is_some());
                spawned_on_worker.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    pool.in_place_scope_fifo(|s| {
        assert_eq!(CALLERS_VALUE.with(Cell::get), 42);
        for _ in 0..4 {
            s.spawn_fifo(|_| {
                assert!(current_worker().is_some());
                spawned_on_worker.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    assert_eq!(spawned_on_worker.into_inner(), 8);
    // The free functions: the global pool, the body still here.
    sixfold::in_place_scope(|_| assert_eq!(thread::current().id(), caller));
    sixfold::in_place_scope_fifo(|_| assert_eq!(thread::current().id(), caller));
}

/// rayon's `in_place_scope_no_deadlock`: on a one-worker pool, the body
/// (on the calling thread) waits for a spawned task that the worker runs,
/// while the worker's own task waits for the body: neither holds the
/// other's thread.
#[test]
fn in_place_scope_no_deadlock() {
    within("in-place scopes", Duration::from_secs(60), || {
        let pool = Pool::builder().num_threads(1).build().unwrap();
        let (tx, rx) = channel();
        let rx_ref = &Mutex::new(rx);
        pool.in_place_scope(move |s| {
            // With regular scopes this closure would never run because this
            // scope op itself would be blocking the only worker thread.
            s.spawn(move |_| tx.send(()).unwrap());
            rx_ref.lock().unwrap().recv().unwrap();
        });
        let (tx, rx) = channel();
        let rx_ref = &Mutex::new(rx);
        pool.in_place_scope_fifo(move |s| {
            s.spawn_fifo(move |_| tx.send(()).unwrap());
            rx_ref.lock().unwrap().recv().unwrap();
        });
    });
}

/// A panic in the body or a task of an in-place scope is resumed after
/// every task ran (rayon's contract, as for `scope`).
#[test]
fn in_place_scope_runs_every_task_and_resumes_the_body_panic() {
    quiet_intentional_panics();
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let ran = AtomicUsize::new(0);
    let message = expect_panic(|| {
        pool.in_place_scope(|s| {
            for _ in 0..10 {
                s.spawn(|_| {
                    ran.fetch_add(1, Ordering::SeqCst);
                });
            }
            panic!("Hello, world!");
        })
    });
    assert_eq!(message, "Hello, world!");
    assert_eq!(ran.into_inner(), 10);
}

// ---------------------------------------------------------------------
// use_current_thread (rayon-core's tests/use_current_thread.rs).

#[test]
fn use_current_thread_makes_the_builder_worker_0_and_starts_one_thread_less() {
    within("a use_current_thread pool", Duration::from_secs(60), || {
        let started = Arc::new(AtomicUsize::new(0));
        let s = started.clone();
        let pool = Pool::builder()
            .num_threads(2)
            .use_current_thread()
            .start_handler(move |_| {
                s.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap();
        assert_eq!(sixfold::current_thread_index(), Some(0));
        pool.install(|| assert_eq!(sixfold::current_thread_index(), Some(0)));
        // A thread is one pool's worker at a time.
        assert!(matches!(
            Pool::builder().num_threads(2).use_current_thread().build(),
            Err(BuildError::CurrentThreadIsAWorker)
        ));
        // Spawned from worker 0, which then blocks: the other worker takes
        // it from worker 0's deque.
        let pair = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let pair2 = pair.clone();
        pool.spawn(move || {
            assert_ne!(sixfold::current_thread_index(), Some(0));
            *pair2.0.lock().unwrap() = true;
            pair2.1.notify_one();
        });
        let ran = pair
            .1
            .wait_while(pair.0.lock().unwrap(), |ran| !*ran)
            .unwrap();
        drop(ran);
        // Joins and scopes of this thread run in the pool, the other
        // worker helping.
        let (a, b) = sixfold::join(|| 1, sixfold::current_num_threads);
        assert_eq!((a, b), (1, 2));
        let mut seen = Vec::new();
        sixfold::scope(|s| {
            s.spawn(|_| seen.push(sixfold::current_thread_index().is_some()));
        });
        assert_eq!(seen, [true]);
        assert_eq!(
            started.load(Ordering::SeqCst),
            1,
            "one thread started, not two"
        );
        drop(pool);
        // An outside thread again: free functions use the global pool.
        assert_eq!(sixfold::current_thread_index(), None);
    });
}

/// Dropped on its thread, the pool first runs what is left for worker 0:
/// a strict task for it (which no other worker may run) included.
#[test]
fn use_current_thread_pool_runs_its_work_for_worker_0_before_it_drops() {
    within(
        "dropping a use_current_thread pool",
        Duration::from_secs(60),
        || {
            let pool = Pool::builder()
                .num_threads(2)
                .use_current_thread()
                .build()
                .unwrap();
            let (tx, rx) = channel();
            pool.spawn_on(0, move || tx.send(sixfold::current_thread_index()).unwrap())
                .unwrap();
            pool.wait_idle();
            assert_eq!(rx.recv().unwrap(), Some(0));
            let (tx, rx) = channel();
            pool.spawn_on(0, move || tx.send(sixfold::current_thread_index()).unwrap())
                .unwrap();
            drop(pool);
            assert_eq!(rx.recv().unwrap(), Some(0));
        },
    );
}
