//! Strict affinity: a task, graph node or pipeline stage placed on a
//! worker runs there and nowhere else, however long that worker stays
//! busy while the others idle (no proxy lets them take it); a worker
//! blocked in a nested wait still runs its strict tasks (rule 4), so they
//! cannot deadlock on it; an out-of-range worker is an error.

mod common;

use common::within;
use sixfold::{Graph, GraphError, Pipeline, PipelineError, Pool, TaskRef};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

const WATCHDOG: Duration = Duration::from_secs(300);

#[test]
fn a_hundred_thousand_strict_tasks_for_a_busy_worker_all_run_there() {
    within("the strict tasks", WATCHDOG, || {
        const TASKS: usize = 100_000;
        let pool = Pool::builder().num_threads(2).build().unwrap();
        let release = common::occupy_worker_1(&pool);
        let on_1 = Arc::new(AtomicUsize::new(0));
        let elsewhere = Arc::new(AtomicUsize::new(0));
        for _ in 0..TASKS {
            let (on_1, elsewhere) = (on_1.clone(), elsewhere.clone());
            pool.spawn_on(1, move || {
                if sixfold::current_worker() == Some(1) {
                    on_1.fetch_add(1, Ordering::Relaxed);
                } else {
                    elsewhere.fetch_add(1, Ordering::Relaxed);
                }
            })
            .unwrap();
        }
        // Worker 0 idles for a while: long past a proxy's patience.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(on_1.load(Ordering::Relaxed), 0, "worker 1 is still busy");
        release.store(true, Ordering::SeqCst);
        pool.wait_idle();
        assert_eq!(
            elsewhere.load(Ordering::Relaxed),
            0,
            "strict tasks ran elsewhere"
        );
        assert_eq!(on_1.load(Ordering::Relaxed), TASKS);
    });
}

#[test]
fn strict_graph_nodes_and_pipeline_stages_wait_for_their_busy_worker() {
    within("strict nodes and stages", WATCHDOG, || {
        let pool = Arc::new(Pool::builder().num_threads(2).build().unwrap());
        let release = common::occupy_worker_1(&pool);
        let releaser = {
            let release = release.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                release.store(true, Ordering::SeqCst);
            })
        };
        let ran_on = AtomicUsize::new(usize::MAX);
        let mut g = Graph::new();
        let node = g.add(|| ran_on.store(sixfold::current_worker().unwrap(), Ordering::SeqCst));
        g.set_strict_affinity(node, 1).unwrap();
        pool.run_graph(&mut g).unwrap();
        drop(g);
        assert_eq!(ran_on.load(Ordering::SeqCst), 1, "it waited for worker 1");
        releaser.join().unwrap();

        let release = common::occupy_worker_1(&pool);
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            release.store(true, Ordering::SeqCst);
        });
        let mut next = 0;
        let mut stage_workers = Vec::new();
        let mut p = Pipeline::new(|| {
            next += 1;
            (next <= 100).then_some(next)
        })
        .serial_in_order(|x: u32| {
            stage_workers.push(sixfold::current_worker());
            x
        })
        .pin_strict(1)
        .parallel(|x| x * 2);
        pool.run_pipeline(&mut p, 8).unwrap();
        drop(p);
        releaser.join().unwrap();
        assert_eq!(stage_workers.len(), 100);
        assert!(
            stage_workers.iter().all(|&w| w == Some(1)),
            "{stage_workers:?}"
        );
    });
}

/// Worker 1 runs a task that waits (a nested `run`) for a node placed
/// strictly on worker 0, which spins until a strict task for worker 1 has
/// run. That task can only run inside worker 1's wait: the wait takes its
/// mailbox (rule 4).
#[test]
fn a_strict_task_for_a_worker_blocked_in_a_nested_wait_runs_inside_the_wait() {
    within("the nested wait", WATCHDOG, || {
        let pool = Arc::new(Pool::builder().num_threads(2).build().unwrap());
        let waiting = Arc::new(AtomicBool::new(false));
        let strict_ran = Arc::new(AtomicUsize::new(usize::MAX));
        let inside_wait = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        {
            let (p, waiting, strict_ran, inside_wait, done) = (
                pool.clone(),
                waiting.clone(),
                strict_ran.clone(),
                inside_wait.clone(),
                done.clone(),
            );
            pool.spawn_on(1, move || {
                let ran = strict_ran.clone();
                p.run(TaskRef::from_fn(move |cx| {
                    let ran = ran.clone();
                    cx.spawn_on(
                        0,
                        TaskRef::from_fn(move |_| {
                            while ran.load(Ordering::SeqCst) == usize::MAX {
                                std::thread::yield_now();
                            }
                        }),
                    )
                    .unwrap();
                    waiting.store(true, Ordering::SeqCst);
                }));
                // The run returned: the strict task ran before that.
                inside_wait.store(
                    strict_ran.load(Ordering::SeqCst) != usize::MAX,
                    Ordering::SeqCst,
                );
                done.store(true, Ordering::SeqCst);
            })
            .unwrap();
        }
        common::poll_until("worker 1 waiting", Duration::from_secs(60), || {
            waiting.load(Ordering::SeqCst)
        });
        let ran = strict_ran.clone();
        pool.spawn_on(1, move || {
            ran.store(sixfold::current_worker().unwrap(), Ordering::SeqCst);
        })
        .unwrap();
        pool.wait_idle();
        assert!(done.load(Ordering::SeqCst));
        assert_eq!(strict_ran.load(Ordering::SeqCst), 1);
        assert!(
            inside_wait.load(Ordering::SeqCst),
            "it ran inside worker 1's wait"
        );
    });
}

#[test]
fn an_out_of_range_worker_is_an_error() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    assert!(pool.spawn_on(2, || {}).is_err());
    assert!(pool.spawn_task_on(7, TaskRef::from_fn(|_| {})).is_err());
    let from_task = Arc::new(AtomicBool::new(false));
    let f = from_task.clone();
    pool.run(TaskRef::from_fn(move |cx| {
        f.store(
            cx.spawn_on(9, TaskRef::from_fn(|_| {})).is_err(),
            Ordering::SeqCst,
        );
    }));
    assert!(from_task.load(Ordering::SeqCst));
    let mut g = Graph::new();
    let node = g.add(|| {});
    g.set_strict_affinity(node, 5).unwrap();
    assert!(matches!(
        pool.run_graph(&mut g),
        Err(GraphError::AffinityOutOfRange { worker: 5, .. })
    ));
    let mut next = 0;
    let mut p = Pipeline::new(|| {
        next += 1;
        (next <= 3).then_some(next)
    })
    .parallel(|x: i32| x)
    .pin_strict(4);
    assert!(matches!(
        pool.run_pipeline(&mut p, 2),
        Err(PipelineError::AffinityOutOfRange { worker: 4, .. })
    ));
}
