//! Affinity through mailbox proxies: a task with affinity for worker k runs
//! on k when k is free, elsewhere when k is held busy, and never twice.

mod common;

use sixfold::{Graph, Pool, current_worker};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The tests here measure where tasks run on "free" workers: run them one
/// at a time, so they do not compete for the machine's two cores (a worker
/// descheduled for a millisecond looks stuck, and its proxies get claimed).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn pool(threads: usize) -> Arc<Pool> {
    Arc::new(common::pool(threads))
}

/// 10,000 tasks for worker 1 on two free workers: at least 95% run there,
/// whether spawned from worker 0 (proxies in its deque) or from outside
/// (proxies in the shared queue).
#[test]
fn free_target_runs_at_least_95_percent_of_its_tasks() {
    let _serial = serial();
    const TASKS: usize = 10_000;
    for from_worker in [true, false] {
        let pool = pool(2);
        let on_target = Arc::new(AtomicUsize::new(0));
        let ran = Arc::new(AtomicUsize::new(0));
        let submit = {
            let (pool, on_target, ran) = (pool.clone(), on_target.clone(), ran.clone());
            move || {
                for _ in 0..TASKS {
                    let (on_target, ran) = (on_target.clone(), ran.clone());
                    pool.spawn_with_affinity(1, move || {
                        if current_worker() == Some(1) {
                            on_target.fetch_add(1, Ordering::Relaxed);
                        }
                        ran.fetch_add(1, Ordering::Relaxed);
                    })
                    .unwrap();
                }
            }
        };
        if from_worker {
            pool.spawn_with_affinity(0, submit).unwrap();
        } else {
            submit();
        }
        pool.wait_idle();
        assert_eq!(ran.load(Ordering::Relaxed), TASKS);
        let hits = on_target.load(Ordering::Relaxed);
        assert!(
            hits * 100 >= TASKS * 95,
            "only {hits} of {TASKS} ran on worker 1 (from a worker: {from_worker})"
        );
    }
}

/// Worker 1 is held for 200 ms; tasks with affinity for it, submitted
/// meanwhile from worker 0 and from outside, all complete within that time
/// (another worker claims their proxies).
#[test]
fn busy_target_does_not_strand_its_tasks() {
    let _serial = serial();
    const TASKS: usize = 100;
    let pool = pool(2);
    let held = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    {
        let (held, release) = (held.clone(), release.clone());
        pool.spawn_with_affinity(1, move || {
            held.store(true, Ordering::SeqCst);
            let start = Instant::now();
            while !release.load(Ordering::SeqCst) && start.elapsed() < Duration::from_millis(200) {
                std::thread::sleep(Duration::from_millis(1));
            }
        })
        .unwrap();
    }
    while !held.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    let done = Arc::new(AtomicUsize::new(0));
    let elsewhere = Arc::new(AtomicUsize::new(0));
    let task = {
        let (done, elsewhere) = (done.clone(), elsewhere.clone());
        move || {
            if current_worker() != Some(1) {
                elsewhere.fetch_add(1, Ordering::Relaxed);
            }
            done.fetch_add(1, Ordering::Relaxed);
        }
    };
    // Half from worker 0, half from outside.
    {
        let (pool2, task) = (pool.clone(), task.clone());
        pool.spawn_with_affinity(0, move || {
            for _ in 0..TASKS / 2 {
                pool2.spawn_with_affinity(1, task.clone()).unwrap();
            }
        })
        .unwrap();
    }
    for _ in 0..TASKS / 2 {
        pool.spawn_with_affinity(1, task.clone()).unwrap();
    }
    let start = Instant::now();
    while done.load(Ordering::Relaxed) < TASKS && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    release.store(true, Ordering::SeqCst);
    pool.wait_idle();
    assert_eq!(done.load(Ordering::Relaxed), TASKS);
    // Had any waited for worker 1, it would have run there once the hold
    // ended (200 ms at most): all ran elsewhere, so within the hold.
    assert_eq!(
        elsewhere.load(Ordering::Relaxed),
        TASKS,
        "all ran on worker 0"
    );
}

/// Proxy claims under contention: 4 workers, tasks with affinity for every
/// worker spawned from inside and outside the pool and from graph nodes;
/// each task runs exactly once.
#[test]
fn no_task_runs_twice() {
    let _serial = serial();
    const TASKS: usize = 20_000;
    for threads in [2, 4] {
        let pool = pool(threads);
        let runs: Arc<Vec<AtomicU32>> = Arc::new((0..TASKS).map(|_| AtomicU32::new(0)).collect());
        let spawn_range = |pool: &Arc<Pool>, range: std::ops::Range<usize>| {
            for i in range {
                let runs = runs.clone();
                pool.spawn_with_affinity(i % threads, move || {
                    runs[i].fetch_add(1, Ordering::Relaxed);
                })
                .unwrap();
            }
        };
        // From outside...
        spawn_range(&pool, 0..TASKS / 2);
        // ...and from every worker at once.
        let per = TASKS / 2 / threads;
        for w in 0..threads {
            let (p, range) = (pool.clone(), TASKS / 2 + w * per..TASKS / 2 + (w + 1) * per);
            let runs = runs.clone();
            pool.spawn_with_affinity(w, move || {
                for i in range {
                    let runs = runs.clone();
                    p.spawn_with_affinity((i + 1) % threads, move || {
                        runs[i].fetch_add(1, Ordering::Relaxed);
                    })
                    .unwrap();
                }
            })
            .unwrap();
        }
        pool.wait_idle();
        for (i, r) in runs.iter().enumerate() {
            assert_eq!(
                r.load(Ordering::Relaxed),
                1,
                "task {i} on {threads} workers"
            );
        }
    }
}

/// Graph nodes with affinity take the same path: they run on their worker
/// when it is free.
#[test]
fn graph_nodes_with_affinity_run_on_their_worker() {
    let _serial = serial();
    let pool = pool(2);
    let wrong = AtomicUsize::new(0);
    let mut g = Graph::new();
    let root = g.add(|| {});
    for i in 0..64 {
        let target = i % 2;
        let wrong = &wrong;
        let n = g.add(move || {
            if current_worker() != Some(target) {
                wrong.fetch_add(1, Ordering::Relaxed);
            }
        });
        g.set_affinity(n, Some(target)).unwrap();
        g.precede(root, n).unwrap();
    }
    pool.run_graph_n(&mut g, 20).unwrap();
    // 1280 node runs; proxies may take a few when a target is briefly busy.
    let wrong = wrong.load(Ordering::Relaxed);
    assert!(
        wrong * 100 <= 1280 * 5,
        "{wrong} of 1280 ran off their worker"
    );
}

/// Affinity replay: with it on, a node runs where it ran the time before.
/// The first run places the nodes by explicit affinity (half on each
/// worker); then the affinities are cleared and replay alone keeps them.
#[test]
fn graph_affinity_replay_keeps_nodes_where_they_ran() {
    let _serial = serial();
    const NODES: usize = 64;
    const RUNS: usize = 20;
    let pool = pool(2);
    let last: Vec<AtomicUsize> = (0..NODES).map(|_| AtomicUsize::new(usize::MAX)).collect();
    let moved = AtomicUsize::new(0);
    let mut g = Graph::new();
    let root = g.add(|| {});
    let mut ids = Vec::new();
    for slot in &last {
        let moved = &moved;
        let n = g.add(move || {
            std::hint::black_box((0..20_000u64).sum::<u64>());
            let here = current_worker().unwrap();
            let before = slot.swap(here, Ordering::Relaxed);
            if before != usize::MAX && before != here {
                moved.fetch_add(1, Ordering::Relaxed);
            }
        });
        g.precede(root, n).unwrap();
        ids.push(n);
    }
    g.set_affinity_replay(true);
    for (i, &n) in ids.iter().enumerate() {
        g.set_affinity(n, Some(i % 2)).unwrap();
    }
    pool.run_graph(&mut g).unwrap();
    for &n in &ids {
        g.set_affinity(n, None).unwrap();
    }
    moved.store(0, Ordering::Relaxed);
    pool.run_graph_n(&mut g, RUNS).unwrap();
    let used: std::collections::BTreeSet<_> =
        last.iter().map(|s| s.load(Ordering::Relaxed)).collect();
    assert_eq!(used.len(), 2, "both workers kept nodes");
    let moved = moved.load(Ordering::Relaxed);
    assert!(
        moved * 100 <= NODES * RUNS * 5,
        "{moved} of {} node runs moved to another worker",
        NODES * RUNS
    );
}

/// A burst for an idle worker whose first task is long: the worker takes
/// the long one, and the rest must not wait behind it (their proxies are
/// not given up just because the worker moved once).
#[test]
fn a_burst_behind_a_long_task_is_not_stranded() {
    let _serial = serial();
    const SHORT: usize = 10;
    let pool = pool(2);
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    pool.spawn_with_affinity(1, move || {
        let start = Instant::now();
        while !r.load(Ordering::SeqCst) && start.elapsed() < Duration::from_millis(200) {
            std::thread::sleep(Duration::from_millis(1));
        }
    })
    .unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let on_1 = Arc::new(AtomicUsize::new(0));
    for _ in 0..SHORT {
        let (done, on_1) = (done.clone(), on_1.clone());
        pool.spawn_with_affinity(1, move || {
            if current_worker() == Some(1) {
                on_1.fetch_add(1, Ordering::Relaxed);
            }
            done.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    }
    let start = Instant::now();
    while done.load(Ordering::Relaxed) < SHORT && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    release.store(true, Ordering::SeqCst);
    pool.wait_idle();
    // Had they waited for worker 1, they would have run there after the
    // long task (200 ms at most).
    assert_eq!(
        on_1.load(Ordering::Relaxed),
        0,
        "short tasks waited behind the long one"
    );
}
