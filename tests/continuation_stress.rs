//! Stress test of a continuation's pending count while its children run.
//!
//! A task that makes a continuation and then its children one at a time
//! races them: a child spawned first may be stolen and finish while the
//! task is still making the next one. The count of the continuation must
//! then neither lose a unit (it would start before all its children
//! delivered, or twice) nor keep one (it would never start: a hang, which
//! the watchdog turns into a failure). Each node here makes 1 to 5
//! children with a little work between them, and finishes by recycling as
//! its last child, returning it (rule 1), or spawning it too; every
//! continuation checks that all its children delivered before it runs.
//! Also: a continuation's child handed to another run is waited for there.

mod common;

use common::{finishes_within, mix};
use sixfold::{Context, Pool, Task, TaskRef};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Children of a node at `depth` with `seed` (0 for a leaf).
fn fan_out(depth: u32, seed: u64) -> u64 {
    if depth == 0 { 0 } else { 1 + mix(seed) % 5 }
}

fn child_seed(seed: u64, i: u64) -> u64 {
    mix(seed ^ (i + 1).wrapping_mul(0xA24B_AED4_963E_E407))
}

/// Leaves of the tree, counted sequentially.
fn leaves(depth: u32, seed: u64) -> u64 {
    match fan_out(depth, seed) {
        0 => 1,
        k => (0..k).map(|i| leaves(depth - 1, child_seed(seed, i))).sum(),
    }
}

/// A few hundred nanoseconds, so that children finish while their parent
/// is still making their siblings.
fn spin(seed: u64) {
    let mut x = seed | 1;
    for _ in 0..(seed % 64) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    black_box(x);
}

struct Node {
    depth: u32,
    seed: u64,
}

/// Waits for `expected` children, then hands their total upwards.
struct Join {
    expected: usize,
    arrived: AtomicUsize,
    total: AtomicU64,
    out: Option<Arc<AtomicU64>>,
    runs: Arc<AtomicUsize>,
}

impl Join {
    fn new(expected: usize, out: Option<Arc<AtomicU64>>, runs: Arc<AtomicUsize>) -> Self {
        Join {
            expected,
            arrived: AtomicUsize::new(0),
            total: AtomicU64::new(0),
            out,
            runs,
        }
    }
}

fn deliver(cx: &Context<'_>, value: u64) {
    let join = cx.successor::<Join>().expect("a Join successor");
    join.total.fetch_add(value, Ordering::Relaxed);
    join.arrived.fetch_add(1, Ordering::Relaxed);
}

impl Task for Node {
    fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
        let k = fan_out(self.depth, self.seed);
        if k == 0 {
            spin(self.seed);
            deliver(cx, 1);
            return None;
        }
        let runs = cx
            .successor::<Join>()
            .expect("a Join successor")
            .runs
            .clone();
        let join = cx.continuation(Join::new(k as usize, None, runs));
        for i in 0..k - 1 {
            let seed = child_seed(self.seed, i);
            cx.spawn(join.child(Node {
                depth: self.depth - 1,
                seed,
            }));
            spin(seed);
        }
        let last = Node {
            depth: self.depth - 1,
            seed: child_seed(self.seed, k - 1),
        };
        match self.seed % 3 {
            0 => {
                *self = last;
                cx.recycle();
                None
            }
            1 => Some(join.child(last)),
            _ => {
                cx.spawn(join.child(last));
                None
            }
        }
    }
}

impl Task for Join {
    fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
        self.runs.fetch_add(1, Ordering::Relaxed);
        let arrived = self.arrived.load(Ordering::Relaxed);
        assert_eq!(
            arrived, self.expected,
            "a continuation started before all its children delivered"
        );
        let total = self.total.load(Ordering::Relaxed);
        match &self.out {
            Some(out) => out.store(total, Ordering::Relaxed),
            None => deliver(cx, total),
        }
        None
    }
}

/// Joins in the tree (one per inner node) plus the final one.
fn joins(depth: u32, seed: u64) -> usize {
    match fan_out(depth, seed) {
        0 => 0,
        k => {
            1 + (0..k)
                .map(|i| joins(depth - 1, child_seed(seed, i)))
                .sum::<usize>()
        }
    }
}

fn run_tree(pool: &Pool, depth: u32, seed: u64) {
    let out = Arc::new(AtomicU64::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let mut root = TaskRef::new(Node { depth, seed });
    let last = TaskRef::new(Join::new(1, Some(out.clone()), runs.clone()));
    root.precede(&last).expect("no cycle");
    pool.run([root, last]);
    assert_eq!(
        out.load(Ordering::Relaxed),
        leaves(depth, seed),
        "seed {seed}"
    );
    assert_eq!(
        runs.load(Ordering::Relaxed),
        joins(depth, seed) + 1,
        "every continuation runs exactly once (seed {seed})"
    );
}

#[test]
fn children_racing_their_parent_never_lose_or_keep_a_unit() {
    for threads in [2, 4] {
        finishes_within(Duration::from_secs(60), move || {
            let pool = Pool::builder().num_threads(threads).build().unwrap();
            for round in 0..1000u64 {
                run_tree(&pool, 6, mix(round * 7 + threads as u64));
            }
        })
        .unwrap_or_else(|()| panic!("a continuation never started ({threads} workers)"));
    }
}

/// A continuation's child handed to `Pool::run` inside `execute` (not
/// spawned through the context): the run waits for it, as `run` promises,
/// and the continuation still starts after it. It used to return at once:
/// the child kept its continuation's run, and the new run had nothing to
/// wait for.
#[test]
fn a_continuations_child_handed_to_pool_run_is_waited_for() {
    struct Cont(Arc<AtomicUsize>);
    impl Task for Cont {
        fn execute(&mut self, _: &mut Context<'_>) -> Option<TaskRef> {
            assert_eq!(self.0.load(Ordering::SeqCst), 1, "after its child");
            self.0.store(2, Ordering::SeqCst);
            None
        }
    }
    struct Parent {
        pool: Arc<Pool>,
        state: Arc<AtomicUsize>,
    }
    impl Task for Parent {
        fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
            let cont = cx.continuation(Cont(self.state.clone()));
            let state = self.state.clone();
            let child = cont.child_fn(move |_| {
                std::thread::sleep(Duration::from_millis(5));
                state.store(1, Ordering::SeqCst);
            });
            self.pool.run(child);
            assert_eq!(
                self.state.load(Ordering::SeqCst),
                1,
                "Pool::run returned before the child ran"
            );
            None
        }
    }
    finishes_within(Duration::from_secs(120), || {
        let pool = Arc::new(Pool::builder().num_threads(2).build().unwrap());
        for _ in 0..20 {
            let state = Arc::new(AtomicUsize::new(0));
            pool.run(TaskRef::new(Parent {
                pool: pool.clone(),
                state: state.clone(),
            }));
            assert_eq!(state.load(Ordering::SeqCst), 2, "the continuation ran");
        }
    })
    .expect("no hang");
}

/// A continuation's child given a predecessor before it is spawned waits
/// for it: the spawn does not take the child for ready because it was
/// made ready to run (the fork's own path, which writes nothing, serves
/// only a child whose handle holds the last unit). On one worker the
/// child would run first if it were ready: the deque comes before the
/// shared queue, where its predecessor waits.
#[test]
fn a_continuations_child_with_a_predecessor_waits_for_it() {
    struct Cont(Arc<std::sync::Mutex<Vec<&'static str>>>);
    impl Task for Cont {
        fn execute(&mut self, _: &mut Context<'_>) -> Option<TaskRef> {
            self.0.lock().unwrap().push("continuation");
            None
        }
    }
    let pool = Pool::builder().num_threads(1).build().unwrap();
    for _ in 0..20 {
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let in_task = log.clone();
        pool.run(TaskRef::from_fn(move |cx| {
            let cont = cx.continuation(Cont(in_task.clone()));
            let (to_gate, to_child) = (in_task.clone(), in_task.clone());
            let mut gate = TaskRef::from_fn(move |_| to_gate.lock().unwrap().push("gate"));
            let child = cont.child_fn(move |_| to_child.lock().unwrap().push("child"));
            gate.precede(&child).unwrap();
            cx.spawn(child);
            cx.enqueue(gate);
        }));
        assert_eq!(*log.lock().unwrap(), ["gate", "child", "continuation"]);
    }
}
