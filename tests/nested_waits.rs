//! The two guards on waits inside tasks (ARCHITECTURE.md, "Waiting
//! inside a task"): past half of its stack a nested wait stops stealing,
//! and only a worker's outermost loop takes enqueued tasks (rule 5), except
//! for a wait whose own work went to the shared queue: that work is kept
//! apart for it, so it takes its own and no task enqueued by others.

mod common;

use common::wait_for;
use sixfold::{Pool, TaskRef, join, scope};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

thread_local! {
    /// How many of the overflow test's tasks are on this thread's stack.
    static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}
static MAX_DEPTH: AtomicUsize = AtomicUsize::new(0);

/// rayon #854's shape. One worker holds 10,000 unrelated tasks in its deque
/// and does not run them itself; the others steal them. Each task joins two
/// halves: `a` waits until `b` was stolen, `b` lasts until the task's
/// worker, waiting for it, has stolen the next unrelated task on top of the
/// waiting one. With the guard disabled (and `b` sleeping 50 us instead),
/// workers nested 28 to 56 of these tasks (10 runs), and with each task's
/// 8 KiB of scratch a 256 KiB stack overflowed in 6 runs of 6, aborting the
/// test binary. Guarded, the nesting stops at half of the stack (7 deep).
///
/// The halves wait for events, not for a time: with `a` giving up after
/// 300 us and `b` sleeping 50 us, thieves and waiters descheduled on a
/// loaded machine left the joins without a nested steal, and the nesting
/// stopped at 3 or 4 deep, short of the guard.
#[test]
fn stealing_during_waits_cannot_overflow_a_small_stack() {
    const TASKS: usize = 10_000;
    /// The workers other than the producer.
    const THIEVES: usize = 3;
    /// Tasks whose `a` half is waiting for a thief to start `b`.
    static SPINNING: AtomicUsize = AtomicUsize::new(0);
    /// Tasks started, in all and per worker.
    static STARTED: AtomicUsize = AtomicUsize::new(0);
    static STARTED_ON: [AtomicUsize; THIEVES + 1] = [const { AtomicUsize::new(0) }; THIEVES + 1];
    let pool = Arc::new(
        Pool::builder()
            .num_threads(THIEVES + 1)
            .stack_size(256 << 10)
            .build()
            .unwrap(),
    );
    let done = Arc::new(AtomicUsize::new(0));
    let (d, p) = (done.clone(), pool.clone());
    pool.spawn(move || {
        // The producer: push every task onto this worker's deque, then
        // stay out of the way (not a scheduler wait: it takes no task).
        for _ in 0..TASKS {
            let (d, p) = (d.clone(), p.clone());
            p.clone().spawn(move || {
                let depth = DEPTH.with(|c| {
                    c.set(c.get() + 1);
                    c.get()
                });
                MAX_DEPTH.fetch_max(depth, Ordering::Relaxed);
                let me = sixfold::current_worker().unwrap();
                STARTED.fetch_add(1, Ordering::SeqCst);
                // Tasks started on this worker, this one included: one
                // more means one was stolen on top of this one.
                let started_here = STARTED_ON[me].fetch_add(1, Ordering::SeqCst) + 1;
                let guarded_before = p.stats().workers[me].stack_guarded_waits;
                // The task's own working memory: 8 KiB of scratch on the
                // stack, as real tasks have (a parser's buffer, a small
                // matrix). It is what makes each nesting level cost.
                let scratch = std::hint::black_box([depth as u8; 8 << 10]);
                let b_started = AtomicBool::new(false);
                join(
                    || {
                        // Wait for a thief, unless every thief is waiting
                        // here too (then none is left to take `b`: run it
                        // ourselves).
                        SPINNING.fetch_add(1, Ordering::SeqCst);
                        while !b_started.load(Ordering::Acquire)
                            && SPINNING.load(Ordering::SeqCst) < THIEVES
                        {
                            std::thread::yield_now();
                        }
                        SPINNING.fetch_sub(1, Ordering::SeqCst);
                    },
                    || {
                        b_started.store(true, Ordering::Release);
                        if sixfold::current_worker() == Some(me) {
                            return; // not stolen: nothing waits for it
                        }
                        // Until our worker, waiting for us, stole a task on
                        // top of ours; or it cannot: its wait is past the
                        // stack guard, or no task is left to steal.
                        while STARTED_ON[me].load(Ordering::SeqCst) == started_here
                            && p.stats().workers[me].stack_guarded_waits == guarded_before
                            && STARTED.load(Ordering::SeqCst) < TASKS
                        {
                            std::thread::yield_now();
                        }
                    },
                );
                std::hint::black_box(&scratch);
                DEPTH.with(|c| c.set(c.get() - 1));
                d.fetch_add(1, Ordering::Relaxed);
            });
        }
        while d.load(Ordering::Relaxed) < TASKS {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    pool.wait_idle();
    assert_eq!(done.load(Ordering::Relaxed), TASKS);
    let stats = pool.stats();
    let guarded: u64 = stats.workers.iter().map(|w| w.stack_guarded_waits).sum();
    let depth = MAX_DEPTH.load(Ordering::Relaxed);
    eprintln!("deepest nesting: {depth} tasks on one stack");
    // The shape really nests that deep: the guard had to step in.
    assert!(guarded > 0, "the stack guard never engaged:\n{stats}");
    // 8 KiB of scratch each: 16 would fill the whole stack.
    assert!(depth < 16, "{depth} tasks nested on a 256 KiB stack");
}

/// A worker waiting in a nested join does not take an unrelated enqueued
/// task: `b` is stolen and takes 30 ms, a 300 ms task is enqueued meanwhile,
/// and the join returns without having run it.
#[test]
fn a_nested_wait_leaves_enqueued_tasks_to_outer_loops() {
    let pool = Arc::new(Pool::builder().num_threads(2).build().unwrap());
    let long_ran_on = Arc::new(AtomicUsize::new(usize::MAX));
    let joined = Arc::new(AtomicBool::new(false));
    let (p, ran_on, j) = (pool.clone(), long_ran_on.clone(), joined.clone());
    let (caller, long_during_join) = pool.install(move || {
        let caller = sixfold::current_worker().unwrap();
        let b_started = AtomicBool::new(false);
        join(
            || {
                assert!(wait_for(Duration::from_secs(10), || b_started
                    .load(Ordering::Acquire)));
                let (ran_on, j) = (ran_on.clone(), j.clone());
                // Enqueued by `a`'s worker while `b` runs on the other one.
                p.enqueue(move || {
                    let during = !j.load(Ordering::SeqCst);
                    ran_on.store(
                        sixfold::current_worker().unwrap() | (usize::from(during) << 8),
                        Ordering::SeqCst,
                    );
                    std::thread::sleep(Duration::from_millis(300));
                });
            },
            || {
                b_started.store(true, Ordering::Release);
                std::thread::sleep(Duration::from_millis(30));
            },
        );
        j.store(true, Ordering::SeqCst);
        // Did the long task start on this worker before the join returned?
        let v = ran_on.load(Ordering::SeqCst);
        (caller, v != usize::MAX && (v & 0xff) == caller)
    });
    assert!(
        !long_during_join,
        "worker {caller} ran the enqueued task inside its nested join"
    );
    pool.wait_idle();
    assert_ne!(long_ran_on.load(Ordering::SeqCst), usize::MAX);
}

/// Liveness: on a one-worker pool, a `run` inside a task whose nodes
/// enqueue more nodes must take them (rule 5) although it is nested.
#[test]
fn a_nested_run_takes_its_own_enqueued_nodes() {
    let pool = Arc::new(Pool::builder().num_threads(1).build().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let (p, c) = (pool.clone(), count.clone());
    pool.install(move || {
        let c2 = c.clone();
        p.run([TaskRef::from_fn(move |cx| {
            for _ in 0..100 {
                let c = c2.clone();
                cx.enqueue(TaskRef::from_fn(move |_| {
                    c.fetch_add(1, Ordering::Relaxed);
                }));
            }
        })]);
        assert_eq!(c.load(Ordering::Relaxed), 100);
    });
    assert_eq!(count.load(Ordering::Relaxed), 100);
}

/// Liveness: a scope whose tasks are spawned from a thread outside the pool
/// (so they go to the shared queue) completes on a one-worker pool, where
/// the scope's own nested wait is the only one who can run them.
#[test]
fn a_nested_scope_takes_its_tasks_from_the_shared_queue() {
    let pool = Pool::builder().num_threads(1).build().unwrap();
    let count = AtomicUsize::new(0);
    pool.install(|| {
        // Nested: inside a task (the install job) of the one worker.
        join(
            || {
                scope(|s| {
                    std::thread::scope(|ts| {
                        ts.spawn(|| {
                            for _ in 0..50 {
                                s.spawn(|_| {
                                    count.fetch_add(1, Ordering::Relaxed);
                                });
                            }
                        });
                    });
                });
            },
            || (),
        );
    });
    assert_eq!(count.load(Ordering::Relaxed), 50);
}

/// Unrelated enqueued work still runs while every worker is inside a
/// nested wait, once one of them gets back to its outermost loop.
#[test]
fn enqueued_work_runs_after_nested_waits_end() {
    let pool = Arc::new(Pool::builder().num_threads(2).build().unwrap());
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..200 {
        let (p, r) = (pool.clone(), ran.clone());
        pool.spawn(move || {
            join(
                || {
                    let r = r.clone();
                    p.enqueue(move || {
                        r.fetch_add(1, Ordering::Relaxed);
                    });
                    std::thread::sleep(Duration::from_micros(100));
                },
                || std::thread::sleep(Duration::from_micros(100)),
            );
        });
    }
    pool.wait_idle();
    assert_eq!(ran.load(Ordering::Relaxed), 200);
}

/// A task node that finishes takes the next task node of its deque itself
/// only in the worker's main loop (`pop_own_task_in_main_loop`): a nested
/// `run` returns as soon as its own node is done, not after the unrelated
/// nodes beneath it in the deque (here 50 of 1 ms each).
#[test]
fn a_nested_run_returns_before_the_unrelated_nodes_in_its_deque() {
    let pool = Arc::new(Pool::builder().num_threads(1).build().unwrap());
    let slow_ran = Arc::new(AtomicUsize::new(0));
    let seen_at_return = Arc::new(AtomicUsize::new(usize::MAX));
    let (p, slow, seen) = (pool.clone(), slow_ran.clone(), seen_at_return.clone());
    pool.run([TaskRef::from_fn(move |cx| {
        for _ in 0..50 {
            let slow = slow.clone();
            cx.spawn(TaskRef::from_fn(move |_| {
                std::thread::sleep(Duration::from_millis(1));
                slow.fetch_add(1, Ordering::Relaxed);
            }));
        }
        p.run([TaskRef::from_fn(|_| {})]);
        seen.store(slow.load(Ordering::Relaxed), Ordering::Relaxed);
    })]);
    assert_eq!(slow_ran.load(Ordering::Relaxed), 50);
    assert_eq!(
        seen_at_return.load(Ordering::Relaxed),
        0,
        "the nested run waited for unrelated nodes"
    );
}

/// The shape of issue 23's check, for each entry point that waits inside a
/// task: on a one-worker pool, a task enqueues 20 unrelated tasks, then
/// waits (`nested_wait`) for work that itself goes through the shared
/// queue. The wait must take its own enqueued work (nobody else can: one
/// worker) and none of the 20, which belong to the worker's outermost
/// loop; they all run after the task returns.
fn a_nested_wait_takes_only_its_own_enqueued_work(
    nested_wait: impl FnOnce(&Pool) + Send + 'static,
) {
    const UNRELATED: usize = 20;
    let pool = Pool::builder().num_threads(1).build().unwrap();
    let unrelated_ran = Arc::new(AtomicUsize::new(0));
    let ran_during_wait = common::within("the nested wait", Duration::from_secs(60), {
        let unrelated_ran = unrelated_ran.clone();
        move || {
            let ran_during = pool.install(|| {
                for _ in 0..UNRELATED {
                    let r = unrelated_ran.clone();
                    pool.enqueue(move || {
                        r.fetch_add(1, Ordering::SeqCst);
                    });
                }
                let before = unrelated_ran.load(Ordering::SeqCst);
                nested_wait(&pool);
                unrelated_ran.load(Ordering::SeqCst) - before
            });
            pool.wait_idle();
            ran_during
        }
    });
    assert_eq!(
        ran_during_wait, 0,
        "the nested wait ran {ran_during_wait} of {UNRELATED} unrelated enqueued tasks"
    );
    assert_eq!(unrelated_ran.load(Ordering::SeqCst), UNRELATED);
}

#[test]
fn a_nested_run_takes_its_own_enqueued_nodes_and_no_unrelated_task() {
    a_nested_wait_takes_only_its_own_enqueued_work(|pool| {
        let own = Arc::new(AtomicUsize::new(0));
        let o = own.clone();
        pool.run([TaskRef::from_fn(move |cx| {
            for _ in 0..10 {
                let o = o.clone();
                cx.enqueue(TaskRef::from_fn(move |_| {
                    o.fetch_add(1, Ordering::SeqCst);
                }));
            }
        })]);
        assert_eq!(own.load(Ordering::SeqCst), 10, "the run's own nodes");
    });
}

#[test]
fn a_nested_graph_run_takes_its_enqueued_nodes_and_no_unrelated_task() {
    a_nested_wait_takes_only_its_own_enqueued_work(|pool| {
        let own = AtomicUsize::new(0);
        let mut g = sixfold::Graph::new();
        let first = g.add(|| {
            own.fetch_add(1, Ordering::SeqCst);
        });
        for _ in 0..10 {
            let node = g.add(|| {
                own.fetch_add(1, Ordering::SeqCst);
            });
            g.set_dispatch(node, sixfold::Dispatch::Enqueue).unwrap();
            g.precede(first, node).unwrap();
        }
        g.set_dispatch(first, sixfold::Dispatch::Enqueue).unwrap();
        // Twice: a rerun starts its flag over and keeps apart again.
        pool.run_graph(&mut g).unwrap();
        pool.run_graph(&mut g).unwrap();
        drop(g);
        assert_eq!(own.load(Ordering::SeqCst), 22, "the graph's own nodes");
    });
}

#[test]
fn a_nested_pipeline_run_takes_no_unrelated_task() {
    a_nested_wait_takes_only_its_own_enqueued_work(|pool| {
        let mut next = 0;
        let mut sum = 0;
        let mut p = sixfold::Pipeline::new(|| {
            (next < 100).then(|| {
                next += 1;
                next
            })
        })
        .parallel(|x: u64| x * 2)
        .serial_in_order(|x| sum += x);
        pool.run_pipeline(&mut p, 4).unwrap();
        drop(p);
        assert_eq!(sum, 100 * 101);
    });
}
