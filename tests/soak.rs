//! A soak test that would catch the next hang or lost task: random
//! mixtures of every entry point (spawn, enqueue, spawn_fifo, join, scope,
//! scope_fifo, TaskRef DAGs, Graph runs, pipelines, install across two
//! pools, isolate) with panics in each, on pools of 1 to 4 workers.
//!
//! Each round checks that every task ran exactly once (at most once, and
//! the rest exactly once after a clean rerun, where oneTBB's cancel
//! contract applies) and that every panic arrived where its contract says:
//! resumed by `join`/`scope`/`run`/`run_graph`/`install`, or handed to the
//! pool's panic handler for `'static` tasks. A watchdog fails a round that
//! hangs instead of hanging the test run.
//!
//! Rounds: `SIXFOLD_SOAK_ROUNDS` (default 1,000: about 2 s in a debug
//! build on two cores), one after another on one watched thread; the seed
//! of a failing round is in the message, and `SIXFOLD_SOAK_SEED` replays
//! from it (the thread's node caches may differ from the first run's:
//! replay from the first seed if a round alone does not fail).
//! `SIXFOLD_SOAK_KEEP_POOLS=1` builds
//! the two pools once and runs every round on them, in one watched thread:
//! on a busy machine, most of a round's time is new threads waiting for
//! their first time slice, and this mode measures the rest. (There a
//! failing round also depends on the rounds before it: replay from the
//! first seed.)

mod common;

use sixfold::{Graph, Pool, TaskRef};
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// Small, seedable, good enough to pick shapes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Execution counts of one round's tasks, by id.
struct Ledger {
    runs: Vec<AtomicU32>,
    next: AtomicUsize,
}

impl Ledger {
    fn new(capacity: usize) -> Self {
        Ledger {
            runs: (0..capacity).map(|_| AtomicU32::new(0)).collect(),
            next: AtomicUsize::new(0),
        }
    }
    /// A fresh task id.
    fn id(&self) -> usize {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        assert!(id < self.runs.len(), "ledger too small");
        id
    }
    fn ran(&self, id: usize) {
        self.runs[id].fetch_add(1, Ordering::SeqCst);
    }
    fn count(&self, id: usize) -> u32 {
        self.runs[id].load(Ordering::SeqCst)
    }
}

const PANIC: &str = "soak: intentional";

/// What the soak ran, over all rounds: operations by kind, tasks, panics.
static OPS_BY_KIND: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];
static TASKS: AtomicUsize = AtomicUsize::new(0);
static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Where the rounds' time went, in nanoseconds: building the pools, each
/// kind of operation (as `OPS_BY_KIND`), pool A's `wait_idle`, dropping the
/// pools. On a busy machine this says whether a slow round is spent in
/// sixfold's operations or in starting and stopping threads.
static PHASE_NANOS: [AtomicU64; 11] = [const { AtomicU64::new(0) }; 11];
const PHASE_BUILD: usize = 0;
const PHASE_WAIT_IDLE: usize = 9;
const PHASE_DROP: usize = 10;

fn timed<R>(phase: usize, f: impl FnOnce() -> R) -> R {
    let start = Instant::now();
    let result = f();
    PHASE_NANOS[phase].fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    result
}

/// What the current round is doing, for the watchdog's message: a hang
/// must say which operation stopped, on which pools, and which of its
/// tasks never ran, or it cannot be chased from a CI log.
struct Progress {
    step: String,
    pools: Option<(Arc<Pool>, Arc<Pool>)>,
    ledger: Option<Arc<Ledger>>,
}

static PROGRESS: Mutex<Progress> = Mutex::new(Progress {
    step: String::new(),
    pools: None,
    ledger: None,
});

fn progress() -> std::sync::MutexGuard<'static, Progress> {
    // A panicking round poisons nothing we need: the record is plain data.
    PROGRESS.lock().unwrap_or_else(|e| e.into_inner())
}

fn set_step(step: String) {
    progress().step = step;
}

/// The watchdog's report on a hung round: the step, both pools' counters
/// and sleepers, and the ids handed out that have not run.
fn hang_report() -> String {
    let p = progress();
    let mut report = format!("stopped at: {}", p.step);
    if let Some((a, b)) = &p.pools {
        report += &format!(
            "\npool A: {} workers, {} asleep\n{}\npool B: {} workers, {} asleep\n{}",
            a.num_workers(),
            a.sleeping_workers(),
            a.stats(),
            b.num_workers(),
            b.sleeping_workers(),
            b.stats()
        );
    }
    if let Some(ledger) = &p.ledger {
        let handed_out = ledger.next.load(Ordering::Relaxed).min(ledger.runs.len());
        let not_run: Vec<usize> = (0..handed_out)
            .filter(|&id| ledger.count(id) == 0)
            .collect();
        report += &format!("\ntask ids not run (of {handed_out}): {not_run:?}");
    }
    report
}

fn payload_is_ours(payload: &(dyn Any + Send)) -> bool {
    payload
        .downcast_ref::<String>()
        .is_some_and(|s| s.starts_with(PANIC))
}

fn quiet_intentional_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !payload_is_ours(info.payload()) {
                default(info);
            }
        }));
    });
}

/// The pools of a round: A (1-4 workers) and B (1-2 workers), and what
/// A's panic handler received.
#[derive(Clone)]
struct Pools {
    a: Arc<Pool>,
    b: Arc<Pool>,
    handled: Arc<AtomicUsize>,
}

impl Pools {
    fn new(rng: &mut Rng) -> Pools {
        let handled = Arc::new(AtomicUsize::new(0));
        let h = handled.clone();
        let a = Pool::builder()
            .num_threads(1 + rng.below(4))
            .panic_handler(move |payload| {
                assert!(
                    payload_is_ours(&*payload),
                    "a foreign panic reached the handler"
                );
                h.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap();
        let b = Pool::builder()
            .num_threads(1 + rng.below(2))
            .build()
            .unwrap();
        Pools {
            a: Arc::new(a),
            b: Arc::new(b),
            handled,
        }
    }
}

/// One operation of a round. Returns the task ids it made, for the checks,
/// and whether it expected its panic to be resumed to it (and was).
fn run_op(op: usize, rng: &mut Rng, pools: &Pools, ledger: &Arc<Ledger>) -> Outcome {
    let panics = rng.chance(15);
    OPS_BY_KIND[op].fetch_add(1, Ordering::Relaxed);
    PANICS.fetch_add(usize::from(panics), Ordering::Relaxed);
    match op {
        0 => op_static(rng, pools, ledger, panics),
        1 => op_join(rng, pools, ledger, panics),
        2 => op_scope(rng, pools, ledger, panics, false),
        3 => op_scope(rng, pools, ledger, panics, true),
        4 => op_task_dag(rng, pools, ledger, panics),
        5 => op_graph(rng, pools, ledger, panics),
        6 => op_pipeline(rng, pools, ledger, panics),
        _ => op_cross_pool(rng, pools, ledger, panics),
    }
}

/// What an operation leaves for the end-of-round check.
struct Outcome {
    /// Tasks that must have run exactly once by the end of the round.
    exactly_once: Vec<usize>,
    /// Tasks that may have been cancelled (oneTBB's contract): at most once.
    at_most_once: Vec<usize>,
    /// Panics handed to A's panic handler by this operation.
    handled_panics: usize,
}

impl Outcome {
    fn exact(ids: Vec<usize>) -> Outcome {
        Outcome {
            exactly_once: ids,
            at_most_once: Vec::new(),
            handled_panics: 0,
        }
    }
}

/// Resume-checking: `f` must panic with our payload iff `expect_panic`.
fn expect_resumed(what: &str, expect_panic: bool, f: impl FnOnce()) {
    let result = catch_unwind(AssertUnwindSafe(f));
    match (result, expect_panic) {
        (Ok(()), false) => {}
        (Err(payload), true) => assert!(payload_is_ours(&*payload), "{what}: foreign panic"),
        (Ok(()), true) => panic!("{what}: the panic was lost"),
        (Err(payload), false) => std::panic::resume_unwind(payload),
    }
}

fn maybe_panic(panics: bool, id: usize) {
    if panics {
        panic!("{PANIC} {id}");
    }
}

/// spawn / enqueue / spawn_fifo of 'static tasks, from outside or inside.
fn op_static(rng: &mut Rng, pools: &Pools, ledger: &Arc<Ledger>, panics: bool) -> Outcome {
    let n = 1 + rng.below(20);
    let ids: Vec<usize> = (0..n).map(|_| ledger.id()).collect();
    let panicking = panics.then(|| rng.below(n));
    let kinds: Vec<usize> = (0..n).map(|_| rng.below(4)).collect();
    let inside = rng.chance(50);
    let submit = {
        let (a, ids, ledger) = (pools.a.clone(), ids.clone(), ledger.clone());
        move || {
            for (k, (&id, &kind)) in ids.iter().zip(&kinds).enumerate() {
                let ledger = ledger.clone();
                let job = move || {
                    ledger.ran(id);
                    maybe_panic(panicking == Some(k), id);
                };
                match kind {
                    0 => a.spawn(job),
                    1 => a.enqueue(job),
                    2 => a.spawn_fifo(job),
                    _ => a.spawn_with_affinity(k % a.num_workers(), job).unwrap(),
                }
            }
        }
    };
    if inside {
        let a = pools.a.clone();
        a.install(submit);
    } else {
        submit();
    }
    pools.a.wait_idle();
    Outcome {
        exactly_once: ids,
        at_most_once: Vec::new(),
        handled_panics: usize::from(panicking.is_some()),
    }
}

/// A join tree of random depth; one leaf may panic, which `join` resumes.
fn op_join(rng: &mut Rng, pools: &Pools, ledger: &Arc<Ledger>, panics: bool) -> Outcome {
    let depth = rng.below(7) as u32;
    let leaves = 1usize << depth;
    let ids: Vec<usize> = (0..leaves).map(|_| ledger.id()).collect();
    let panicking = panics.then(|| rng.below(leaves));
    fn tree(ids: &[usize], first: usize, panicking: Option<usize>, ledger: &Ledger) {
        if ids.len() == 1 {
            ledger.ran(ids[0]);
            maybe_panic(panicking == Some(first), ids[0]);
            return;
        }
        let (l, r) = ids.split_at(ids.len() / 2);
        sixfold::join(
            || tree(l, first, panicking, ledger),
            || tree(r, first + l.len(), panicking, ledger),
        );
    }
    let isolated = rng.chance(30);
    let ledger2 = ledger.clone();
    let ids2 = ids.clone();
    expect_resumed("join", panicking.is_some(), || {
        pools.a.install(|| {
            let body = || tree(&ids2, 0, panicking, &ledger2);
            if isolated {
                sixfold::isolate(body)
            } else {
                body()
            }
        })
    });
    Outcome::exact(ids)
}

/// A scope (or FIFO scope) with nested spawns; rayon's contract: every job
/// runs even after a panic, which the scope resumes.
fn op_scope(
    rng: &mut Rng,
    pools: &Pools,
    ledger: &Arc<Ledger>,
    panics: bool,
    fifo: bool,
) -> Outcome {
    let outer = 1 + rng.below(12);
    let inner = rng.below(4);
    let ids: Vec<usize> = (0..outer * (1 + inner)).map(|_| ledger.id()).collect();
    let panicking = panics.then(|| rng.below(ids.len()));
    let body_panics = panics && rng.chance(30);
    let ledger2 = ledger.clone();
    let ids2 = ids.clone();
    let run = move || {
        let ledger = &ledger2;
        let ids = &ids2;
        let job = move |k: usize| {
            ledger.ran(ids[k]);
            maybe_panic(panicking == Some(k), ids[k]);
        };
        if fifo {
            sixfold::scope_fifo(|s| {
                for o in 0..outer {
                    s.spawn_fifo(move |s| {
                        for i in 0..inner {
                            s.spawn_fifo(move |_| job(outer + o * inner + i));
                        }
                        job(o);
                    });
                }
                if body_panics {
                    panic!("{PANIC} body");
                }
            })
        } else {
            sixfold::scope(|s| {
                for o in 0..outer {
                    s.spawn(move |s| {
                        for i in 0..inner {
                            s.spawn(move |_| job(outer + o * inner + i));
                        }
                        job(o);
                    });
                }
                if body_panics {
                    panic!("{PANIC} body");
                }
            })
        }
    };
    let from_outside = rng.chance(30);
    expect_resumed("scope", panicking.is_some() || body_panics, || {
        if from_outside {
            // Through `Pool::scope`'s install from this thread.
            pools.a.install(run)
        } else {
            let a = pools.a.clone();
            a.install(|| sixfold::isolate(run))
        }
    });
    Outcome::exact(ids)
}

/// A random DAG of TaskRefs run with `Pool::run`; oneTBB's contract on a
/// panic: not-started tasks may be skipped, the panic is resumed.
fn op_task_dag(rng: &mut Rng, pools: &Pools, ledger: &Arc<Ledger>, panics: bool) -> Outcome {
    let n = 1 + rng.below(30);
    let ids: Vec<usize> = (0..n).map(|_| ledger.id()).collect();
    let panicking = panics.then(|| rng.below(n));
    let mut tasks: Vec<TaskRef> = ids
        .iter()
        .enumerate()
        .map(|(k, &id)| {
            let ledger = ledger.clone();
            TaskRef::from_fn(move |cx| {
                ledger.ran(id);
                // Some tasks spawn a child with its own id? Keep ids exact:
                // children are accounted as part of their parent's id.
                let _ = cx.worker_index();
                maybe_panic(panicking == Some(k), id);
            })
        })
        .collect();
    for j in 1..n {
        for _ in 0..rng.below(3) {
            let i = rng.below(j);
            let (before, after) = tasks.split_at_mut(j);
            before[i].precede(&after[0]).unwrap();
        }
    }
    let from_inside = rng.chance(50);
    expect_resumed("run", panicking.is_some(), || {
        if from_inside {
            let a = pools.a.clone();
            a.install(|| a.run(tasks))
        } else {
            pools.a.run(tasks)
        }
    });
    if panicking.is_some() {
        Outcome {
            exactly_once: Vec::new(),
            at_most_once: ids,
            handled_panics: 0,
        }
    } else {
        Outcome::exact(ids)
    }
}

/// A random Graph, run 1-3 times; a panicking run cancels what had not
/// started and the graph runs cleanly again afterwards.
fn op_graph(rng: &mut Rng, pools: &Pools, ledger: &Arc<Ledger>, panics: bool) -> Outcome {
    let n = 1 + rng.below(40);
    let runs = 1 + rng.below(3);
    let ids: Vec<usize> = (0..n).map(|_| ledger.id()).collect();
    let panicking = panics.then(|| rng.below(n));
    let panic_armed = AtomicU32::new(u32::from(panicking.is_some()));
    let seen: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
    {
        let mut g = Graph::new();
        let nodes: Vec<_> = (0..n)
            .map(|k| {
                let (seen, panic_armed) = (&seen, &panic_armed);
                g.add(move || {
                    seen[k].fetch_add(1, Ordering::SeqCst);
                    if panicking == Some(k) && panic_armed.swap(0, Ordering::SeqCst) == 1 {
                        panic!("{PANIC} graph node {k}");
                    }
                })
            })
            .collect();
        for j in 1..n {
            for _ in 0..rng.below(3) {
                g.precede(nodes[rng.below(j)], nodes[j]).unwrap();
            }
        }
        // The first run panics if armed; then `runs` clean runs.
        if panicking.is_some() {
            expect_resumed("run_graph", true, || pools.a.run_graph(&mut g).unwrap());
        }
        let from_inside = rng.chance(50);
        for _ in 0..runs {
            if from_inside {
                let a = pools.a.clone();
                a.install(|| a.run_graph(&mut g)).unwrap();
            } else {
                pools.a.run_graph(&mut g).unwrap();
            }
        }
    }
    // Every node ran `runs` times, plus at most once in the panicking run.
    let extra = u32::from(panicking.is_some());
    for (k, count) in seen.iter().enumerate() {
        let c = count.load(Ordering::SeqCst);
        assert!(
            c >= runs as u32 && c <= runs as u32 + extra,
            "graph node {k} ran {c} times in {runs} clean runs (+{extra} panicking)"
        );
        ledger.ran(ids[k]);
    }
    Outcome::exact(ids)
}

/// A pipeline of random stages (serial in order, out of order, parallel,
/// some filtering) with random tokens; a panic in one stage stops the
/// source and drops the items in flight (oneTBB's contract), and is
/// resumed. Without a panic every item reaches the end exactly once, in
/// order if the last stage is in order; with one, every item made is
/// dropped exactly once.
fn op_pipeline(rng: &mut Rng, pools: &Pools, ledger: &Arc<Ledger>, panics: bool) -> Outcome {
    use sixfold::Pipeline;
    let n = rng.below(200) as u64;
    let panics = panics && n > 0;
    let tokens = 1 + rng.below(8);
    let kinds: Vec<usize> = (0..1 + rng.below(4)).map(|_| rng.below(3)).collect();
    let panic_stage = panics.then(|| rng.below(kinds.len()));
    let panic_item = rng.below(n.max(1) as usize) as u64;
    let filter_odd = rng.chance(30);
    let ids: Vec<usize> = (0..n).map(|_| ledger.id()).collect();
    let made = AtomicUsize::new(0);
    let dropped = AtomicUsize::new(0);
    struct Item<'d>(u64, &'d AtomicUsize);
    impl Drop for Item<'_> {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }
    let delivered = std::sync::Mutex::new(Vec::new());
    let mut next = 0u64;
    let mut p: Pipeline<'_, Item<'_>> = Pipeline::new(|| {
        (next < n).then(|| {
            next += 1;
            made.fetch_add(1, Ordering::SeqCst);
            Item(next - 1, &dropped)
        })
    });
    for (k, &kind) in kinds.iter().enumerate() {
        let check = move |item: &Item<'_>| {
            if panic_stage == Some(k) && item.0 == panic_item {
                panic!("{PANIC} pipeline stage {k}");
            }
        };
        p = match kind {
            0 => p.serial_in_order(move |item| {
                check(&item);
                item
            }),
            1 => p.serial_out_of_order(move |item| {
                check(&item);
                item
            }),
            _ => p.parallel(move |item| {
                check(&item);
                item
            }),
        };
    }
    let last_in_order = *kinds.last().unwrap() == 0;
    let mut p = p
        .parallel(move |item: Item<'_>| (!filter_odd || item.0.is_multiple_of(2)).then_some(item))
        .flatten()
        .serial_in_order(|item| delivered.lock().unwrap().push(item.0));
    let from_inside = rng.chance(50);
    expect_resumed("run_pipeline", panics, || {
        let result = if from_inside {
            let a = pools.a.clone();
            a.install(|| a.run_pipeline(&mut p, tokens))
        } else {
            pools.a.run_pipeline(&mut p, tokens)
        };
        result.unwrap();
    });
    drop(p);
    let made = made.load(Ordering::SeqCst);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        made,
        "pipeline: every item dropped once"
    );
    let delivered = delivered.into_inner().unwrap();
    if !panics {
        let expect: Vec<u64> = (0..n).filter(|i| !filter_odd || i % 2 == 0).collect();
        assert_eq!(
            delivered, expect,
            "pipeline: delivered in order (last stage in order: {last_in_order})"
        );
        for &id in &ids {
            ledger.ran(id);
        }
        Outcome::exact(ids)
    } else {
        // Delivered in order, without gaps, up to where it stopped.
        let expect: Vec<u64> = (0..n)
            .filter(|i| !filter_odd || i % 2 == 0)
            .take(delivered.len())
            .collect();
        assert_eq!(delivered, expect, "pipeline: in order before the panic");
        for (k, &id) in ids.iter().enumerate() {
            if (k as u64) < made as u64 {
                ledger.ran(id);
            }
        }
        Outcome {
            exactly_once: Vec::new(),
            at_most_once: ids,
            handled_panics: 0,
        }
    }
}

/// install across the two pools, A -> B -> A (-> B), maybe isolated, maybe
/// panicking at the bottom (resumed all the way up).
fn op_cross_pool(rng: &mut Rng, pools: &Pools, ledger: &Arc<Ledger>, panics: bool) -> Outcome {
    let id = ledger.id();
    let deep = rng.chance(50);
    let isolated = rng.chance(30);
    let (a, b) = (pools.a.clone(), pools.b.clone());
    let ledger = ledger.clone();
    expect_resumed("install across pools", panics, || {
        let bottom = || {
            ledger.ran(id);
            maybe_panic(panics, id);
        };
        let chain = || b.install(|| a.install(|| if deep { b.install(bottom) } else { bottom() }));
        a.install(|| {
            if isolated {
                sixfold::isolate(chain)
            } else {
                chain()
            }
        })
    });
    Outcome::exact(vec![id])
}

/// One round on new pools, or on `kept` ones (whose handler count restarts).
fn round(seed: u64, kept: Option<&Pools>) {
    set_step(format!("seed {seed}: building the pools"));
    let mut rng = Rng(seed | 1);
    let pools = match kept {
        Some(pools) => {
            pools.handled.store(0, Ordering::SeqCst);
            pools.clone()
        }
        None => timed(PHASE_BUILD, || Pools::new(&mut rng)),
    };
    let ledger = Arc::new(Ledger::new(4096));
    {
        let mut p = progress();
        p.pools = Some((pools.a.clone(), pools.b.clone()));
        p.ledger = Some(ledger.clone());
    }
    const KINDS: [&str; 8] = [
        "static",
        "join",
        "scope",
        "scope_fifo",
        "task DAG",
        "graph",
        "pipeline",
        "cross-pool",
    ];
    let mut outcomes = Vec::new();
    let ops = 4 + rng.below(12);
    for i in 0..ops {
        let op = rng.below(8);
        set_step(format!(
            "seed {seed}, operation {i} of {ops}: {} (ids from {})",
            KINDS[op],
            ledger.next.load(Ordering::Relaxed)
        ));
        outcomes.push(timed(1 + op, || run_op(op, &mut rng, &pools, &ledger)));
    }
    set_step(format!(
        "seed {seed}: pool A's wait_idle after {ops} operations"
    ));
    timed(PHASE_WAIT_IDLE, || pools.a.wait_idle());
    set_step(format!("seed {seed}: the checks and the pools' drop"));
    TASKS.fetch_add(ledger.next.load(Ordering::Relaxed), Ordering::Relaxed);
    let mut handled = 0;
    for outcome in &outcomes {
        for &id in &outcome.exactly_once {
            assert_eq!(
                ledger.count(id),
                1,
                "task {id} ran {} times",
                ledger.count(id)
            );
        }
        for &id in &outcome.at_most_once {
            assert!(
                ledger.count(id) <= 1,
                "task {id} ran {} times",
                ledger.count(id)
            );
        }
        handled += outcome.handled_panics;
    }
    assert_eq!(
        pools.handled.load(Ordering::SeqCst),
        handled,
        "'static panics handed to the handler"
    );
    // Let the pools drop with the round, as a user's would.
    {
        let mut p = progress();
        p.pools = None;
        p.ledger = None;
        p.step = format!("seed {seed}: dropping the pools");
    }
    timed(PHASE_DROP, || drop(pools));
}

#[test]
fn random_mixtures_of_every_entry_point_lose_nothing_and_never_hang() {
    quiet_intentional_panics();
    let rounds: u64 = std::env::var("SIXFOLD_SOAK_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let first_seed: u64 = std::env::var("SIXFOLD_SOAK_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_0000);
    let keep_pools = std::env::var("SIXFOLD_SOAK_KEEP_POOLS").is_ok_and(|v| v == "1");
    let start = Instant::now();
    if keep_pools {
        let pools = Pools::new(&mut Rng(first_seed | 1));
        // One watchdog for all rounds: a minute, plus a tenth of a second
        // a round (a loaded round takes a few milliseconds).
        let per_round = Duration::from_millis(100);
        let watchdog = Duration::from_secs(60)
            .saturating_add(per_round.saturating_mul(u32::try_from(rounds).unwrap_or(u32::MAX)));
        common::finishes_within(watchdog, move || {
            for r in 0..rounds {
                round(first_seed + r, Some(&pools));
            }
        })
        .unwrap_or_else(|()| panic!("soak round hung (kept pools)\n{}", hang_report()));
    } else {
        // One watched thread runs the rounds and reports each as it ends;
        // a round that reports nothing within 60 s hung. (A watched thread
        // of its own per round measured the harness too: on a busy
        // machine, starting those threads took a quarter of the soak.)
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("watched".into())
            .spawn(move || {
                for r in 0..rounds {
                    let outcome = catch_unwind(AssertUnwindSafe(|| round(first_seed + r, None)));
                    let failed = outcome.is_err();
                    if done_tx.send(outcome).is_err() || failed {
                        return;
                    }
                }
            })
            .expect("spawn the watched thread");
        for r in 0..rounds {
            let seed = first_seed + r;
            match done_rx.recv_timeout(Duration::from_secs(60)) {
                Ok(Ok(())) => {}
                Ok(Err(payload)) => {
                    eprintln!("soak round with SIXFOLD_SOAK_SEED={seed} failed");
                    std::panic::resume_unwind(payload)
                }
                Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                    "soak round with SIXFOLD_SOAK_SEED={seed} hung (60 s watchdog)\n{}",
                    hang_report()
                ),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("the watched thread ended before round {seed} reported")
                }
            }
        }
    }
    let ops: Vec<usize> = OPS_BY_KIND
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    let phase_ms: Vec<u64> = PHASE_NANOS
        .iter()
        .map(|t| t.load(Ordering::Relaxed) / 1_000_000)
        .collect();
    eprintln!(
        "soak: {rounds} rounds in {:.1} s: {} tasks checked, {} operations with a panic; \
         operations static/join/scope/scope_fifo/run/graph/pipeline/cross-pool = {ops:?}; \
         ms in build pools/those operations/wait_idle/drop pools = {phase_ms:?}",
        start.elapsed().as_secs_f64(),
        TASKS.load(Ordering::Relaxed),
        PANICS.load(Ordering::Relaxed),
    );
}
