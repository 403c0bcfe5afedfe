//! Random DAG stress: dependency order and exactly-once execution.
//!
//! A seeded xorshift generator builds random DAGs of task nodes (edges only
//! from a lower to a higher index, so there are no cycles), linked with
//! `TaskRef::precede`, and runs them on pools of 1, 2, 4 and 8 workers (the
//! test machine has 2 cores, so 4 and 8 oversubscribe). Every node counts
//! its runs and takes a stamp from one global atomic clock when it starts
//! and another when it ends. After the pool is done, each node must have run
//! exactly once and must have started after every one of its predecessors
//! ended.
//!
//! Besides large sparse and small dense DAGs, it covers: a long chain and
//! wide fans, submission in reversed and shuffled order (so nodes join their
//! group while their successors already belong to it), a DAG split between
//! `Pool::spawn_task` (static) and `Pool::run`, DAGs built and handed over
//! from inside running tasks (with `Context::spawn`, and with a mix of
//! `spawn`, `enqueue` and `spawn_with_affinity`), and a pool without
//! threads, whose caller and drainer thread run everything.
//!
//! Under Miri the sizes shrink to a few dozen nodes on 2 workers.

use sixfold::{Pool, TaskRef};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Worker counts to try.
#[cfg(not(miri))]
const THREADS: &[usize] = &[1, 2, 4, 8];
#[cfg(miri)]
const THREADS: &[usize] = &[2];

/// `n` nodes, or a Miri-sized few.
fn size(n: usize) -> usize {
    if cfg!(miri) { n.min(50) } else { n }
}

/// Added to every seed: set `SIXFOLD_STRESS_SEED=k` to explore other DAGs
/// (the seeds then start at `k * 100_000`; failure messages print them).
fn seed_base() -> u64 {
    std::env::var("SIXFOLD_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(0, |k| k.wrapping_mul(100_000))
}

/// xorshift64: a tiny seeded generator, so every failure is reproducible.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // Mix the seed and never start at zero (a fixed point).
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// A DAG as predecessor lists in compressed form: the predecessors of node
/// `i` are `preds[start[i]..start[i + 1]]`, all smaller than `i`. Duplicate
/// edges are allowed (the API documents that they count twice).
struct Dag {
    start: Vec<usize>,
    preds: Vec<u32>,
}

/// How to draw a random DAG.
#[derive(Clone, Copy, Debug)]
struct Shape {
    nodes: usize,
    /// Each node gets `0..=max_preds` predecessors.
    max_preds: usize,
    /// Predecessors come from the `window` nodes just before (0: from all).
    window: usize,
}

impl Dag {
    fn random(rng: &mut Rng, shape: Shape) -> Dag {
        let mut start = Vec::with_capacity(shape.nodes + 1);
        let mut preds = Vec::new();
        for i in 0..shape.nodes {
            start.push(preds.len());
            if i == 0 {
                continue;
            }
            let lo = if shape.window == 0 {
                0
            } else {
                i.saturating_sub(shape.window)
            };
            for _ in 0..rng.below(shape.max_preds + 1) {
                preds.push((lo + rng.below(i - lo)) as u32);
            }
        }
        start.push(preds.len());
        Dag { start, preds }
    }

    /// A chain `0 -> 1 -> ... -> n-1`.
    fn chain(n: usize) -> Dag {
        Dag {
            start: (0..=n).map(|i| i.saturating_sub(1)).collect(),
            preds: (0..n.saturating_sub(1)).map(|i| i as u32).collect(),
        }
    }

    /// `0 -> {1..=width} -> width+1`.
    fn fan(width: usize) -> Dag {
        let mut start = vec![0, 0];
        let mut preds = Vec::new();
        for _ in 0..width {
            preds.push(0);
            start.push(preds.len());
        }
        preds.extend(1..=width as u32);
        start.push(preds.len());
        Dag { start, preds }
    }

    fn len(&self) -> usize {
        self.start.len() - 1
    }

    fn preds_of(&self, i: usize) -> &[u32] {
        &self.preds[self.start[i]..self.start[i + 1]]
    }

    fn edges(&self) -> usize {
        self.preds.len()
    }

    /// Successor lists in the same compressed form, each in increasing order.
    fn successors(&self) -> (Vec<usize>, Vec<u32>) {
        let n = self.len();
        let mut count = vec![0usize; n + 1];
        for &p in &self.preds {
            count[p as usize + 1] += 1;
        }
        for i in 0..n {
            count[i + 1] += count[i];
        }
        let start = count.clone();
        let mut fill = count;
        let mut succs = vec![0u32; self.preds.len()];
        for i in 0..n {
            for &p in self.preds_of(i) {
                succs[fill[p as usize]] = i as u32;
                fill[p as usize] += 1;
            }
        }
        (start, succs)
    }
}

/// What the nodes record: runs, and start and end stamps of one clock.
struct Record {
    runs: Vec<AtomicU32>,
    started: Vec<AtomicU64>,
    ended: Vec<AtomicU64>,
    clock: AtomicU64,
}

impl Record {
    fn new(n: usize) -> Arc<Record> {
        Arc::new(Record {
            runs: (0..n).map(|_| AtomicU32::new(0)).collect(),
            started: (0..n).map(|_| AtomicU64::new(0)).collect(),
            ended: (0..n).map(|_| AtomicU64::new(0)).collect(),
            clock: AtomicU64::new(0),
        })
    }

    /// The body of node `i`. Stamps start at 1, so 0 means "never ran".
    fn visit(&self, i: usize) {
        let start = self.clock.fetch_add(1, Ordering::SeqCst) + 1;
        self.started[i].store(start, Ordering::Relaxed);
        self.runs[i].fetch_add(1, Ordering::Relaxed);
        let end = self.clock.fetch_add(1, Ordering::SeqCst) + 1;
        self.ended[i].store(end, Ordering::Relaxed);
    }

    fn task(self: &Arc<Self>, i: usize) -> TaskRef {
        let rec = self.clone();
        TaskRef::from_fn(move |_| rec.visit(i))
    }

    /// Every node of `dag` (stored at `base..base + dag.len()`) ran once
    /// and started after all its predecessors ended.
    fn check(&self, dag: &Dag, base: usize, what: &str) {
        let mut bad_runs = Vec::new();
        let mut bad_order = Vec::new();
        for i in 0..dag.len() {
            let runs = self.runs[base + i].load(Ordering::Relaxed);
            if runs != 1 {
                bad_runs.push((i, runs));
            }
            let start = self.started[base + i].load(Ordering::Relaxed);
            for &p in dag.preds_of(i) {
                let pred_end = self.ended[base + p as usize].load(Ordering::Relaxed);
                if start <= pred_end {
                    bad_order.push((p as usize, i, pred_end, start));
                }
            }
        }
        assert!(
            bad_runs.is_empty(),
            "{what}: {} of {} nodes did not run exactly once; first (node, runs): {:?}",
            bad_runs.len(),
            dag.len(),
            &bad_runs[..bad_runs.len().min(10)]
        );
        assert!(
            bad_order.is_empty(),
            "{what}: {} edges out of order; first (pred, node, pred end, node start): {:?}",
            bad_order.len(),
            &bad_order[..bad_order.len().min(10)]
        );
    }
}

/// The nodes of `dag`, linked, recording into `rec` at `base + i`.
///
/// Edges are added in increasing order of the predecessor: when node `p` is
/// linked to its successors, none of them has successors yet, so the cycle
/// check of `precede` returns at once.
fn build(dag: &Dag, rec: &Arc<Record>, base: usize) -> Vec<TaskRef> {
    let mut nodes: Vec<TaskRef> = (0..dag.len()).map(|i| rec.task(base + i)).collect();
    let (start, succs) = dag.successors();
    for p in 0..dag.len() {
        let (head, tail) = nodes.split_at_mut(p + 1);
        let pred = &mut head[p];
        for &s in &succs[start[p]..start[p + 1]] {
            pred.precede(&tail[s as usize - p - 1])
                .expect("a forward edge cannot close a cycle");
        }
    }
    for (i, node) in nodes.iter().enumerate() {
        assert_eq!(
            node.pending_predecessors(),
            dag.preds_of(i).len(),
            "node {i} counts its predecessors"
        );
    }
    nodes
}

fn pool(threads: usize) -> Pool {
    Pool::builder().num_threads(threads).build().expect("pool")
}

/// Build `dag`, hand all of it to `run`, and check the record.
fn run_dag(pool: &Pool, dag: &Dag, what: &str) {
    let rec = Record::new(dag.len());
    let nodes = build(dag, &rec, 0);
    pool.run(nodes);
    rec.check(dag, 0, what);
}

#[test]
fn large_sparse_dags() {
    let n = size(100_000);
    for (k, &threads) in THREADS.iter().enumerate() {
        let pool = pool(threads);
        // Local edges (long chains of dependence, deep readiness cascades),
        // edges from anywhere (many nodes waiting at once), and a forest
        // (at most one predecessor: every node is some node's rule-2 pick).
        for (j, (max_preds, window)) in [(3, 64), (3, 0), (1, 0)].into_iter().enumerate() {
            let seed = seed_base() + 1000 + 10 * k as u64 + j as u64;
            let shape = Shape {
                nodes: n,
                max_preds,
                window,
            };
            let dag = Dag::random(&mut Rng::new(seed), shape);
            run_dag(
                &pool,
                &dag,
                &format!("seed {seed}, {threads} workers, {shape:?}"),
            );
        }
    }
}

#[test]
fn small_dense_dags() {
    for (k, &threads) in THREADS.iter().enumerate() {
        let pool = pool(threads);
        for j in 0..6u64 {
            let seed = seed_base() + 2000 + 10 * k as u64 + j;
            let shape = Shape {
                nodes: size(1_000 + 1_000 * j as usize),
                max_preds: 40,
                window: if j % 2 == 0 { 0 } else { 100 },
            };
            let dag = Dag::random(&mut Rng::new(seed), shape);
            assert!(cfg!(miri) || dag.edges() > 10 * dag.len());
            run_dag(
                &pool,
                &dag,
                &format!("seed {seed}, {threads} workers, {shape:?}"),
            );
        }
    }
}

#[test]
fn long_chain_and_wide_fans() {
    for &threads in THREADS {
        let pool = pool(threads);
        // A chain runs by rule 2 from one node to the next: it must neither
        // recurse (stack overflow) nor lose a link.
        let chain = Dag::chain(size(100_000));
        run_dag(&pool, &chain, &format!("chain, {threads} workers"));
        // One node with many successors, one node with many predecessors.
        let fan = Dag::fan(size(20_000));
        run_dag(&pool, &fan, &format!("fan, {threads} workers"));
    }
}

#[test]
fn submission_order_does_not_matter() {
    for (k, &threads) in THREADS.iter().enumerate() {
        let pool = pool(threads);
        for (j, order) in ["reversed", "shuffled"].into_iter().enumerate() {
            let seed = seed_base() + 3000 + 10 * k as u64 + j as u64;
            let mut rng = Rng::new(seed);
            let shape = Shape {
                nodes: size(50_000),
                max_preds: 4,
                window: 200,
            };
            let dag = Dag::random(&mut rng, shape);
            let rec = Record::new(dag.len());
            let mut nodes = build(&dag, &rec, 0);
            // Successors submitted before their predecessors make the
            // predecessors join a group that already holds their successor.
            if order == "reversed" {
                nodes.reverse();
            } else {
                rng.shuffle(&mut nodes);
            }
            pool.run(nodes);
            rec.check(&dag, 0, &format!("seed {seed}, {order}, {threads} workers"));
        }
    }
}

#[test]
fn static_and_run_nodes_in_one_dag() {
    for (k, &threads) in THREADS.iter().enumerate() {
        let pool = pool(threads);
        let seed = seed_base() + 4000 + k as u64;
        let mut rng = Rng::new(seed);
        let shape = Shape {
            nodes: size(100_000),
            max_preds: 3,
            window: 500,
        };
        let dag = Dag::random(&mut rng, shape);
        let rec = Record::new(dag.len());
        let nodes = build(&dag, &rec, 0);
        // About a third of the nodes go in as `'static` tasks first, the
        // rest as one `run`. Edges cross between the two groups both ways.
        let mut to_run = Vec::new();
        let mut is_static = vec![false; dag.len()];
        for (i, node) in nodes.into_iter().enumerate() {
            if rng.below(3) == 0 {
                is_static[i] = true;
                pool.spawn_task(node);
            } else {
                to_run.push(node);
            }
        }
        pool.run(to_run);
        // `run` returned: every node it was given has finished.
        for i in (0..dag.len()).filter(|&i| !is_static[i]) {
            assert_eq!(
                rec.runs[i].load(Ordering::Relaxed),
                1,
                "seed {seed}, {threads} workers: run-node {i} had not run when `run` returned"
            );
        }
        pool.wait_idle();
        rec.check(&dag, 0, &format!("seed {seed}, mixed, {threads} workers"));
    }
}

/// How the nodes built inside a task are handed to the scheduler.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Placement {
    /// All with `Context::spawn`.
    Spawn,
    /// A random mix of `spawn`, `enqueue` and `spawn_with_affinity`.
    Mixed,
}

/// Roots that each build a random DAG while running and hand its nodes
/// (in a shuffled order) to the scheduler from inside the task; `run` must
/// wait for all of them, in dependency order.
fn dags_from_inside(pool: &Pool, seed: u64, placement: Placement) {
    const ROOTS: usize = 8;
    let threads = pool.num_threads();
    let mut rng = Rng::new(seed);
    let dags: Arc<Vec<Dag>> = Arc::new(
        (0..ROOTS)
            .map(|r| {
                let shape = Shape {
                    nodes: size(2_000 + 500 * r),
                    max_preds: 5,
                    window: if r % 2 == 0 { 0 } else { 50 },
                };
                Dag::random(&mut rng, shape)
            })
            .collect(),
    );
    let bases: Vec<usize> = dags
        .iter()
        .scan(0, |next, dag| {
            let base = *next;
            *next += dag.len();
            Some(base)
        })
        .collect();
    let total = bases[ROOTS - 1] + dags[ROOTS - 1].len();
    let rec = Record::new(total);
    let roots: Vec<TaskRef> = (0..ROOTS)
        .map(|r| {
            let (dags, rec, base) = (dags.clone(), rec.clone(), bases[r]);
            let mut rng = Rng::new(seed * 100 + r as u64);
            TaskRef::from_fn(move |cx| {
                let mut nodes = build(&dags[r], &rec, base);
                rng.shuffle(&mut nodes);
                for node in nodes {
                    match (placement, rng.below(3)) {
                        (Placement::Spawn, _) | (Placement::Mixed, 0) => cx.spawn(node),
                        (Placement::Mixed, 1) => cx.enqueue(node),
                        (Placement::Mixed, _) => {
                            let target = rng.below(cx.num_workers());
                            cx.spawn_with_affinity(target, node)
                                .expect("target in range");
                        }
                    }
                }
            })
        })
        .collect();
    pool.run(roots);
    for (r, dag) in dags.iter().enumerate() {
        rec.check(
            dag,
            bases[r],
            &format!("seed {seed}, root {r}, {placement:?}, {threads} threads"),
        );
    }
}

#[test]
fn dags_spawned_from_inside_tasks() {
    for (k, &threads) in THREADS.iter().enumerate() {
        let pool = pool(threads);
        dags_from_inside(&pool, seed_base() + 5000 + k as u64, Placement::Spawn);
    }
}

#[test]
fn dags_placed_from_inside_tasks_by_spawn_enqueue_and_affinity() {
    for (k, &threads) in THREADS.iter().enumerate() {
        let pool = pool(threads);
        dags_from_inside(&pool, seed_base() + 6000 + k as u64, Placement::Mixed);
    }
}

#[test]
fn dags_on_a_pool_without_threads() {
    // The caller is the guest worker for `run`; `'static` nodes submitted
    // from outside go to a drainer thread, or to the caller's `wait_idle`.
    let pool = pool(0);
    let seed = seed_base() + 7000;
    let mut rng = Rng::new(seed);
    let shape = Shape {
        nodes: size(50_000),
        max_preds: 3,
        window: 300,
    };
    let dag = Dag::random(&mut rng, shape);
    run_dag(&pool, &dag, &format!("seed {seed}, guest"));

    let dag = Dag::random(&mut rng, shape);
    let rec = Record::new(dag.len());
    let mut to_run = Vec::new();
    for node in build(&dag, &rec, 0) {
        if rng.below(3) == 0 {
            pool.spawn_task(node);
        } else {
            to_run.push(node);
        }
    }
    pool.run(to_run);
    pool.wait_idle();
    rec.check(&dag, 0, &format!("seed {seed}, guest, mixed"));

    dags_from_inside(&pool, seed + 1, Placement::Mixed);
}
