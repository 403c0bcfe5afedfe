//! Affinity through mailbox proxies: a task with affinity for worker k runs
//! on k when k is free, elsewhere when k is held busy, and never twice.

mod common;

use sixfold::{Graph, Pool, Stats, current_worker};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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

/// How long a busy target may take nothing from its mailbox before another
/// worker claims its proxies (`PATIENCE` in src/queues/proxy.rs).
const PATIENCE: Duration = Duration::from_millis(1);

/// Nanoseconds since the first call (the clock `proxy.rs` measures
/// patience with: `Instant`).
fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// When each task of a test ran, and where; and for those that ran off
/// their target, when they were pushed.
///
/// A task with affinity runs off its target when another worker claims its
/// proxy because the target looked stuck: busy, and taking nothing from
/// its mailbox for `PATIENCE`. On a loaded machine a preempted target looks
/// exactly so, and giving way then is the design. So the tests below
/// attribute each task that ran off its target. It counts as claimed from
/// a stuck target if (1) its target's runs leave room, between the task's
/// push and its start, for `PATIENCE` without a take from the target's
/// mailbox (the target takes its next task after its previous one ends and
/// before the next starts: a target running short tasks one after another
/// leaves no such room, a preempted one does); and (2) the pool counted as
/// many claims (`WorkerStats::proxies_claimed_from_stuck`). The ratios are
/// asserted on the other tasks. A pool that claimed from a target that was
/// moving through its mailbox fails, however loaded the machine; on an
/// idle machine no target is stuck and the ratios are over all tasks, as
/// before.
#[derive(Default)]
struct Timeline {
    /// `(worker, start, end)` of every run.
    runs: Mutex<Vec<(usize, u64, u64)>>,
    /// `(target, pushed, start)` of the runs off their target.
    off: Mutex<Vec<(usize, u64, u64)>>,
}

impl Timeline {
    /// Run `body`, the task of one with affinity for `target` pushed at
    /// `pushed` (`now_ns`), and log it. Whether it ran on its target.
    fn run(&self, target: usize, pushed: u64, body: impl FnOnce()) -> bool {
        let worker = current_worker().expect("a task runs on a worker");
        let start = now_ns();
        body();
        let end = now_ns();
        self.runs.lock().unwrap().push((worker, start, end));
        if worker != target {
            self.off.lock().unwrap().push((target, pushed, start));
        }
        worker == target
    }

    fn off_target(&self) -> usize {
        self.off.lock().unwrap().len()
    }

    /// The runs off target that a claim from a stuck target explains:
    /// those whose target may have taken nothing from its mailbox for
    /// `PATIENCE` between their push and their start, at most `claimed`.
    fn explained(&self, claimed: usize) -> usize {
        let mut by_worker: Vec<Vec<(u64, u64)>> = Vec::new();
        for &(w, start, end) in self.runs.lock().unwrap().iter() {
            if by_worker.len() <= w {
                by_worker.resize(w + 1, Vec::new());
            }
            by_worker[w].push((start, end));
        }
        for runs in &mut by_worker {
            runs.sort_unstable();
        }
        let patience = PATIENCE.as_nanos() as u64;
        let could_be_stuck = |&&(target, pushed, start): &&(usize, u64, u64)| {
            let runs = by_worker.get(target).map_or(&[][..], |r| &r[..]);
            // Take k (of run k) lies between the end of run k-1 and the
            // start of run k. Window k, between takes k-1 and k, is at
            // most from the end of run k-2 to the start of run k.
            let n = runs.len();
            let lower = |k: usize| if k >= 2 { runs[k - 2].1 } else { 0 };
            let upper = |k: usize| if k < n { runs[k].0 } else { u64::MAX };
            let first = runs.partition_point(|r| r.0 <= pushed);
            (first..=n)
                .take_while(|&k| lower(k) < start)
                .any(|k| upper(k).min(start).saturating_sub(lower(k).max(pushed)) >= patience)
        };
        let plausible = self
            .off
            .lock()
            .unwrap()
            .iter()
            .filter(could_be_stuck)
            .count();
        plausible.min(claimed)
    }

    fn clear(&self) {
        self.runs.lock().unwrap().clear();
        self.off.lock().unwrap().clear();
    }
}

/// Proxies claimed from a stuck target since `before`, all workers.
fn claimed_since(pool: &Pool, before: &Stats) -> usize {
    let stats = pool.stats().since(before);
    stats
        .workers
        .iter()
        .map(|w| w.proxies_claimed_from_stuck as usize)
        .sum()
}

/// 10,000 tasks for worker 1 on two free workers: at least 95% run there,
/// whether spawned from worker 0 (proxies in its deque) or from outside
/// (proxies in the shared queue). Tasks claimed because worker 1 was stuck
/// are left out of the ratio (see `Timeline`).
#[test]
fn free_target_runs_at_least_95_percent_of_its_tasks() {
    let _serial = serial();
    const TASKS: usize = 10_000;
    for from_worker in [true, false] {
        let pool = pool(2);
        let timeline = Arc::new(Timeline::default());
        let submit = {
            let (pool, timeline) = (pool.clone(), timeline.clone());
            move || {
                for _ in 0..TASKS {
                    let timeline = timeline.clone();
                    let pushed = now_ns();
                    pool.spawn_with_affinity(1, move || {
                        timeline.run(1, pushed, || {});
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
        assert_eq!(timeline.runs.lock().unwrap().len(), TASKS);
        let claimed = claimed_since(&pool, &Stats::default());
        let stuck = timeline.explained(claimed);
        let hits = TASKS - timeline.off_target();
        eprintln!(
            "from a worker: {from_worker}: {hits} of {TASKS} on worker 1; of the others, \
             {stuck} claimed while it was stuck ({claimed} claims)"
        );
        assert!(
            hits * 100 >= (TASKS - stuck) * 95,
            "only {hits} of {} ran on worker 1 (from a worker: {from_worker}; \
             {stuck} more were claimed while it was stuck; the pool counted {claimed} claims)",
            TASKS - stuck
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
/// when it is free. Nodes claimed because their worker was stuck are left
/// out (see `Timeline`).
#[test]
fn graph_nodes_with_affinity_run_on_their_worker() {
    let _serial = serial();
    const RUNS: usize = 20;
    let pool = pool(2);
    let timeline = Timeline::default();
    // When the root ended: its successors are pushed after that.
    let root_done = AtomicU64::new(0);
    let mut g = Graph::new();
    let root = g.add(|| {
        let worker = current_worker().unwrap();
        timeline.run(worker, 0, || {});
        root_done.store(now_ns(), Ordering::SeqCst);
    });
    for i in 0..64 {
        let target = i % 2;
        let (timeline, root_done) = (&timeline, &root_done);
        let n = g.add(move || {
            timeline.run(target, root_done.load(Ordering::SeqCst), || {});
        });
        g.set_affinity(n, Some(target)).unwrap();
        g.precede(root, n).unwrap();
    }
    let before = pool.stats();
    pool.run_graph_n(&mut g, RUNS).unwrap();
    let claimed = claimed_since(&pool, &before);
    let stuck = timeline.explained(claimed);
    // 1280 node runs; proxies may take a few when a target is briefly busy.
    let wrong = timeline.off_target();
    eprintln!(
        "{wrong} of 1280 ran off their worker, {stuck} claimed while it was stuck \
         ({claimed} claims)"
    );
    assert!(
        (wrong - stuck) * 100 <= (64 * RUNS - stuck) * 5,
        "{} of {} ran off their worker ({stuck} more were claimed while it was stuck; \
         the pool counted {claimed} claims)",
        wrong - stuck,
        64 * RUNS - stuck
    );
}

/// Affinity replay: with it on, a node runs where it ran the time before.
/// The first run places the nodes by explicit affinity (half on each
/// worker); then the affinities are cleared and replay alone keeps them.
/// A node claimed because its worker was stuck moves, rightly, and replay
/// then keeps it where it moved: those moves are left out (see
/// `Timeline`), and the nodes are placed again after a run that had a
/// claim.
#[test]
fn graph_affinity_replay_keeps_nodes_where_they_ran() {
    let _serial = serial();
    const NODES: usize = 64;
    const RUNS: usize = 20;
    let pool = pool(2);
    // Where each node ran last; the root replays too.
    let last: Vec<AtomicUsize> = (0..=NODES).map(|_| AtomicUsize::new(usize::MAX)).collect();
    let timeline = Timeline::default();
    let run_started = AtomicU64::new(0);
    let root_done = AtomicU64::new(0);
    // A node's run: where it ran last is its target (none the first time).
    let node = |slot: &AtomicUsize, pushed: u64, body: &dyn Fn()| {
        let here = current_worker().unwrap();
        let before = slot.swap(here, Ordering::Relaxed);
        let target = if before == usize::MAX { here } else { before };
        timeline.run(target, pushed, body);
    };
    let mut g = Graph::new();
    let root = g.add(|| {
        node(&last[NODES], run_started.load(Ordering::SeqCst), &|| {});
        root_done.store(now_ns(), Ordering::SeqCst);
    });
    let mut ids = Vec::new();
    for slot in &last[..NODES] {
        let (node, root_done) = (&node, &root_done);
        let n = g.add(move || {
            node(slot, root_done.load(Ordering::SeqCst), &|| {
                std::hint::black_box((0..20_000u64).sum::<u64>());
            });
        });
        g.precede(root, n).unwrap();
        ids.push(n);
    }
    g.set_affinity_replay(true);
    let run_graph = |g: &mut Graph<'_>| {
        let before = pool.stats();
        run_started.store(now_ns(), Ordering::SeqCst);
        pool.run_graph(g).unwrap();
        claimed_since(&pool, &before)
    };
    let (mut moved, mut stuck, mut claimed, mut placings) = (0, 0, 0, 0);
    let mut placed = false;
    let mut run = 0;
    while run < RUNS {
        if !placed {
            for (i, &n) in ids.iter().enumerate() {
                g.set_affinity(n, Some(i % 2)).unwrap();
            }
            placed = run_graph(&mut g) == 0;
            for &n in &ids {
                g.set_affinity(n, None).unwrap();
            }
            placings += 1;
            assert!(placings < 1000, "every placing run had a claim");
            continue;
        }
        // Each run on its own: a node's target is where it ran the run
        // before (placing moves nodes on purpose: not counted).
        timeline.clear();
        let run_claimed = run_graph(&mut g);
        moved += timeline.off_target();
        stuck += timeline.explained(run_claimed);
        claimed += run_claimed;
        if run_claimed == 0 {
            let used: std::collections::BTreeSet<_> = last[..NODES]
                .iter()
                .map(|s| s.load(Ordering::Relaxed))
                .collect();
            assert_eq!(used.len(), 2, "both workers kept nodes (run {run})");
        } else {
            placed = false;
        }
        run += 1;
    }
    let node_runs = (NODES + 1) * RUNS;
    eprintln!(
        "{moved} of {node_runs} node runs moved, {stuck} claimed while their worker was \
         stuck ({claimed} claims); {placings} placing runs"
    );
    assert!(
        (moved - stuck) * 100 <= (node_runs - stuck) * 5,
        "{} of {} node runs moved to another worker ({stuck} more were claimed while their \
         worker was stuck; the pool counted {claimed} claims)",
        moved - stuck,
        node_runs - stuck
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

/// A placed loop (Static, Affinity) started by a worker inside a task,
/// whose other part's worker is stuck: here on a lock the loop's caller
/// holds. The caller's wait must claim that part once the target is stuck
/// (`PATIENCE`). It deferred the part's proxy on first look into a queue
/// lane that its nested wait never takes from again, so with two workers
/// nobody could claim it and the loop and its target waited on each other
/// forever.
#[test]
fn a_placed_loop_in_a_nested_wait_claims_the_part_of_a_stuck_worker() {
    let _serial = serial();
    for kind in ["static", "affinity"] {
        let pool = pool(2);
        let p = pool.clone();
        common::within(
            &format!("a {kind} loop whose other part's worker waits for the caller's lock"),
            Duration::from_secs(30),
            move || {
                let lock = Arc::new(Mutex::new(()));
                let mut affinity = sixfold::AffinityPartitioner::new();
                p.install(|| {
                    let held = lock.lock().unwrap();
                    let me = current_worker().unwrap();
                    let other = 1 - me;
                    let started = Arc::new(AtomicBool::new(false));
                    let (l, s) = (lock.clone(), started.clone());
                    p.spawn_on(other, move || {
                        s.store(true, Ordering::SeqCst);
                        drop(l.lock().unwrap());
                    })
                    .unwrap();
                    common::poll_until("the target blocked", Duration::from_secs(20), || {
                        started.load(Ordering::SeqCst)
                    });
                    let ran = AtomicUsize::new(0);
                    let partitioner = match kind {
                        "static" => sixfold::Partitioner::Static,
                        _ => sixfold::Partitioner::Affinity(&mut affinity),
                    };
                    p.for_range_with(0..2, partitioner, |r| {
                        ran.fetch_add(r.len(), Ordering::SeqCst);
                    });
                    assert_eq!(ran.load(Ordering::SeqCst), 2);
                    drop(held);
                });
                p.wait_idle();
            },
        );
    }
}

/// A pool built with `use_current_thread`: the building thread is worker
/// 0, but it runs its own code, not a search. A task with affinity for
/// worker 0, spawned by worker 1 while the building thread blocks outside
/// the pool, must run on worker 1 once worker 0 looks stuck. Worker 0's
/// mailbox said "idle" (its owner comes for its proxies soon) until its
/// first wait, so nobody ever claimed them, and the task waited for a
/// thread that was waiting for it.
#[test]
fn a_task_for_the_adopted_worker_0_runs_while_that_thread_is_busy_elsewhere() {
    let _serial = serial();
    common::within(
        "a task with affinity for a use_current_thread pool's worker 0",
        Duration::from_secs(30),
        || {
            let pool = Arc::new(
                Pool::builder()
                    .num_threads(2)
                    .use_current_thread()
                    .build()
                    .unwrap(),
            );
            let (tx, rx) = std::sync::mpsc::channel();
            let p = pool.clone();
            pool.spawn_on(1, move || {
                p.spawn_with_affinity(0, move || tx.send(current_worker()).unwrap())
                    .unwrap();
            })
            .unwrap();
            // Worker 0 (this thread) blocks outside the pool meanwhile.
            let ran_on = rx.recv_timeout(Duration::from_secs(20));
            assert_eq!(ran_on, Ok(Some(1)), "the task never ran");
            drop(pool);
        },
    );
}
