//! Waits across pools: a worker of pool A that waits on pool B (install,
//! join, scope, scope_fifo, run, run_graph, wait_idle through B) keeps
//! running A's work until B is done, so pools that call into each other
//! never deadlock, and it sleeps when there is nothing to do.
//!
//! Every scenario runs under a watchdog (a hang fails the test) and, where
//! the issue asks for it, 100 rounds in a loop. Before this was fixed, the
//! worker of A parked on a lock latch, and each of these hung.

mod common;

use common::within;
use sixfold::{Graph, Pool, TaskRef};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

fn one_worker(name: &'static str) -> Arc<Pool> {
    Arc::new(
        Pool::builder()
            .num_threads(1)
            .thread_name(move |i| format!("{name}-{i}"))
            .build()
            .unwrap(),
    )
}

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("").to_owned()
}

#[test]
fn a_b_a_on_one_worker_pools_returns_100_times() {
    let (a, b) = (one_worker("a"), one_worker("b"));
    within("a -> b -> a, 100 rounds", LIMIT, move || {
        for round in 0..100 {
            let got = a.install(|| b.install(|| a.install(|| 1)));
            assert_eq!(got, 1, "round {round}");
        }
    });
}

#[test]
fn a_b_a_b_with_sleeps_inside_returns() {
    // The sleeps let the waiting workers fall asleep: the inner entry must
    // wake A's worker, and the latch must wake it across the pools.
    let (a, b) = (one_worker("a"), one_worker("b"));
    within("a -> b -> a -> b with sleeps", LIMIT, move || {
        for _ in 0..5 {
            let names = a.install(|| {
                b.install(|| {
                    std::thread::sleep(Duration::from_millis(15));
                    a.install(|| {
                        let inner = b.install(|| {
                            std::thread::sleep(Duration::from_millis(15));
                            thread_name()
                        });
                        (thread_name(), inner)
                    })
                })
            });
            assert_eq!(names, ("a-0".to_owned(), "b-0".to_owned()));
        }
        for _ in 0..100 {
            let got = a.install(|| b.install(|| a.install(|| b.install(|| 4))));
            assert_eq!(got, 4);
        }
    });
}

#[test]
fn join_halves_that_cross_pools_return() {
    let (a, b) = (one_worker("a"), one_worker("b"));
    within("join halves across pools", LIMIT, move || {
        for _ in 0..100 {
            let (x, y) = a.join(
                || b.install(|| a.install(|| 1)),
                || b.join(|| a.install(|| 2), || a.install(|| b.install(|| 3))),
            );
            assert_eq!((x, y), (1, (2, 3)));
        }
    });
}

#[test]
fn two_workers_waiting_on_b_at_once_return() {
    // Both workers of A wait on B's only worker at the same time, and B's
    // work needs A back.
    let a = Arc::new(Pool::builder().num_threads(2).build().unwrap());
    let b = one_worker("b");
    within("two waiters on b", LIMIT, move || {
        for _ in 0..100 {
            let (x, y) = a.join(
                || b.install(|| a.install(|| 10)),
                || b.install(|| a.install(|| 20)),
            );
            assert_eq!(x + y, 30);
        }
    });
}

/// Scopes nested through ten one-worker pools, each scope opened inside the
/// previous pool's scope; the innermost body spawns one job into every one
/// of them (rayon's `nested_scopes`).
#[test]
fn scopes_nested_through_ten_pools_finish_100_times() {
    fn nest<'scope>(
        pools: &[Arc<Pool>],
        scopes: Vec<&sixfold::Scope<'scope>>,
        counter: &'scope AtomicUsize,
    ) {
        match pools.split_first() {
            Some((pool, rest)) => pool.scope(|s| {
                let mut scopes = scopes;
                scopes.push(s);
                nest(rest, scopes, counter);
            }),
            None => {
                for s in scopes {
                    s.spawn(move |_| {
                        counter.fetch_add(1, Ordering::SeqCst);
                    });
                }
            }
        }
    }
    let pools: Vec<Arc<Pool>> = (0..10).map(|_| one_worker("p")).collect();
    within("scopes through 10 pools", LIMIT, move || {
        for _ in 0..100 {
            let counter = AtomicUsize::new(0);
            nest(&pools, Vec::new(), &counter);
            assert_eq!(counter.load(Ordering::SeqCst), 10);
        }
    });
}

#[test]
fn fifo_scopes_nested_through_ten_pools_finish() {
    fn nest<'scope>(
        pools: &[Arc<Pool>],
        scopes: Vec<&sixfold::ScopeFifo<'scope>>,
        counter: &'scope AtomicUsize,
    ) {
        match pools.split_first() {
            Some((pool, rest)) => pool.scope_fifo(|s| {
                let mut scopes = scopes;
                scopes.push(s);
                nest(rest, scopes, counter);
            }),
            None => {
                for s in scopes {
                    s.spawn_fifo(move |_| {
                        counter.fetch_add(1, Ordering::SeqCst);
                    });
                }
            }
        }
    }
    let pools: Vec<Arc<Pool>> = (0..10).map(|_| one_worker("f")).collect();
    within("fifo scopes through 10 pools", LIMIT, move || {
        for _ in 0..100 {
            let counter = AtomicUsize::new(0);
            nest(&pools, Vec::new(), &counter);
            assert_eq!(counter.load(Ordering::SeqCst), 10);
        }
    });
}

#[test]
fn run_and_run_graph_through_another_pool_return() {
    let (a, b) = (one_worker("a"), one_worker("b"));
    within("run and run_graph across pools", LIMIT, move || {
        for _ in 0..100 {
            let total = Arc::new(AtomicUsize::new(0));
            let (a2, b2, t2) = (a.clone(), b.clone(), total.clone());
            // A task of A runs a task set on B whose task needs A.
            a.run(TaskRef::from_fn(move |_| {
                let (a3, t3) = (a2.clone(), t2.clone());
                b2.run(TaskRef::from_fn(move |_| {
                    t3.fetch_add(a3.install(|| 5), Ordering::SeqCst);
                }));
                // And a graph on B whose node needs A.
                let mut g = Graph::new();
                let t4 = &t2;
                let a4 = &a2;
                let first = g.add(|| {
                    t4.fetch_add(a4.install(|| 7), Ordering::SeqCst);
                });
                let second = g.add(|| {
                    t4.fetch_add(1, Ordering::SeqCst);
                });
                g.precede(first, second).unwrap();
                b2.run_graph(&mut g).unwrap();
            }));
            assert_eq!(total.load(Ordering::SeqCst), 13);
        }
    });
}

#[test]
fn wait_idle_on_another_pool_keeps_the_waiter_working() {
    let (a, b) = (one_worker("a"), one_worker("b"));
    within("wait_idle across pools", LIMIT, move || {
        for _ in 0..20 {
            let done = Arc::new(AtomicUsize::new(0));
            let (a2, b2, d2) = (a.clone(), b.clone(), done.clone());
            a.install(move || {
                for _ in 0..3 {
                    let (a3, d3) = (a2.clone(), d2.clone());
                    // B's 'static task needs A's only worker, which is the
                    // one waiting for B to go idle.
                    b2.spawn(move || {
                        d3.fetch_add(a3.install(|| 1), Ordering::SeqCst);
                    });
                }
                b2.wait_idle();
            });
            assert_eq!(done.load(Ordering::SeqCst), 3);
        }
    });
}

#[test]
fn a_zero_thread_pool_called_from_a_worker_runs_on_its_drainer() {
    // A pool without threads, called from a worker of A whose job it needs
    // back: the call runs on C's drainer while A's worker keeps working.
    let a = one_worker("a");
    let c = Arc::new(Pool::builder().num_threads(0).build().unwrap());
    within("a -> c(0 threads) -> a", LIMIT, move || {
        for _ in 0..100 {
            assert_eq!(a.install(|| c.install(|| a.install(|| 3))), 3);
        }
    });
}

/// Thread CPU time of the calling thread, in milliseconds.
fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out-pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

#[test]
fn a_worker_waiting_on_another_pool_sleeps() {
    // While B's job sleeps 300 ms, A's worker has nothing to do: it must
    // sleep on its latch, not spin. (A spinning waiter burns ~300 ms.)
    let (a, b) = (one_worker("a"), one_worker("b"));
    let used = within("a sleeping wait", LIMIT, move || {
        a.install(|| {
            let before = thread_cpu_ms();
            b.install(|| std::thread::sleep(Duration::from_millis(300)));
            thread_cpu_ms() - before
        })
    });
    assert!(
        used < 60.0,
        "A's waiting worker used {used:.1} ms of CPU in a 300 ms wait"
    );
}

/// `in_place_scope` and `in_place_scope_fifo` of pool A, called by a
/// worker of pool B, whose spawns call back into B: the worker of B must
/// keep running B's work while it waits for A's scope, as every other call
/// into another pool does. It blocked instead (a lock latch), and B's only
/// worker was the one the spawn's `b.install` needed. Also with a pool of
/// zero threads as A (its drainer runs the spawns).
#[test]
fn in_place_scopes_of_another_pool_keep_the_waiting_worker_working() {
    let a = one_worker("a");
    let a2 = Arc::new(Pool::builder().num_threads(2).build().unwrap());
    let zero = Arc::new(Pool::builder().num_threads(0).build().unwrap());
    let b = one_worker("b");
    within("B -> A.in_place_scope -> B, 100 rounds", LIMIT, move || {
        for _ in 0..100 {
            let ran = AtomicUsize::new(0);
            b.install(|| {
                a.in_place_scope(|s| {
                    s.spawn(|_| {
                        ran.fetch_add(b.install(|| 1), Ordering::SeqCst);
                    })
                });
                a2.in_place_scope_fifo(|s| {
                    s.spawn_fifo(|_| {
                        ran.fetch_add(b.install(|| 1), Ordering::SeqCst);
                    })
                });
                zero.in_place_scope(|s| {
                    s.spawn(|_| {
                        let (x, y) = b.join(|| 1, || 1);
                        ran.fetch_add(x + y - 1, Ordering::SeqCst);
                    })
                });
            });
            assert_eq!(ran.load(Ordering::SeqCst), 3);
        }
    });
}

/// A cancel reaches the scopes and runs nested in a cancelled scope's
/// tasks on another pool too, as the docs promise for nested ones: a
/// cancellable scope or run on B, opened by a task of a cancelled scope on
/// A, starts none of its tasks and says `Cancelled`; an `in_place_scope`
/// on B sees `is_cancelled`. They used to run everything and return `Ok`.
#[test]
fn a_cancel_reaches_scopes_and_runs_nested_on_another_pool() {
    within("cancel across pools", LIMIT, || {
        for threads in [1, 2] {
            let a = Pool::builder().num_threads(threads).build().unwrap();
            let b = Pool::builder().num_threads(2).build().unwrap();
            let ran = Arc::new(AtomicUsize::new(0));
            let outcome = a.scope_cancellable(|outer| {
                outer.spawn(|outer| {
                    outer.cancel();
                    let scope = b.scope_cancellable(|s| {
                        for _ in 0..10 {
                            s.spawn(|_| {
                                ran.fetch_add(1, Ordering::Relaxed);
                            });
                        }
                    });
                    assert_eq!(scope, Err(sixfold::Cancelled), "B's scope");
                    let counter = ran.clone();
                    let run = b.run_cancellable([TaskRef::from_fn(move |_| {
                        counter.fetch_add(1, Ordering::Relaxed);
                    })]);
                    assert_eq!(run, Err(sixfold::Cancelled), "B's run");
                    assert!(b.in_place_scope(|s| s.is_cancelled()), "B's in_place_scope");
                    assert!(b.install(sixfold::is_cancelled), "B's install");
                });
            });
            assert_eq!(outcome, Err(sixfold::Cancelled));
            assert_eq!(ran.load(Ordering::Relaxed), 0, "nothing started on B");
        }
    });
}
