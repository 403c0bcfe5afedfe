//! Each of the six rules, shown deterministically by execution order and by
//! `Pool::stats()`. Most tests use a one-worker pool, where the order in
//! which tasks start is fully determined by the rules.

use sixfold::{Context, Pool, Rule, Stats, Task, TaskRef};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Log = Arc<Mutex<Vec<&'static str>>>;

fn logger(log: &Log, name: &'static str) -> TaskRef {
    let log = log.clone();
    TaskRef::from_fn(move |_| log.lock().unwrap().push(name))
}

fn one_worker() -> Pool {
    Pool::builder().num_threads(1).build().unwrap()
}

/// Run `f` and return the counters it added.
fn delta(pool: &Pool, f: impl FnOnce()) -> Stats {
    let before = pool.stats();
    f();
    pool.stats().since(&before)
}

/// Keep a one-worker pool's only worker busy (in a task blocked on a
/// gate) until the returned closure is called.
fn hold_the_only_worker(pool: &Pool) -> impl FnOnce() {
    let (release, wait) = std::sync::mpsc::channel::<()>();
    pool.spawn(move || {
        let _ = wait.recv();
    });
    // Let the worker take the blocker. The tests below hold either way:
    // if it has not yet, the blocker waits in the shared queue first.
    std::thread::sleep(Duration::from_millis(20));
    move || {
        let _ = release.send(());
    }
}

/// Spawns `spawned`, then returns `returned` from `execute`.
struct SpawnThenReturn {
    log: Log,
}

impl Task for SpawnThenReturn {
    fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
        cx.spawn(logger(&self.log, "spawned"));
        Some(logger(&self.log, "returned"))
    }
}

#[test]
fn rule_1_the_returned_task_runs_before_anything_in_the_deque() {
    let pool = one_worker();
    let log = Log::default();
    let stats = delta(&pool, || {
        pool.run(TaskRef::new(SpawnThenReturn { log: log.clone() }))
    });
    assert_eq!(*log.lock().unwrap(), ["returned", "spawned"]);
    assert_eq!(stats.by_rule(Rule::Returned), 1);
    assert_eq!(stats.by_rule(Rule::OwnDeque), 1);
}

#[test]
fn chain_of_1000_runs_999_tasks_by_rule_2() {
    // Under Miri (in CI) a shorter chain walks the same paths in a fifth
    // of the time.
    let n = if cfg!(miri) { 200 } else { 1000 };
    let pool = one_worker();
    let ran = Arc::new(AtomicUsize::new(0));
    let mut nodes: Vec<TaskRef> = (0..n)
        .map(|i| {
            let ran = ran.clone();
            TaskRef::from_fn(move |_| {
                // Each node sees exactly its predecessors done.
                assert_eq!(ran.fetch_add(1, Ordering::SeqCst), i);
            })
        })
        .collect();
    for i in 1..nodes.len() {
        let (head, tail) = nodes.split_at_mut(i);
        head[i - 1].precede(&tail[0]).unwrap();
    }
    // Hand over the waiting nodes first and the head last: a node handed
    // over after its predecessor finished would be made ready (and queued)
    // by the handing-over thread, not by rule 2.
    let stats = delta(&pool, || pool.run(nodes.into_iter().rev()));
    assert_eq!(ran.load(Ordering::SeqCst), n);
    assert_eq!(stats.by_rule(Rule::Successor), n as u64 - 1);
    assert_eq!(stats.total(), n as u64);
}

#[test]
fn rule_2_successor_of_a_join_runs_after_its_last_predecessor_on_that_worker() {
    let pool = one_worker();
    let log = Log::default();
    let (mut a, mut b, c) = (logger(&log, "a"), logger(&log, "b"), logger(&log, "c"));
    a.precede(&c).unwrap();
    b.precede(&c).unwrap();
    let stats = delta(&pool, || pool.run([c, a, b]));
    assert_eq!(log.lock().unwrap().last(), Some(&"c"));
    assert_eq!(stats.by_rule(Rule::Successor), 1);
}

/// On a one-worker pool, run a root task that hands over tasks A, B, C
/// with `hand_over`; return the order they ran in and the counters.
fn run_a_b_c(hand_over: fn(&mut Context<'_>, TaskRef)) -> (Vec<&'static str>, Stats) {
    let pool = one_worker();
    let log = Log::default();
    let root_log = log.clone();
    let stats = delta(&pool, || {
        pool.run(TaskRef::from_fn(move |cx| {
            for name in ["A", "B", "C"] {
                hand_over(cx, logger(&root_log, name));
            }
        }))
    });
    let order = log.lock().unwrap().clone();
    (order, stats)
}

#[test]
fn rule_3_spawned_tasks_on_one_worker_run_in_lifo_order() {
    let (order, stats) = run_a_b_c(|cx, task| cx.spawn(task));
    assert_eq!(order, ["C", "B", "A"]);
    assert_eq!(stats.by_rule(Rule::OwnDeque), 3);
}

#[test]
fn rule_4_affinity_tasks_come_from_the_mailbox_of_their_worker() {
    // One worker, held while the tasks are submitted: each task's mailbox
    // entry is then found before its proxy's shared-queue entry (rule 4
    // before rule 5), so all 20 come by rule 4.
    let single = Pool::builder().num_threads(1).build().unwrap();
    let release = hold_the_only_worker(&single);
    let stats = delta(&single, || {
        for _ in 0..20 {
            single.spawn_with_affinity(0, || {}).unwrap();
        }
        release();
        single.wait_idle();
    });
    assert_eq!(stats.by_rule(Rule::Mailbox), 20);
    // The proxies' other entries ran nothing: besides the 20, at most the
    // holding task (if the worker had not taken it yet when `delta` began).
    assert!(stats.by_rule(Rule::SharedQueue) <= 1, "{stats}");
    assert_eq!(stats.total(), 20 + stats.by_rule(Rule::SharedQueue));

    // Two workers, worker 1 free: its tasks come from its mailbox, or from
    // the proxy's shared-queue entry if worker 1 finds that one first. Only
    // if it looks stuck (a slow machine) may worker 0 claim a proxy.
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let on_target = Arc::new(AtomicUsize::new(0));
    let stats = delta(&pool, || {
        for _ in 0..20 {
            let on_target = on_target.clone();
            pool.spawn_with_affinity(1, move || {
                if sixfold::current_worker() == Some(1) {
                    on_target.fetch_add(1, Ordering::SeqCst);
                }
            })
            .unwrap();
        }
        pool.wait_idle();
    });
    let on_target = on_target.load(Ordering::SeqCst) as u64;
    assert!(on_target >= 18, "{on_target} of 20 on worker 1");
    let w1 = &stats.workers[1];
    assert_eq!(
        w1.by_rule(Rule::Mailbox) + w1.by_rule(Rule::SharedQueue),
        on_target
    );
    assert!(w1.by_rule(Rule::Mailbox) >= 10, "{stats}");
    assert_eq!(stats.workers[0].by_rule(Rule::Mailbox), 0);
}

#[test]
fn rule_4_mailbox_comes_before_the_shared_queue() {
    let pool = one_worker();
    let log = Log::default();
    // Hold the only worker, then queue one task in the shared queue and one
    // in its mailbox. (Whether or not the worker already took the blocker,
    // the mailbox is looked at before the shared queue.)
    let release = hold_the_only_worker(&pool);
    let l = log.clone();
    pool.enqueue(move || l.lock().unwrap().push("shared"));
    let l = log.clone();
    pool.spawn_with_affinity(0, move || l.lock().unwrap().push("mailbox"))
        .unwrap();
    release();
    pool.wait_idle();
    assert_eq!(*log.lock().unwrap(), ["mailbox", "shared"]);
}

#[test]
fn rule_5_enqueued_tasks_on_one_worker_run_in_fifo_order() {
    let (order, stats) = run_a_b_c(|cx, task| cx.enqueue(task));
    assert_eq!(order, ["A", "B", "C"]);
    // The root came from outside through the shared queue too.
    assert_eq!(stats.by_rule(Rule::SharedQueue), 4);
}

#[test]
fn rule_5_outside_enqueues_run_in_fifo_order() {
    let pool = one_worker();
    let log = Log::default();
    let release = hold_the_only_worker(&pool);
    for name in ["1", "2", "3", "4", "5"] {
        let l = log.clone();
        pool.enqueue(move || l.lock().unwrap().push(name));
    }
    release();
    pool.wait_idle();
    assert_eq!(*log.lock().unwrap(), ["1", "2", "3", "4", "5"]);
}

#[test]
fn rule_6_a_worker_that_spawns_many_tasks_loses_some_to_stealing() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let ran_on = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let counts = ran_on.clone();
    let stats = delta(&pool, || {
        pool.run(TaskRef::from_fn(move |cx| {
            for _ in 0..200 {
                let counts = counts.clone();
                cx.spawn(TaskRef::from_fn(move |cx| {
                    counts[cx.worker_index()].fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_micros(200));
                }));
            }
        }))
    });
    let total: usize = ran_on.iter().map(|c| c.load(Ordering::SeqCst)).sum();
    assert_eq!(total, 200);
    assert!(stats.by_rule(Rule::Steal) > 0, "no steals: {stats}");
    assert_eq!(
        stats.workers.iter().map(|w| w.steals).sum::<u64>(),
        stats.by_rule(Rule::Steal)
    );
    assert!(
        stats.workers.iter().map(|w| w.steal_attempts).sum::<u64>() >= stats.by_rule(Rule::Steal)
    );
}

#[test]
fn stats_count_every_task_exactly_once() {
    // Under Miri (in CI) 100 of each: half a minute less.
    let n = if cfg!(miri) { 100 } else { 500 };
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let stats = delta(&pool, || {
        pool.run(TaskRef::from_fn(move |cx| {
            for _ in 0..n {
                cx.spawn(TaskRef::from_fn(|_| {}));
                cx.enqueue(TaskRef::from_fn(|_| {}));
            }
        }))
    });
    assert_eq!(stats.total(), 2 * n as u64 + 1);
}
