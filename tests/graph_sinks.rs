//! Graphs with many sinks: the run's latch counted in batches.
//!
//! A worker that finishes a sink does not release the run's latch at once
//! while the newest job of its deque is another node of the same run: it
//! runs that node first and releases the units of all its sinks together
//! (`graph/run.rs`, `execute_node`). A unit held and never released would
//! hang `run_graph`; one released twice would let it return while nodes
//! still run. So every run here checks, when `run_graph` returns, that
//! each node ran exactly once, under a watchdog, in the shapes that end a
//! batch early: a deque whose newest job is a task of no graph (a node
//! that spawns), a node of another run (two runs at once on one pool, and
//! a run nested inside a node, whose wait is not the worker's main loop),
//! and pools of one to four workers, with tracing on and off. The task
//! counts by rule must add up to one per node.

mod common;

use common::{pool, within};
use sixfold::{Graph, Pool};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Runs of each graph; fewer under Miri.
const RUNS: usize = if cfg!(miri) { 2 } else { 40 };

/// Levels of the trees; smaller under Miri.
const DEPTH: u32 = if cfg!(miri) { 4 } else { 11 };

const LIMIT: Duration = Duration::from_secs(120);

/// Pool sizes to try; one under Miri.
const THREADS: &[usize] = if cfg!(miri) { &[2] } else { &[1, 2, 4] };

/// A complete binary tree of `depth` levels, each node before its two
/// children: `2^(depth - 1)` sinks. Node `i` runs `body(i)` and counts
/// its run in `ran[i]`.
fn tree<'a>(depth: u32, ran: &'a [AtomicUsize], body: &'a (dyn Fn(usize) + Sync)) -> Graph<'a> {
    let n = (1usize << depth) - 1;
    assert_eq!(ran.len(), n);
    let mut g = Graph::new();
    let ids: Vec<_> = (0..n)
        .map(|i| {
            g.add(move || {
                body(i);
                ran[i].fetch_add(1, Ordering::Relaxed);
            })
        })
        .collect();
    for i in 1..n {
        g.precede(ids[(i - 1) / 2], ids[i])
            .expect("a tree is acyclic");
    }
    g
}

fn counters(n: usize) -> Vec<AtomicUsize> {
    (0..n).map(|_| AtomicUsize::new(0)).collect()
}

/// Every node ran exactly `runs` times.
fn assert_ran(ran: &[AtomicUsize], runs: usize, what: &str) {
    for (i, c) in ran.iter().enumerate() {
        let c = c.load(Ordering::Relaxed);
        assert_eq!(c, runs, "{what}: node {i} ran {c} times after {runs} runs");
    }
}

#[test]
fn trees_run_every_node_once_per_run_on_one_to_four_workers() {
    for &threads in THREADS {
        for tracing in [false, true] {
            within("tree runs", LIMIT, move || {
                let pool = Pool::builder()
                    .num_threads(threads)
                    .trace(tracing)
                    .build()
                    .expect("pool");
                let n = (1usize << DEPTH) - 1;
                let ran = counters(n);
                let body = |_: usize| {};
                let mut g = tree(DEPTH, &ran, &body);
                let before = pool.stats();
                for run in 1..=RUNS {
                    pool.run_graph(&mut g).expect("run");
                    assert_ran(&ran, run, &format!("{threads} workers, tracing {tracing}"));
                }
                // One task counted a node, by whichever rule took it.
                let counted = pool.stats().since(&before).total();
                assert_eq!(counted, (n * RUNS) as u64, "{threads} workers");
                if tracing {
                    drop(pool.take_trace());
                }
            });
        }
    }
}

#[test]
fn nodes_that_spawn_leave_other_work_on_the_deque_and_runs_still_end() {
    for &threads in THREADS {
        within("trees whose nodes spawn", LIMIT, move || {
            let pool = Arc::new(pool(threads));
            let n = (1usize << DEPTH) - 1;
            let ran = counters(n);
            let spawned = Arc::new(AtomicUsize::new(0));
            // Every third node leaves a `'static` task on its worker's
            // deque: when a chain ends at a sink, the newest job there is
            // then often not a node of the run.
            let body = {
                let spawned = spawned.clone();
                move |i: usize| {
                    if i.is_multiple_of(3) {
                        let spawned = spawned.clone();
                        sixfold::spawn(move || {
                            spawned.fetch_add(1, Ordering::Relaxed);
                        });
                    }
                }
            };
            let mut g = tree(DEPTH, &ran, &body);
            for run in 1..=RUNS {
                pool.run_graph(&mut g).expect("run");
                assert_ran(&ran, run, &format!("{threads} workers"));
            }
            drop(g);
            pool.wait_idle();
            let expect = (0..n).filter(|i| i.is_multiple_of(3)).count() * RUNS;
            assert_eq!(spawned.load(Ordering::Relaxed), expect);
        });
    }
}

#[test]
fn two_runs_at_once_on_one_pool_each_end_with_all_their_nodes() {
    for &threads in THREADS {
        within("two concurrent tree runs", LIMIT, move || {
            let pool = Arc::new(pool(threads));
            let callers: Vec<_> = (0..2)
                .map(|k| {
                    let pool = pool.clone();
                    std::thread::spawn(move || {
                        let n = (1usize << DEPTH) - 1;
                        let ran = counters(n);
                        let body = |_: usize| {};
                        let mut g = tree(DEPTH, &ran, &body);
                        for run in 1..=RUNS {
                            pool.run_graph(&mut g).expect("run");
                            assert_ran(&ran, run, &format!("caller {k}, {threads} workers"));
                        }
                    })
                })
                .collect();
            for caller in callers {
                caller.join().expect("a caller failed");
            }
        });
    }
}

#[test]
fn a_tree_run_inside_a_node_of_another_tree_ends_with_all_its_nodes() {
    for &threads in THREADS {
        within("nested tree runs", LIMIT, move || {
            let pool = pool(threads);
            let inner_pool = &pool;
            let depth = DEPTH.min(7);
            let n = (1usize << depth) - 1;
            let inner_runs = AtomicUsize::new(0);
            let ran = counters(n);
            // Every leaf of the outer tree runs a tree of its own and
            // checks it at once: its wait is nested, not the main loop.
            let body = |i: usize| {
                if i >= n / 2 {
                    let inner = counters(n);
                    let nothing = |_: usize| {};
                    let mut g = tree(depth, &inner, &nothing);
                    inner_pool.run_graph(&mut g).expect("inner run");
                    drop(g);
                    assert_ran(&inner, 1, "inner tree");
                    inner_runs.fetch_add(1, Ordering::Relaxed);
                }
            };
            let mut g = tree(depth, &ran, &body);
            let runs = RUNS.min(10);
            for run in 1..=runs {
                pool.run_graph(&mut g).expect("outer run");
                assert_ran(&ran, run, &format!("outer, {threads} workers"));
            }
            drop(g);
            assert_eq!(inner_runs.load(Ordering::Relaxed), (n - n / 2) * runs);
        });
    }
}

/// A run that ends on another worker while the worker that routed its
/// last node is still returning: the caller drops the graph (and its run
/// state) as soon as `run_graph` returns. Node `a` prefers worker 0 and
/// hands its successor `b`, which prefers worker 1, to that worker; `b` is
/// the sink, so worker 1 may end the run before worker 0 has left the
/// frames that completed `a`. Those frames must not hold the run state,
/// or its nodes, as reference arguments, which assert them live until
/// they return (Miri reports the graph's drop as a race otherwise).
///
/// Three variants: soft affinities (a worker spinning for work takes a
/// proxy at once: of the three, this one caught the bug under Miri), the
/// same with tracing on (the traced chain loop is another path), and
/// strict affinities (always the two workers, each a hand-off by wake).
#[test]
fn a_graph_dropped_as_soon_as_its_run_ends_elsewhere_is_not_used_after() {
    let rounds = if cfg!(miri) { 8 } else { 1_000 };
    for (strict, tracing) in [(false, false), (false, true), (true, false)] {
        within("runs dropped at once", LIMIT, move || {
            let pool = Pool::builder()
                .num_threads(2)
                .trace(tracing)
                .build()
                .expect("pool");
            let ran = AtomicUsize::new(0);
            for _ in 0..rounds {
                let mut g = Graph::new();
                let a = g.add(|| {
                    ran.fetch_add(1, Ordering::Relaxed);
                });
                let b = g.add(|| {
                    ran.fetch_add(1, Ordering::Relaxed);
                });
                g.precede(a, b).expect("acyclic");
                if strict {
                    g.set_strict_affinity(a, 0).expect("worker 0 exists");
                    g.set_strict_affinity(b, 1).expect("worker 1 exists");
                } else {
                    g.set_affinity(a, Some(0)).expect("worker 0 exists");
                    g.set_affinity(b, Some(1)).expect("worker 1 exists");
                }
                pool.run_graph(&mut g).expect("run");
                drop(g);
            }
            let ran = ran.load(Ordering::Relaxed);
            assert_eq!(ran, 2 * rounds, "strict {strict}, tracing {tracing}");
        });
    }
}
