//! Reusable task graphs: `Graph` and `Pool::run_graph`.
//!
//! The core check is a property test: a seeded generator builds random DAGs
//! (mixing spawn and enqueue dispatch, affinities and subflow nodes with
//! children and grandchildren), and the same graph runs again and again on
//! pools of 1, 2 and 4 workers. Every node counts its own runs, and on entry
//! checks that each predecessor (with all of that predecessor's subflow
//! children) already finished in this run; a failed check is recorded, not
//! panicked, so it is reported with its seed after the runs. Nodes with
//! affinity also check where they ran, counted apart from ordering.
//!
//! No assertion depends on timing: the only clocks are generous guards
//! (a watchdog, a bounded spin) that turn a hang into a failure.
//!
//! Then the edges of the API: the exact messages of refused edges and of an
//! affinity the pool does not have, duplicate edges, the empty graph,
//! cancellation from a node and from another thread, a panicking node, a
//! subflow's join, `join` and `scope` inside a node, `run_graph` from inside
//! a worker (nested waits, including for enqueued nodes), which of the six
//! rules carry graph nodes, and the DOT export.

mod common;

use common::pool;
use sixfold::{
    CancelToken, Dispatch, Graph, GraphError, NodeId, Rule, Subflow, current_worker, join, scope,
};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// splitmix64: a tiny seeded generator, so every failure is reproducible
/// from the seed in its message.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `percent / 100`.
    fn percent(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }
}

/// Spin (yielding) until `cond` holds; false if it still does not after
/// `limit`. Only a guard against hanging forever: the limit is far beyond
/// anything a passing run needs.
fn spin_until(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::yield_now();
    }
    true
}

/// Run `f` on a thread of its own and fail if it does not finish within
/// `LIMIT`, so that a lost wake-up or a nested wait that can never make
/// progress fails the test instead of hanging the test binary.
fn finishes(what: &str, f: impl FnOnce() + Send + 'static) {
    const LIMIT: Duration = Duration::from_secs(120);
    let (done, finished) = channel();
    let handle = std::thread::spawn(move || {
        f();
        let _ = done.send(());
    });
    match finished.recv_timeout(LIMIT) {
        Ok(()) => handle.join().unwrap(),
        // `f` panicked: report its panic.
        Err(RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(handle.join().unwrap_err())
        }
        Err(RecvTimeoutError::Timeout) => panic!("{what}: not finished after {LIMIT:?} (hang?)"),
    }
}

// ---------------------------------------------------------------------------
// The random-DAG property test.

/// No affinity, in `Probe::affinity`.
const ANYWHERE: usize = usize::MAX;

/// Failed checks of one kind, counted inside nodes (a panic there would
/// cancel the run and hide the rest of the evidence behind a different
/// failure) and asserted after the runs.
#[derive(Default)]
struct Tally {
    count: AtomicU64,
    first: Mutex<Option<String>>,
}

impl Tally {
    fn note(&self, what: impl FnOnce() -> String) {
        if self.count.fetch_add(1, Ordering::SeqCst) == 0 {
            *self.first.lock().unwrap() = Some(what());
        }
    }

    fn assert_none(&self, context: &str, kind: &str) {
        let count = self.count.load(Ordering::SeqCst);
        let first = self.first.lock().unwrap();
        assert_eq!(
            count,
            0,
            "{context}: {count} {kind}, the first: {}",
            first.as_deref().unwrap_or("?")
        );
    }
}

/// What the nodes of one random DAG record, and what they check.
struct Probe {
    /// Each node's predecessors.
    preds: Vec<Vec<usize>>,
    /// Children and grandchildren a subflow node spawns per run (0 for a
    /// plain node).
    subtasks: Vec<u64>,
    /// The worker each node must run on with the current pool, or
    /// `ANYWHERE`. Reassigned (with the graph's affinities) per pool.
    affinity: Vec<AtomicUsize>,
    /// Body starts per node: also the number of the run a body is in,
    /// since every node runs exactly once per run.
    runs: Vec<AtomicU64>,
    /// The run in which each node's body last finished.
    finished: Vec<AtomicU64>,
    /// Subflow children and grandchildren finished, over all runs.
    subtasks_done: Vec<AtomicU64>,
    /// Dependency order and exactly-once violations.
    order: Tally,
    /// Nodes that ran on another worker than their affinity's. Kept apart
    /// from `order`: placement is a separate, weaker promise (affinity is
    /// a preference: a proxy lets another worker run a node whose worker
    /// is stuck, which on an oversubscribed machine includes "preempted").
    placement: Tally,
    /// Runs of nodes with affinity.
    pinned: AtomicU64,
}

impl Probe {
    /// Start of node `i`'s body: the number of this run, after checking
    /// that `i` is not running twice and that every predecessor, with its
    /// whole subflow, completed in this same run.
    fn enter(&self, i: usize) -> u64 {
        let run = self.runs[i].fetch_add(1, Ordering::AcqRel) + 1;
        let mine = self.finished[i].load(Ordering::Acquire);
        if mine != run - 1 {
            self.order
                .note(|| format!("node {i} started run {run} after finishing run {mine}"));
        }
        for &p in &self.preds[i] {
            let done = self.finished[p].load(Ordering::Acquire);
            let subtasks = self.subtasks_done[p].load(Ordering::Acquire);
            if done != run || subtasks != run * self.subtasks[p] {
                self.order.note(|| {
                    format!(
                        "node {i} started run {run} but predecessor {p} finished run {done} \
                         with {subtasks} of {} subtasks done",
                        run * self.subtasks[p]
                    )
                });
            }
        }
        let want = self.affinity[i].load(Ordering::Relaxed);
        let here = current_worker();
        if want != ANYWHERE {
            self.pinned.fetch_add(1, Ordering::Relaxed);
            if here != Some(want) {
                self.placement
                    .note(|| format!("node {i} with affinity for worker {want} ran on {here:?}"));
            }
        }
        run
    }

    fn leave(&self, i: usize, run: u64) {
        self.finished[i].store(run, Ordering::Release);
    }

    /// After `runs` runs in all: no node started before its predecessors
    /// (and their subflows) finished, every node ran `runs` times, every
    /// subflow spawned and finished all its subtasks each time, and every
    /// node with affinity ran on its worker at least 75% of the time.
    fn verify(&self, runs: u64, context: &str) {
        self.order.assert_none(context, "ordering violations");
        for i in 0..self.preds.len() {
            assert_eq!(
                self.runs[i].load(Ordering::SeqCst),
                runs,
                "{context}: node {i} ran a wrong number of times"
            );
            assert_eq!(
                self.subtasks_done[i].load(Ordering::SeqCst),
                runs * self.subtasks[i],
                "{context}: node {i}'s subtasks ran a wrong number of times"
            );
        }
        let (off, pinned) = (
            self.placement.count.load(Ordering::SeqCst),
            self.pinned.load(Ordering::SeqCst),
        );
        // A quarter: these pools have up to 4 workers on 2 cores, where a
        // descheduled worker looks stuck and its proxies are claimed, as
        // designed; beside busy loops (`under-load`) a worker is off its
        // core for whole time slices. Over many runs per context the share
        // elsewhere stayed under 7% there, but one in about twelve loaded
        // runs of the test passed 10% on some context. Affinity ignored
        // would put at least half the runs elsewhere (one worker in two or
        // more by chance), so a quarter still catches it.
        assert!(
            off * 100 <= pinned * 25,
            "{context}: {off} of {pinned} runs of nodes with affinity were elsewhere, the first: {}",
            self.placement
                .first
                .lock()
                .unwrap()
                .as_deref()
                .unwrap_or("?")
        );
    }
}

/// How one random node is set up.
struct NodePlan {
    preds: Vec<usize>,
    enqueue: bool,
    /// Pinned to some worker (which one is drawn per pool).
    pinned: bool,
    /// For a subflow node: children, and grandchildren per child.
    subflow: Option<(u64, u64)>,
    named: bool,
}

fn plan(rng: &mut Rng, nodes: usize) -> Vec<NodePlan> {
    // The density varies per seed: narrow windows give long chains (rule 2),
    // wide ones give fans and joins with many predecessors.
    let window = 1 + rng.below(24);
    let edge_percent = 10 + rng.below(40) as u64;
    (0..nodes)
        .map(|j| {
            let mut preds: Vec<usize> = (j.saturating_sub(window)..j)
                .filter(|_| rng.percent(edge_percent))
                .collect();
            // Now and then an edge from far back.
            if j > 0 && rng.percent(5) {
                let far = rng.below(j);
                if !preds.contains(&far) {
                    preds.push(far);
                }
            }
            NodePlan {
                preds,
                enqueue: rng.percent(15),
                pinned: rng.percent(10),
                subflow: rng
                    .percent(10)
                    .then(|| (1 + rng.below(4) as u64, rng.below(4) as u64)),
                named: rng.percent(20),
            }
        })
        .collect()
}

/// Add the planned nodes, bodies reporting to `probe`, and their edges.
fn build<'a>(rng: &mut Rng, plans: &[NodePlan], probe: &'a Probe) -> (Graph<'a>, Vec<NodeId>) {
    let mut g = Graph::new();
    let ids: Vec<NodeId> = plans
        .iter()
        .enumerate()
        .map(|(i, plan)| {
            let id = match plan.subflow {
                Some((children, grandchildren)) => {
                    g.add_subflow(move |sf: &mut Subflow<'_, 'a>| {
                        let run = probe.enter(i);
                        for _ in 0..children {
                            sf.spawn(move |sf| {
                                for _ in 0..grandchildren {
                                    sf.spawn(move |_| {
                                        probe.subtasks_done[i].fetch_add(1, Ordering::AcqRel);
                                    });
                                }
                                probe.subtasks_done[i].fetch_add(1, Ordering::AcqRel);
                            });
                        }
                        probe.leave(i, run);
                    })
                }
                None if plan.named => g.add_named(format!("node {i}"), move || {
                    let run = probe.enter(i);
                    probe.leave(i, run);
                }),
                None => g.add(move || {
                    let run = probe.enter(i);
                    probe.leave(i, run);
                }),
            };
            if plan.enqueue {
                g.set_dispatch(id, Dispatch::Enqueue).unwrap();
            }
            id
        })
        .collect();
    let mut edges = 0;
    for (j, plan) in plans.iter().enumerate() {
        for &p in &plan.preds {
            // Both spellings of an edge.
            if rng.percent(50) {
                g.precede(ids[p], ids[j]).unwrap();
            } else {
                g.succeed(ids[j], ids[p]).unwrap();
            }
            edges += 1;
        }
    }
    assert_eq!(g.len(), plans.len());
    assert_eq!(g.num_edges(), edges);
    (g, ids)
}

/// Seeds 0..SEEDS: seed 0 is the graph rerun 1,000 times on each pool, the
/// others are rerun a few times each, for variety of shapes.
const SEEDS: u64 = 64;
const RERUNS_BIG: usize = 1_000;
const RERUNS_SMALL: usize = 30;

#[test]
fn random_dags_rerun_in_dependency_order_exactly_once_per_run() {
    let pools = [pool(1), pool(2), pool(4)];
    for seed in 0..SEEDS {
        let mut rng = Rng::new(seed);
        let nodes = if seed == 0 { 300 } else { 50 + rng.below(251) };
        let plans = plan(&mut rng, nodes);
        let probe = Probe {
            preds: plans.iter().map(|p| p.preds.clone()).collect(),
            subtasks: plans
                .iter()
                .map(|p| p.subflow.map_or(0, |(c, g)| c * (1 + g)))
                .collect(),
            affinity: (0..nodes).map(|_| AtomicUsize::new(ANYWHERE)).collect(),
            runs: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            finished: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            subtasks_done: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            order: Tally::default(),
            placement: Tally::default(),
            pinned: AtomicU64::new(0),
        };
        let (mut g, ids) = build(&mut rng, &plans, &probe);
        let reruns = if seed == 0 { RERUNS_BIG } else { RERUNS_SMALL };
        let mut total = 0;
        // The same graph on every pool: the per-node counts carry over, so
        // a run that leaves a pending count wrong shows up in the next.
        for pool in &pools {
            let workers = pool.num_workers();
            // Affinities must fit the pool: draw them again. This also
            // changes the graph between runs.
            for (plan, &id) in plans.iter().zip(&ids) {
                let worker = plan.pinned.then(|| rng.below(workers));
                g.set_affinity(id, worker).unwrap();
                probe.affinity[id.index()].store(worker.unwrap_or(ANYWHERE), Ordering::Relaxed);
            }
            let context = format!("seed {seed}, {nodes} nodes, {workers} workers");
            // Half through `run_graph_n`, half one by one.
            pool.run_graph_n(&mut g, reruns / 2)
                .unwrap_or_else(|e| panic!("{context}: {e}"));
            for _ in reruns / 2..reruns {
                pool.run_graph(&mut g)
                    .unwrap_or_else(|e| panic!("{context}: {e}"));
            }
            total += reruns as u64;
            probe.verify(total, &context);
        }
    }
}

// ---------------------------------------------------------------------------
// Bad inputs.

/// Counts the runs of each of a handful of nodes.
fn counters(n: usize) -> Vec<AtomicUsize> {
    (0..n).map(|_| AtomicUsize::new(0)).collect()
}

fn counts(c: &[AtomicUsize]) -> Vec<usize> {
    c.iter().map(|a| a.load(Ordering::SeqCst)).collect()
}

#[test]
fn an_edge_closing_a_cycle_is_refused_with_the_cycle_named() {
    let pool = pool(2);
    let order = Mutex::new(Vec::new());
    let mut g = Graph::new();
    let a = g.add_named("a", || order.lock().unwrap().push("a"));
    let b = g.add_named("b", || order.lock().unwrap().push("b"));
    let c = g.add_named("c", || order.lock().unwrap().push("c"));
    g.precede(a, b).unwrap();
    g.precede(b, c).unwrap();

    let err = g.precede(c, a).unwrap_err();
    assert_eq!(
        err.to_string(),
        "this edge would close the cycle a -> b -> c -> a"
    );
    // The path starts at the edge's target and ends at its source.
    assert_eq!(
        err,
        GraphError::Cycle {
            cycle: vec![a, b, c],
            names: "a -> b -> c -> a".to_string(),
        }
    );
    // `succeed` is the same edge spelled the other way round.
    assert_eq!(g.succeed(a, c).unwrap_err(), err);
    // Without names the message uses `#index`.
    let mut h = Graph::new();
    let x = h.add(|| {});
    let y = h.add(|| {});
    h.precede(x, y).unwrap();
    assert_eq!(
        h.precede(y, x).unwrap_err().to_string(),
        "this edge would close the cycle #0 -> #1 -> #0"
    );

    // The refused edge left nothing behind: the graph still runs, in order.
    assert_eq!(g.num_edges(), 2);
    pool.run_graph_n(&mut g, 3).unwrap();
    assert_eq!(
        *order.lock().unwrap(),
        ["a", "b", "c", "a", "b", "c", "a", "b", "c"]
    );
}

#[test]
fn self_edges_and_nodes_of_other_graphs_are_refused() {
    let mut g = Graph::new();
    let a = g.add_named("a", || {});
    let b = g.add(|| {});

    let err = g.precede(a, a).unwrap_err();
    assert_eq!(
        err.to_string(),
        "an edge from node a to itself would never let it run"
    );
    assert_eq!(
        err,
        GraphError::SelfEdge {
            node: a,
            name: "a".to_string()
        }
    );
    assert_eq!(
        g.succeed(b, b).unwrap_err().to_string(),
        "an edge from node #1 to itself would never let it run"
    );

    // A node of another graph, at an index this graph also has: the graph
    // number tells them apart.
    let mut other = Graph::new();
    let foreign = other.add(|| {});
    assert_eq!(foreign.index(), a.index());
    assert_ne!(foreign.graph_id(), a.graph_id());
    let expected = format!(
        "node 0 belongs to another graph (graph #{})",
        foreign.graph_id()
    );
    let refusals = [
        g.precede(a, foreign),
        g.precede(foreign, a),
        g.succeed(foreign, b),
        g.set_name(foreign, "x"),
        g.set_dispatch(foreign, Dispatch::Enqueue),
        g.set_affinity(foreign, Some(0)),
    ];
    for refusal in refusals {
        let err = refusal.unwrap_err();
        assert_eq!(err, GraphError::ForeignNode { node: foreign });
        assert_eq!(err.to_string(), expected);
    }
    assert_eq!(g.num_edges(), 0);
    assert_eq!(other.num_edges(), 0);
}

#[test]
fn a_duplicate_edge_is_ignored() {
    let pool = pool(2);
    let runs = counters(3);
    let mut g = Graph::new();
    let [a, b, c] = [0, 1, 2].map(|i| {
        let runs = &runs;
        g.add(move || {
            runs[i].fetch_add(1, Ordering::SeqCst);
        })
    });
    g.precede(a, b).unwrap();
    g.precede(a, c).unwrap();
    g.precede(b, c).unwrap();
    // The same edges again, in both spellings: accepted, not added.
    g.precede(a, b).unwrap();
    g.succeed(b, a).unwrap();
    g.succeed(c, b).unwrap();
    g.precede(a, c).unwrap();
    assert_eq!(g.num_edges(), 3);
    // Were a duplicate counted in `c`'s in-degree, `c` would wait forever
    // (or, counted on one side only, run early or twice).
    pool.run_graph_n(&mut g, 50).unwrap();
    assert_eq!(counts(&runs), [50, 50, 50]);
}

#[test]
fn an_affinity_the_pool_lacks_is_refused_before_anything_runs() {
    let pool = pool(2);
    let runs = counters(3);
    let mut g = Graph::new();
    let first = g.add(|| {
        runs[0].fetch_add(1, Ordering::SeqCst);
    });
    let pinned = g.add_named("pinned", || {
        runs[1].fetch_add(1, Ordering::SeqCst);
    });
    let other = g.add(|| {
        runs[2].fetch_add(1, Ordering::SeqCst);
    });
    g.precede(first, pinned).unwrap();
    g.set_affinity(pinned, Some(5)).unwrap();

    let err = pool.run_graph(&mut g).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node pinned has affinity for worker 5, but the pool's workers are 0..2"
    );
    assert_eq!(
        err,
        GraphError::AffinityOutOfRange {
            node: "pinned".to_string(),
            worker: 5,
            num_workers: 2
        }
    );
    assert_eq!(counts(&runs), [0, 0, 0], "a node ran in a refused run");

    // The first worker index the pool lacks, on an unnamed node.
    g.set_affinity(pinned, None).unwrap();
    g.set_affinity(other, Some(2)).unwrap();
    assert_eq!(
        pool.run_graph_n(&mut g, 3).unwrap_err().to_string(),
        "node #2 has affinity for worker 2, but the pool's workers are 0..2"
    );
    assert_eq!(counts(&runs), [0, 0, 0], "a node ran in a refused run");

    // In range, it runs; the refused runs left no count behind.
    g.set_affinity(other, Some(1)).unwrap();
    pool.run_graph_n(&mut g, 3).unwrap();
    assert_eq!(counts(&runs), [3, 3, 3]);
}

#[test]
fn an_empty_graph_runs_and_returns_ok() {
    let mut g = Graph::new();
    assert!(g.is_empty());
    assert_eq!((g.len(), g.num_edges()), (0, 0));
    for threads in [0, 1, 2] {
        let pool = pool(threads);
        pool.run_graph(&mut g).unwrap();
        pool.run_graph_n(&mut g, 100).unwrap();
        pool.install(|| pool.run_graph(&mut g)).unwrap();
    }
}

// ---------------------------------------------------------------------------
// Cancellation.

#[test]
fn a_node_cancelling_the_run_skips_its_dependents() {
    let pool = pool(2);
    let runs = counters(5);
    let cancel_now = AtomicBool::new(true);
    let mut g = Graph::new();
    let token = g.cancel_token();
    let root = g.add(|| {
        runs[0].fetch_add(1, Ordering::SeqCst);
    });
    let trigger = {
        let (runs, cancel_now) = (&runs, &cancel_now);
        g.add(move || {
            runs[1].fetch_add(1, Ordering::SeqCst);
            if cancel_now.load(Ordering::SeqCst) {
                token.cancel();
            }
        })
    };
    let after: Vec<NodeId> = (2..5)
        .map(|i| {
            let runs = &runs;
            g.add(move || {
                runs[i].fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    g.precede(root, trigger).unwrap();
    // A chain and a second branch behind the trigger.
    g.precede(trigger, after[0]).unwrap();
    g.precede(after[0], after[1]).unwrap();
    g.precede(trigger, after[2]).unwrap();

    assert_eq!(pool.run_graph(&mut g), Err(GraphError::Cancelled));
    assert_eq!(counts(&runs), [1, 1, 0, 0, 0]);
    // The run cleared the token, so the graph can run again.
    assert!(!g.cancel_token().is_cancelled());
    assert_eq!(
        GraphError::Cancelled.to_string(),
        "the graph run was cancelled; nodes not yet started were skipped"
    );

    cancel_now.store(false, Ordering::SeqCst);
    pool.run_graph(&mut g).unwrap();
    assert_eq!(counts(&runs), [2, 2, 1, 1, 1]);

    // A token fired between runs cancels the next run: nothing runs.
    g.cancel_token().cancel();
    assert_eq!(pool.run_graph(&mut g), Err(GraphError::Cancelled));
    assert_eq!(counts(&runs), [2, 2, 1, 1, 1]);
    pool.run_graph_n(&mut g, 5).unwrap();
    assert_eq!(counts(&runs), [7, 7, 6, 6, 6]);
}

#[test]
fn a_token_cancelled_from_another_thread_skips_the_rest_of_a_chain() {
    const CHAIN: usize = 10;
    let pool = pool(2);
    let runs = counters(CHAIN);
    let started = AtomicBool::new(false);
    let cancelled = AtomicBool::new(false);
    let hold = AtomicBool::new(true);
    let timed_out = AtomicBool::new(false);
    let mut g = Graph::new();
    let nodes: Vec<NodeId> = (0..CHAIN)
        .map(|i| {
            let (runs, started, cancelled, hold, timed_out) =
                (&runs, &started, &cancelled, &hold, &timed_out);
            g.add(move || {
                runs[i].fetch_add(1, Ordering::SeqCst);
                // The first node holds the run until the other thread has
                // cancelled (bounded, and reported, rather than a hang).
                if i == 0 && hold.load(Ordering::SeqCst) {
                    started.store(true, Ordering::SeqCst);
                    if !spin_until(Duration::from_secs(60), || cancelled.load(Ordering::SeqCst)) {
                        timed_out.store(true, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for pair in nodes.windows(2) {
        g.precede(pair[0], pair[1]).unwrap();
    }
    let token: CancelToken = g.cancel_token();

    let result = std::thread::scope(|s| {
        s.spawn(|| {
            if spin_until(Duration::from_secs(60), || started.load(Ordering::SeqCst)) {
                token.cancel();
                cancelled.store(true, Ordering::SeqCst);
            }
        });
        pool.run_graph(&mut g)
    });
    assert!(!timed_out.load(Ordering::SeqCst), "the cancel never came");
    assert_eq!(result, Err(GraphError::Cancelled));
    let mut expected = vec![0; CHAIN];
    expected[0] = 1;
    assert_eq!(counts(&runs), expected, "nodes after the cancel ran");
    assert!(!token.is_cancelled());

    // Next time round nothing cancels: everything runs.
    hold.store(false, Ordering::SeqCst);
    pool.run_graph(&mut g).unwrap();
    expected = vec![1; CHAIN];
    expected[0] = 2;
    assert_eq!(counts(&runs), expected);
}

// ---------------------------------------------------------------------------
// Panics.

#[test]
fn a_panicking_node_is_resumed_by_run_graph_and_the_graph_runs_again() {
    let pool = pool(2);
    let runs = counters(4);
    let fail = AtomicBool::new(true);
    let mut g = Graph::new();
    let a = g.add(|| {
        runs[0].fetch_add(1, Ordering::SeqCst);
    });
    let b = g.add(|| {
        if fail.load(Ordering::SeqCst) {
            panic!("node b failed");
        }
        runs[1].fetch_add(1, Ordering::SeqCst);
    });
    let c = g.add(|| {
        runs[2].fetch_add(1, Ordering::SeqCst);
    });
    let d = g.add(|| {
        runs[3].fetch_add(1, Ordering::SeqCst);
    });
    g.precede(a, b).unwrap();
    g.precede(b, c).unwrap();
    g.precede(c, d).unwrap();

    let payload = catch_unwind(AssertUnwindSafe(|| pool.run_graph(&mut g))).unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"node b failed"));
    // `c` and `d` had not started: skipped.
    assert_eq!(counts(&runs), [1, 0, 0, 0]);
    // The panic's cancellation was cleared with the run.
    assert!(!g.cancel_token().is_cancelled());

    fail.store(false, Ordering::SeqCst);
    pool.run_graph_n(&mut g, 10).unwrap();
    assert_eq!(counts(&runs), [11, 10, 10, 10]);
    // The pool keeps working.
    assert_eq!(pool.install(|| join(|| 1 + 1, || 2 + 2)), (2, 4));
}

#[test]
fn a_panicking_subflow_child_is_resumed_by_run_graph() {
    let pool = pool(2);
    let fail = AtomicBool::new(true);
    let after = AtomicUsize::new(0);
    let mut g = Graph::new();
    let split = g.add_subflow(|sf| {
        for k in 0..4 {
            let fail = &fail;
            sf.spawn(move |_| {
                if k == 2 && fail.load(Ordering::SeqCst) {
                    std::panic::panic_any(k);
                }
            });
        }
    });
    let merge = g.add(|| {
        after.fetch_add(1, Ordering::SeqCst);
    });
    g.precede(split, merge).unwrap();

    let payload = catch_unwind(AssertUnwindSafe(|| pool.run_graph(&mut g))).unwrap_err();
    assert_eq!(payload.downcast_ref::<i32>(), Some(&2));
    assert_eq!(after.load(Ordering::SeqCst), 0, "the successor ran");

    fail.store(false, Ordering::SeqCst);
    pool.run_graph_n(&mut g, 10).unwrap();
    assert_eq!(after.load(Ordering::SeqCst), 10);
}

// ---------------------------------------------------------------------------
// Subflows, join and scope inside nodes.

#[test]
fn a_subflows_successor_sees_all_its_children_and_grandchildren() {
    const CHILDREN: usize = 8;
    const GRANDCHILDREN: usize = 4;
    const PER_RUN: usize = CHILDREN * (1 + GRANDCHILDREN);
    const RUNS: usize = 100;
    let pool = pool(4);
    let done = AtomicUsize::new(0);
    let seen = Mutex::new(Vec::new());
    let bad_worker = AtomicBool::new(false);
    let mut g = Graph::new();
    let split = g.add_subflow(|sf| {
        if sf.worker_index() >= 4 || current_worker() != Some(sf.worker_index()) {
            bad_worker.store(true, Ordering::SeqCst);
        }
        for _ in 0..CHILDREN {
            sf.spawn(|sf| {
                for _ in 0..GRANDCHILDREN {
                    sf.spawn(|_| {
                        // Give thieves a chance to take siblings.
                        std::hint::black_box((0..200).sum::<u64>());
                        done.fetch_add(1, Ordering::SeqCst);
                    });
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    let merge = g.add(|| seen.lock().unwrap().push(done.load(Ordering::SeqCst)));
    g.precede(split, merge).unwrap();
    pool.run_graph_n(&mut g, RUNS).unwrap();

    // Run r's successor ran after all of run r's subtasks and before any
    // of run r + 1's.
    let expected: Vec<usize> = (1..=RUNS).map(|r| r * PER_RUN).collect();
    assert_eq!(*seen.lock().unwrap(), expected);
    assert!(!bad_worker.load(Ordering::SeqCst));
}

#[test]
fn nodes_may_use_join_and_scope() {
    fn sum(slice: &[u64]) -> u64 {
        if slice.len() <= 16 {
            return slice.iter().sum();
        }
        let (l, r) = slice.split_at(slice.len() / 2);
        let (a, b) = join(|| sum(l), || sum(r));
        a + b
    }
    let pool = pool(2);
    let data: Vec<u64> = (1..=1000).collect();
    let joined = AtomicU64::new(0);
    let scoped = AtomicU64::new(0);
    let seen = Mutex::new(Vec::new());
    let mut g = Graph::new();
    let by_join = g.add(|| {
        joined.store(sum(&data), Ordering::SeqCst);
    });
    let by_scope = g.add(|| {
        // Scope tasks borrow the node's own stack.
        let parts: Vec<AtomicU64> = (0..8).map(|_| AtomicU64::new(0)).collect();
        scope(|s| {
            for (k, chunk) in data.chunks(125).enumerate() {
                let parts = &parts;
                s.spawn(move |_| parts[k].store(chunk.iter().sum(), Ordering::SeqCst));
            }
        });
        let total = parts.iter().map(|p| p.load(Ordering::SeqCst)).sum();
        scoped.store(total, Ordering::SeqCst);
    });
    let merge = g.add(|| {
        seen.lock().unwrap().push((
            joined.swap(0, Ordering::SeqCst),
            scoped.swap(0, Ordering::SeqCst),
        ))
    });
    g.precede(by_join, merge).unwrap();
    g.precede(by_scope, merge).unwrap();
    pool.run_graph_n(&mut g, 20).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![(500_500, 500_500); 20]);
}

// ---------------------------------------------------------------------------
// run_graph inside the pool: nested waits must make progress.

/// A graph of `'static` counting nodes: a chain of 30 alternating enqueue
/// and spawn dispatch, then a fan of 20 enqueue nodes joined by one node.
/// Returns it with the per-run node count.
fn enqueue_heavy(count: &Arc<AtomicUsize>) -> (Graph<'static>, usize) {
    let mut g = Graph::new();
    let node = |g: &mut Graph<'static>, dispatch| {
        let count = count.clone();
        let id = g.add(move || {
            count.fetch_add(1, Ordering::SeqCst);
        });
        g.set_dispatch(id, dispatch).unwrap();
        id
    };
    let chain: Vec<NodeId> = (0..30)
        .map(|i| {
            let dispatch = if i % 2 == 0 {
                Dispatch::Enqueue
            } else {
                Dispatch::Spawn
            };
            node(&mut g, dispatch)
        })
        .collect();
    for pair in chain.windows(2) {
        g.precede(pair[0], pair[1]).unwrap();
    }
    let join_node = node(&mut g, Dispatch::Enqueue);
    for _ in 0..20 {
        let f = node(&mut g, Dispatch::Enqueue);
        g.precede(chain[29], f).unwrap();
        g.precede(f, join_node).unwrap();
    }
    let n = g.len();
    (g, n)
}

#[test]
fn run_graph_from_inside_a_one_worker_pool_completes() {
    finishes("run_graph inside install on 1 worker", || {
        let pool = pool(1);
        let count = Arc::new(AtomicUsize::new(0));
        let (mut g, n) = enqueue_heavy(&count);
        // The only worker waits inside `install` for a run whose nodes sit
        // in the shared queue: it must take them itself.
        pool.install(|| {
            for _ in 0..50 {
                pool.run_graph(&mut g).unwrap();
            }
            pool.run_graph_n(&mut g, 50).unwrap();
        });
        assert_eq!(count.load(Ordering::SeqCst), 100 * n);
    });
}

#[test]
fn run_graph_from_inside_a_node_of_another_graph_completes() {
    finishes("run_graph inside a graph node on 1 worker", || {
        let pool = pool(1);
        let count = Arc::new(AtomicUsize::new(0));
        let (mut inner, n) = enqueue_heavy(&count);
        let outer_runs = AtomicUsize::new(0);
        let mut outer = Graph::new();
        let before = outer.add(|| {
            outer_runs.fetch_add(1, Ordering::SeqCst);
        });
        let nested = outer.add(|| pool.run_graph_n(&mut inner, 3).unwrap());
        outer.set_dispatch(nested, Dispatch::Enqueue).unwrap();
        let after = outer.add(|| {
            outer_runs.fetch_add(1, Ordering::SeqCst);
        });
        outer.precede(before, nested).unwrap();
        outer.precede(nested, after).unwrap();
        pool.run_graph_n(&mut outer, 20).unwrap();
        pool.install(|| pool.run_graph_n(&mut outer, 20)).unwrap();
        drop(outer);
        assert_eq!(outer_runs.load(Ordering::SeqCst), 2 * 40);
        assert_eq!(count.load(Ordering::SeqCst), 40 * 3 * n);
    });
}

#[test]
fn two_nested_runs_on_two_workers_complete() {
    finishes("two run_graph calls joined inside install", || {
        let pool = pool(2);
        let count = Arc::new(AtomicUsize::new(0));
        let (mut g1, n) = enqueue_heavy(&count);
        let (mut g2, _) = enqueue_heavy(&count);
        for _ in 0..50 {
            let (r1, r2) =
                pool.install(|| join(|| pool.run_graph(&mut g1), || pool.run_graph(&mut g2)));
            r1.unwrap();
            r2.unwrap();
        }
        assert_eq!(count.load(Ordering::SeqCst), 100 * n);
    });
}

#[test]
fn a_pool_without_threads_runs_graphs_on_the_caller() {
    finishes("run_graph on a pool without threads", || {
        let pool = pool(0);
        assert_eq!(pool.num_workers(), 1);
        let count = Arc::new(AtomicUsize::new(0));
        let (mut g, n) = enqueue_heavy(&count);
        // The guest slot is worker 0: affinity for it is in range.
        let pinned = {
            let count = count.clone();
            g.add(move || {
                assert_eq!(current_worker(), Some(0));
                count.fetch_add(1, Ordering::SeqCst);
            })
        };
        g.set_affinity(pinned, Some(0)).unwrap();
        pool.run_graph_n(&mut g, 20).unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 20 * (n + 1));
    });
}

// ---------------------------------------------------------------------------
// Dispatch, affinity and the six rules.

#[test]
fn nodes_with_affinity_run_on_their_worker() {
    let pool = pool(2);
    let misplaced = AtomicUsize::new(0);
    let pinned_runs = AtomicUsize::new(0);
    let runs = AtomicUsize::new(0);
    let mut g = Graph::new();
    /// A node that counts its runs and notes when it is not on `want`.
    fn node<'a>(
        g: &mut Graph<'a>,
        want: Option<usize>,
        dispatch: Dispatch,
        (misplaced, pinned_runs, runs): (&'a AtomicUsize, &'a AtomicUsize, &'a AtomicUsize),
    ) -> NodeId {
        let id = g.add(move || {
            runs.fetch_add(1, Ordering::SeqCst);
            if want.is_some() {
                pinned_runs.fetch_add(1, Ordering::SeqCst);
                if current_worker() != want {
                    misplaced.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        g.set_affinity(id, want).unwrap();
        g.set_dispatch(id, dispatch).unwrap();
        id
    }
    let probe = (&misplaced, &pinned_runs, &runs);
    // A chain that hops between the workers (so a worker makes ready a node
    // pinned elsewhere, and one pinned to itself), then a fan pinned to
    // worker 1, half of it enqueued.
    let wants = [
        Some(0),
        Some(1),
        Some(1),
        None,
        Some(0),
        Some(1),
        None,
        Some(1),
    ];
    let chain: Vec<NodeId> = (0..40)
        .map(|i| node(&mut g, wants[i % wants.len()], Dispatch::Spawn, probe))
        .collect();
    for pair in chain.windows(2) {
        g.precede(pair[0], pair[1]).unwrap();
    }
    let sink = node(&mut g, Some(0), Dispatch::Spawn, probe);
    for k in 0..16 {
        let dispatch = if k % 2 == 0 {
            Dispatch::Enqueue
        } else {
            Dispatch::Spawn
        };
        let f = node(&mut g, Some(1), dispatch, probe);
        g.precede(chain[39], f).unwrap();
        g.precede(f, sink).unwrap();
    }
    let n = g.len();
    pool.run_graph_n(&mut g, 50).unwrap();
    pool.install(|| pool.run_graph_n(&mut g, 50)).unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 100 * n);
    let (misplaced, pinned_runs) = (
        misplaced.load(Ordering::SeqCst),
        pinned_runs.load(Ordering::SeqCst),
    );
    // Affinity is a preference kept by proxies: at least 95% on target.
    assert!(
        misplaced * 100 <= pinned_runs * 5,
        "{misplaced} of {pinned_runs} runs of nodes with affinity were on another worker"
    );
}

#[test]
fn enqueue_nodes_are_taken_from_the_shared_queue() {
    const FAN: u64 = 10;
    let pool = pool(2);
    let ran = AtomicU64::new(0);
    let mut g = Graph::new();
    let root = g.add(|| {
        ran.fetch_add(1, Ordering::SeqCst);
    });
    for _ in 0..FAN {
        let e = g.add(|| {
            ran.fetch_add(1, Ordering::SeqCst);
        });
        g.set_dispatch(e, Dispatch::Enqueue).unwrap();
        g.precede(root, e).unwrap();
    }
    let before = pool.stats();
    pool.run_graph(&mut g).unwrap();
    let delta = pool.stats().since(&before);
    assert_eq!(ran.load(Ordering::SeqCst), 1 + FAN);
    // The root, routed from outside the pool, also goes through the shared
    // queue; an enqueue node is never run by rule 2 nor pushed to a deque.
    assert_eq!(delta.by_rule(Rule::SharedQueue), 1 + FAN, "{delta}");
    assert_eq!(delta.total(), 1 + FAN, "{delta}");
}

#[test]
fn a_chain_of_spawn_nodes_is_carried_by_rule_2() {
    const CHAIN: usize = 10_000;
    let pool = pool(1);
    let ran = AtomicUsize::new(0);
    let mut g = Graph::new();
    let nodes: Vec<NodeId> = (0..CHAIN)
        .map(|_| {
            g.add(|| {
                ran.fetch_add(1, Ordering::Relaxed);
            })
        })
        .collect();
    for pair in nodes.windows(2) {
        g.precede(pair[0], pair[1]).unwrap();
    }
    let before = pool.stats();
    pool.run_graph(&mut g).unwrap();
    let delta = pool.stats().since(&before);
    assert_eq!(ran.load(Ordering::SeqCst), CHAIN);
    assert_eq!(delta.total(), CHAIN as u64, "{delta}");
    // All but the root: each node hands its successor straight back.
    assert!(
        delta.by_rule(Rule::Successor) >= CHAIN as u64 - 1,
        "{delta}"
    );
}

// ---------------------------------------------------------------------------
// DOT export.

#[test]
fn to_dot_shows_names_dispatch_affinity_and_every_edge() {
    let mut g = Graph::new();
    let load = g.add_named("load", || {});
    let parse = g.add_named("parse", || {});
    let check = g.add(|| {});
    let quoted = g.add_named("say \"hi\"", || {});
    g.precede(load, parse).unwrap();
    g.precede(load, check).unwrap();
    g.precede(parse, quoted).unwrap();
    g.precede(check, quoted).unwrap();
    g.set_dispatch(parse, Dispatch::Enqueue).unwrap();
    g.set_affinity(check, Some(3)).unwrap();
    g.set_name(check, "check").unwrap();
    g.set_affinity(quoted, Some(0)).unwrap();
    g.set_dispatch(quoted, Dispatch::Enqueue).unwrap();

    let dot = g.to_dot();
    assert!(dot.starts_with("digraph sixfold {\n"), "{dot}");
    assert!(dot.ends_with("}\n"), "{dot}");
    for line in [
        r#"  n0 [label="load"];"#,
        r#"  n1 [label="parse\nenqueue", style=dashed];"#,
        r#"  n2 [label="check\n@worker 3"];"#,
        r#"  n3 [label="say \"hi\"\nenqueue\n@worker 0", style=dashed];"#,
        "  n0 -> n1;",
        "  n0 -> n2;",
        "  n1 -> n3;",
        "  n2 -> n3;",
    ] {
        assert!(dot.lines().any(|l| l == line), "no line {line:?} in\n{dot}");
    }
    let edge_lines = dot.lines().filter(|l| l.contains(" -> ")).count();
    assert_eq!(edge_lines, g.num_edges(), "{dot}");
}

/// Graphs large enough for their node array to be kept after a drop and
/// reused by the next large graph (`graph/spare.rs`): built with a capacity
/// and by growing, of other shapes and sizes one after the other; each runs
/// right, and every body (each holding a clone of an `Arc`) is dropped.
#[test]
fn large_graphs_built_one_after_another_run_right_and_drop_their_bodies() {
    let pool = pool(2);
    let witness = Arc::new(());
    // A chain: each node checks that its predecessor ran just before it.
    let chain = |g: &mut Graph<'static>, n: u64, last: &Arc<AtomicU64>, bad: &Arc<AtomicU64>| {
        let mut prev: Option<NodeId> = None;
        for i in 0..n {
            let (last, bad, w) = (last.clone(), bad.clone(), witness.clone());
            let id = g.add(move || {
                let _keep = &w;
                if last.swap(i + 1, Ordering::Relaxed) != i {
                    bad.fetch_add(1, Ordering::Relaxed);
                }
            });
            if let Some(p) = prev {
                g.precede(p, id).unwrap();
            }
            prev = Some(id);
        }
    };
    // 2^20 nodes: the largest node array kept, and the smallest count
    // array; 600,000 and 550,000 keep and reuse the builder's lists and
    // edges (arrays of 4 MiB or more are kept).
    for (n, with_capacity) in [
        (200_000u64, true),
        (150_000, false),
        (100_000, true),
        (210_000, false),
        (600_000, true),
        (550_000, true),
        (1 << 20, true),
        (1 << 20, true),
        (300_000, false),
    ] {
        let (last, bad) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut g = if with_capacity {
            Graph::with_capacity(n as usize, n as usize)
        } else {
            Graph::new()
        };
        chain(&mut g, n, &last, &bad);
        pool.run_graph(&mut g).unwrap();
        assert_eq!(last.load(Ordering::Relaxed), n, "{n} nodes");
        assert_eq!(bad.load(Ordering::Relaxed), 0, "{n} nodes ran out of order");
        drop(g);
        assert_eq!(
            Arc::strong_count(&witness),
            1,
            "bodies of {n} nodes not dropped"
        );
    }
}

/// A chain's links run by rule 2 without looking at a count; a link stops
/// being one when the graph changes between runs: a second predecessor
/// (the successor then waits for both), a dispatch to the shared queue (it
/// goes there, rule 5), an affinity (its worker, not the predecessor's).
#[test]
fn chain_links_follow_edits_between_runs() {
    let pool = pool(2);
    let slow_done = AtomicBool::new(false);
    let c_saw_slow = AtomicUsize::new(0);
    let c_runs = AtomicUsize::new(0);
    let c_off_worker_1 = AtomicUsize::new(0);
    let c_pinned = AtomicBool::new(false);
    let b_slow = AtomicBool::new(false);
    let b_off_worker_0 = AtomicUsize::new(0);
    let mut g = Graph::new();
    let a = g.add(|| {});
    let b = g.add(|| {
        if c_pinned.load(Ordering::Relaxed) && current_worker() != Some(0) {
            b_off_worker_0.fetch_add(1, Ordering::Relaxed);
        }
        if b_slow.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(30));
        }
    });
    let c = g.add(|| {
        if c_pinned.load(Ordering::Relaxed) && current_worker() != Some(1) {
            c_off_worker_1.fetch_add(1, Ordering::Relaxed);
        }
        c_runs.fetch_add(1, Ordering::Relaxed);
        if slow_done.load(Ordering::Acquire) {
            c_saw_slow.fetch_add(1, Ordering::Relaxed);
        }
    });
    g.precede(a, b).unwrap();
    g.precede(b, c).unwrap();
    let before = pool.stats();
    pool.run_graph(&mut g).unwrap();
    let stats = pool.stats().since(&before);
    assert_eq!(
        stats.by_rule(Rule::Successor),
        2,
        "a chain of three: two links"
    );

    // A second predecessor of `c`, slow: `c` must wait for it.
    let d = g.add(|| {
        if !b_slow.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(30));
            slow_done.store(true, Ordering::Release);
        }
    });
    g.precede(d, c).unwrap();
    let mut linked = None;
    for _ in 0..3 {
        slow_done.store(false, Ordering::Release);
        let before = pool.stats();
        pool.run_graph(&mut g).unwrap();
        linked = Some(pool.stats().since(&before));
    }
    let linked = linked.unwrap();
    assert_eq!(c_runs.load(Ordering::Relaxed), 4);
    assert_eq!(
        c_saw_slow.load(Ordering::Relaxed),
        3,
        "c ran before its second predecessor"
    );

    // `b -> c` is no link now; `a -> b` still is. Enqueue `b`: it goes to
    // the shared queue.
    g.set_dispatch(b, Dispatch::Enqueue).unwrap();
    let before = pool.stats();
    pool.run_graph(&mut g).unwrap();
    let stats = pool.stats().since(&before);
    assert_eq!(
        stats.by_rule(Rule::SharedQueue),
        linked.by_rule(Rule::SharedQueue) + 1,
        "b by rule 5 (the roots come that way too): {stats:?}"
    );
    assert_eq!(
        stats.by_rule(Rule::Successor) + 1,
        linked.by_rule(Rule::Successor),
        "b no longer by rule 2: {stats:?}"
    );

    // `c`, with two predecessors now, is bound to worker 1: whichever
    // finishes last (`b`, the older predecessor, now, bound to worker 0)
    // must send it there, not keep it.
    // And `b`'s one predecessor `a` runs on worker 1 while `b` is bound to
    // worker 0: the link from `a` must not keep it.
    g.set_dispatch(b, Dispatch::Spawn).unwrap();
    g.set_strict_affinity(a, 1).unwrap();
    g.set_strict_affinity(b, 0).unwrap();
    g.set_strict_affinity(c, 1).unwrap();
    c_pinned.store(true, Ordering::Relaxed);
    b_slow.store(true, Ordering::Relaxed);
    for _ in 0..8 {
        pool.run_graph(&mut g).unwrap();
    }
    assert_eq!(
        c_off_worker_1.load(Ordering::Relaxed),
        0,
        "c ran off its worker"
    );
    assert_eq!(
        b_off_worker_0.load(Ordering::Relaxed),
        0,
        "b ran off its worker"
    );
}
