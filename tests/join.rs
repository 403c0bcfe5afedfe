//! `join` and `Pool::join`: both results come back, a panic is resumed only
//! after both halves finished (the first closure's panic wins), stolen
//! halves are waited for, and a join allocates nothing.

mod common;

use common::{fib_join as fib, pool};
use sixfold::{Pool, join};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Counts the allocations of the counted pool's worker threads while
/// `COUNTING` is on (other tests run in parallel in this process).
struct CountingAllocator;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static IN_COUNTED_POOL: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) && IN_COUNTED_POOL.with(Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

#[test]
fn join_returns_both_results_in_a_pool_and_outside() {
    for threads in [0, 1, 2, 4] {
        let pool = pool(threads);
        assert_eq!(pool.install(|| fib(18)), 2584, "{threads} threads");
        let (x, y) = pool.join(|| 1 + 1, || "two");
        assert_eq!((x, y), (2, "two"));
    }
    // Outside every pool both halves run on this thread.
    assert_eq!(fib(10), 55);
}

#[test]
fn join_borrows_from_the_stack_and_sees_every_element_once() {
    let pool = pool(2);
    let data: Vec<u64> = (0..100_000).collect();
    fn sum(slice: &[u64]) -> u64 {
        if slice.len() <= 64 {
            return slice.iter().sum();
        }
        let (left, right) = slice.split_at(slice.len() / 2);
        let (a, b) = join(|| sum(left), || sum(right));
        a + b
    }
    assert_eq!(pool.install(|| sum(&data)), 100_000 * 99_999 / 2);
}

#[test]
fn the_first_closures_panic_wins_after_both_finished() {
    let pool = pool(2);
    let b_finished = AtomicBool::new(false);
    let caught = catch_unwind(AssertUnwindSafe(|| {
        pool.join(
            || panic!("first"),
            || {
                std::thread::sleep(Duration::from_millis(20));
                b_finished.store(true, Ordering::SeqCst);
                panic!("second")
            },
        )
    }));
    let payload = caught.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"first"));
    assert!(
        b_finished.load(Ordering::SeqCst),
        "join returned before b finished"
    );

    let caught = catch_unwind(AssertUnwindSafe(|| {
        pool.join(|| 1, || -> i32 { panic!("only b") })
    }));
    assert_eq!(caught.unwrap_err().downcast_ref::<&str>(), Some(&"only b"));
    // The pool keeps working.
    assert_eq!(pool.install(|| fib(15)), 610);
}

#[test]
fn a_stolen_half_is_waited_for() {
    let pool = pool(2);
    let stolen = AtomicUsize::new(0);
    pool.install(|| {
        for _ in 0..200 {
            let me = sixfold::current_worker();
            let (_, ran_on) = join(
                || std::thread::sleep(Duration::from_micros(300)),
                sixfold::current_worker,
            );
            if ran_on != me {
                stolen.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    assert!(
        stolen.load(Ordering::SeqCst) > 0,
        "no second half was ever stolen"
    );
}

#[test]
fn join_allocates_nothing() {
    let pool = Pool::builder()
        .num_threads(2)
        .start_handler(|_| IN_COUNTED_POOL.with(|c| c.set(true)))
        .build()
        .unwrap();
    // Warm up: thread-locals, deque buffers and parking state are set up
    // on first use.
    for _ in 0..3 {
        assert_eq!(pool.install(|| fib(20)), 6765);
    }
    let fib_on_worker = || {
        COUNTING.store(true, Ordering::SeqCst);
        let value = fib(20);
        COUNTING.store(false, Ordering::SeqCst);
        value
    };
    assert_eq!(pool.install(fib_on_worker), 6765);
    assert_eq!(
        ALLOCATIONS.load(Ordering::SeqCst),
        0,
        "10,945 joins allocated"
    );
}
