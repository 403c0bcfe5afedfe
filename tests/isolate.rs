//! `isolate`: a wait inside an isolated region runs only tasks spawned
//! inside it, directly or transitively; other workers still take the
//! region's tasks, and run them isolated too.
//!
//! The scenario is rayon's #592 and #1174: an outer loop whose tasks hold
//! a non-reentrant lock around an inner join. While a worker waits in the
//! inner join (its second half was stolen), a waiting worker that is free
//! to take anything starts the next outer task on top of the waiting frame;
//! that task takes the lock the frame below it holds, and the worker
//! deadlocks with itself.
//!
//! To make that deterministic, the outer tasks are placed in worker 0's
//! mailbox (affinity for worker 0: only worker 0 takes them), and each
//! inner join's first half waits until worker 1 has stolen the second
//! half, so worker 0 always waits in the join with outer tasks in reach.

mod common;

use common::{finishes_within, poll_until, within};
use sixfold::{Pool, isolate, join};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::ThreadId;
use std::time::Duration;

/// A lock that is not reentrant: taking it again on the thread that holds
/// it spins forever (and counts the attempt, so the test can say why it
/// hung).
struct NonReentrantLock {
    held: AtomicBool,
    holder: std::sync::Mutex<Option<ThreadId>>,
    reentries: AtomicUsize,
}

impl NonReentrantLock {
    fn new() -> Self {
        NonReentrantLock {
            held: AtomicBool::new(false),
            holder: std::sync::Mutex::new(None),
            reentries: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> Guard<'_> {
        let me = std::thread::current().id();
        let mut counted = false;
        while self
            .held
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            if !counted && *self.holder.lock().unwrap() == Some(me) {
                self.reentries.fetch_add(1, Ordering::SeqCst);
                counted = true;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        *self.holder.lock().unwrap() = Some(me);
        Guard(self)
    }
}

struct Guard<'a>(&'a NonReentrantLock);

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        *self.0.holder.lock().unwrap() = None;
        self.0.held.store(false, Ordering::Release);
    }
}

thread_local! {
    /// Set while this thread waits in an inner join.
    static IN_INNER_WAIT: Cell<bool> = const { Cell::new(false) };
}

struct Outer {
    lock: NonReentrantLock,
    done: AtomicUsize,
    /// Outer tasks that started on a thread waiting in an inner join.
    started_inside_inner_wait: AtomicUsize,
}

/// One outer task: take the lock, then an inner join whose second half
/// worker 1 must steal, so that worker 0 waits in it.
fn outer_task(outer: &Outer, isolated: bool) {
    if IN_INNER_WAIT.with(Cell::get) {
        outer
            .started_inside_inner_wait
            .fetch_add(1, Ordering::SeqCst);
    }
    let _guard = outer.lock.lock();
    let inner = || {
        let stolen = AtomicBool::new(false);
        join(
            || {
                // Wait (bounded by the test's watchdog) until the other
                // worker took the second half; then this worker must wait.
                while !stolen.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                IN_INNER_WAIT.with(|w| w.set(true));
            },
            || {
                stolen.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(5));
            },
        );
        IN_INNER_WAIT.with(|w| w.set(false));
    };
    if isolated {
        isolate(inner)
    } else {
        inner()
    }
    outer.done.fetch_add(1, Ordering::SeqCst);
}

const OUTER_TASKS: usize = 8;

/// Start the outer loop: `OUTER_TASKS` tasks that worker 0 puts in its
/// own mailbox (affinity for the spawning worker: no proxy, so only
/// worker 0 ever takes them; worker 1 only steals the inner halves).
fn outer_loop(pool: &Arc<Pool>, outer: &Arc<Outer>, isolated: bool) {
    let (p, outer) = (pool.clone(), outer.clone());
    pool.spawn_with_affinity(0, move || {
        if sixfold::current_worker() != Some(0) {
            // Worker 1 claimed the spawner (worker 0 looked stuck): again.
            return outer_loop(&p, &outer, isolated);
        }
        for _ in 0..OUTER_TASKS {
            let outer = outer.clone();
            p.spawn_with_affinity(0, move || outer_task(&outer, isolated))
                .unwrap();
        }
    })
    .unwrap();
}

#[test]
fn without_isolate_an_inner_wait_takes_an_outer_task_and_deadlocks() {
    let pool = Arc::new(Pool::builder().num_threads(2).build().unwrap());
    let outer = Arc::new(Outer {
        lock: NonReentrantLock::new(),
        done: AtomicUsize::new(0),
        started_inside_inner_wait: AtomicUsize::new(0),
    });
    let (p, o) = (pool.clone(), outer.clone());
    let finished = finishes_within(Duration::from_secs(2), move || {
        outer_loop(&p, &o, false);
        poll_until("the outer tasks", Duration::from_secs(60), || {
            o.done.load(Ordering::SeqCst) == OUTER_TASKS
        });
    });
    // Worker 0 waited in an inner join, took the next outer task from its
    // mailbox on top of the waiting frame, and that task now spins on the
    // lock its own thread holds further down: it can never finish.
    assert!(
        finished.is_err(),
        "the non-isolated loop was expected to hang"
    );
    assert!(outer.lock.reentries.load(Ordering::SeqCst) >= 1);
    assert!(outer.started_inside_inner_wait.load(Ordering::SeqCst) >= 1);
    // The pool is left deadlocked on purpose; its threads die with the test.
    std::mem::forget(pool);
}

#[test]
fn with_isolate_the_same_loop_completes_and_no_outer_task_starts_in_an_inner_wait() {
    for round in 0..20 {
        let pool = Arc::new(Pool::builder().num_threads(2).build().unwrap());
        let outer = Arc::new(Outer {
            lock: NonReentrantLock::new(),
            done: AtomicUsize::new(0),
            started_inside_inner_wait: AtomicUsize::new(0),
        });
        let (p, o) = (pool.clone(), outer.clone());
        within(
            "the isolated outer loop",
            Duration::from_secs(30),
            move || {
                outer_loop(&p, &o, true);
                p.wait_idle();
            },
        );
        assert_eq!(
            outer.done.load(Ordering::SeqCst),
            OUTER_TASKS,
            "round {round}"
        );
        assert_eq!(
            outer.lock.reentries.load(Ordering::SeqCst),
            0,
            "round {round}"
        );
        assert_eq!(
            outer.started_inside_inner_wait.load(Ordering::SeqCst),
            0,
            "round {round}"
        );
    }
}

#[test]
fn a_thief_runs_a_stolen_region_task_isolated_too() {
    // Worker 1 steals a task of a region and, inside it, waits in a join
    // whose second half worker 2 steals. Worker 1's mailbox holds outer
    // tasks meanwhile: adopting the task's region, worker 1 must not start
    // them in that wait.
    let pool = Arc::new(Pool::builder().num_threads(3).build().unwrap());
    let started_in_wait = Arc::new(AtomicUsize::new(0));
    let outer_ran = Arc::new(AtomicUsize::new(0));
    let (p, s, r) = (pool.clone(), started_in_wait.clone(), outer_ran.clone());
    within(
        "the thief's isolated wait",
        Duration::from_secs(30),
        move || {
            for _ in 0..10 {
                p.install(|| {
                    isolate(|| {
                        let on_worker_1 = AtomicBool::new(false);
                        sixfold::scope(|scope| {
                            scope.spawn(|_| {
                                if sixfold::current_worker() != Some(1) {
                                    return; // not the placement this round wants
                                }
                                on_worker_1.store(true, Ordering::SeqCst);
                                // Outer tasks for worker 1, from outside the
                                // region.
                                for _ in 0..4 {
                                    let (s, r) = (s.clone(), r.clone());
                                    std::thread::spawn({
                                        let p = p.clone();
                                        move || {
                                            p.spawn_with_affinity(1, move || {
                                                if IN_INNER_WAIT.with(Cell::get) {
                                                    s.fetch_add(1, Ordering::SeqCst);
                                                }
                                                r.fetch_add(1, Ordering::SeqCst);
                                            })
                                            .unwrap()
                                        }
                                    })
                                    .join()
                                    .unwrap();
                                }
                                let stolen = AtomicBool::new(false);
                                join(
                                    || {
                                        common::wait_for(Duration::from_secs(5), || {
                                            stolen.load(Ordering::SeqCst)
                                        });
                                        IN_INNER_WAIT.with(|w| w.set(true));
                                    },
                                    || {
                                        stolen.store(true, Ordering::SeqCst);
                                        std::thread::sleep(Duration::from_millis(5));
                                    },
                                );
                                IN_INNER_WAIT.with(|w| w.set(false));
                            });
                            // Let another worker take the task: the region's
                            // own wait does not run it itself while we spin.
                            common::wait_for(Duration::from_millis(50), || {
                                on_worker_1.load(Ordering::SeqCst)
                            });
                        });
                    })
                });
            }
            p.wait_idle();
        },
    );
    assert_eq!(started_in_wait.load(Ordering::SeqCst), 0);
    assert_eq!(outer_ran.load(Ordering::SeqCst) % 4, 0);
}

#[test]
fn an_isolated_wait_across_pools_still_returns() {
    // The entry jobs carry the region across pools, so A's only worker,
    // isolated, still takes the job B's task sends back to it.
    let a = Arc::new(Pool::builder().num_threads(1).build().unwrap());
    let b = Arc::new(Pool::builder().num_threads(1).build().unwrap());
    within("isolate(a -> b -> a)", Duration::from_secs(20), move || {
        for _ in 0..100 {
            let got = a.install(|| isolate(|| b.install(|| a.install(|| 9))));
            assert_eq!(got, 9);
        }
    });
}

/// A pool with one worker, reachable from inside its own tasks.
static ONE_WORKER: std::sync::LazyLock<Pool> =
    std::sync::LazyLock::new(|| Pool::builder().num_threads(1).build().unwrap());

#[test]
fn isolated_regions_run_everything_they_spawn_on_one_worker() {
    // Every construct inside a region must be able to finish on a pool with
    // one worker, where nobody else could run its tasks: scopes (also one
    // spawned into from a nested region), FIFO scopes, graphs with an
    // enqueued node and affinity, task runs that enqueue and use affinity.
    let total = within("constructs in a region", Duration::from_secs(20), || {
        ONE_WORKER.install(|| {
            isolate(|| {
                let count = AtomicUsize::new(0);
                sixfold::scope(|s| {
                    s.spawn(|_| {
                        count.fetch_add(1, Ordering::SeqCst);
                    });
                    // Spawned into the outer region's scope from a nested
                    // region: the scope's wait must still run it.
                    isolate(|| {
                        s.spawn(|_| {
                            count.fetch_add(1, Ordering::SeqCst);
                        })
                    });
                });
                sixfold::scope_fifo(|s| {
                    for _ in 0..3 {
                        s.spawn_fifo(|_| {
                            count.fetch_add(1, Ordering::SeqCst);
                        });
                    }
                });
                let mut g = sixfold::Graph::new();
                let x = g.add(|| {
                    count.fetch_add(1, Ordering::SeqCst);
                });
                let y = g.add(|| {
                    count.fetch_add(1, Ordering::SeqCst);
                });
                g.precede(x, y).unwrap();
                g.set_dispatch(y, sixfold::Dispatch::Enqueue).unwrap();
                g.set_affinity(x, Some(0)).unwrap();
                ONE_WORKER.run_graph(&mut g).unwrap();
                let c = Arc::new(AtomicUsize::new(0));
                let (c1, c2) = (c.clone(), c.clone());
                ONE_WORKER.run(vec![
                    sixfold::TaskRef::from_fn(move |cx| {
                        cx.enqueue(sixfold::TaskRef::from_fn(move |_| {
                            c1.fetch_add(1, Ordering::SeqCst);
                        }));
                    }),
                    sixfold::TaskRef::from_fn(move |cx| {
                        cx.spawn_with_affinity(
                            0,
                            sixfold::TaskRef::from_fn(move |_| {
                                c2.fetch_add(1, Ordering::SeqCst);
                            }),
                        )
                        .unwrap();
                    }),
                ]);
                count.load(Ordering::SeqCst) + c.load(Ordering::SeqCst)
            })
        })
    });
    assert_eq!(total, 2 + 3 + 2 + 2);
}

/// Enqueued work while worker 0 sleeps in an isolated wait: a new task
/// wakes the first sleeper, which is worker 0, and worker 0 may not take
/// it. It must hand the task on for every new post, not only the first
/// time it searches: here the second task is the one that ends the wait,
/// and with a single hand-on per search it stayed in the queue with every
/// worker asleep.
#[test]
fn an_isolated_wait_hands_on_every_enqueued_task_it_may_not_take() {
    let pool = Arc::new(Pool::builder().num_threads(3).build().unwrap());
    let thief = Arc::new(AtomicUsize::new(usize::MAX));
    let release = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    {
        let (thief, release) = (thief.clone(), release.clone());
        pool.spawn_on(0, move || {
            isolate(|| {
                join(
                    // Worker 0 waits in the join once a thief runs the
                    // second half, which holds until the release.
                    || {
                        poll_until("a thief", Duration::from_secs(20), || {
                            thief.load(Ordering::SeqCst) != usize::MAX
                        })
                    },
                    || {
                        thief.store(sixfold::current_worker().unwrap(), Ordering::SeqCst);
                        poll_until("the release", Duration::from_secs(60), || {
                            release.load(Ordering::SeqCst)
                        });
                    },
                )
            });
            done_tx.send(()).unwrap();
        })
        .unwrap();
    }
    poll_until("a thief", Duration::from_secs(20), || {
        thief.load(Ordering::SeqCst) != usize::MAX
    });
    assert_ne!(
        thief.load(Ordering::SeqCst),
        0,
        "worker 0 runs the first half"
    );
    // Worker 0 (in the isolated wait) and the third worker asleep.
    let both_asleep = || pool.sleeping_workers() == 2;
    poll_until("two sleepers", Duration::from_secs(20), both_asleep);
    let first = Arc::new(AtomicBool::new(false));
    let f = first.clone();
    pool.enqueue(move || f.store(true, Ordering::SeqCst));
    poll_until("the first enqueued task", Duration::from_secs(20), || {
        first.load(Ordering::SeqCst)
    });
    poll_until("two sleepers again", Duration::from_secs(20), both_asleep);
    let r = release.clone();
    pool.enqueue(move || r.store(true, Ordering::SeqCst));
    assert!(
        done_rx.recv_timeout(Duration::from_secs(20)).is_ok(),
        "the second enqueued task never ran: every worker asleep, the \
         isolated wait ({} asleep now)",
        pool.sleeping_workers()
    );
}

/// Two workers each in an isolated region, each broadcasting: each
/// broadcast needs a part run on the other worker, which waits in its own
/// region. A strict task for a worker runs in any of its waits, isolated
/// ones included; before, each isolated wait took only its own region's
/// jobs, and both workers slept forever.
#[test]
fn two_isolated_broadcasts_on_two_workers_both_return() {
    let pool = Arc::new(Pool::builder().num_threads(2).build().unwrap());
    let p = pool.clone();
    within(
        "two isolated broadcasts",
        Duration::from_secs(30),
        move || {
            for _ in 0..20 {
                let barrier = Arc::new(std::sync::Barrier::new(2));
                let (tx, rx) = std::sync::mpsc::channel();
                for worker in 0..2 {
                    let (p, barrier, tx) = (p.clone(), barrier.clone(), tx.clone());
                    let q = p.clone();
                    q.spawn_on(worker, move || {
                        let indices = isolate(|| {
                            // Both are inside their regions before either
                            // sends its parts.
                            barrier.wait();
                            p.broadcast(|ctx| ctx.index())
                        });
                        tx.send(indices).unwrap();
                    })
                    .unwrap();
                }
                for _ in 0..2 {
                    assert_eq!(rx.recv().unwrap(), vec![0, 1]);
                }
            }
        },
    );
}
