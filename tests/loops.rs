//! Parallel loops: every index (or cell) visited exactly once by every
//! partitioner, on every pool size; reduce equals the sequential fold, and
//! the deterministic reduce is bit-identical across runs and pool sizes;
//! static and affinity placement; loops nested in the other constructs;
//! panics (rayon's contract) and bad input.

mod common;

use common::within;
use sixfold::{AffinityPartitioner, Partitioner, Pool, Range2d, Rule};
use std::ops::Range;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const WATCHDOG: Duration = Duration::from_secs(300);

/// Each partitioner the tests go through, made afresh for each loop (the
/// affinity one lives in the caller).
#[derive(Clone, Copy, Debug)]
enum Kind {
    Auto(usize),
    Simple(usize),
    Static,
    Affinity,
}

fn partitioner(kind: Kind, affinity: &mut AffinityPartitioner) -> Partitioner<'_> {
    match kind {
        Kind::Auto(min_grain) => Partitioner::Auto { min_grain },
        Kind::Simple(grain) => Partitioner::Simple { grain },
        Kind::Static => Partitioner::Static,
        Kind::Affinity => Partitioner::Affinity(affinity),
    }
}

/// The kinds for a range of `len`: grains around the length.
fn kinds(len: usize) -> Vec<Kind> {
    let mut kinds = vec![Kind::Static, Kind::Affinity, Kind::Auto(1), Kind::Simple(0)];
    for grain in [len.saturating_sub(1), len, len + 1, (len / 3).max(1)] {
        kinds.push(Kind::Auto(grain));
        kinds.push(Kind::Simple(grain));
    }
    kinds
}

/// Visit counts, one per index.
fn counts(len: usize) -> Vec<AtomicU8> {
    (0..len).map(|_| AtomicU8::new(0)).collect()
}

fn assert_once(hits: &[AtomicU8], what: &str) {
    if let Some(i) = hits.iter().position(|h| h.load(Ordering::Relaxed) != 1) {
        panic!(
            "{what}: index {i} visited {} times",
            hits[i].load(Ordering::Relaxed)
        );
    }
}

#[test]
fn every_index_is_visited_once_by_every_partitioner_on_0_1_2_and_4_workers() {
    within("the loops", WATCHDOG, || {
        for threads in [0, 1, 2, 4] {
            let pool = common::pool(threads);
            for len in [0usize, 1, 2, 3, 7, 1000, 1_000_000] {
                for kind in kinds(len) {
                    let mut affinity = AffinityPartitioner::new();
                    // Twice, so that the affinity partitioner replays.
                    for round in 0..2 {
                        let hits = counts(len);
                        pool.for_range_with(0..len, partitioner(kind, &mut affinity), |r| {
                            for i in r {
                                hits[i].fetch_add(1, Ordering::Relaxed);
                            }
                        });
                        assert_once(
                            &hits,
                            &format!("{threads} workers, len {len}, {kind:?}, round {round}"),
                        );
                    }
                }
            }
        }
    });
}

#[test]
fn slices_are_handed_out_in_disjoint_chunks_with_their_offsets() {
    within("the loops", WATCHDOG, || {
        for threads in [0, 2, 4] {
            let pool = common::pool(threads);
            for len in [0usize, 1, 7, 1000, 100_000] {
                for kind in kinds(len) {
                    let mut affinity = AffinityPartitioner::new();
                    let mut v = vec![0u32; len];
                    pool.for_chunks_mut_with(&mut v, partitioner(kind, &mut affinity), |c, o| {
                        for (i, x) in c.iter_mut().enumerate() {
                            *x += (o + i) as u32 + 1;
                        }
                    });
                    assert!(
                        v.iter().enumerate().all(|(i, &x)| x == i as u32 + 1),
                        "{threads} workers, len {len}, {kind:?}"
                    );
                    let seen = AtomicUsize::new(0);
                    pool.for_chunks_with(&v, partitioner(kind, &mut affinity), |c, o| {
                        assert_eq!(c.first().copied(), Some(o as u32 + 1));
                        seen.fetch_add(c.len(), Ordering::Relaxed);
                    });
                    assert_eq!(seen.into_inner(), len);
                }
            }
        }
    });
}

#[test]
fn tiles_cover_every_cell_once() {
    within("the loops", WATCHDOG, || {
        let pool = common::pool(4);
        for (rows, cols) in [
            (0, 5),
            (1, 1),
            (3, 7),
            (100, 1),
            (1, 100),
            (37, 91),
            (256, 256),
        ] {
            for grain in [(1, 1), (4, 16), (rows.max(1), cols.max(1)), (0, 0)] {
                for kind in [
                    Kind::Auto(1),
                    Kind::Simple(64),
                    Kind::Static,
                    Kind::Affinity,
                ] {
                    let mut affinity = AffinityPartitioner::new();
                    let hits = counts(rows * cols);
                    let range = Range2d::new(0..rows, 0..cols).grain(grain.0, grain.1);
                    pool.for_tiles_with(range, partitioner(kind, &mut affinity), |tile| {
                        assert!(tile.cells() > 0, "an empty tile");
                        for r in tile.rows.clone() {
                            for c in tile.cols.clone() {
                                hits[r * cols + c].fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    });
                    assert_once(&hits, &format!("{rows}x{cols}, grain {grain:?}, {kind:?}"));
                }
            }
        }
    });
}

#[test]
fn reduce_equals_the_sequential_fold() {
    within("the reductions", WATCHDOG, || {
        let data: Vec<u64> = (0..200_000u64).map(|i| i * 2654435761 % 1000).collect();
        let expected: u64 = data.iter().sum();
        let max = *data.iter().max().unwrap();
        for threads in [0, 1, 2, 4] {
            let pool = common::pool(threads);
            for kind in kinds(data.len()) {
                let mut affinity = AffinityPartitioner::new();
                let sum = pool.reduce_with(
                    0..data.len(),
                    partitioner(kind, &mut affinity),
                    0u64,
                    |r, acc| acc + data[r].iter().sum::<u64>(),
                    |a, b| a + b,
                );
                assert_eq!(sum, expected, "{threads} workers, {kind:?}");
            }
            // Not commutative: a concatenation keeps the order of pieces.
            let order = pool.reduce(
                0..5000,
                Vec::new(),
                |r, mut acc: Vec<usize>| {
                    acc.extend(r);
                    acc
                },
                |mut a, b| {
                    a.extend(b);
                    a
                },
            );
            assert_eq!(order, (0..5000).collect::<Vec<_>>());
            assert_eq!(
                pool.reduce(
                    0..data.len(),
                    0,
                    |r, m| data[r].iter().fold(m, |m, &x| m.max(x)),
                    u64::max
                ),
                max
            );
            // An empty range gives the identity.
            assert_eq!(pool.reduce(3..3, 42u64, |_, _| 0, |a, b| a + b), 42);
        }
    });
}

#[test]
fn the_deterministic_reduce_is_bit_identical_over_100_runs_and_1_2_and_4_workers() {
    within("the reductions", WATCHDOG, || {
        let data: Vec<f64> = (0..300_000)
            .map(|i| ((i as f64) * 0.618).sin() * 10f64.powi((i % 17) - 8))
            .collect();
        let sum = |pool: &Pool| {
            pool.reduce_deterministic(
                0..data.len(),
                1000,
                0.0f64,
                |r, acc| data[r].iter().fold(acc, |s, x| s + x),
                |a, b| a + b,
            )
        };
        let reference = sum(&common::pool(1)).to_bits();
        for threads in [1, 2, 4] {
            let pool = common::pool(threads);
            for run in 0..100 {
                assert_eq!(
                    sum(&pool).to_bits(),
                    reference,
                    "{threads} workers, run {run}"
                );
            }
        }
        // The plain reduce need not be (and the sum is order-sensitive):
        // this is what the deterministic one is for.
        let sequential = data.iter().fold(0.0, |s, x| s + x);
        let magnitude: f64 = data.iter().map(|x| x.abs()).sum();
        assert!((f64::from_bits(reference) - sequential).abs() <= 1e-12 * magnitude);
    });
}

/// `Static` sends part k to worker k's mailbox (rule 4); the caller, worker
/// 0 here, runs its own part in place. A part runs elsewhere only through
/// its proxy, after its worker left it for the proxy's patience (1 ms): a
/// loaded machine may deschedule a worker that long, so such a part must
/// have waited at least that long.
#[test]
fn static_puts_part_k_on_worker_k() {
    within("the static loops", WATCHDOG, || {
        let pool = common::pool(4);
        let mut off_target_in_time = 0;
        let mut on_target = 0;
        for _ in 0..50 {
            let ran_on: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(usize::MAX)).collect();
            let waited: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
            let start = Instant::now();
            pool.install(|| {
                pool.for_range_with(0..4000, Partitioner::Static, |r| {
                    let k = r.start / 1000;
                    assert_eq!(r, k * 1000..(k + 1) * 1000, "part {k} is the k-th quarter");
                    ran_on[k].store(sixfold::current_worker().unwrap(), Ordering::Relaxed);
                    waited[k].store(start.elapsed().as_micros() as usize, Ordering::Relaxed);
                })
            });
            for k in 0..4 {
                if ran_on[k].load(Ordering::Relaxed) == k {
                    on_target += 1;
                } else if waited[k].load(Ordering::Relaxed) < 1000 {
                    off_target_in_time += 1;
                }
            }
        }
        assert_eq!(
            off_target_in_time, 0,
            "parts ran off their worker before it left them waiting 1 ms"
        );
        assert!(on_target > 0);
    });
}

/// A repeated loop with an affinity partitioner sends each piece to the
/// worker that ran it the time before: at least 95% of pieces, counting as
/// misses only pieces taken from a worker that was not stuck (a proxy
/// takes a piece only after its worker left it waiting 1 ms, which a
/// loaded machine causes and no scheduling choice of ours does) and that
/// the other worker did not help with (it takes a piece only once it has
/// run its own and the piece's worker has not started it: that worker
/// was slower, and the stats count each such piece; the piece goes home
/// the step after). The pool's stats show the pieces arriving by mailbox
/// (rule 4).
#[test]
fn affinity_replays_at_least_95_percent_of_pieces_on_their_previous_worker() {
    within("the affinity loops", WATCHDOG, || {
        let pool = common::pool(2);
        let mut affinity = AffinityPartitioner::new();
        let mut data = vec![1.0f64; 1 << 16];
        let step = |data: &mut [f64], affinity: &mut AffinityPartitioner| {
            pool.for_chunks_mut_with(data, affinity, |chunk, _| {
                for x in chunk.iter_mut() {
                    *x = (*x * 1.000001).sqrt();
                }
            });
        };
        pool.install(|| step(&mut data, &mut affinity));
        let pieces = affinity.pieces();
        assert_eq!(pieces, 8, "4 pieces per worker");
        let before = pool.stats();
        let (mut kept, mut explained, mut total) = (0.0, 0usize, 0usize);
        const STEPS: usize = 200;
        pool.install(|| {
            for _ in 0..STEPS {
                let start = Instant::now();
                step(&mut data, &mut affinity);
                let took = start.elapsed();
                let share = affinity.kept_share();
                kept += share;
                total += pieces;
                if share < 1.0 && took >= Duration::from_millis(1) {
                    // Long enough for a proxy's patience to run out.
                    explained += ((1.0 - share) * pieces as f64).round() as usize;
                }
            }
        });
        let stats = pool.stats().since(&before);
        let helped: u64 = stats.workers.iter().map(|w| w.loop_parts_helped).sum();
        let missed = total - (kept / STEPS as f64 * total as f64).round() as usize;
        // A help costs up to two misses: the step it happens in, and the
        // next, when the piece goes home.
        let unexplained = missed.saturating_sub(explained + 2 * helped as usize);
        assert!(
            unexplained * 20 <= total,
            "{unexplained} of {total} pieces ran off their previous worker without a stuck \
             worker to explain it ({missed} missed in all)"
        );
        // Worker 1 can miss every step of so short a run when the machine
        // does not schedule it (test threads of this binary run beside
        // it): then the other worker ran all the pieces, explained as
        // helped. Step on until a piece comes by mailbox; a pool that never
        // sends one still fails, at the deadline.
        let deadline = Instant::now() + Duration::from_secs(20);
        while pool.stats().since(&before).by_rule(Rule::Mailbox) == 0 && Instant::now() < deadline {
            pool.install(|| step(&mut data, &mut affinity));
        }
        let stats = pool.stats().since(&before);
        assert!(
            stats.by_rule(Rule::Mailbox) > 0,
            "no piece came by mailbox in 20 s: {stats:?}"
        );
    });
}

/// `Auto` cuts a piece that is already running when another worker has
/// nothing to do. Called on a worker, 0..64 on two workers cuts into four
/// pieces of 16; the caller keeps 0..16 (a leaf: nobody stole it, so the
/// adaptive splitter alone never cuts it again), while the other worker
/// steals and finishes 16..64 at once. Each of the first 16 indices sleeps
/// 2 ms: without a demand cut all 16 run on the caller. With it, the idle
/// worker gets half of what is left after the first one. On a loaded
/// machine the idle worker may not get a core before the caller has
/// finished alone, so a few tries; one shared piece is enough.
#[test]
fn auto_cuts_a_running_piece_for_an_idle_worker() {
    within("the demand cut", WATCHDOG, || {
        let pool = common::pool(2);
        let shared = (0..10).any(|_| {
            let ran_on: Vec<AtomicUsize> = (0..64).map(|_| AtomicUsize::new(usize::MAX)).collect();
            pool.install(|| {
                pool.for_range_with(0..64, Partitioner::Auto { min_grain: 1 }, |r| {
                    for i in r {
                        ran_on[i].store(sixfold::current_worker().unwrap(), Ordering::Relaxed);
                        if i < 16 {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                    }
                })
            });
            let first: Vec<usize> = ran_on[..16]
                .iter()
                .map(|w| w.load(Ordering::Relaxed))
                .collect();
            assert!(first.iter().all(|&w| w < 2), "every index ran: {first:?}");
            first.iter().any(|&w| w != first[0])
        });
        assert!(
            shared,
            "the slow first piece never shared with the idle worker"
        );
    });
}

/// The range the helping tests loop over: eight parts of 1,000.
const PLANNED_LEN: usize = 8000;

/// An affinity plan for `0..PLANNED_LEN` on a pool of two: parts 0..4
/// planned for worker 0, 4..8 for worker 1.
fn planned_on(pool: &Pool) -> AffinityPartitioner {
    let mut affinity = AffinityPartitioner::new();
    pool.install(|| pool.for_range_with(0..PLANNED_LEN, &mut affinity, |_| {}));
    assert_eq!(affinity.pieces(), 8);
    affinity
}

/// A worker that has run its share of an affinity loop runs the parts of
/// another share that nobody has started, so that one slow worker does
/// not hold the whole loop back; the plan still sends those parts home
/// next time. Two workers, eight parts, four planned for each: the first
/// part planned for the worker that is not the caller sleeps 50 ms (the
/// others 2 ms), so the caller, done with its own four parts, takes the
/// other three. The old code left them waiting behind the slow part.
/// Rounds in which the slow part did not run on its planned worker (on a
/// loaded machine its proxy may go to the caller first) prove nothing and
/// are retried.
#[test]
fn affinity_lets_a_worker_done_with_its_share_run_a_slow_workers_unstarted_parts() {
    within("the helped loop", WATCHDOG, || {
        let (pool, len) = (common::pool(2), PLANNED_LEN);
        let mut affinity = planned_on(&pool);
        let slow_part = |caller: usize| if caller == 0 { 4 } else { 0 };
        let helped_round = (0..20).any(|_| {
            let ran_on: Vec<AtomicUsize> = (0..8).map(|_| AtomicUsize::new(usize::MAX)).collect();
            let before = pool.stats();
            let caller = pool.install(|| {
                let caller = sixfold::current_worker().unwrap();
                pool.for_range_with(0..len, &mut affinity, |r| {
                    let k = r.start / 1000;
                    let me = sixfold::current_worker().unwrap();
                    ran_on[k].store(me, Ordering::Relaxed);
                    // Every part takes a while, so the other worker is
                    // awake and at its own parts before the caller is done.
                    std::thread::sleep(Duration::from_millis(2));
                    if k == slow_part(caller) && me != caller {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                });
                caller
            });
            let ran_on: Vec<usize> = ran_on.iter().map(|w| w.load(Ordering::Relaxed)).collect();
            assert!(ran_on.iter().all(|&w| w < 2), "every part ran: {ran_on:?}");
            let helped: u64 = pool
                .stats()
                .since(&before)
                .workers
                .iter()
                .map(|w| w.loop_parts_helped)
                .sum();
            let slow = slow_part(caller);
            let slow_ran_home = ran_on[slow] != caller;
            if slow_ran_home {
                assert!(
                    ran_on[slow + 1..slow + 4].contains(&caller),
                    "the caller waited 50 ms for parts it could have run: {ran_on:?}"
                );
                assert!(helped > 0, "a helped part is counted");
            }
            slow_ran_home
        });
        assert!(
            helped_round,
            "the slow part never ran on its planned worker"
        );
        // The plan still names the slow worker for its parts.
        pool.install(|| pool.for_range_with(0..len, &mut affinity, |_| {}));
        assert_eq!(affinity.pieces(), 8);
    });
}

/// A stuck worker's parts move to the worker that ran them, once: its
/// share is taken through its proxy (after about a millisecond), and the
/// plan then sends those parts elsewhere, as it did before workers helped
/// each other. Worker 1 spins in a task of its own until the end; 20 loops
/// on worker 0 must not each wait for its proxy (helped parts that the
/// plan kept on the stuck worker made every call wait: 20 proxies taken).
#[test]
fn affinity_moves_a_stuck_workers_parts_once() {
    within("the stuck worker", WATCHDOG, || {
        let (pool, len) = (common::pool(2), PLANNED_LEN);
        let mut affinity = planned_on(&pool);
        let release = common::occupy_worker_1(&pool);
        let before = pool.stats();
        let mut ran_on = Vec::new();
        for _ in 0..20 {
            let seen: Vec<AtomicUsize> = (0..8).map(|_| AtomicUsize::new(usize::MAX)).collect();
            pool.install(|| {
                pool.for_range_with(0..len, &mut affinity, |r| {
                    let worker = sixfold::current_worker().unwrap();
                    seen[r.start / 1000].store(worker, Ordering::Relaxed);
                })
            });
            ran_on = seen.iter().map(|w| w.load(Ordering::Relaxed)).collect();
        }
        release.store(true, Ordering::Release);
        let stats = pool.stats().since(&before);
        let from_stuck: u64 = stats
            .workers
            .iter()
            .map(|w| w.proxies_claimed_from_stuck)
            .sum();
        assert!(
            from_stuck <= 2,
            "{from_stuck} proxies taken from the stuck worker in 20 loops"
        );
        assert_eq!(ran_on, vec![0; 8], "the last loop ran on worker 0 alone");
        assert_eq!(affinity.kept_share(), 1.0, "the plan names worker 0");
    });
}

/// A changed length or pool size replans.
#[test]
fn affinity_replans_when_the_length_or_the_pool_changes() {
    let two = common::pool(2);
    let four = common::pool(4);
    let mut affinity = AffinityPartitioner::new();
    two.for_range_with(0..1000, &mut affinity, |_| {});
    assert_eq!(affinity.pieces(), 8);
    two.for_range_with(0..1000, &mut affinity, |_| {});
    two.for_range_with(0..3, &mut affinity, |_| {});
    assert_eq!(affinity.pieces(), 3, "a range of 3 has 3 pieces at most");
    assert_eq!(
        affinity.kept_share(),
        0.0,
        "a new plan has no previous worker"
    );
    four.for_range_with(0..1000, &mut affinity, |_| {});
    assert_eq!(affinity.pieces(), 16);
}

fn sum_of(pool: &Pool, n: usize) -> usize {
    pool.reduce(0..n, 0, |r, acc| acc + r.sum::<usize>(), |a, b| a + b)
}

#[test]
fn loops_nest_in_loops_graph_nodes_pipeline_stages_isolate_and_other_pools() {
    within("the nested loops", WATCHDOG, || {
        let pool = common::pool(2);
        let other = common::pool(2);
        let expected = 999 * 1000 / 2;
        // A loop inside a loop's body.
        let inner = AtomicUsize::new(0);
        pool.for_range_with(0..8, Partitioner::Simple { grain: 1 }, |_| {
            inner.fetch_add(
                sixfold::reduce(0..1000, 0, |r, a| a + r.sum::<usize>(), |a, b| a + b),
                Ordering::Relaxed,
            );
        });
        assert_eq!(inner.into_inner(), 8 * expected);
        // In a graph node.
        let from_node = AtomicUsize::new(0);
        let mut g = sixfold::Graph::new();
        g.add(|| from_node.store(sum_of(&pool, 1000), Ordering::Relaxed));
        pool.run_graph(&mut g).unwrap();
        drop(g);
        assert_eq!(from_node.into_inner(), expected);
        // In a pipeline stage.
        let mut next = 0;
        let mut total = 0;
        let mut p = sixfold::Pipeline::new(|| {
            (next < 4).then(|| {
                next += 1;
                1000
            })
        })
        .parallel(|n| sixfold::reduce(0..n, 0, |r, a| a + r.sum::<usize>(), |a, b| a + b))
        .serial_in_order(|s| total += s);
        pool.run_pipeline(&mut p, 2).unwrap();
        drop(p);
        assert_eq!(total, 4 * expected);
        // Inside isolate.
        let isolated = pool.install(|| {
            sixfold::isolate(|| {
                sixfold::reduce(0..1000, 0, |r, a| a + r.sum::<usize>(), |a, b| a + b)
            })
        });
        assert_eq!(isolated, expected);
        // Across pools, both ways, and with placed partitioners.
        let across = pool.install(|| other.install(|| sum_of(&pool, 1000)));
        assert_eq!(across, expected);
        let mut affinity = AffinityPartitioner::new();
        for _ in 0..3 {
            let hits = counts(5000);
            pool.install(|| {
                other.for_range_with(0..5000, &mut affinity, |r| {
                    for i in r {
                        hits[i].fetch_add(1, Ordering::Relaxed);
                    }
                })
            });
            assert_once(&hits, "a loop on another pool");
        }
    });
}

/// Rayon's contract: every piece runs even after one panicked, the first
/// panic is resumed once all finished, and the pool keeps working.
#[test]
fn a_panic_in_a_body_is_resumed_after_every_piece_ran_and_the_pool_survives() {
    common::quiet_intentional_panics("loop body panics on purpose");
    within("the panicking loops", WATCHDOG, || {
        let pool = common::pool(2);
        for kind in [
            Kind::Auto(1),
            Kind::Simple(10),
            Kind::Static,
            Kind::Affinity,
        ] {
            let mut affinity = AffinityPartitioner::new();
            for _ in 0..2 {
                let hits = counts(1000);
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    pool.for_range_with(0..1000, partitioner(kind, &mut affinity), |r| {
                        for i in r.clone() {
                            hits[i].fetch_add(1, Ordering::Relaxed);
                        }
                        if r.contains(&500) {
                            panic!("loop body panics on purpose");
                        }
                    })
                }));
                let payload = result.expect_err("the panic is resumed");
                assert!(common::panic_message(&*payload).contains("on purpose"));
                assert_once(&hits, &format!("{kind:?}: every piece still ran"));
            }
        }
        assert_eq!(sum_of(&pool, 1000), 999 * 1000 / 2, "the pool survives");
    });
}

/// Bad input has a meaning, never a hang: a grain of 0 is 1, a reversed
/// range is empty, a grain larger than the range is one piece.
#[test]
fn a_zero_grain_a_reversed_range_and_a_huge_grain_are_well_defined() {
    within("the loops", WATCHDOG, || {
        let pool = common::pool(2);
        let pieces = AtomicUsize::new(0);
        pool.for_range_with(0..64, Partitioner::Simple { grain: 0 }, |r| {
            assert_eq!(r.len(), 1, "a grain of 0 cuts down to single elements");
            pieces.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(pieces.swap(0, Ordering::Relaxed), 64);
        pool.for_range_with(0..64, Partitioner::Auto { min_grain: 0 }, |r| {
            pieces.fetch_add(r.len(), Ordering::Relaxed);
        });
        assert_eq!(pieces.swap(0, Ordering::Relaxed), 64);
        #[allow(clippy::reversed_empty_ranges)]
        let reversed: Range<usize> = 10..3;
        pool.for_range(reversed, |_| panic!("a reversed range is empty"));
        pool.for_range_with(0..100, Partitioner::Simple { grain: usize::MAX }, |r| {
            assert_eq!(r, 0..100);
            pieces.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(pieces.into_inner(), 1);
        assert_eq!(
            pool.reduce_deterministic(0..10, 0, 0, |r, a| a + r.len(), |a, b| a + b),
            10
        );
    });
}

/// The free functions run in the global pool from outside every pool, and
/// in the calling worker's pool inside one.
#[test]
fn free_functions_use_the_callers_pool() {
    let pool = Pool::builder()
        .num_threads(2)
        .thread_name(|i| format!("loops-test-{i}"))
        .build()
        .unwrap();
    pool.install(|| {
        sixfold::for_each_index(0..100, |_| {
            let name = std::thread::current().name().map(str::to_owned);
            assert!(
                name.as_deref()
                    .is_some_and(|n| n.starts_with("loops-test-")),
                "ran on {name:?}, not on the calling worker's pool"
            );
        })
    });
    let hits = counts(10_000);
    sixfold::for_range(0..10_000, |r| {
        assert!(
            sixfold::current_worker().is_some(),
            "the global pool's worker"
        );
        for i in r {
            hits[i].fetch_add(1, Ordering::Relaxed);
        }
    });
    assert_once(&hits, "the global pool");
}

/// The trace names the tasks that ran loop pieces, and the pool's stats
/// count placed parts by the rule that brought them (mailbox).
#[test]
fn the_trace_names_loop_pieces_and_stats_count_placed_parts_by_rule() {
    let pool = Pool::builder().num_threads(2).trace(true).build().unwrap();
    let _ = pool.take_trace();
    let before = pool.stats();
    pool.install(|| {
        for _ in 0..20 {
            sixfold::for_range_with(0..4000, Partitioner::Static, |r| {
                std::hint::black_box(r);
            });
        }
    });
    let stats = pool.stats().since(&before);
    let trace = pool.take_trace();
    let named = trace
        .tasks
        .iter()
        .filter(|t| t.name.as_deref() == Some("loop piece"))
        .count();
    assert!(named >= 20, "{named} tasks named for loop pieces");
    // The other worker's part of each loop is a task of its own: taken
    // from its mailbox (rule 4); or through the proxy the caller keeps in
    // its deque, by the target itself if it steals it there first (rule 6:
    // a worker that just ran a share keeps searching, steals included), or
    // by the caller if the target was stuck (a loaded machine: its own
    // deque, or the shared queue the proxy was deferred to).
    let parts = stats.by_rule(Rule::Mailbox)
        + stats.by_rule(Rule::OwnDeque)
        + stats.by_rule(Rule::SharedQueue)
        + stats.by_rule(Rule::Steal);
    assert!(parts >= 20, "{parts} part tasks for 20 loops: {stats:?}");
}
