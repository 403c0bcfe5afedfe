//! Every blocking call from every kind of caller.
//!
//! Every blocking call of the API (`install`, `run`, `run_graph`,
//! `run_pipeline`, the loops, `join`, `scope`) enters its pool through one
//! function, `Registry::enter`, which decides where the caller is: a worker
//! of this pool (it starts and waits as itself), a worker of another pool
//! (an entry job runs the call on one of our workers while the caller keeps
//! working on its own pool), a thread outside every pool calling a pool
//! without threads (the caller becomes its guest worker), or any other
//! outside thread (it blocks). One branch chosen wrongly, or one call that
//! starts its work its own way from one of those places, and that call
//! breaks from that place only. So this file pins every call down from
//! every place: one test per call (and one per call whose work panics),
//! each running the call from each kind of caller in [`Caller::ALL`] and
//! checking the answer, that the work ran on the pool it was given to, that
//! a panic in the work comes back to the caller with its message, and that
//! every pool still answers afterwards.
//!
//! A failure names the call (the test) and the caller kind (the message);
//! every caller kind is tried and all failures are reported together. A
//! watchdog turns a hang into a failure naming the caller kind that hung;
//! it is the only clock here: nothing is decided by timing.

mod common;

use common::{panic_message, quiet_intentional_panics};
use sixfold::{Graph, Pipeline, Pool, TaskRef};
use std::fmt;
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// How long one test's whole matrix may take before it counts as a hang.
/// A watchdog only: a correct run takes milliseconds.
const LIMIT: Duration = Duration::from_secs(60);

/// The name of the outside thread that makes every call.
const CALLER: &str = "entry-matrix-caller";

/// The name a pool without threads gives the thread that runs the work
/// nobody is there to run (an entry job from another pool's worker).
const DRAINER: &str = "sixfold-drainer";

/// Marks the panics these tests cause on purpose (the hook keeps quiet
/// about them).
const MARKER: &str = "[intentional entry-matrix panic]";

/// The size of the loops' ranges.
const N: usize = 10_000;

/// Tags of the pools (their threads are named `{tag}-{index}`).
const TWO: &str = "two";
const ZERO: &str = "zero";
const ONE: &str = "one";
const OTHER: &str = "other";
const DEEP_A: &str = "deep-a";
const DEEP_B: &str = "deep-b";

/// The pools of one test: fresh per test, shared by its caller kinds (so a
/// kind that leaves a pool broken shows up in the kinds after it, too).
struct Pools {
    /// The 2-thread pool most calls go to.
    two: Pool,
    /// A pool without threads.
    zero: Pool,
    /// Another pool, one thread: a foreign caller.
    one: Pool,
    /// Another pool, two threads: a foreign caller.
    other: Pool,
    /// Two 1-thread pools for `a.install(|| b.install(|| a.<call>))`.
    deep_a: Pool,
    deep_b: Pool,
}

fn named_pool(tag: &'static str, threads: usize) -> Pool {
    Pool::builder()
        .num_threads(threads)
        .thread_name(move |i| format!("{tag}-{i}"))
        .build()
        .expect("build a pool")
}

impl Pools {
    fn new() -> Pools {
        Pools {
            two: named_pool(TWO, 2),
            zero: named_pool(ZERO, 0),
            one: named_pool(ONE, 1),
            other: named_pool(OTHER, 2),
            deep_a: named_pool(DEEP_A, 1),
            deep_b: named_pool(DEEP_B, 1),
        }
    }

    fn all(&self) -> [(&'static str, &Pool); 6] {
        [
            (TWO, &self.two),
            (ZERO, &self.zero),
            (ONE, &self.one),
            (OTHER, &self.other),
            (DEEP_A, &self.deep_a),
            (DEEP_B, &self.deep_b),
        ]
    }

    /// The pools that no longer run an `install` from outside.
    fn unusable(&self) -> Vec<&'static str> {
        self.all()
            .into_iter()
            .filter(|(tag, pool)| {
                let answer = catch_unwind(AssertUnwindSafe(|| pool.install(|| (on_pool(tag), 7))));
                !matches!(answer, Ok((true, 7)))
            })
            .map(|(tag, _)| tag)
            .collect()
    }
}

/// The pool a call goes to, and its tag.
#[derive(Clone, Copy)]
struct Target<'p> {
    pool: &'p Pool,
    tag: &'static str,
}

impl Target<'_> {
    /// Whether the calling thread works for this pool.
    fn here(&self) -> bool {
        on_pool(self.tag)
    }
}

/// Whether the calling thread works for the pool tagged `tag`: one of its
/// threads, or for the pool without threads its guest (the caller thread)
/// or its drainer.
fn on_pool(tag: &str) -> bool {
    let current = thread::current();
    let name = current.name().unwrap_or("");
    if sixfold::current_worker().is_none() {
        return false;
    }
    if tag == ZERO {
        return name == CALLER || name == DRAINER;
    }
    name.strip_prefix(tag)
        .is_some_and(|index| index.starts_with('-'))
}

/// Where a call is made from.
#[derive(Clone, Copy, Debug)]
enum Caller {
    /// A thread outside every pool, calling the 2-thread pool: it blocks.
    Outside,
    /// A worker of the 2-thread pool (inside its `install`).
    OwnWorker,
    /// A worker of another 1-thread pool.
    ForeignOneThread,
    /// A worker of another 2-thread pool.
    ForeignTwoThreads,
    /// A thread outside every pool, calling the pool without threads: it
    /// becomes the guest worker.
    OutsideZero,
    /// The guest of the pool without threads calling it again (inside its
    /// `install`).
    GuestAgain,
    /// The guest of the pool without threads calling the 2-thread pool: a
    /// foreign worker whose own pool has no threads.
    GuestIntoTwo,
    /// A worker of another (1-thread) pool calling the pool without
    /// threads: the work runs on its drainer.
    ForeignIntoZero,
    /// Two levels deep across 1-thread pools:
    /// `a.install(|| b.install(|| a.<call>))`; `a`'s only worker is the
    /// one waiting on `b`.
    TwoDeep,
}

impl Caller {
    const ALL: [Caller; 9] = [
        Caller::Outside,
        Caller::OwnWorker,
        Caller::ForeignOneThread,
        Caller::ForeignTwoThreads,
        Caller::OutsideZero,
        Caller::GuestAgain,
        Caller::GuestIntoTwo,
        Caller::ForeignIntoZero,
        Caller::TwoDeep,
    ];

    /// Make the call `work` from this kind of caller.
    fn call<T: Send>(self, pools: &Pools, work: fn(Target<'_>) -> T) -> T {
        let two = Target {
            pool: &pools.two,
            tag: TWO,
        };
        let zero = Target {
            pool: &pools.zero,
            tag: ZERO,
        };
        let deep_a = Target {
            pool: &pools.deep_a,
            tag: DEEP_A,
        };
        match self {
            Caller::Outside => work(two),
            Caller::OwnWorker => pools.two.install(|| {
                assert!(on_pool(TWO), "install did not run on the pool");
                work(two)
            }),
            Caller::ForeignOneThread => pools.one.install(|| work(two)),
            Caller::ForeignTwoThreads => pools.other.install(|| work(two)),
            Caller::OutsideZero => work(zero),
            Caller::GuestAgain => pools.zero.install(|| {
                assert!(on_pool(ZERO), "install did not run as the guest");
                work(zero)
            }),
            Caller::GuestIntoTwo => pools.zero.install(|| work(two)),
            Caller::ForeignIntoZero => pools.one.install(|| work(zero)),
            Caller::TwoDeep => pools
                .deep_a
                .install(|| pools.deep_b.install(|| work(deep_a))),
        }
    }
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Caller::Outside => "an outside thread (2-thread pool)",
            Caller::OwnWorker => "a worker of the same 2-thread pool",
            Caller::ForeignOneThread => "a worker of another 1-thread pool (2-thread pool)",
            Caller::ForeignTwoThreads => "a worker of another 2-thread pool (2-thread pool)",
            Caller::OutsideZero => "an outside thread (0-thread pool, as its guest)",
            Caller::GuestAgain => "the guest of the same 0-thread pool",
            Caller::GuestIntoTwo => "the guest of a 0-thread pool (2-thread pool)",
            Caller::ForeignIntoZero => "a worker of another 1-thread pool (0-thread pool)",
            Caller::TwoDeep => {
                "two levels deep, a.install(|| b.install(|| a.<call>)) (1-thread pools)"
            }
        };
        write!(f, "{text} [{self:?}]")
    }
}

/// Make the call `work` from every caller kind on fresh pools, on an
/// outside thread under a watchdog, and check each answer equals
/// `expected` and every pool still answers afterwards. Fails once, with
/// every caller kind that went wrong.
fn every_caller<T>(call: &'static str, expected: T, work: fn(Target<'_>) -> T)
where
    T: PartialEq + fmt::Debug + Send + 'static,
{
    quiet_intentional_panics(MARKER);
    let now = Arc::new(Mutex::new(String::from("building the pools")));
    let (done, outcome) = mpsc::channel();
    let progress = now.clone();
    let note = move |what: String| *progress.lock().unwrap() = what;
    thread::Builder::new()
        .name(CALLER.into())
        .spawn(move || {
            let pools = Pools::new();
            let mut failures = Vec::new();
            for caller in Caller::ALL {
                note(format!("{call} from {caller}"));
                match catch_unwind(AssertUnwindSafe(|| caller.call(&pools, work))) {
                    Ok(got) if got == expected => {}
                    Ok(got) => failures.push(format!(
                        "{call} from {caller}: got {got:?}, expected {expected:?}"
                    )),
                    Err(payload) => failures.push(format!(
                        "{call} from {caller}: panicked: {}",
                        panic_message(&*payload)
                    )),
                }
                note(format!("install on every pool after {call} from {caller}"));
                let unusable = pools.unusable();
                if !unusable.is_empty() {
                    failures.push(format!(
                        "after {call} from {caller}: pools {unusable:?} no longer run install"
                    ));
                }
            }
            note(format!("dropping the pools after {call}"));
            drop(pools);
            let _ = done.send(failures);
        })
        .expect("spawn the caller thread");
    match outcome.recv_timeout(LIMIT) {
        Ok(failures) => assert!(
            failures.is_empty(),
            "{} of {} caller kinds failed:\n{}",
            failures.len(),
            Caller::ALL.len(),
            failures.join("\n")
        ),
        Err(RecvTimeoutError::Timeout) => panic!(
            "no answer within {LIMIT:?} (a hang) during: {}",
            now.lock().unwrap()
        ),
        Err(RecvTimeoutError::Disconnected) => {
            panic!("the caller thread died during: {}", now.lock().unwrap())
        }
    }
}

/// Run `f`, which must panic, and return the panic's message.
fn panic_of<R>(f: impl FnOnce() -> R) -> String {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(_) => "<no panic>".to_owned(),
        Err(payload) => panic_message(&*payload),
    }
}

/// The message of the panic a workload causes at `place`.
fn intentional(place: &str) -> String {
    format!("{MARKER} in {place}")
}

/// A panic's message, and the plain workload's answer right after on the
/// same pool (from the same caller): the pool is usable after a panic.
type AfterPanic<T> = (String, T);

// ---------------------------------------------------------------- install

/// `install` returns the closure's value, computed on the pool from data
/// borrowed from the caller's frame.
fn install(t: Target<'_>) -> (u64, bool) {
    let data: Vec<u64> = (1..=100).collect();
    t.pool.install(|| (data.iter().sum(), t.here()))
}

fn install_panics(t: Target<'_>) -> AfterPanic<(u64, bool)> {
    let message = panic_of(|| {
        t.pool
            .install(|| -> u64 { panic!("{}", intentional("install")) })
    });
    (message, install(t))
}

#[test]
fn install_from_every_caller() {
    every_caller("Pool::install", (5050, true), install);
}

#[test]
fn install_panic_from_every_caller() {
    every_caller(
        "Pool::install with a panic",
        (intentional("install"), (5050, true)),
        install_panics,
    );
}

// ---------------------------------------------------------------- run

/// `run` of a `Vec<TaskRef>`: `first` precedes `second`, two more have no
/// edge. Each runs once, on the pool, `first` before `second`.
fn run_tasks(t: Target<'_>) -> (Vec<&'static str>, bool, bool) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let elsewhere = Arc::new(AtomicBool::new(false));
    let tag = t.tag;
    let step = |name: &'static str| {
        let (log, elsewhere) = (log.clone(), elsewhere.clone());
        TaskRef::from_fn(move |_| {
            if !on_pool(tag) {
                elsewhere.store(true, Ordering::Relaxed);
            }
            log.lock().unwrap().push(name);
        })
    };
    let (mut first, second) = (step("first"), step("second"));
    first.precede(&second).unwrap();
    // The successor comes first in the vector: the edge, not the order of
    // submission, decides.
    t.pool
        .run(vec![second, step("loose-1"), first, step("loose-2")]);
    let log = log.lock().unwrap().clone();
    let position = |name| log.iter().position(|&n| n == name);
    let ordered = matches!((position("first"), position("second")), (Some(a), Some(b)) if a < b);
    let mut ran = log.clone();
    ran.sort_unstable();
    (ran, ordered, !elsewhere.load(Ordering::Relaxed))
}

fn run_expected() -> (Vec<&'static str>, bool, bool) {
    (vec!["first", "loose-1", "loose-2", "second"], true, true)
}

fn run_panics(t: Target<'_>) -> AfterPanic<(Vec<&'static str>, bool, bool)> {
    let message = panic_of(|| {
        let mut first = TaskRef::from_fn(|_| panic!("{}", intentional("a run task")));
        let second = TaskRef::from_fn(|_| {});
        first.precede(&second).unwrap();
        t.pool.run(vec![first, second, TaskRef::from_fn(|_| {})]);
    });
    (message, run_tasks(t))
}

#[test]
fn run_from_every_caller() {
    every_caller("Pool::run", run_expected(), run_tasks);
}

#[test]
fn run_panic_from_every_caller() {
    every_caller(
        "Pool::run with a panic",
        (intentional("a run task"), run_expected()),
        run_panics,
    );
}

// ---------------------------------------------------------------- graph

/// A diamond with a tail (`a -> b, a -> c, b -> d, c -> d, d -> e`), run
/// twice: each run's order with the two middle nodes sorted (`b` and `c`
/// may run either way round), and whether every node ran on the pool.
fn run_graph(t: Target<'_>) -> (Vec<Vec<&'static str>>, bool) {
    let log = Mutex::new(Vec::new());
    let elsewhere = AtomicBool::new(false);
    let mut runs = Vec::new();
    {
        let mut g = Graph::new();
        let mut node = |name: &'static str| {
            let (log, elsewhere, tag) = (&log, &elsewhere, t.tag);
            g.add(move || {
                if !on_pool(tag) {
                    elsewhere.store(true, Ordering::Relaxed);
                }
                log.lock().unwrap().push(name);
            })
        };
        let (a, b, c, d, e) = (node("a"), node("b"), node("c"), node("d"), node("e"));
        for (from, to) in [(a, b), (a, c), (b, d), (c, d), (d, e)] {
            g.precede(from, to).unwrap();
        }
        for _ in 0..2 {
            t.pool.run_graph(&mut g).unwrap();
            let mut order = std::mem::take(&mut *log.lock().unwrap());
            if order.len() >= 3 {
                order[1..3].sort_unstable();
            }
            runs.push(order);
        }
    }
    (runs, !elsewhere.load(Ordering::Relaxed))
}

fn graph_expected() -> (Vec<Vec<&'static str>>, bool) {
    (vec![vec!["a", "b", "c", "d", "e"]; 2], true)
}

fn run_graph_panics(t: Target<'_>) -> AfterPanic<(Vec<Vec<&'static str>>, bool)> {
    let message = panic_of(|| {
        let mut g = Graph::new();
        let root = g.add(|| {});
        let bad = g.add(|| panic!("{}", intentional("a graph node")));
        let sink = g.add(|| {});
        g.precede(root, bad).unwrap();
        g.precede(bad, sink).unwrap();
        t.pool.run_graph(&mut g)
    });
    (message, run_graph(t))
}

#[test]
fn run_graph_from_every_caller() {
    every_caller("Pool::run_graph", graph_expected(), run_graph);
}

#[test]
fn run_graph_panic_from_every_caller() {
    every_caller(
        "Pool::run_graph with a panic",
        (intentional("a graph node"), graph_expected()),
        run_graph_panics,
    );
}

// ---------------------------------------------------------------- pipeline

const ITEMS: u64 = 12;

/// Source `1..=12`, then serial in order (logs what it sees), parallel
/// (times ten, checks it runs on the pool), serial in order (collects and
/// sums), with 4 tokens.
fn run_pipeline(t: Target<'_>) -> (Vec<u64>, Vec<u64>, u64, bool) {
    let mut next = 0;
    let mut seen = Vec::new();
    let mut out = Vec::new();
    let mut sum = 0;
    let elsewhere = AtomicBool::new(false);
    {
        let elsewhere = &elsewhere;
        let tag = t.tag;
        let mut p = Pipeline::new(|| {
            next += 1;
            (next <= ITEMS).then_some(next)
        })
        .serial_in_order(|x: u64| {
            seen.push(x);
            x
        })
        .parallel(move |x: u64| {
            if !on_pool(tag) {
                elsewhere.store(true, Ordering::Relaxed);
            }
            x * 10
        })
        .serial_in_order(|x: u64| {
            out.push(x);
            sum += x;
        });
        t.pool.run_pipeline(&mut p, 4).unwrap();
    }
    (seen, out, sum, !elsewhere.load(Ordering::Relaxed))
}

fn pipeline_expected() -> (Vec<u64>, Vec<u64>, u64, bool) {
    (
        (1..=ITEMS).collect(),
        (1..=ITEMS).map(|x| x * 10).collect(),
        (1..=ITEMS).sum::<u64>() * 10,
        true,
    )
}

fn run_pipeline_panics(t: Target<'_>) -> AfterPanic<(Vec<u64>, Vec<u64>, u64, bool)> {
    let message = panic_of(|| {
        let mut next = 0;
        let mut p = Pipeline::new(|| {
            next += 1;
            (next <= ITEMS).then_some(next)
        })
        .serial_in_order(|x: u64| x)
        .parallel(|x: u64| {
            if x == 5 {
                panic!("{}", intentional("a pipeline stage"));
            }
            x
        })
        .serial_in_order(|_: u64| {});
        t.pool.run_pipeline(&mut p, 4)
    });
    (message, run_pipeline(t))
}

#[test]
fn run_pipeline_from_every_caller() {
    every_caller("Pool::run_pipeline", pipeline_expected(), run_pipeline);
}

#[test]
fn run_pipeline_panic_from_every_caller() {
    every_caller(
        "Pool::run_pipeline with a panic",
        (intentional("a pipeline stage"), pipeline_expected()),
        run_pipeline_panics,
    );
}

// ---------------------------------------------------------------- loops

/// How many indices of `0..N` a loop marked once, never, more than once;
/// and whether every piece ran on the pool.
type Marks = (usize, usize, usize, bool);

const MARKS_EXPECTED: Marks = (N, 0, 0, true);

/// Run `lp` with a body that marks each index of its piece, and count.
fn marks(tag: &'static str, lp: impl FnOnce(&(dyn Fn(Range<usize>) + Sync))) -> Marks {
    let counts: Vec<AtomicU32> = (0..N).map(|_| AtomicU32::new(0)).collect();
    let elsewhere = AtomicBool::new(false);
    lp(&|r: Range<usize>| {
        if !on_pool(tag) {
            elsewhere.store(true, Ordering::Relaxed);
        }
        for i in r {
            counts[i].fetch_add(1, Ordering::Relaxed);
        }
    });
    let count = |want: fn(u32) -> bool| {
        counts
            .iter()
            .filter(|c| want(c.load(Ordering::Relaxed)))
            .count()
    };
    (
        count(|c| c == 1),
        count(|c| c == 0),
        count(|c| c > 1),
        !elsewhere.load(Ordering::Relaxed),
    )
}

fn for_range(t: Target<'_>) -> Marks {
    marks(t.tag, |body| t.pool.for_range(0..N, body))
}

/// The free `sixfold::for_range`, from inside a worker of the pool: it
/// runs on that worker's pool.
fn free_for_range(t: Target<'_>) -> Marks {
    marks(t.tag, |body| {
        t.pool.install(|| sixfold::for_range(0..N, body))
    })
}

fn loop_body_panics(r: Range<usize>) {
    if r.contains(&(N / 2)) {
        panic!("{}", intentional("a loop body"));
    }
}

fn for_range_panics(t: Target<'_>) -> AfterPanic<Marks> {
    let message = panic_of(|| t.pool.for_range(0..N, loop_body_panics));
    (message, for_range(t))
}

fn free_for_range_panics(t: Target<'_>) -> AfterPanic<Marks> {
    let message = panic_of(|| {
        t.pool
            .install(|| sixfold::for_range(0..N, loop_body_panics))
    });
    (message, free_for_range(t))
}

#[test]
fn for_range_from_every_caller() {
    every_caller("Pool::for_range", MARKS_EXPECTED, for_range);
}

#[test]
fn for_range_panic_from_every_caller() {
    every_caller(
        "Pool::for_range with a panic",
        (intentional("a loop body"), MARKS_EXPECTED),
        for_range_panics,
    );
}

#[test]
fn free_for_range_in_a_worker_from_every_caller() {
    every_caller(
        "sixfold::for_range inside Pool::install",
        MARKS_EXPECTED,
        free_for_range,
    );
}

#[test]
fn free_for_range_in_a_worker_panic_from_every_caller() {
    every_caller(
        "sixfold::for_range inside Pool::install with a panic",
        (intentional("a loop body"), MARKS_EXPECTED),
        free_for_range_panics,
    );
}

/// `reduce` summing `0..=N`, and whether every piece ran on the pool.
fn reduce(t: Target<'_>) -> (u64, bool) {
    let elsewhere = AtomicBool::new(false);
    let sum = t.pool.reduce(
        0..N + 1,
        0u64,
        |r, acc| {
            if !on_pool(t.tag) {
                elsewhere.store(true, Ordering::Relaxed);
            }
            acc + r.map(|i| i as u64).sum::<u64>()
        },
        |a, b| a + b,
    );
    (sum, !elsewhere.load(Ordering::Relaxed))
}

const REDUCE_EXPECTED: (u64, bool) = ((N as u64) * (N as u64 + 1) / 2, true);

fn reduce_panics(t: Target<'_>) -> AfterPanic<(u64, bool)> {
    let message = panic_of(|| {
        t.pool.reduce(
            0..N,
            0usize,
            |r, acc| {
                loop_body_panics(r.clone());
                acc + r.len()
            },
            |a, b| a + b,
        )
    });
    (message, reduce(t))
}

#[test]
fn reduce_from_every_caller() {
    every_caller("Pool::reduce", REDUCE_EXPECTED, reduce);
}

#[test]
fn reduce_panic_from_every_caller() {
    every_caller(
        "Pool::reduce with a panic",
        (intentional("a loop body"), REDUCE_EXPECTED),
        reduce_panics,
    );
}

// ---------------------------------------------------------------- join

/// `join` of two halves of a borrowed slice: both values, and whether
/// both sides ran on the pool.
fn join(t: Target<'_>) -> ((u64, bool), (String, bool)) {
    let data: Vec<u64> = (1..=100).collect();
    let (left, right) = data.split_at(50);
    t.pool.join(
        || (left.iter().sum(), t.here()),
        || (format!("right {}", right.iter().sum::<u64>()), t.here()),
    )
}

fn join_expected() -> ((u64, bool), (String, bool)) {
    ((1275, true), ("right 3775".to_owned(), true))
}

fn join_panics(t: Target<'_>) -> AfterPanic<((u64, bool), (String, bool))> {
    let message = panic_of(|| {
        t.pool
            .join(|| 1, || -> u32 { panic!("{}", intentional("a join half")) })
    });
    (message, join(t))
}

#[test]
fn join_from_every_caller() {
    every_caller("Pool::join", join_expected(), join);
}

#[test]
fn join_panic_from_every_caller() {
    every_caller(
        "Pool::join with a panic",
        (intentional("a join half"), join_expected()),
        join_panics,
    );
}

// ---------------------------------------------------------------- scope

/// `scope` whose spawned tasks write into slots borrowed from the
/// caller's frame; and whether they all ran on the pool.
fn scope(t: Target<'_>) -> ([usize; 8], bool) {
    let mut slots = [0usize; 8];
    let elsewhere = AtomicBool::new(false);
    let tag = t.tag;
    t.pool.scope(|s| {
        for (i, slot) in slots.iter_mut().enumerate() {
            let elsewhere = &elsewhere;
            s.spawn(move |_| {
                if !on_pool(tag) {
                    elsewhere.store(true, Ordering::Relaxed);
                }
                *slot = i * i + 1;
            });
        }
    });
    (slots, !elsewhere.load(Ordering::Relaxed))
}

const SCOPE_EXPECTED: ([usize; 8], bool) = ([1, 2, 5, 10, 17, 26, 37, 50], true);

fn scope_panics(t: Target<'_>) -> AfterPanic<([usize; 8], bool)> {
    let message = panic_of(|| {
        t.pool.scope(|s| {
            s.spawn(|_| {});
            s.spawn(|_| panic!("{}", intentional("a scope task")));
            s.spawn(|_| {});
        })
    });
    (message, scope(t))
}

#[test]
fn scope_from_every_caller() {
    every_caller("Pool::scope", SCOPE_EXPECTED, scope);
}

#[test]
fn scope_panic_from_every_caller() {
    every_caller(
        "Pool::scope with a panic",
        (intentional("a scope task"), SCOPE_EXPECTED),
        scope_panics,
    );
}
