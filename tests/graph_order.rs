//! The builder's cycle check against a brute-force oracle, for edges added
//! in any order (the check keeps a topological order as edges arrive and
//! searches only when an edge disagrees with it), and runs of the graphs
//! built that way in dependency order.

use sixfold::{Graph, GraphError, Pool, TaskRef};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// xorshift64*: reproducible without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// Does `from` reach `to` along `succ`? (Depth-first, no cleverness.)
fn reaches(succ: &[Vec<usize>], from: usize, to: usize) -> bool {
    let mut seen = vec![false; succ.len()];
    let mut stack = vec![from];
    while let Some(n) = stack.pop() {
        if n == to {
            return true;
        }
        if !std::mem::replace(&mut seen[n], true) {
            stack.extend(&succ[n]);
        }
    }
    false
}

#[test]
fn graph_refuses_exactly_the_edges_that_close_a_cycle_and_runs_in_order() {
    let pools: Vec<Pool> = [2, 1, 0]
        .into_iter()
        .map(|n| Pool::builder().num_threads(n).build().unwrap())
        .collect();
    for seed in 1..=200u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let n = 2 + rng.below(40);
        let clock = AtomicUsize::new(0);
        let started: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        let mut g = Graph::new();
        let ids: Vec<_> = (0..n)
            .map(|i| {
                let (clock, started) = (&clock, &started);
                g.add(move || {
                    started[i].store(clock.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                })
            })
            .collect();
        let mut succ = vec![Vec::new(); n];
        let mut edges = Vec::new();
        for _ in 0..3 * n {
            let (a, b) = (rng.below(n), rng.below(n));
            if a == b {
                continue;
            }
            let closes = reaches(&succ, b, a);
            match g.precede(ids[a], ids[b]) {
                Ok(()) => {
                    assert!(!closes, "seed {seed}: {a} -> {b} closes a cycle");
                    if !succ[a].contains(&b) {
                        succ[a].push(b);
                        edges.push((a, b));
                    }
                }
                Err(GraphError::Cycle { cycle, .. }) => {
                    assert!(closes, "seed {seed}: {a} -> {b} refused without a cycle");
                    // The reported path runs from `b` to `a` along edges.
                    let path: Vec<usize> = cycle.iter().map(|id| id.index()).collect();
                    assert_eq!((path[0], *path.last().unwrap()), (b, a), "seed {seed}");
                    for w in path.windows(2) {
                        assert!(succ[w[0]].contains(&w[1]), "seed {seed}: {w:?} is no edge");
                    }
                }
                Err(e) => panic!("seed {seed}: {e}"),
            }
        }
        assert_eq!(g.num_edges(), edges.len());
        // Several workers, one (its counts need no read-modify-write), and
        // none (the caller runs the graph).
        for pool in &pools {
            pool.run_graph(&mut g).unwrap();
            for &(a, b) in &edges {
                let (ta, tb) = (
                    started[a].load(Ordering::SeqCst),
                    started[b].load(Ordering::SeqCst),
                );
                assert!(ta > 0 && ta < tb, "seed {seed}: {a} -> {b} ran {ta}, {tb}");
            }
        }
    }
}

#[test]
fn a_chain_built_back_to_front_runs_front_to_back_and_still_refuses_its_cycle() {
    let n = 20_000;
    let order = Mutex::new(Vec::with_capacity(n));
    let mut g = Graph::new();
    let ids: Vec<_> = (0..n)
        .map(|i| {
            let order = &order;
            g.add(move || order.lock().unwrap().push(i))
        })
        .collect();
    for i in (1..n).rev() {
        g.precede(ids[i - 1], ids[i]).unwrap();
    }
    // Closing it from the last node back to the first names every node.
    let err = g.precede(ids[n - 1], ids[0]).unwrap_err();
    match &err {
        GraphError::Cycle { cycle, .. } => assert_eq!(cycle.len(), n),
        e => panic!("{e}"),
    }
    let pool = Pool::builder().num_threads(2).build().unwrap();
    pool.run_graph(&mut g).unwrap();
    drop(g);
    assert_eq!(order.into_inner().unwrap(), (0..n).collect::<Vec<_>>());
}

#[test]
fn a_reordering_edge_names_its_cycle_with_node_names() {
    // Nodes added successors first: every edge disagrees with the order of
    // addition, so each one reorders.
    let mut g = Graph::new();
    let c = g.add_named("c", || {});
    let b = g.add_named("b", || {});
    let a = g.add_named("a", || {});
    g.precede(a, b).unwrap();
    g.precede(b, c).unwrap();
    let err = g.precede(c, a).unwrap_err();
    assert_eq!(
        err.to_string(),
        "this edge would close the cycle a -> b -> c -> a"
    );
    let pool = Pool::builder().num_threads(1).build().unwrap();
    pool.run_graph(&mut g).unwrap();
}

#[test]
fn taskrefs_refuse_exactly_the_edges_that_close_a_cycle_in_any_order() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    for seed in 1..=100u64 {
        let mut rng = Rng(seed.wrapping_mul(0xd1b5_4a32_d192_ed03) | 1);
        let n = 2 + rng.below(30);
        let clock = std::sync::Arc::new(AtomicUsize::new(0));
        let started: std::sync::Arc<Vec<AtomicUsize>> =
            std::sync::Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect());
        let mut tasks: Vec<TaskRef> = (0..n)
            .map(|i| {
                let (clock, started) = (clock.clone(), started.clone());
                TaskRef::from_fn(move |_| {
                    started[i].store(clock.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                })
            })
            .collect();
        let mut succ = vec![Vec::new(); n];
        for _ in 0..3 * n {
            let (a, b) = (rng.below(n), rng.below(n));
            if a == b {
                continue;
            }
            let closes = reaches(&succ, b, a);
            let (lo, hi) = tasks.split_at_mut(a.max(b));
            let (ta, tb) = if a < b {
                (&mut lo[a], &hi[0])
            } else {
                (&mut hi[0], &lo[b])
            };
            match ta.precede(tb) {
                Ok(()) => {
                    assert!(!closes, "seed {seed}: {a} -> {b} closes a cycle");
                    succ[a].push(b);
                }
                Err(_) => assert!(closes, "seed {seed}: {a} -> {b} refused without a cycle"),
            }
        }
        pool.run(tasks);
        for (a, list) in succ.iter().enumerate() {
            for &b in list {
                let (ta, tb) = (
                    started[a].load(Ordering::SeqCst),
                    started[b].load(Ordering::SeqCst),
                );
                assert!(ta > 0 && ta < tb, "seed {seed}: {a} -> {b} ran {ta}, {tb}");
            }
        }
    }
}
