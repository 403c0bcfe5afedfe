//! `scope` and `Pool::scope`: borrowing tasks, per-thread LIFO order on one
//! worker, nested spawns, the global pool outside every pool, and rayon's
//! panic contract (every spawned task still runs, the first panic is
//! resumed when the scope ends, the body's first, the pool still working).

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
fn scope_outside_every_pool_runs_in_the_global_pool() {
    let on_workers = AtomicUsize::new(0);
    scope(|s| {
        for _ in 0..10 {
            s.spawn(|_| {
                if sixfold::current_worker().is_some() {
                    on_workers.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    assert_eq!(on_workers.load(Ordering::SeqCst), 10);
}

#[test]
fn a_panicking_task_lets_every_other_task_run_and_is_resumed() {
    // One worker: the body spawns a panicking task last, so it runs first
    // (LIFO) and the 100 spawned before it have not started. Under rayon's
    // contract they all run anyway (they may own resources to release).
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
    assert_eq!(ran.load(Ordering::SeqCst), 100);
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
fn the_bodys_panic_wins_and_every_task_still_runs() {
    for threads in [1, 2] {
        let pool = Pool::builder().num_threads(threads).build().unwrap();
        let finished = AtomicUsize::new(0);
        let caught = catch_unwind(AssertUnwindSafe(|| {
            pool.scope(|s| {
                s.spawn(|_| panic!("task failed"));
                for _ in 0..9 {
                    s.spawn(|_| {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        finished.fetch_add(1, Ordering::SeqCst);
                    });
                }
                panic!("body failed")
            })
        }));
        assert_eq!(
            caught.unwrap_err().downcast_ref::<&str>(),
            Some(&"body failed"),
            "{threads} threads"
        );
        // All nine ran, before the scope returned: nothing runs after it.
        assert_eq!(finished.load(Ordering::SeqCst), 9, "{threads} threads");
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(finished.load(Ordering::SeqCst), 9, "{threads} threads");
    }
}
