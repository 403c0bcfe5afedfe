//! Enqueue priorities: rule 5 takes the high lane first, then the normal
//! lanes, then the low lane; FIFO within a lane; a low task still runs once
//! the higher lanes are empty.

mod common;

use common::within;
use sixfold::{Dispatch, Graph, Pool, Priority, TaskRef};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A one-worker pool whose worker is held busy until the returned flag is
/// set, so that everything enqueued meanwhile waits in the shared queue.
fn held_pool() -> (Pool, Arc<AtomicBool>) {
    let pool = Pool::builder().num_threads(1).build().unwrap();
    let release = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let (r, s) = (release.clone(), started.clone());
    pool.spawn(move || {
        s.store(true, Ordering::SeqCst);
        while !r.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    });
    common::poll_until("the worker held", Duration::from_secs(60), || {
        started.load(Ordering::SeqCst)
    });
    (pool, release)
}

#[test]
fn a_high_priority_task_enqueued_after_100_normal_ones_runs_first() {
    within("the priorities", Duration::from_secs(120), || {
        let (pool, release) = held_pool();
        let log = Arc::new(Mutex::new(Vec::new()));
        for i in 0..100 {
            let log = log.clone();
            pool.enqueue(move || log.lock().unwrap().push(i));
        }
        let l = log.clone();
        pool.enqueue_with_priority(Priority::High, move || l.lock().unwrap().push(1000));
        release.store(true, Ordering::SeqCst);
        pool.wait_idle();
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 101);
        assert_eq!(log[0], 1000, "the high task ran first: {:?}", &log[..5]);
        assert!(
            log[1..].windows(2).all(|w| w[0] < w[1]),
            "normal tasks in FIFO order"
        );
    });
}

#[test]
fn lanes_run_high_then_normal_then_low_and_low_tasks_are_not_lost() {
    within("the priorities", Duration::from_secs(120), || {
        let (pool, release) = held_pool();
        let log = Arc::new(Mutex::new(Vec::new()));
        let push = |priority: Priority, tag: char, n: usize| {
            for i in 0..n {
                let log = log.clone();
                pool.enqueue_with_priority(priority, move || log.lock().unwrap().push((tag, i)));
            }
        };
        push(Priority::Low, 'l', 10);
        push(Priority::Normal, 'n', 50);
        // A long stream of high-priority work.
        push(Priority::High, 'h', 2000);
        release.store(true, Ordering::SeqCst);
        pool.wait_idle();
        let log = log.lock().unwrap();
        let tags: String = log.iter().map(|&(t, _)| t).collect();
        let expected = "h".repeat(2000) + &"n".repeat(50) + &"l".repeat(10);
        assert_eq!(
            tags, expected,
            "high, then normal, then low (the low ones ran)"
        );
        for tag in ['h', 'n', 'l'] {
            let order: Vec<usize> = log.iter().filter(|e| e.0 == tag).map(|e| e.1).collect();
            assert!(
                order.windows(2).all(|w| w[0] < w[1]),
                "FIFO within lane {tag}"
            );
        }
    });
}

#[test]
fn a_task_node_carries_its_priority() {
    within("the priorities", Duration::from_secs(120), || {
        let (pool, release) = held_pool();
        let log = Arc::new(Mutex::new(Vec::new()));
        for _ in 0..20 {
            let log = log.clone();
            pool.enqueue(move || log.lock().unwrap().push("normal"));
        }
        let l = log.clone();
        pool.enqueue_task(
            TaskRef::from_fn(move |_| l.lock().unwrap().push("task")).with_priority(Priority::High),
        );
        release.store(true, Ordering::SeqCst);
        pool.wait_idle();
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 21);
        assert_eq!(log[0], "task", "{log:?}");
    });
}

/// A finished graph node makes two enqueue-dispatched successors ready at
/// once, the normal one first: the one worker then takes the high one
/// first (rule 5's high lane), whatever order they were made ready in.
#[test]
fn a_graph_node_carries_its_priority() {
    let pool = Pool::builder().num_threads(1).build().unwrap();
    let log = Mutex::new(Vec::new());
    let mut g = Graph::new();
    let root = g.add(|| log.lock().unwrap().push("root"));
    let normal = g.add(|| log.lock().unwrap().push("normal"));
    let high = g.add(|| log.lock().unwrap().push("high"));
    for node in [normal, high] {
        g.set_dispatch(node, Dispatch::Enqueue).unwrap();
        g.precede(root, node).unwrap();
    }
    g.set_priority(high, Priority::High).unwrap();
    for _ in 0..10 {
        pool.run_graph(&mut g).unwrap();
    }
    drop(g);
    let log = log.into_inner().unwrap();
    assert!(
        log.chunks(3).all(|run| run == ["root", "high", "normal"]),
        "{log:?}"
    );
}

/// A task that enqueues itself again and again on one worker must not
/// keep a task enqueued from elsewhere waiting: each pop starts one lane
/// further. Worker 1 is held, so worker 0 is the only one taking enqueued
/// tasks; its re-enqueued task goes to its own lane, the other tasks come
/// from two new threads outside the pool (so from both lanes, whichever
/// the first took). Before, worker 0 always scanned its own lane first,
/// found the re-enqueued task there every time, and the others ran only
/// once worker 1 was free.
#[test]
fn a_task_that_keeps_re_enqueueing_itself_does_not_starve_other_lanes() {
    let pool = Arc::new(Pool::builder().num_threads(2).build().unwrap());
    let others_done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let held = Arc::new(AtomicBool::new(false));
    {
        let (done, held) = (others_done.clone(), held.clone());
        pool.spawn_on(1, move || {
            held.store(true, Ordering::SeqCst);
            // Held until both other tasks ran (or long past the point).
            common::wait_for(Duration::from_secs(30), || done.load(Ordering::SeqCst) == 2);
        })
        .unwrap();
    }
    common::poll_until("worker 1 held", Duration::from_secs(20), || {
        held.load(Ordering::SeqCst)
    });
    fn again(pool: Arc<Pool>, done: Arc<std::sync::atomic::AtomicUsize>, rounds: u64) {
        if done.load(Ordering::SeqCst) == 2 || rounds > 50_000_000 {
            return;
        }
        let p = pool.clone();
        pool.enqueue(move || again(p, done, rounds + 1));
    }
    {
        let (p, d) = (pool.clone(), others_done.clone());
        pool.spawn_on(0, move || again(p, d, 0)).unwrap();
    }
    for _ in 0..2 {
        let (p, d) = (pool.clone(), others_done.clone());
        std::thread::spawn(move || {
            p.enqueue(move || {
                d.fetch_add(1, Ordering::SeqCst);
            })
        })
        .join()
        .unwrap();
    }
    common::poll_until(
        "both tasks enqueued from outside, while worker 1 is held",
        Duration::from_secs(20),
        || others_done.load(Ordering::SeqCst) == 2,
    );
    pool.wait_idle();
}
