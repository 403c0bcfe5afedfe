//! A graph's predecessor counts across runs: a node restores its own
//! count when it starts, and nothing else resets them, so each run must
//! find every count back at its node's in-degree. These tests run graphs
//! an odd and an even number of times, with fans of up to 40,000
//! predecessors, and change in-degrees between runs (a join gaining
//! predecessors, a grid whose new cells gain a second one), on pools of one worker (plain loads and stores) and two
//! (read-modify-writes). Each join node checks, when it runs, that every
//! predecessor ran before it in this run; each node counts its runs.

mod common;

use common::{pool, within};
use sixfold::{Graph, NodeId, Pool};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Far beyond what a passing test needs: a lost count hangs a run, and
/// this turns the hang into a failure.
const LIMIT: Duration = Duration::from_secs(120);

/// Run `test` on a pool of one worker, then on a pool of two, under the
/// watchdog.
fn on_one_and_two_workers(what: &str, test: impl Fn(&Pool, usize) + Send + 'static) {
    within(what, LIMIT, move || {
        for workers in [1, 2] {
            test(&pool(workers), workers);
        }
    });
}

/// `fan` roots, each bumping `arrived`, then one join that records how
/// many had arrived when it ran (`seen`) and counts its runs.
struct FanIn {
    arrived: AtomicUsize,
    seen: AtomicUsize,
    joins: AtomicUsize,
}

impl FanIn {
    fn new() -> Self {
        FanIn {
            arrived: AtomicUsize::new(0),
            seen: AtomicUsize::new(0),
            joins: AtomicUsize::new(0),
        }
    }

    fn build(&self, fan: usize) -> (Graph<'_>, NodeId) {
        let mut g = Graph::with_capacity(fan + 1, fan);
        let join = g.add(|| {
            self.seen
                .store(self.arrived.load(Ordering::Acquire), Ordering::Relaxed);
            self.joins.fetch_add(1, Ordering::Relaxed);
        });
        for _ in 0..fan {
            self.add_predecessor(&mut g, join);
        }
        (g, join)
    }

    /// One more root of `g` before `join`, bumping `arrived`.
    fn add_predecessor<'a>(&'a self, g: &mut Graph<'a>, join: NodeId) {
        let root = g.add(|| {
            self.arrived.fetch_add(1, Ordering::Release);
        });
        g.precede(root, join).unwrap();
    }

    /// Run `g` once and check the join saw all `fan` predecessors.
    fn run_once(&self, pool: &Pool, g: &mut Graph<'_>, fan: usize, what: &str) {
        self.arrived.store(0, Ordering::Relaxed);
        let joins = self.joins.load(Ordering::Relaxed);
        pool.run_graph(g).unwrap();
        assert_eq!(
            self.joins.load(Ordering::Relaxed),
            joins + 1,
            "{what}: the join runs once a run"
        );
        assert_eq!(
            self.seen.load(Ordering::Relaxed),
            fan,
            "{what}: the join ran after all {fan} predecessors"
        );
    }
}

#[test]
fn a_join_waits_for_all_its_predecessors_run_after_run() {
    on_one_and_two_workers(
        "a join waits for all its predecessors run after run",
        |pool, workers| {
            for fan in [2, 3, 1000, 40_000] {
                let probe = FanIn::new();
                let (mut g, _) = probe.build(fan);
                for run in 0..5 {
                    probe.run_once(
                        pool,
                        &mut g,
                        fan,
                        &format!("{workers} workers, fan {fan}, run {run}"),
                    );
                }
            }
        },
    );
}

/// An edge added after an odd number of runs and after an even one.
#[test]
fn in_degrees_changed_between_runs_are_counted_from_the_new_value() {
    on_one_and_two_workers(
        "in degrees changed between runs are counted from the new value",
        |pool, workers| {
            let probe = FanIn::new();
            let fan = 1000;
            let (mut g, join) = probe.build(fan);
            let mut fan_now = fan;
            for runs_before_edit in [1, 2, 1, 3] {
                for run in 0..runs_before_edit {
                    let what = format!("{workers} workers, fan {fan_now}, run {run}");
                    probe.run_once(pool, &mut g, fan_now, &what);
                }
                probe.add_predecessor(&mut g, join);
                fan_now += 1;
            }
            assert_eq!(fan_now, 1004, "four edges added");
            for run in 0..3 {
                let what = format!("{workers} workers, fan {fan_now} after the edits, run {run}");
                probe.run_once(pool, &mut g, fan_now, &what);
            }
        },
    );
}

/// Cell (i, j) of a `SIDE`-wide grid in a flat array.
fn cell(i: usize, j: usize) -> usize {
    i * SIDE + j
}

const SIDE: usize = 64;

/// Add grid cell (i, j): it checks that the cells above and to its left
/// have run once more than it has (so, in this run), then counts its run.
fn add_cell<'a>(
    g: &mut Graph<'a>,
    ran: &'a [AtomicUsize],
    late: &'a AtomicUsize,
    i: usize,
    j: usize,
) -> NodeId {
    g.add(move || {
        let mine = ran[cell(i, j)].load(Ordering::Relaxed);
        let before = [
            (i > 0).then(|| cell(i - 1, j)),
            (j > 0).then(|| cell(i, j - 1)),
        ];
        for k in before.into_iter().flatten() {
            if ran[k].load(Ordering::Acquire) != mine + 1 {
                late.fetch_add(1, Ordering::Relaxed);
            }
        }
        ran[cell(i, j)].store(mine + 1, Ordering::Release);
    })
}

/// A grid (two predecessors a cell) run an odd number of times, then
/// grown by a row whose cells gain their second predecessor, run again:
/// every cell runs once a run, after both its predecessors.
#[test]
fn a_grid_grown_between_runs_keeps_its_order() {
    on_one_and_two_workers(
        "a grid grown between runs keeps its order",
        |pool, workers| {
            let rows = SIDE + 1;
            let ran: Vec<AtomicUsize> = (0..rows * SIDE).map(|_| AtomicUsize::new(0)).collect();
            let late = AtomicUsize::new(0);
            let mut g = Graph::new();
            let mut ids = Vec::new();
            for i in 0..SIDE {
                for j in 0..SIDE {
                    let id = add_cell(&mut g, &ran, &late, i, j);
                    ids.push(id);
                    if j > 0 {
                        g.precede(ids[cell(i, j - 1)], id).unwrap();
                    }
                    if i > 0 {
                        g.precede(ids[cell(i - 1, j)], id).unwrap();
                    }
                }
            }
            for _ in 0..3 {
                pool.run_graph(&mut g).unwrap();
            }
            // The new row starts behind: its cells run as often as the grid's
            // from here on, so count from three.
            for j in 0..SIDE {
                ran[cell(SIDE, j)].store(3, Ordering::Relaxed);
                let id = add_cell(&mut g, &ran, &late, SIDE, j);
                ids.push(id);
                g.precede(ids[cell(SIDE - 1, j)], id).unwrap();
                if j > 0 {
                    g.precede(ids[cell(SIDE, j - 1)], id).unwrap();
                }
            }
            for _ in 0..4 {
                pool.run_graph(&mut g).unwrap();
            }
            assert_eq!(
                late.load(Ordering::Relaxed),
                0,
                "{workers} workers: a cell ran before a predecessor"
            );
            for (k, r) in ran.iter().enumerate() {
                assert_eq!(
                    r.load(Ordering::Relaxed),
                    7,
                    "{workers} workers: cell {k} runs once a run"
                );
            }
        },
    );
}

/// A node's successor list changes form as it grows (one in its link, two
/// as a pair, more in the pool made before the next run), here between
/// runs, after an odd and an even number of them: each successor runs
/// once a run, after the node, from the run after it was added.
#[test]
fn successors_added_between_runs_each_run_once_after_their_node() {
    on_one_and_two_workers(
        "successors added between runs each run once after their node",
        |pool, workers| {
            let round = AtomicUsize::new(0);
            let source_runs = AtomicUsize::new(0);
            let early = AtomicUsize::new(0);
            let runs: Vec<AtomicUsize> = (0..6).map(|_| AtomicUsize::new(0)).collect();
            let mut g = Graph::new();
            let source = g.add(|| {
                source_runs.fetch_add(1, Ordering::SeqCst);
            });
            let mut expected = [0usize; 6];
            for (k, runs_after) in [1, 2, 1, 2, 3, 2].into_iter().enumerate() {
                let (round, source_runs, early, ran) = (&round, &source_runs, &early, &runs[k]);
                let succ = g.add(move || {
                    // The source ran in this run, before this node.
                    if source_runs.load(Ordering::SeqCst) != round.load(Ordering::SeqCst) {
                        early.fetch_add(1, Ordering::SeqCst);
                    }
                    ran.fetch_add(1, Ordering::SeqCst);
                });
                g.precede(source, succ).unwrap();
                for _ in 0..runs_after {
                    round.fetch_add(1, Ordering::SeqCst);
                    pool.run_graph(&mut g).unwrap();
                    for e in &mut expected[..=k] {
                        *e += 1;
                    }
                }
            }
            let ran: Vec<usize> = runs.iter().map(|r| r.load(Ordering::SeqCst)).collect();
            assert_eq!(ran, expected, "{workers} workers: runs of each successor");
            assert_eq!(
                early.load(Ordering::SeqCst),
                0,
                "{workers} workers: ran before the source"
            );
        },
    );
}

/// A node's count holds its children while it runs, and the last child
/// restores it: a joining node (three predecessors) and a root that spawn
/// children and grandchildren, run again and again, still wait for every
/// predecessor each run, and their successor for every child.
#[test]
fn nodes_that_spawn_keep_their_counts_whole_run_after_run() {
    on_one_and_two_workers(
        "nodes that spawn keep their counts whole run after run",
        |pool, workers| {
            let round = AtomicUsize::new(0);
            let before = AtomicUsize::new(0);
            let children = AtomicUsize::new(0);
            let wrong = AtomicUsize::new(0);
            let last = AtomicUsize::new(0);
            let mut g = Graph::new();
            let (round_ref, before_ref, children_ref, wrong_ref) =
                (&round, &before, &children, &wrong);
            let root = g.add_subflow(move |sf| spawn_three(sf, children_ref));
            let preds: Vec<NodeId> = (0..3)
                .map(|_| {
                    g.add(move || {
                        before_ref.fetch_add(1, Ordering::SeqCst);
                    })
                })
                .collect();
            let join = g.add_subflow(move |sf| {
                // Every predecessor of this run came first.
                if before_ref.load(Ordering::SeqCst) != 3 * round_ref.load(Ordering::SeqCst) {
                    wrong_ref.fetch_add(1, Ordering::SeqCst);
                }
                spawn_three(sf, children_ref);
            });
            let last_ref = &last;
            let after = g.add(move || {
                // Both spawners' children and grandchildren of this run.
                if children_ref.load(Ordering::SeqCst) != 12 * round_ref.load(Ordering::SeqCst) {
                    wrong_ref.fetch_add(1, Ordering::SeqCst);
                }
                last_ref.fetch_add(1, Ordering::SeqCst);
            });
            for &p in &preds {
                g.precede(p, join).unwrap();
            }
            g.precede(root, after).unwrap();
            g.precede(join, after).unwrap();
            for run in 1..=7 {
                round.store(run, Ordering::SeqCst);
                pool.run_graph(&mut g).unwrap();
            }
            assert_eq!(last.load(Ordering::SeqCst), 7, "{workers} workers");
            assert_eq!(children.load(Ordering::SeqCst), 7 * 12, "{workers} workers");
            assert_eq!(
                wrong.load(Ordering::SeqCst),
                0,
                "{workers} workers: out of order"
            );
        },
    );
}

/// Spawn three children, each with a child of its own, counting them.
fn spawn_three<'a>(sf: &mut sixfold::Subflow<'_, 'a>, children: &'a AtomicUsize) {
    for _ in 0..3 {
        sf.spawn(move |sf| {
            children.fetch_add(1, Ordering::SeqCst);
            sf.spawn(move |_| {
                children.fetch_add(1, Ordering::SeqCst);
            });
        });
    }
}
