//! `scope_fifo` and `spawn_fifo`: per-thread FIFO by the indirection of the
//! Rayon RFC on FIFO scopes, with its required orders: creation order on
//! one worker, composition with a LIFO scope and `join`, and the stealing
//! example (a thief runs what its stolen task spawned before it goes back).

use sixfold::{Pool, join, scope_fifo};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[test]
fn scope_fifo_spawning_a_b_c_on_one_worker_runs_a_b_c() {
    let pool = Pool::builder().num_threads(1).build().unwrap();
    let log = Mutex::new(Vec::new());
    pool.scope_fifo(|s| {
        for name in ["A", "B", "C"] {
            let log = &log;
            s.spawn_fifo(move |_| log.lock().unwrap().push(name));
        }
    });
    assert_eq!(*log.lock().unwrap(), ["A", "B", "C"]);
}

#[test]
fn lifo_scope_around_fifo_scope_around_join_runs_innermost_first() {
    let pool = Pool::builder().num_threads(1).build().unwrap();
    let log = Mutex::new(Vec::new());
    let push = |name: &'static str| log.lock().unwrap().push(name);
    pool.scope(|s1| {
        s1.spawn(|_| push("S1 first"));
        s1.spawn(|_| push("S1 second"));
        scope_fifo(|s2| {
            s2.spawn_fifo(|_| push("S2 first"));
            s2.spawn_fifo(|_| push("S2 second"));
            join(|| push("join A"), || push("join B"));
        });
    });
    assert_eq!(
        *log.lock().unwrap(),
        [
            "join A",
            "join B",
            "S2 first",
            "S2 second",
            "S1 second",
            "S1 first"
        ]
    );
}

#[test]
fn a_thief_runs_what_its_stolen_task_spawned_before_going_back() {
    // T1 spawns A, B, C in a FIFO scope and is held in A; T2 steals B,
    // which spawns D and E; T2 runs D and E before it goes back for C.
    // To make T1 the one that runs A (not a thief racing it for the front
    // of the FIFO), T2 is kept busy until A has started.
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let starts = Mutex::new(Vec::new());
    let (a_started, e_started) = (AtomicBool::new(false), AtomicBool::new(false));
    let blocker_running = AtomicBool::new(false);
    let start = |name: &'static str| starts.lock().unwrap().push(name);
    let wait_for = |flag: &AtomicBool, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !flag.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "{what} never happened");
            std::thread::sleep(Duration::from_micros(100));
        }
    };
    std::thread::scope(|outside| {
        // T2: whichever worker takes this first, held until A started.
        outside.spawn(|| {
            pool.install(|| {
                blocker_running.store(true, Ordering::SeqCst);
                wait_for(&a_started, "A started");
            })
        });
        wait_for(&blocker_running, "the blocker started");
        // T1: the other worker runs the scope body and then A.
        pool.scope_fifo(|s| {
            s.spawn_fifo(|_| {
                start("A");
                a_started.store(true, Ordering::SeqCst);
                wait_for(&e_started, "E started while A held T1");
            });
            s.spawn_fifo(|s| {
                start("B");
                s.spawn_fifo(|_| start("D"));
                s.spawn_fifo(|_| {
                    start("E");
                    e_started.store(true, Ordering::SeqCst);
                });
            });
            s.spawn_fifo(|_| start("C"));
        });
    });
    assert_eq!(*starts.lock().unwrap(), ["A", "B", "D", "E", "C"]);
}

#[test]
fn fifo_scope_borrows_nests_and_finishes_everything() {
    for threads in [0, 1, 2, 4] {
        let pool = Pool::builder().num_threads(threads).build().unwrap();
        let count = AtomicUsize::new(0);
        fn tree<'s>(s: &sixfold::ScopeFifo<'s>, count: &'s AtomicUsize, depth: u32) {
            count.fetch_add(1, Ordering::Relaxed);
            if depth > 0 {
                s.spawn_fifo(move |s| tree(s, count, depth - 1));
                s.spawn_fifo(move |s| tree(s, count, depth - 1));
            }
        }
        pool.scope_fifo(|s| tree(s, &count, 10));
        assert_eq!(count.load(Ordering::Relaxed), 2047, "{threads} threads");
    }
}

#[test]
fn a_panic_in_a_fifo_task_lets_the_rest_run_and_is_resumed() {
    let pool = Pool::builder().num_threads(1).build().unwrap();
    let ran = AtomicUsize::new(0);
    let caught = catch_unwind(AssertUnwindSafe(|| {
        pool.scope_fifo(|s| {
            s.spawn_fifo(|_| panic!("first task failed"));
            for _ in 0..50 {
                s.spawn_fifo(|_| {
                    ran.fetch_add(1, Ordering::SeqCst);
                });
            }
        })
    }));
    assert_eq!(
        caught.unwrap_err().downcast_ref::<&str>(),
        Some(&"first task failed")
    );
    // rayon's contract: the 50 spawned after the panic still ran.
    assert_eq!(ran.load(Ordering::SeqCst), 50);
    assert_eq!(pool.install(|| 7), 7);
}

#[test]
fn pool_spawn_fifo_from_a_worker_runs_in_spawn_order_and_spawn_in_reverse() {
    use std::sync::Arc;
    let pool = Arc::new(Pool::builder().num_threads(1).build().unwrap());
    for fifo in [true, false] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (p, l) = (pool.clone(), log.clone());
        pool.install(move || {
            for i in 0..5 {
                let l = l.clone();
                let task = move || l.lock().unwrap().push(i);
                if fifo {
                    p.spawn_fifo(task);
                } else {
                    p.spawn(task);
                }
            }
        });
        pool.wait_idle();
        let expected: Vec<i32> = if fifo {
            vec![0, 1, 2, 3, 4]
        } else {
            vec![4, 3, 2, 1, 0]
        };
        assert_eq!(*log.lock().unwrap(), expected, "fifo = {fifo}");
    }
}
