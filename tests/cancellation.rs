//! Cancelling scopes and runs: tasks not yet started are dropped unrun
//! (each closure dropped exactly once), running ones see `is_cancelled`,
//! nested scopes and runs inherit a cancel, and the cancellable calls say
//! they were cancelled.

mod common;

use common::within;
use sixfold::{Cancelled, Pool, TaskRef};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Counts its drops: a closure that owns one is dropped exactly once
/// whether it ran or not.
struct DropCount<'a>(&'a AtomicUsize);

impl Drop for DropCount<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn a_search_that_cancels_at_its_first_hit_starts_few_of_the_remaining_jobs() {
    const CANDIDATES: usize = 1_000_000;
    const HIT: usize = 1_000;
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let started = AtomicUsize::new(0);
    let dropped = AtomicUsize::new(0);
    let started_at_cancel = AtomicUsize::new(usize::MAX);
    let outcome = pool.scope_cancellable(|s| {
        // Oldest spawns are stolen first, newest run first by the spawner:
        // the hit is among the first spawned, so some of the pool runs it
        // early while most candidates are still waiting.
        for candidate in 0..CANDIDATES {
            let guard = DropCount(&dropped);
            let (started, started_at_cancel) = (&started, &started_at_cancel);
            s.spawn(move |s| {
                let _guard = guard;
                let n = started.fetch_add(1, Ordering::SeqCst) + 1;
                if candidate == HIT {
                    started_at_cancel.store(n, Ordering::SeqCst);
                    s.cancel();
                }
            });
        }
    });
    assert_eq!(outcome, Err(Cancelled));
    let at_cancel = started_at_cancel.load(Ordering::SeqCst);
    assert_ne!(at_cancel, usize::MAX, "the hit never ran");
    let after = started.load(Ordering::SeqCst) - at_cancel;
    let remaining = CANDIDATES - at_cancel;
    assert!(
        after * 100 < remaining,
        "{after} of the {remaining} jobs left at the hit still started"
    );
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        CANDIDATES,
        "every closure dropped once"
    );
}

#[test]
fn a_cancelled_run_drops_its_unstarted_tasks_once_each_and_says_so() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    // A chain: the first cancels, so none of the 99 after it may start.
    let mut tasks: Vec<TaskRef> = vec![TaskRef::from_fn(|cx| cx.cancel_run())];
    for _ in 0..99 {
        let ran = ran.clone();
        let owned = DropOnce(dropped.clone());
        tasks.push(TaskRef::from_fn(move |_| {
            let _owned = &owned;
            ran.fetch_add(1, Ordering::Relaxed);
        }));
    }
    for k in 1..tasks.len() {
        let (before, after) = tasks.split_at_mut(k);
        before[k - 1].precede(&after[0]).unwrap();
    }
    assert_eq!(pool.run_cancellable(tasks), Err(Cancelled));
    assert_eq!(ran.load(Ordering::Relaxed), 0);
    assert_eq!(dropped.load(Ordering::Relaxed), 99);
    // Not cancelled: Ok, and the pool works on.
    assert_eq!(pool.run_cancellable([TaskRef::from_fn(|_| {})]), Ok(()));
}

/// Counts its drop ('static, for task nodes).
struct DropOnce(Arc<AtomicUsize>);

impl Drop for DropOnce {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn nested_scopes_and_runs_inherit_the_cancel_of_their_parent() {
    within("nested cancels", Duration::from_secs(60), || {
        let pool = Pool::builder().num_threads(2).build().unwrap();
        let nested_ran = Arc::new(AtomicUsize::new(0));
        let nested = std::sync::Mutex::new(Vec::new());
        let outcome = pool.scope_cancellable(|outer| {
            outer.spawn(|outer| {
                // Cancel the parent, then start nested work in its task.
                outer.cancel();
                assert!(sixfold::is_cancelled());
                let scope = sixfold::scope_cancellable(|s| {
                    assert!(s.is_cancelled(), "a child sees its parent's cancel");
                    for _ in 0..100 {
                        s.spawn(|_| {
                            nested_ran.fetch_add(1, Ordering::Relaxed);
                        });
                    }
                });
                let ran = nested_ran.clone();
                let run = pool.run_cancellable([TaskRef::from_fn(move |_| {
                    ran.fetch_add(1, Ordering::Relaxed);
                })]);
                nested.lock().unwrap().extend([scope, run]);
            });
        });
        assert_eq!(outcome, Err(Cancelled));
        assert_eq!(
            nested_ran.load(Ordering::Relaxed),
            0,
            "a nested task started"
        );
        assert_eq!(
            nested.into_inner().unwrap(),
            [Err(Cancelled), Err(Cancelled)],
            "the nested scope and run"
        );
        // A scope beside the cancelled one (not nested in it) is not.
        assert_eq!(pool.scope_cancellable(|s| s.is_cancelled()), Ok(false));
    });
}

#[test]
fn a_running_task_sees_the_cancel_and_an_outside_thread_can_cancel() {
    within("an outside cancel", Duration::from_secs(60), || {
        let pool = Pool::builder().num_threads(2).build().unwrap();
        let spinning = AtomicBool::new(false);
        let outcome = pool.scope_cancellable(|s| {
            s.spawn(|_| {
                spinning.store(true, Ordering::SeqCst);
                while !sixfold::is_cancelled() {
                    std::thread::yield_now();
                }
            });
            // A thread outside the pool, sharing the scope, cancels it.
            std::thread::scope(|outside| {
                outside.spawn(|| {
                    while !spinning.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                    s.cancel();
                });
            });
        });
        assert_eq!(outcome, Err(Cancelled));
    });
}

#[test]
fn a_cancel_after_every_task_ran_drops_nothing_and_an_uncancelled_scope_is_ok() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let ran = AtomicUsize::new(0);
    let outcome = pool.scope_cancellable(|s| {
        for _ in 0..10 {
            s.spawn(|_| {
                ran.fetch_add(1, Ordering::SeqCst);
            });
        }
        s.spawn(|s| {
            // The last task cancels once all the others ran: nothing left
            // to drop.
            while ran.load(Ordering::SeqCst) < 10 {
                std::thread::yield_now();
            }
            s.cancel();
        });
    });
    assert_eq!(ran.into_inner(), 10);
    assert_eq!(
        outcome,
        Err(Cancelled),
        "a cancel is reported even when it dropped nothing"
    );
    assert_eq!(pool.scope_cancellable(|_| 5), Ok(5));
    assert_eq!(
        pool.scope_fifo_cancellable(|s| s.spawn_fifo(|_| {})),
        Ok(())
    );
    // rayon's contract is unchanged: a panic does not cancel a scope.
    let ran = AtomicUsize::new(0);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.scope(|s| {
            s.spawn(|_| panic!("on purpose"));
            for _ in 0..10 {
                s.spawn(|_| {
                    ran.fetch_add(1, Ordering::SeqCst);
                });
            }
        })
    }));
    assert!(result.is_err());
    assert_eq!(ran.into_inner(), 10);
}

#[test]
fn a_run_is_cancelled_from_another_thread_through_its_token() {
    within(
        "a run cancelled from outside",
        Duration::from_secs(60),
        || {
            let pool = Pool::builder().num_threads(2).build().unwrap();
            let token = sixfold::CancelToken::standalone();
            let started = Arc::new(AtomicBool::new(false));
            let after = Arc::new(AtomicUsize::new(0));
            let dropped = Arc::new(AtomicUsize::new(0));
            let s = started.clone();
            let mut first = TaskRef::from_fn(move |_| {
                s.store(true, Ordering::SeqCst);
                while !sixfold::is_cancelled() {
                    std::thread::yield_now();
                }
            });
            let (a, owned) = (after.clone(), DropOnce(dropped.clone()));
            let second = TaskRef::from_fn(move |_| {
                let _owned = &owned;
                a.fetch_add(1, Ordering::SeqCst);
            });
            first.precede(&second).unwrap();
            let remote = token.clone();
            let canceller = std::thread::spawn(move || {
                while !started.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                remote.cancel();
            });
            assert_eq!(
                pool.run_cancellable_with([first, second], &token),
                Err(Cancelled)
            );
            canceller.join().unwrap();
            assert_eq!(after.load(Ordering::SeqCst), 0, "the successor started");
            assert_eq!(dropped.load(Ordering::SeqCst), 1);
            // A fired token stays fired: the next run it is given drops all.
            let ran = Arc::new(AtomicBool::new(false));
            let r = ran.clone();
            let task = TaskRef::from_fn(move |_| r.store(true, Ordering::SeqCst));
            assert_eq!(pool.run_cancellable_with([task], &token), Err(Cancelled));
            assert!(!ran.load(Ordering::SeqCst));
            let fresh = sixfold::CancelToken::standalone();
            assert_eq!(
                pool.run_cancellable_with([TaskRef::from_fn(|_| {})], &fresh),
                Ok(())
            );
        },
    );
}

/// An edge between two runs: task A of one run precedes task B of
/// another. When A panics, B is dropped unrun, and B's run says so with
/// `Err(Cancelled)` (it used to return `Ok` for a task that never ran);
/// B's run's other tasks still run. A dropped handle upstream does the
/// same. When A finishes, B runs and both runs are `Ok`.
#[test]
fn a_task_dropped_over_an_edge_from_another_run_makes_its_run_say_cancelled() {
    common::quiet_intentional_panics("A fails on purpose");
    within("edges between runs", Duration::from_secs(60), || {
        let pool = Arc::new(Pool::builder().num_threads(2).build().unwrap());
        for a_fails in [true, false] {
            let (b_ran, other_ran) = (
                Arc::new(AtomicBool::new(false)),
                Arc::new(AtomicBool::new(false)),
            );
            let mut a = TaskRef::from_fn(move |_| {
                std::thread::sleep(Duration::from_millis(20));
                if a_fails {
                    panic!("A fails on purpose");
                }
            });
            let flag = b_ran.clone();
            let b = TaskRef::from_fn(move |_| flag.store(true, Ordering::Relaxed));
            let flag = other_ran.clone();
            let other = TaskRef::from_fn(move |_| flag.store(true, Ordering::Relaxed));
            a.precede(&b).unwrap();
            let second = {
                let pool = pool.clone();
                std::thread::spawn(move || pool.run_cancellable([b, other]))
            };
            let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.run_cancellable([a])
            }));
            let second = second.join().unwrap();
            assert!(
                other_ran.load(Ordering::Relaxed),
                "B's run's other task ran"
            );
            if a_fails {
                assert!(first.is_err(), "A's panic is resumed in A's run");
                assert!(!b_ran.load(Ordering::Relaxed));
                assert_eq!(second, Err(Cancelled), "B's run says B was dropped");
            } else {
                assert_eq!(first.ok(), Some(Ok(())));
                assert!(b_ran.load(Ordering::Relaxed));
                assert_eq!(second, Ok(()));
            }
        }
        // A dropped handle upstream: B never runs, and its run says so.
        let a = TaskRef::from_fn(|_| {});
        let mut before = a;
        let b = TaskRef::from_fn(|_| panic!("B must not run"));
        before.precede(&b).unwrap();
        drop(before);
        assert_eq!(pool.run_cancellable([b]), Err(Cancelled));
    });
}
