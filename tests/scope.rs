//! `scope` and `Pool::scope`: borrowing tasks, per-thread LIFO order on one
//! worker, nested spawns, and panics (not-started tasks cancelled, the
//! panic resumed when the scope ends, the pool still working).

use sixfold::{Pool, scope};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn scope_spawning_a_b_c_on_one_worker_runs_c_b_a() {
    let pool = Pool::builder().num_threads(1).build().unwrap();
    let log = Mutex::new(Vec::new());
    pool.scope(|s| {
        for name in ["A", "B", "C"] {
            let log = &log;
            s.spawn(move |_| log.lock().unwrap().push(name));
        }
    });
    assert_eq!(*log.lock().unwrap(), ["C", "B", "A"]);
}

#[test]
fn spawned_tasks_borrow_and_mutate_the_callers_data() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let mut chunks = vec![0u64; 64];
    let data: Vec<u64> = (0..64 * 1000).collect();
    pool.scope(|s| {
        for (i, slot) in chunks.iter_mut().enumerate() {
            let part = &data[i * 1000..(i + 1) * 1000];
            s.spawn(move |_| *slot = part.iter().sum());
        }
    });
    assert_eq!(chunks.iter().sum::<u64>(), data.iter().sum::<u64>());
}

#[test]
fn nested_spawns_all_finish_before_the_scope_returns() {
    for threads in [0, 1, 2, 4] {
        let pool = Pool::builder().num_threads(threads).build().unwrap();
        let count = AtomicUsize::new(0);
        fn tree<'s>(s: &sixfold::Scope<'s>, count: &'s AtomicUsize, depth: u32) {
            count.fetch_add(1, Ordering::Relaxed);
            if depth > 0 {
                s.spawn(move |s| tree(s, count, depth - 1));
                s.spawn(move |s| tree(s, count, depth - 1));
            }
        }
        pool.scope(|s| tree(s, &count, 10));
        assert_eq!(count.load(Ordering::Relaxed), 2047, "{threads} threads");
    }
}

#[test]
fn scope_outside_every_pool_runs_on_the_calling_thread() {
    let me = std::thread::current().id();
    let ran_here = AtomicUsize::new(0);
    scope(|s| {
        for _ in 0..10 {
            s.spawn(|_| {
                if std::thread::current().id() == me {
                    ran_here.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    assert_eq!(ran_here.load(Ordering::SeqCst), 10);
}

#[test]
fn a_panicking_task_cancels_the_not_started_ones_and_is_resumed() {
    // One worker: the body spawns a panicking task last, so it runs first
    // (LIFO) and the 100 spawned before it have not started.
    let pool = Pool::builder().num_threads(1).build().unwrap();
    let ran = AtomicUsize::new(0);
    let caught = catch_unwind(AssertUnwindSafe(|| {
        pool.scope(|s| {
            for _ in 0..100 {
                s.spawn(|_| {
                    ran.fetch_add(1, Ordering::SeqCst);
                });
            }
            s.spawn(|_| panic!("task failed"));
        })
    }));
    assert_eq!(
        caught.unwrap_err().downcast_ref::<&str>(),
        Some(&"task failed")
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    // The pool keeps working.
    let after = AtomicUsize::new(0);
    pool.scope(|s| {
        s.spawn(|_| {
            after.fetch_add(1, Ordering::SeqCst);
        })
    });
    assert_eq!(after.load(Ordering::SeqCst), 1);
}

#[test]
fn the_bodys_panic_wins_and_waits_for_started_tasks() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let finished = AtomicUsize::new(0);
    let caught = catch_unwind(AssertUnwindSafe(|| {
        pool.scope(|s| {
            s.spawn(|_| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                finished.fetch_add(1, Ordering::SeqCst);
            });
            std::thread::sleep(std::time::Duration::from_millis(5));
            panic!("body failed")
        })
    }));
    assert_eq!(
        caught.unwrap_err().downcast_ref::<&str>(),
        Some(&"body failed")
    );
    // The spawned task was taken by the other worker before the panic and
    // finished before the scope returned; had it not started, it would
    // have been cancelled. Either way nothing runs after the scope.
    let after_scope = finished.load(Ordering::SeqCst);
    std::thread::sleep(std::time::Duration::from_millis(40));
    assert_eq!(finished.load(Ordering::SeqCst), after_scope);
}
