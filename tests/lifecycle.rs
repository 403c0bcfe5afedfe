//! Pool lifecycle and error paths, one test per documented behaviour:
//! what dropping a pool runs, pools without threads (`num_threads(0)`),
//! panics in `'static` tasks and in `run` trees, argument errors
//! (`AffinityError`, `TaskError::Cycle`), cancellation by dropping a
//! handle, `wait_idle`, several pools used from each other's tasks, and the
//! start and exit handlers.
//!
//! Every test asserts on counts, values, thread identities or messages, so
//! each can fail. Waits on the tests' own flags poll with a deadline; a
//! scheduler that loses a task can still hang `run`, `wait_idle` or a drop.

mod common;

use common::{panic_message, poll_until, pool};
use sixfold::{AffinityError, Pool, TaskError, TaskRef, current_worker};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::thread;
use std::time::Duration;

/// Marks the panics these tests cause on purpose; the panic hook keeps
/// quiet about them (and only them).
const INTENTIONAL: &str = "[intentional]";

thread_local! {
    /// Set while this thread runs code that is expected to panic.
    static EXPECTING_PANIC: Cell<bool> = const { Cell::new(false) };
}

fn quiet_intentional_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let expected = EXPECTING_PANIC.with(Cell::get);
            if !expected && !panic_message(info.payload()).contains(INTENTIONAL) {
                default(info);
            }
        }));
    });
}

/// Run `f`, which must panic, and return the panic's message.
fn expect_panic<R>(f: impl FnOnce() -> R) -> String {
    quiet_intentional_panics();
    EXPECTING_PANIC.with(|e| e.set(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    EXPECTING_PANIC.with(|e| e.set(false));
    match result {
        Ok(_) => panic!("expected a panic"),
        Err(payload) => panic_message(&*payload),
    }
}

/// A task that adds one to `count`.
fn counting(count: &Arc<AtomicUsize>) -> TaskRef {
    let count = count.clone();
    TaskRef::from_fn(move |_| {
        count.fetch_add(1, Ordering::Relaxed);
    })
}

#[test]
fn dropping_a_pool_runs_every_spawned_and_enqueued_task() {
    const EACH: usize = if cfg!(miri) { 50 } else { 50_000 };
    for threads in [2, 1, 0] {
        let count = Arc::new(AtomicUsize::new(0));
        let pool = pool(threads);
        for _ in 0..EACH {
            let count = count.clone();
            pool.spawn(move || {
                count.fetch_add(1, Ordering::Relaxed);
            });
        }
        for _ in 0..EACH {
            let count = count.clone();
            pool.enqueue(move || {
                count.fetch_add(1, Ordering::Relaxed);
            });
        }
        drop(pool);
        assert_eq!(
            count.load(Ordering::Relaxed),
            2 * EACH,
            "{threads} threads: tasks lost by the drop"
        );
        // Each closure was dropped with its node: nothing leaked or pending.
        assert_eq!(Arc::strong_count(&count), 1, "{threads} threads");
    }
}

#[test]
fn enqueue_on_zero_thread_pool_runs_while_caller_only_polls() {
    let pool = pool(0);
    let caller = thread::current().id();
    // Several rounds: each may find the previous drainer gone and start a
    // new one.
    for round in 0..20 {
        let done = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(None));
        let (done2, seen2) = (done.clone(), seen.clone());
        pool.enqueue(move || {
            *seen2.lock().unwrap() = Some((thread::current().id(), current_worker()));
            done2.store(true, Ordering::Release);
        });
        poll_until(
            &format!("the enqueued task of round {round}"),
            Duration::from_secs(10),
            || done.load(Ordering::Acquire),
        );
        let (ran_on, worker) = seen.lock().unwrap().expect("task recorded itself");
        assert_ne!(
            ran_on, caller,
            "round {round}: the caller never entered the pool"
        );
        assert_eq!(worker, Some(0), "round {round}: the drainer is worker 0");
    }
}

#[test]
fn install_on_zero_thread_pool_runs_on_calling_thread() {
    let pool = pool(0);
    assert_eq!(pool.num_threads(), 0);
    assert_eq!(pool.num_workers(), 1);
    let caller = thread::current().id();
    assert_eq!(current_worker(), None);

    let ran_in_run = Arc::new(Mutex::new(None));
    let (on, worker, nested) = pool.install(|| {
        let nested = pool.install(current_worker);
        let ran_in_run = ran_in_run.clone();
        pool.run(TaskRef::from_fn(move |cx| {
            *ran_in_run.lock().unwrap() = Some((thread::current().id(), cx.worker_index()));
        }));
        (thread::current().id(), current_worker(), nested)
    });
    assert_eq!(on, caller, "install ran on another thread");
    assert_eq!(worker, Some(0), "current_worker inside install");
    assert_eq!(nested, Some(0), "nested install");
    assert_eq!(
        *ran_in_run.lock().unwrap(),
        Some((caller, 0)),
        "run inside install"
    );
    assert_eq!(current_worker(), None, "the guest slot was left");

    // A result comes back, and so does a panic.
    assert_eq!(pool.install(|| (1..=10).sum::<u32>()), 55);
    let text = expect_panic(|| pool.install(|| panic!("{INTENTIONAL} install panic")));
    assert_eq!(text, format!("{INTENTIONAL} install panic"));
    assert_eq!(current_worker(), None, "the guest slot was left on unwind");
    assert_eq!(pool.install(|| thread::current().id()), caller);
}

#[test]
fn panicking_static_task_does_not_kill_the_pool() {
    quiet_intentional_panics();

    // Without a panic handler: counted as unhandled.
    let pool = pool(2);
    pool.spawn(|| panic!("{INTENTIONAL} spawned"));
    pool.enqueue(|| panic!("{INTENTIONAL} enqueued"));
    pool.spawn_with_affinity(1, || panic!("{INTENTIONAL} with affinity"))
        .unwrap();
    pool.wait_idle();
    assert_eq!(pool.stats().unhandled_panics, 3);
    let count = Arc::new(AtomicUsize::new(0));
    for _ in 0..100 {
        pool.spawn_task(counting(&count));
    }
    pool.wait_idle();
    assert_eq!(count.load(Ordering::Relaxed), 100, "later tasks ran");
    assert_eq!(pool.stats().unhandled_panics, 3);
    drop(pool);

    // With a panic handler: it gets the payload, nothing is unhandled.
    let messages = Arc::new(Mutex::new(Vec::new()));
    let sink = messages.clone();
    let pool = Pool::builder()
        .num_threads(2)
        .panic_handler(move |payload| sink.lock().unwrap().push(panic_message(&*payload)))
        .build()
        .unwrap();
    pool.spawn(|| panic!("{INTENTIONAL} handled {}", 42));
    pool.wait_idle();
    pool.enqueue(|| panic!("{INTENTIONAL} handled too"));
    pool.wait_idle();
    assert_eq!(
        *messages.lock().unwrap(),
        [
            format!("{INTENTIONAL} handled 42"),
            format!("{INTENTIONAL} handled too")
        ]
    );
    assert_eq!(pool.stats().unhandled_panics, 0);
    let count = Arc::new(AtomicUsize::new(0));
    for _ in 0..100 {
        pool.enqueue_task(counting(&count));
    }
    pool.wait_idle();
    assert_eq!(count.load(Ordering::Relaxed), 100, "later tasks ran");
}

#[test]
fn successors_of_a_panicked_task_never_run() {
    quiet_intentional_panics();
    let pool = pool(2);
    let ran = Arc::new(AtomicUsize::new(0));
    // A static task that panics, with a chain of static successors.
    let mut first = TaskRef::from_fn(|_| panic!("{INTENTIONAL} first of a chain"));
    let mut second = counting(&ran);
    let third = counting(&ran);
    first.precede(&second).unwrap();
    second.precede(&third).unwrap();
    pool.spawn_task(third);
    pool.spawn_task(second);
    pool.spawn_task(first);
    pool.wait_idle();
    assert_eq!(ran.load(Ordering::Relaxed), 0, "a successor of a panic ran");
    assert_eq!(pool.stats().unhandled_panics, 1);
    assert_eq!(Arc::strong_count(&ran), 1, "cancelled nodes were freed");
}

#[test]
fn panic_in_run_is_resumed_and_cancels_unstarted_tasks() {
    quiet_intentional_panics();
    // With a single worker slot the root's children sit on the deque of
    // the worker that runs the root, and nobody can take them before the
    // root panics: all 100 have not started, so all are skipped.
    for threads in [1, 0] {
        let pool = pool(threads);
        let ran = Arc::new(AtomicUsize::new(0));
        let ran2 = ran.clone();
        let mut root = TaskRef::from_fn(move |cx| {
            for _ in 0..100 {
                cx.spawn(counting(&ran2));
            }
            panic!("{INTENTIONAL} root of the run tree");
        });
        let after = counting(&ran);
        root.precede(&after).unwrap();
        let text = expect_panic(|| pool.run([root, after]));
        assert_eq!(text, format!("{INTENTIONAL} root of the run tree"));
        assert_eq!(
            ran.load(Ordering::Relaxed),
            0,
            "{threads} threads: not-started tasks of the tree ran"
        );
        assert_eq!(
            Arc::strong_count(&ran),
            1,
            "{threads} threads: skipped tasks were freed"
        );

        // The pool still works, for `run` and for `'static` tasks.
        let ran2 = ran.clone();
        pool.run(TaskRef::from_fn(move |cx| {
            for _ in 0..100 {
                cx.spawn(counting(&ran2));
            }
        }));
        assert_eq!(ran.load(Ordering::Relaxed), 100, "{threads} threads");
        pool.spawn_task(counting(&ran));
        pool.wait_idle();
        assert_eq!(ran.load(Ordering::Relaxed), 101, "{threads} threads");
    }

    // With several workers some children may have started before the
    // panic; those finish before `run` resumes it, the rest are skipped.
    let pool = pool(2);
    let started = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let (s, f) = (started.clone(), finished.clone());
    let root = TaskRef::from_fn(move |cx| {
        for _ in 0..100 {
            let (s, f) = (s.clone(), f.clone());
            cx.spawn(TaskRef::from_fn(move |_| {
                s.fetch_add(1, Ordering::Relaxed);
                thread::sleep(Duration::from_millis(10));
                f.fetch_add(1, Ordering::Relaxed);
            }));
        }
        panic!("{INTENTIONAL} root, two workers");
    });
    let text = expect_panic(|| pool.run(root));
    assert_eq!(text, format!("{INTENTIONAL} root, two workers"));
    let (s, f) = (
        started.load(Ordering::Relaxed),
        finished.load(Ordering::Relaxed),
    );
    assert_eq!(s, f, "run returned before its started tasks finished");
    assert!(s < 100, "all {s} children ran although the root panicked");

    // Two started tasks panic, 50 ms apart: the first panic wins.
    let started = Arc::new(AtomicUsize::new(0));
    let task = |delay: u64, name: &'static str| {
        let started = started.clone();
        TaskRef::from_fn(move |_| {
            started.fetch_add(1, Ordering::SeqCst);
            poll_until("both tasks to start", Duration::from_secs(10), || {
                started.load(Ordering::SeqCst) == 2
            });
            thread::sleep(Duration::from_millis(delay));
            panic!("{INTENTIONAL} {name}");
        })
    };
    let (late, early) = (task(50, "late"), task(0, "early"));
    let text = expect_panic(|| pool.run([late, early]));
    assert_eq!(text, format!("{INTENTIONAL} early"));

    // A panic in a nested `run` (from a worker) is resumed in that task,
    // which may catch it; the outer `run` is then unaffected.
    let outer_ran = Arc::new(AtomicUsize::new(0));
    let (outer, caught) = (outer_ran.clone(), Arc::new(Mutex::new(None)));
    let caught2 = caught.clone();
    let pool = Arc::new(pool);
    let inner_pool = pool.clone();
    pool.run(TaskRef::from_fn(move |_| {
        let result = catch_unwind(AssertUnwindSafe(|| {
            inner_pool.run(TaskRef::from_fn(|_| panic!("{INTENTIONAL} nested run")));
        }));
        *caught2.lock().unwrap() = result.err().map(|p| panic_message(&*p));
        outer.fetch_add(1, Ordering::Relaxed);
    }));
    assert_eq!(outer_ran.load(Ordering::Relaxed), 1);
    assert_eq!(
        caught.lock().unwrap().as_deref(),
        Some(format!("{INTENTIONAL} nested run").as_str())
    );
}

#[test]
fn spawn_with_affinity_out_of_range_is_an_error() {
    let pool = pool(2);
    let ran = Arc::new(AtomicBool::new(false));
    let ran2 = ran.clone();
    let err = pool
        .spawn_with_affinity(7, move || ran2.store(true, Ordering::Relaxed))
        .expect_err("index 7 of 2 workers");
    assert_eq!(
        err,
        AffinityError::OutOfRange {
            index: 7,
            num_workers: 2
        }
    );
    let text = err.to_string();
    assert!(
        text.contains('7') && text.contains("0..2"),
        "message names neither the index nor the range: {text}"
    );
    // The refused closure was dropped, not run.
    assert_eq!(Arc::strong_count(&ran), 1);
    let err = pool
        .spawn_task_with_affinity(2, counting(&Arc::new(AtomicUsize::new(0))))
        .expect_err("index 2 of 2 workers");
    assert_eq!(
        err,
        AffinityError::OutOfRange {
            index: 2,
            num_workers: 2
        }
    );

    // From inside a task, through the context.
    let inner = Arc::new(Mutex::new(None));
    let inner2 = inner.clone();
    pool.run(TaskRef::from_fn(move |cx| {
        let result = cx.spawn_with_affinity(5, TaskRef::from_fn(|_| {}));
        *inner2.lock().unwrap() = Some(result);
    }));
    assert_eq!(
        inner.lock().unwrap().take(),
        Some(Err(AffinityError::OutOfRange {
            index: 5,
            num_workers: 2
        }))
    );

    // A pool without threads has one slot.
    let zero = self::pool(0);
    assert_eq!(
        zero.spawn_with_affinity(1, || {}),
        Err(AffinityError::OutOfRange {
            index: 1,
            num_workers: 1
        })
    );

    // In range, the task runs (on that worker when it is free; placement
    // under load is tested in tests/affinity.rs).
    let on = Arc::new(Mutex::new(Vec::new()));
    for target in [0, 1, 1, 0] {
        let on = on.clone();
        pool.spawn_with_affinity(target, move || {
            on.lock().unwrap().push((target, current_worker()))
        })
        .expect("in range");
    }
    pool.wait_idle();
    let mut on = on.lock().unwrap().clone();
    on.sort();
    assert_eq!(on.len(), 4);
    assert!(on.iter().all(|(_, worker)| worker.is_some()));
    assert_eq!(
        on.iter().map(|(target, _)| *target).collect::<Vec<_>>(),
        [0, 0, 1, 1]
    );
    assert!(!ran.load(Ordering::Relaxed));
}

#[test]
fn precede_that_would_close_a_cycle_is_refused() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let task = |name: &'static str| {
        let log = log.clone();
        TaskRef::from_fn(move |_| log.lock().unwrap().push(name))
    };
    // a -> b -> c, a -> d -> c
    let (mut a, mut b, mut c, mut d) = (task("a"), task("b"), task("c"), task("d"));
    a.precede(&b).unwrap();
    b.precede(&c).unwrap();
    a.precede(&d).unwrap();
    d.precede(&c).unwrap();

    assert_eq!(c.precede(&a), Err(TaskError::Cycle), "c -> a");
    assert_eq!(b.precede(&a), Err(TaskError::Cycle), "b -> a");
    assert_eq!(c.precede(&d), Err(TaskError::Cycle), "c -> d");
    assert_eq!(a.succeed(&mut c), Err(TaskError::Cycle), "a after c");
    assert!(
        TaskError::Cycle.to_string().contains("cycle"),
        "{}",
        TaskError::Cycle
    );
    // Nothing changed: the refused edges added no predecessor.
    assert_eq!(a.pending_predecessors(), 0);
    assert_eq!(b.pending_predecessors(), 1);
    assert_eq!(d.pending_predecessors(), 1);
    assert_eq!(c.pending_predecessors(), 2);
    // A non-cycle edge across the diamond is still accepted.
    b.precede(&d).unwrap();
    assert_eq!(d.pending_predecessors(), 2);

    let pool = pool(2);
    pool.run([c, d, b, a]);
    let log = log.lock().unwrap();
    assert_eq!(
        *log,
        ["a", "b", "d", "c"],
        "refused edges changed the order"
    );
}

#[test]
fn dropping_an_unsubmitted_task_cancels_it_and_its_successors() {
    let pool = Arc::new(pool(2));

    // 1. The handle is dropped while its predecessor runs: a -> b -> c,
    //    a -> d. `a` drops `b`; `run` gets a, c and d and still returns.
    //    (Until 683221a, `a` completing made the never-submitted `b` ready
    //    and a worker ran it with a null group: that worker died, and this
    //    `run` hung.)
    let ran = Arc::new(Mutex::new(Vec::new()));
    let task = |name: &'static str| {
        let ran = ran.clone();
        TaskRef::from_fn(move |_| ran.lock().unwrap().push(name))
    };
    let holder: Arc<Mutex<Option<TaskRef>>> = Arc::new(Mutex::new(None));
    let holder2 = holder.clone();
    let ran2 = ran.clone();
    let mut a = TaskRef::from_fn(move |_| {
        let b = holder2.lock().unwrap().take().expect("b is held");
        assert_eq!(b.pending_predecessors(), 1, "b waits for a");
        drop(b);
        ran2.lock().unwrap().push("a");
    });
    let (mut b, c, d) = (task("b"), task("c"), task("d"));
    a.precede(&b).unwrap();
    b.precede(&c).unwrap();
    a.precede(&d).unwrap();
    *holder.lock().unwrap() = Some(b);
    pool.run([a, c, d]);
    let mut names = ran.lock().unwrap().clone();
    names.sort();
    assert_eq!(names, ["a", "d"], "b and c must not run");

    // 2. The predecessor finished before the drop: a2 -> b2 -> {c2, d2},
    //    a2 and d2 static, c2 in a later `run`.
    let count = Arc::new(AtomicUsize::new(0));
    let mut a2 = counting(&count);
    let mut b2 = counting(&count);
    let (c2, d2) = (counting(&count), counting(&count));
    a2.precede(&b2).unwrap();
    b2.precede(&c2).unwrap();
    b2.precede(&d2).unwrap();
    pool.spawn_task(d2);
    pool.spawn_task(a2);
    poll_until("a2", Duration::from_secs(10), || {
        b2.pending_predecessors() == 0
    });
    assert_eq!(count.load(Ordering::Relaxed), 1, "a2 ran");
    drop(b2);
    pool.wait_idle(); // d2 was released (cancelled), or this would hang
    pool.run(c2);
    assert_eq!(count.load(Ordering::Relaxed), 1, "b2, c2 or d2 ran");
    assert_eq!(Arc::strong_count(&count), 1, "cancelled nodes were freed");

    // 3. Dropped before the predecessor even started: on a pool whose
    //    only worker is busy, the predecessor waits in the queue.
    let one = self::pool(1);
    let gate = Arc::new(AtomicBool::new(false));
    let gate2 = gate.clone();
    one.spawn(move || {
        while !gate2.load(Ordering::Acquire) {
            thread::yield_now();
        }
    });
    let count = Arc::new(AtomicUsize::new(0));
    let mut a3 = counting(&count);
    let mut b3 = counting(&count);
    let c3 = counting(&count);
    a3.precede(&b3).unwrap();
    b3.precede(&c3).unwrap();
    one.spawn_task(a3);
    drop(b3);
    gate.store(true, Ordering::Release);
    one.run(c3);
    one.wait_idle();
    assert_eq!(count.load(Ordering::Relaxed), 1, "only a3 runs");
}

/// A static tree: each task below `depth` spawns `fanout` children (every
/// other one enqueued), leaves work a little. Counts every task.
fn tree(count: Arc<AtomicUsize>, depth: u32, fanout: usize) -> TaskRef {
    TaskRef::from_fn(move |cx| {
        if depth == 0 {
            thread::sleep(Duration::from_micros(300));
        } else {
            for i in 0..fanout {
                let child = tree(count.clone(), depth - 1, fanout);
                if i % 2 == 0 {
                    cx.spawn(child);
                } else {
                    cx.enqueue(child);
                }
            }
        }
        count.fetch_add(1, Ordering::Relaxed);
    })
}

#[test]
fn wait_idle_waits_for_static_tasks_and_what_they_spawn() {
    // Per root: 1 + 4 + 16 + 64 tasks, 64 of them leaves.
    const ROOTS: usize = 8;
    const PER_ROOT: usize = 1 + 4 + 16 + 64;
    for threads in [2, 4, 0] {
        let pool = pool(threads);
        let count = Arc::new(AtomicUsize::new(0));
        for _ in 0..ROOTS {
            pool.spawn_task(tree(count.clone(), 3, 4));
        }
        pool.wait_idle();
        assert_eq!(
            count.load(Ordering::Relaxed),
            ROOTS * PER_ROOT,
            "{threads} threads: wait_idle returned early"
        );
        assert_eq!(Arc::strong_count(&count), 1, "{threads} threads");

        // Called from inside the pool, it would wait for itself: a panic.
        if threads > 0 {
            let text = pool.install(|| expect_panic(|| pool.wait_idle()));
            assert!(text.contains("wait_idle"), "{text}");
        }

        // Again, with the roots waiting on a predecessor that is spawned last.
        let count = Arc::new(AtomicUsize::new(0));
        let mut gate = TaskRef::from_fn(|_| thread::sleep(Duration::from_millis(20)));
        for _ in 0..ROOTS {
            let root = tree(count.clone(), 2, 4);
            gate.precede(&root).unwrap();
            pool.spawn_task(root);
        }
        pool.spawn_task(gate);
        pool.wait_idle();
        assert_eq!(
            count.load(Ordering::Relaxed),
            ROOTS * (1 + 4 + 16),
            "{threads} threads: wait_idle returned before the gated tasks"
        );
    }
}

#[test]
fn pools_live_side_by_side() {
    let a = Pool::builder()
        .num_threads(2)
        .thread_name(|i| format!("pool-a-{i}"))
        .build()
        .unwrap();
    let b = Arc::new(
        Pool::builder()
            .num_threads(2)
            .thread_name(|i| format!("pool-b-{i}"))
            .build()
            .unwrap(),
    );
    let name = || thread::current().name().unwrap_or("").to_owned();

    // `install` into B from a task of A.
    let (in_a, in_b, sum) = a.install(|| {
        let (in_b, sum) = b.install(|| (name(), (1..=100u64).sum::<u64>()));
        (name(), in_b, sum)
    });
    assert!(in_a.starts_with("pool-a-"), "{in_a}");
    assert!(in_b.starts_with("pool-b-"), "{in_b}");
    assert_eq!(sum, 5050);

    // `run` on B from a task of A: B's tasks run on B, and all of them
    // have finished when B's `run` returns inside A's task.
    let total = Arc::new(AtomicU64::new(0));
    let wrong_pool = Arc::new(AtomicUsize::new(0));
    let seen_in_a = Arc::new(Mutex::new(None));
    let (b2, t2, w2, s2) = (
        b.clone(),
        total.clone(),
        wrong_pool.clone(),
        seen_in_a.clone(),
    );
    a.run(TaskRef::from_fn(move |_| {
        let (t, w) = (t2.clone(), w2.clone());
        b2.run(TaskRef::from_fn(move |cx| {
            for i in 1..=10u64 {
                let (t, w) = (t.clone(), w.clone());
                cx.spawn(TaskRef::from_fn(move |_| {
                    if !name().starts_with("pool-b-") {
                        w.fetch_add(1, Ordering::Relaxed);
                    }
                    t.fetch_add(i, Ordering::Relaxed);
                }));
            }
        }));
        *s2.lock().unwrap() = Some((t2.load(Ordering::Relaxed), name()));
    }));
    let (seen, ran_on) = seen_in_a.lock().unwrap().clone().expect("A's task ran");
    assert_eq!(seen, 55, "B's run returned before its tasks finished");
    assert!(ran_on.starts_with("pool-a-"), "{ran_on}");
    assert_eq!(
        wrong_pool.load(Ordering::Relaxed),
        0,
        "B's tasks ran elsewhere"
    );
    assert_eq!(total.load(Ordering::Relaxed), 55);

    // A pool without threads does not borrow a worker of A (which must
    // stay free to run A's tasks, see tests/cross_pool.rs): its work runs
    // on its drainer thread while A's worker waits by working, and A's
    // worker identity is unchanged afterwards.
    let c = pool(0);
    let (before, inside, counted, after) = a.install(|| {
        let before = current_worker();
        let inside = c.install(|| (current_worker(), name()));
        let count = Arc::new(AtomicUsize::new(0));
        let count2 = count.clone();
        c.run(TaskRef::from_fn(move |cx| {
            for _ in 0..10 {
                cx.spawn(counting(&count2));
            }
        }));
        (
            before,
            inside,
            count.load(Ordering::Relaxed),
            current_worker(),
        )
    });
    assert!(matches!(before, Some(0 | 1)), "{before:?}");
    assert_eq!(inside.0, Some(0), "C's only slot");
    assert_eq!(inside.1, "sixfold-drainer", "C's drainer, not A's worker");
    assert_eq!(counted, 10, "C's run from a worker of A");
    assert_eq!(after, before, "A's worker index after C's install and run");
}

#[test]
fn start_and_exit_handlers_run_once_per_worker() {
    const THREADS: usize = 4;
    type Calls = Arc<Mutex<Vec<(usize, String, Option<usize>)>>>;
    let starts: Calls = Arc::default();
    let exits: Calls = Arc::default();
    let record = |calls: &Calls| {
        let calls = calls.clone();
        move |i: usize| {
            let name = thread::current().name().unwrap_or("").to_owned();
            calls.lock().unwrap().push((i, name, current_worker()));
        }
    };
    let pool = Pool::builder()
        .num_threads(THREADS)
        .start_handler(record(&starts))
        .exit_handler(record(&exits))
        .build()
        .unwrap();

    // A worker's start handler has run before that worker takes work.
    let early = Arc::new(AtomicUsize::new(0));
    for target in 0..THREADS {
        let (starts, early) = (starts.clone(), early.clone());
        pool.spawn_with_affinity(target, move || {
            // The worker that runs it (its target, or another through the
            // proxy) has run its start handler.
            let me = current_worker().unwrap();
            if !starts.lock().unwrap().iter().any(|s| s.0 == me) {
                early.fetch_add(1, Ordering::Relaxed);
            }
        })
        .unwrap();
    }
    pool.wait_idle();
    assert_eq!(
        early.load(Ordering::Relaxed),
        0,
        "work before start handler"
    );
    assert!(exits.lock().unwrap().is_empty(), "exit before drop");

    drop(pool);
    for (what, calls) in [("start", &starts), ("exit", &exits)] {
        let mut calls = calls.lock().unwrap().clone();
        calls.sort();
        let expected: Vec<_> = (0..THREADS)
            .map(|i| (i, format!("sixfold-{i}"), Some(i)))
            .collect();
        assert_eq!(
            calls, expected,
            "{what} handler: once per worker, on that worker"
        );
    }
}

/// The CPUs the calling thread may run on.
#[cfg(target_os = "linux")]
fn allowed_cpus() -> Vec<usize> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a zeroed cpu_set_t is an empty set, and `set` is a writable
    // set of `size` bytes.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut set) }, 0);
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, within the set.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// A pool's drop moves its workers to the dropping thread's CPU so that
/// they exit as soon as it waits (asleep or awake, or woken moments ago):
/// each must have its own CPUs back before its exit handler runs. Pools
/// of three workers, dropped while their workers sleep and while they
/// are still looking for work. (On a machine that lets the process use
/// one CPU only, nothing is moved, and the test checks nothing more than
/// the handlers' count.)
#[test]
#[cfg(target_os = "linux")]
fn an_exit_handler_runs_with_every_cpu_its_worker_was_allowed() {
    const THREADS: usize = 3;
    let own = allowed_cpus();
    let seen: Arc<Mutex<Vec<Vec<usize>>>> = Arc::default();
    for round in 0..40 {
        let log = seen.clone();
        let pool = Pool::builder()
            .num_threads(THREADS)
            .exit_handler(move |_| log.lock().unwrap().push(allowed_cpus()))
            .build()
            .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..64 {
            let ran = ran.clone();
            pool.spawn(move || {
                ran.fetch_add(1, Ordering::Relaxed);
            });
        }
        pool.wait_idle();
        if round % 2 == 0 {
            // Let the workers block; odd rounds drop them while awake.
            thread::sleep(Duration::from_millis(5));
        }
        drop(pool);
        assert_eq!(ran.load(Ordering::Relaxed), 64);
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 40 * THREADS, "one exit handler per worker");
    for cpus in seen.iter() {
        assert_eq!(cpus, &own, "an exit handler ran with narrowed CPUs");
    }
}

/// Counting start and exit handlers, and their counts.
fn counting_handlers(
    builder: sixfold::Builder,
) -> (sixfold::Builder, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (starts, exits) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (s, e) = (starts.clone(), exits.clone());
    let builder = builder
        .start_handler(move |_| {
            s.fetch_add(1, Ordering::SeqCst);
        })
        .exit_handler(move |_| {
            e.fetch_add(1, Ordering::SeqCst);
        });
    (builder, starts, exits)
}

#[test]
fn a_thread_name_with_a_nul_byte_is_an_error_and_stops_the_threads_started() {
    let (builder, starts, exits) =
        counting_handlers(Pool::builder().num_threads(4).thread_name(|i| {
            if i == 2 {
                "bad\0name".into()
            } else {
                format!("ok-{i}")
            }
        }));
    match builder.build() {
        Err(sixfold::BuildError::ThreadSpawn(e)) => {
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
            assert!(e.to_string().contains("worker 2"), "{e}");
        }
        Err(other) => panic!("another error: {other}"),
        Ok(_) => panic!("a NUL byte in a thread name was accepted"),
    }
    // The two threads started were stopped and joined: their exit
    // handlers ran before `build` returned.
    assert_eq!(exits.load(Ordering::SeqCst), 2);
    assert_eq!(starts.load(Ordering::SeqCst), 2);
}

#[test]
fn a_panicking_thread_name_stops_and_joins_the_threads_already_started() {
    quiet_intentional_panics();
    let (builder, starts, exits) =
        counting_handlers(Pool::builder().num_threads(10).thread_name(|i| {
            if i >= 5 {
                panic!("no name for worker {i}");
            }
            format!("named-{i}")
        }));
    let message = expect_panic(|| builder.build());
    assert_eq!(message, "no name for worker 5");
    // The five started workers ran their start handler, were stopped, ran
    // their exit handler and were joined before the panic came out.
    assert_eq!(starts.load(Ordering::SeqCst), 5);
    assert_eq!(exits.load(Ordering::SeqCst), 5);
    // Nothing holds the handlers any more: no thread outlived the build.
    assert_eq!(Arc::strong_count(&starts), 1);
    assert_eq!(Arc::strong_count(&exits), 1);
}

#[test]
fn a_thread_that_fails_to_start_is_an_error_and_leaves_no_thread_behind() {
    let (builder, starts, exits) = counting_handlers(
        Pool::builder()
            .num_threads(10)
            .stack_size(isize::MAX as usize),
    );
    match builder.build() {
        Err(sixfold::BuildError::ThreadSpawn(_)) => {}
        other => panic!("expected ThreadSpawn, got {other:?}"),
    }
    assert_eq!(starts.load(Ordering::SeqCst), exits.load(Ordering::SeqCst));
    assert_eq!(Arc::strong_count(&starts), 1);
    assert_eq!(Arc::strong_count(&exits), 1);
}
