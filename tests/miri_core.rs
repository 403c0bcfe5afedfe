//! Small tests that walk every `unsafe` path of the core, sized to run
//! under Miri in CI (`cargo +nightly miri test --test miri_core`): task node
//! allocation, hand-over and freeing; cancellation by dropping a handle;
//! continuations, recycling and `Context::successor`; stack jobs
//! (`install`); the guest slot of a zero-thread pool; a latch set from
//! another pool's worker; the deques under stealing; a set submitted
//! with a look-ahead; the trace records (each worker's buffer, reached
//! through a pointer it keeps). They run as ordinary tests too.

mod common;

use common::fib_join;
use sixfold::{Context, Pool, Task, TaskRef};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

struct Fib {
    n: u64,
    slot: usize,
}

/// A continuation with no drop glue: freed without a call through its
/// vtable (its block goes straight back to the node allocator).
struct Sum {
    parts: [AtomicU64; 2],
    slot: usize,
}

impl Sum {
    fn new(slot: usize) -> Self {
        Sum {
            parts: [AtomicU64::new(0), AtomicU64::new(0)],
            slot,
        }
    }
}

/// The top's successor, holding what the caller reads.
struct Answer(AtomicU64, Arc<AtomicU64>);

fn deliver(cx: &Context<'_>, slot: usize, value: u64) {
    match cx.successor::<Sum>() {
        Some(sum) => sum.parts[slot].store(value, Ordering::Relaxed),
        None => cx
            .successor::<Answer>()
            .expect("a Sum or the Answer")
            .0
            .store(value, Ordering::Relaxed),
    }
}

impl Task for Fib {
    fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
        if self.n < 2 {
            deliver(cx, self.slot, self.n);
            return None;
        }
        let sum = cx.continuation(Sum::new(self.slot));
        let right = sum.child(Fib {
            n: self.n - 2,
            slot: 1,
        });
        if self.n.is_multiple_of(2) {
            // Recycle: run again as the left child.
            cx.spawn(right);
            self.n -= 1;
            self.slot = 0;
            cx.recycle();
            None
        } else {
            // Return the left child (rule 1) and spawn the right.
            cx.spawn(right);
            Some(sum.child(Fib {
                n: self.n - 1,
                slot: 0,
            }))
        }
    }
}

impl Task for Sum {
    fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
        let total = self.parts[0].load(Ordering::Relaxed) + self.parts[1].load(Ordering::Relaxed);
        deliver(cx, self.slot, total);
        None
    }
}

impl Task for Answer {
    fn execute(&mut self, _cx: &mut Context<'_>) -> Option<TaskRef> {
        self.1
            .store(self.0.load(Ordering::Relaxed), Ordering::Relaxed);
        None
    }
}

fn fib_cps(pool: &Pool, n: u64) -> u64 {
    let out = Arc::new(AtomicU64::new(0));
    let mut root = TaskRef::new(Fib { n, slot: 0 });
    let answer = TaskRef::new(Answer(AtomicU64::new(0), out.clone()));
    root.precede(&answer).unwrap();
    pool.run([root, answer]);
    out.load(Ordering::Relaxed)
}

#[test]
fn continuation_passing_fib_with_recycling_and_bypass() {
    for threads in [1, 2] {
        let pool = Pool::builder().num_threads(threads).build().unwrap();
        assert_eq!(fib_cps(&pool, 10), 55);
    }
}

#[test]
fn dropping_an_unsubmitted_node_cancels_it_and_its_successors() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let count = |ran: &Arc<AtomicUsize>| {
        let ran = ran.clone();
        TaskRef::from_fn(move |_| {
            ran.fetch_add(1, Ordering::SeqCst);
        })
    };
    let (mut a, mut b, c) = (count(&ran), count(&ran), count(&ran));
    a.precede(&b).unwrap();
    b.precede(&c).unwrap();
    drop(b); // cancels b and therefore c
    pool.run([a, c]);
    assert_eq!(ran.load(Ordering::SeqCst), 1);

    // Dropped with nothing before it: freed at once.
    drop(count(&ran));
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn a_node_with_many_successors_releases_each_once_run_or_dropped() {
    // One successor sits in the node's list word; from the second on the
    // list is a boxed vector (successors.rs), walked by the cycle check,
    // by completion, by cancellation, and freed with the node.
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let task = |name: &'static str| {
        let log = log.clone();
        TaskRef::from_fn(move |_| log.lock().unwrap().push(name))
    };
    let (mut a, mut b, mut c, mut d, mut e) =
        (task("a"), task("b"), task("c"), task("d"), task("e"));
    for next in [&b, &c, &d] {
        a.precede(next).unwrap();
    }
    for before in [&mut b, &mut c, &mut d] {
        before.precede(&e).unwrap();
    }
    assert_eq!(e.pending_predecessors(), 3);
    assert!(
        e.precede(&a).is_err(),
        "e -> a closes a cycle through a's vector"
    );
    pool.run([a, b, c, d, e]);
    let log = log.lock().unwrap().clone();
    assert_eq!((log.len(), log[0], log[4]), (5, "a", "e"));

    // Dropped unsubmitted: every successor in the vector is cancelled.
    let ran = Arc::new(AtomicUsize::new(0));
    let count = || {
        let ran = ran.clone();
        TaskRef::from_fn(move |_| {
            ran.fetch_add(1, Ordering::SeqCst);
        })
    };
    let mut root = count();
    let rest: Vec<TaskRef> = (0..3).map(|_| count()).collect();
    for next in &rest {
        root.precede(next).unwrap();
    }
    drop(root);
    pool.run(rest);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

/// `Pool::run` reads handles ahead of the one it submits (to prefetch
/// their nodes) while it consumes the vector back to front: a chain and a
/// crowd of unrelated nodes, longer than the look-ahead, run whole and in
/// order, and each node once.
#[test]
fn a_set_longer_than_the_submit_look_ahead_runs_whole_and_in_order() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut chain: Vec<TaskRef> = (0..40)
        .map(|i| {
            let log = log.clone();
            TaskRef::from_fn(move |_| log.lock().unwrap().push(i))
        })
        .collect();
    for i in 1..chain.len() {
        let (head, tail) = chain.split_at_mut(i);
        head[i - 1].precede(&tail[0]).unwrap();
    }
    let ran = Arc::new(AtomicUsize::new(0));
    let crowd = (0..30).map(|_| {
        let ran = ran.clone();
        TaskRef::from_fn(move |_| {
            ran.fetch_add(1, Ordering::SeqCst);
        })
    });
    pool.run(chain.into_iter().chain(crowd));
    assert_eq!(*log.lock().unwrap(), (0..40).collect::<Vec<_>>());
    assert_eq!(ran.load(Ordering::SeqCst), 30);
}

#[test]
fn cycle_is_refused_and_nodes_are_freed() {
    let mut a = TaskRef::from_fn(|_| {});
    let mut b = TaskRef::from_fn(|_| {});
    a.precede(&b).unwrap();
    assert!(b.precede(&a).is_err());
    assert_eq!(b.pending_predecessors(), 1);
}

#[test]
fn install_runs_a_stack_job_and_returns_its_result() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let local = [1u64, 2, 3];
    let sum = pool.install(|| local.iter().sum::<u64>());
    assert_eq!(sum, 6);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.install(|| panic!("boom"));
    }));
    assert!(caught.is_err());
}

#[test]
fn zero_thread_pool_runs_everything_on_the_guest_slot() {
    let pool = Pool::builder().num_threads(0).build().unwrap();
    assert_eq!(fib_cps(&pool, 8), 21);
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..10 {
        let ran = ran.clone();
        pool.enqueue(move || {
            ran.fetch_add(1, Ordering::SeqCst);
        });
    }
    pool.wait_idle();
    assert_eq!(ran.load(Ordering::SeqCst), 10);
}

/// Guests of pools without threads, call after call: each entry of the
/// outer pool reuses the worker memory its thread kept from the last one.
/// The inner pool, entered from the outer's worker, runs on a drainer
/// thread of its own, whose kept memory is freed when that thread ends.
/// Both pools' joins work, and the caller is no worker after.
#[test]
fn guests_of_pools_without_threads_reuse_their_worker_memory() {
    let outer = Pool::builder().num_threads(0).build().unwrap();
    let inner = Pool::builder().num_threads(0).build().unwrap();
    for round in 0..3u64 {
        let (inside, after) = outer.install(|| {
            let inside = inner.install(|| fib_join(6) + round);
            // Back in the outer pool's guest slot: its joins still work.
            (inside, fib_join(5))
        });
        assert_eq!((inside, after), (8 + round, 5));
        assert_eq!(sixfold::current_worker(), None);
    }
}

#[test]
fn run_from_a_worker_of_another_pool_wakes_the_right_owner() {
    let outer = Pool::builder().num_threads(2).build().unwrap();
    let inner = Arc::new(Pool::builder().num_threads(2).build().unwrap());
    let results = Arc::new(Mutex::new(Vec::new()));
    let (inner2, results2) = (inner.clone(), results.clone());
    outer.run(TaskRef::from_fn(move |cx| {
        for i in 0..4u64 {
            let inner = inner2.clone();
            let results = results2.clone();
            cx.spawn(TaskRef::from_fn(move |_| {
                let value = fib_cps(&inner, 5 + i);
                results.lock().unwrap().push(value);
            }));
        }
    }));
    let mut got = results.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, [5, 8, 13, 21]);
}

#[test]
fn nested_run_inside_a_worker_keeps_working_until_done() {
    let pool = Arc::new(Pool::builder().num_threads(2).build().unwrap());
    let total = Arc::new(AtomicUsize::new(0));
    let (p, t) = (pool.clone(), total.clone());
    pool.run(TaskRef::from_fn(move |_| {
        for _ in 0..3 {
            let t = t.clone();
            p.run(TaskRef::from_fn(move |cx| {
                for _ in 0..5 {
                    let t = t.clone();
                    cx.spawn(TaskRef::from_fn(move |_| {
                        t.fetch_add(1, Ordering::SeqCst);
                    }));
                }
            }));
        }
    }));
    assert_eq!(total.load(Ordering::SeqCst), 15);
}

#[test]
fn panics_in_run_are_resumed_and_the_pool_survives() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.run(TaskRef::from_fn(|cx| {
            cx.spawn(TaskRef::from_fn(|_| panic!("child failed")));
        }));
    }));
    let payload = caught.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"child failed"));
    assert_eq!(fib_cps(&pool, 6), 8);
}

#[test]
fn stealing_moves_tasks_between_deques_without_loss() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    pool.run(TaskRef::from_fn(move |cx| {
        for _ in 0..40 {
            let r = r.clone();
            cx.spawn(TaskRef::from_fn(move |_| {
                r.fetch_add(1, Ordering::SeqCst);
            }));
        }
    }));
    assert_eq!(ran.load(Ordering::SeqCst), 40);
}

#[test]
fn affinity_and_enqueue_paths_deliver_every_task() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    for i in 0..10 {
        let r = ran.clone();
        pool.spawn_with_affinity(i % 2, move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        let r = ran.clone();
        pool.enqueue(move || {
            r.fetch_add(1, Ordering::SeqCst);
        });
    }
    drop(pool); // runs everything first
    assert_eq!(ran.load(Ordering::SeqCst), 20);
}

#[test]
fn join_runs_its_second_half_inline_or_waits_for_the_thief() {
    fn sum(slice: &[u64]) -> u64 {
        if slice.len() <= 2 {
            return slice.iter().sum();
        }
        let (left, right) = slice.split_at(slice.len() / 2);
        let (a, b) = sixfold::join(|| sum(left), || sum(right));
        a + b
    }
    let data: Vec<u64> = (1..=32).collect();
    for threads in [1, 2] {
        let pool = Pool::builder().num_threads(threads).build().unwrap();
        assert_eq!(pool.install(|| sum(&data)), 528);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.join(|| panic!("left"), || sum(&data))
        }));
        assert_eq!(caught.unwrap_err().downcast_ref::<&str>(), Some(&"left"));
    }
}

#[test]
fn scope_jobs_borrow_the_stack_and_release_their_units_last() {
    for threads in [1, 2] {
        let pool = Pool::builder().num_threads(threads).build().unwrap();
        let mut slots = [0u64; 8];
        pool.scope(|s| {
            for (i, slot) in slots.iter_mut().enumerate() {
                s.spawn(move |s| {
                    *slot = i as u64;
                    s.spawn(|_| {});
                });
            }
        });
        assert_eq!(slots.iter().sum::<u64>(), 28);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.scope(|s| s.spawn(|_| panic!("scoped")))
        }));
        assert_eq!(caught.unwrap_err().downcast_ref::<&str>(), Some(&"scoped"));
    }
}

#[test]
fn fifo_scope_indirect_jobs_run_the_front_of_their_fifo() {
    for threads in [1, 2] {
        let pool = Pool::builder().num_threads(threads).build().unwrap();
        let order = Mutex::new(Vec::new());
        pool.scope_fifo(|s| {
            for i in 0..6 {
                let order = &order;
                s.spawn_fifo(move |s| {
                    order.lock().unwrap().push(i);
                    s.spawn_fifo(|_| {});
                });
            }
        });
        let mut order = order.into_inner().unwrap();
        if threads == 1 {
            assert_eq!(order, [0, 1, 2, 3, 4, 5]);
        }
        order.sort();
        assert_eq!(order, [0, 1, 2, 3, 4, 5]);
    }
}

#[test]
fn a_thief_takes_the_front_of_another_workers_fifo() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    // A scope's FIFO: the owner stays busy until the other worker stole an
    // indirect job and, through it, the front of the owner's FIFO.
    let stolen = AtomicBool::new(false);
    pool.scope_fifo(|s| {
        let owner = sixfold::current_worker();
        for _ in 0..3 {
            let stolen = &stolen;
            s.spawn_fifo(move |_| {
                if sixfold::current_worker() != owner {
                    stolen.store(true, Ordering::SeqCst);
                }
            });
        }
        while !stolen.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    });
    // The pool-level FIFO of `Pool::spawn_fifo`, the same way.
    let stolen = Arc::new(AtomicBool::new(false));
    let flag = stolen.clone();
    pool.install(|| {
        let owner = sixfold::current_worker();
        for _ in 0..3 {
            let flag = flag.clone();
            pool.spawn_fifo(move || {
                if sixfold::current_worker() != owner {
                    flag.store(true, Ordering::SeqCst);
                }
            });
        }
        while !flag.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    });
    pool.wait_idle();
    assert!(stolen.load(Ordering::SeqCst));
}

#[test]
fn graph_nodes_run_inline_and_boxed_bodies_subflows_and_are_dropped() {
    let owned = Arc::new(());
    for threads in [0, 1, 2] {
        let pool = Pool::builder().num_threads(threads).build().unwrap();
        let runs = AtomicUsize::new(0);
        let children = AtomicUsize::new(0);
        {
            let mut g = sixfold::Graph::new();
            // Inline body (one reference) and a boxed one (too big to fit).
            let small = g.add(|| {
                runs.fetch_add(1, Ordering::Relaxed);
            });
            let keep = owned.clone();
            let big = [7u64; 8];
            let runs_ref = &runs;
            let boxed = g.add(move || {
                let _ = &keep;
                runs_ref.fetch_add(big.iter().sum::<u64>() as usize / 56, Ordering::Relaxed);
            });
            // A node with more than two successors uses the shared pool.
            let fan: Vec<_> = (0..4)
                .map(|_| {
                    g.add_subflow(|sf| {
                        sf.spawn(|sf| {
                            children.fetch_add(1, Ordering::Relaxed);
                            sf.spawn(|_| {
                                children.fetch_add(1, Ordering::Relaxed);
                            });
                        });
                    })
                })
                .collect();
            g.precede(small, boxed).unwrap();
            for &f in &fan {
                g.precede(boxed, f).unwrap();
            }
            pool.run_graph(&mut g).unwrap();
            pool.install(|| pool.run_graph(&mut g)).unwrap();
            assert_eq!(runs.load(Ordering::Relaxed), 4);
            assert_eq!(children.load(Ordering::Relaxed), 16);
            // Placements and replay read the arrays beside the nodes: a
            // placed successor of a single-successor node, a join of two.
            let join = g.add(|| {
                runs.fetch_add(1, Ordering::Relaxed);
            });
            g.precede(fan[0], join).unwrap();
            g.precede(fan[1], join).unwrap();
            g.set_dispatch(fan[2], sixfold::Dispatch::Enqueue).unwrap();
            g.set_affinity(join, Some(threads.saturating_sub(1)))
                .unwrap();
            g.set_affinity_replay(true);
            pool.run_graph(&mut g).unwrap();
            pool.run_graph(&mut g).unwrap();
            g.set_affinity_replay(false);
            assert_eq!(runs.load(Ordering::Relaxed), 10);
            assert_eq!(children.load(Ordering::Relaxed), 32);
            // Cancelled from a node: the rest is skipped, then it runs again.
            let token = g.cancel_token();
            let stop = g.add(move || token.cancel());
            g.precede(stop, small).unwrap();
            assert_eq!(pool.run_graph(&mut g), Err(sixfold::GraphError::Cancelled));
            assert_eq!(runs.load(Ordering::Relaxed), 10);
        }
        // The graph dropped its bodies, including the boxed one's capture.
        assert_eq!(Arc::strong_count(&owned), 1);
    }
}

#[test]
fn isolated_jobs_carry_their_region_through_wrappers_proxies_and_inline_joins() {
    // Every job of an isolated region is a `RegionJob` wrapper: pushed and
    // run by a thief, taken back and discarded by `join`, inside a proxy
    // whose other entry ran first, through the entry lane of another pool.
    let pool = Arc::new(Pool::builder().num_threads(2).build().unwrap());
    let other = Arc::new(Pool::builder().num_threads(1).build().unwrap());
    let total = AtomicUsize::new(0);
    let hits = Arc::new(AtomicUsize::new(0));
    let (p, o) = (pool.clone(), other.clone());
    let got = pool.install(|| {
        sixfold::isolate(|| {
            fn sum(n: usize) -> usize {
                if n < 2 {
                    return n;
                }
                let (a, b) = sixfold::join(|| sum(n - 1), || sum(n - 2));
                a + b
            }
            let s = sum(8);
            sixfold::scope(|sc| {
                for _ in 0..4 {
                    sc.spawn(|_| {
                        total.fetch_add(1, Ordering::SeqCst);
                    });
                }
            });
            sixfold::scope_fifo(|sc| {
                for _ in 0..4 {
                    sc.spawn_fifo(|_| {
                        total.fetch_add(1, Ordering::SeqCst);
                    });
                }
            });
            for w in [0, 1, 0, 1] {
                let hits = hits.clone();
                p.spawn_with_affinity(w, move || {
                    hits.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
            }
            let back = o.install(|| p.install(|| 5));
            s + back
        })
    });
    assert_eq!(got, 21 + 5);
    assert_eq!(total.load(Ordering::SeqCst), 8);
    pool.wait_idle();
    assert_eq!(hits.load(Ordering::SeqCst), 4);
}

/// `Context::successor` hands out the successor's body only when its type
/// is the one asked for: a `Sum` successor is a `Sum`, not an `Other` of
/// the same size, and a task without successor has none.
#[test]
fn successor_is_typed_and_refuses_another_type() {
    struct Other {
        _parts: [u64; 2],
        _slot: usize,
    }
    impl Task for Other {
        fn execute(&mut self, _: &mut Context<'_>) -> Option<TaskRef> {
            None
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let probe = |seen: Arc<Mutex<Vec<(bool, bool)>>>| {
        TaskRef::from_fn(move |cx| {
            let as_sum = cx.successor::<Sum>().is_some();
            let as_other = cx.successor::<Other>().is_some();
            seen.lock().unwrap().push((as_sum, as_other));
        })
    };
    let pool = Pool::builder().num_threads(1).build().unwrap();
    let mut before_sum = probe(seen.clone());
    let mut sum = TaskRef::new(Sum::new(0));
    before_sum.precede(&sum).unwrap();
    let answer = TaskRef::new(Answer(AtomicU64::new(0), Arc::default()));
    sum.precede(&answer).unwrap();
    let mut before_other = probe(seen.clone());
    let other = TaskRef::new(Other {
        _parts: [0; 2],
        _slot: 0,
    });
    before_other.precede(&other).unwrap();
    let alone = probe(seen.clone());
    pool.run([before_sum, sum, answer, before_other, other, alone]);
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, [(false, false), (false, true), (true, false)]);
}

/// Counts drops of the bodies that carry it.
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A continuation's body of `N` bytes of padding: small ones share a block
/// with their first child (`Memory::WithReserve` in task/node/layout.rs), large ones
/// do not.
struct Join<const N: usize> {
    delivered: AtomicUsize,
    expected: usize,
    ran: Arc<AtomicUsize>,
    _dropped: Dropped,
    _pad: [u8; N],
}

impl<const N: usize> Task for Join<N> {
    fn execute(&mut self, _cx: &mut Context<'_>) -> Option<TaskRef> {
        assert_eq!(self.delivered.load(Ordering::SeqCst), self.expected);
        self.ran.fetch_add(1, Ordering::SeqCst);
        None
    }
}

/// A child of `N` bytes of padding that reports to a `Join<J>`, or panics.
struct Part<const N: usize, const J: usize> {
    panics: bool,
    _dropped: Dropped,
    _pad: [u8; N],
}

impl<const N: usize, const J: usize> Task for Part<N, J> {
    fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
        assert!(!self.panics, "part failed");
        let join = cx.successor::<Join<J>>().expect("a Join successor");
        join.delivered.fetch_add(1, Ordering::SeqCst);
        None
    }
}

/// What a `Fork` does with its children.
#[derive(Clone, Copy)]
enum Plan {
    /// Spawn them all.
    RunAll,
    /// Drop the first (the one in the reserve) unsubmitted.
    DropFirst,
    /// The first one panics.
    FirstPanics,
}

/// Makes a `Join<J>` and three children: two small (the first in the
/// reserve when `Join<J>` is small), one too large for any reserve.
struct Fork<const J: usize> {
    plan: Plan,
    ran: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
}

impl<const J: usize> Task for Fork<J> {
    fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
        let guard = || Dropped(self.dropped.clone());
        let join = cx.continuation(Join::<J> {
            delivered: AtomicUsize::new(0),
            expected: 3,
            ran: self.ran.clone(),
            _dropped: guard(),
            _pad: [0; J],
        });
        let first = join.child(Part::<8, J> {
            panics: matches!(self.plan, Plan::FirstPanics),
            _dropped: guard(),
            _pad: [0; 8],
        });
        let second = join.child(Part::<8, J> {
            panics: false,
            _dropped: guard(),
            _pad: [0; 8],
        });
        let large = join.child(Part::<200, J> {
            panics: false,
            _dropped: guard(),
            _pad: [0; 200],
        });
        match self.plan {
            Plan::DropFirst => drop(first),
            Plan::RunAll | Plan::FirstPanics => cx.spawn(first),
        }
        cx.spawn(second);
        cx.spawn(large);
        None
    }
}

fn fork_with<const J: usize>(pool: &Pool, plan: Plan) -> (usize, usize) {
    let ran = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let fork = TaskRef::new(Fork::<J> {
        plan,
        ran: ran.clone(),
        dropped: dropped.clone(),
    });
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.run(fork)));
    assert_eq!(outcome.is_err(), matches!(plan, Plan::FirstPanics));
    (ran.load(Ordering::SeqCst), dropped.load(Ordering::SeqCst))
}

#[test]
fn continuation_children_in_and_out_of_the_reserve_are_dropped_once() {
    // A small continuation lends its block's second half to its first
    // child; a large one has none. Either way every body is dropped once,
    // whether its child ran, was dropped unsubmitted, or panicked.
    let pool = Pool::builder().num_threads(2).build().unwrap();
    for plan in [Plan::RunAll, Plan::DropFirst, Plan::FirstPanics] {
        let expect_ran = usize::from(matches!(plan, Plan::RunAll));
        // The join's body and the three parts.
        assert_eq!(fork_with::<8>(&pool, plan), (expect_ran, 4));
        assert_eq!(fork_with::<200>(&pool, plan), (expect_ran, 4));
    }
}

#[test]
fn traced_joins_and_a_named_chain_leave_one_record_each() {
    let pool = Pool::builder().num_threads(2).trace(true).build().unwrap();
    assert_eq!(pool.install(|| fib_join(6)), 8);
    let ran = AtomicUsize::new(0);
    let mut g = sixfold::Graph::new();
    let ids: Vec<_> = (0..5)
        .map(|i| {
            let ran = &ran;
            g.add_named(format!("link{i}"), move || {
                ran.fetch_add(1, Ordering::Relaxed);
            })
        })
        .collect();
    for pair in ids.windows(2) {
        g.precede(pair[0], pair[1]).unwrap();
    }
    pool.run_graph(&mut g).unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), 5);
    // A take waits only briefly for records in flight (Miri is slow):
    // gather takes until the chain's records are in.
    let mut tasks = Vec::new();
    for _ in 0..1000 {
        tasks.extend(pool.take_trace().tasks);
        if tasks.iter().filter(|t| t.name.is_some()).count() >= 5 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let mut links: Vec<_> = tasks
        .iter()
        .filter_map(|t| t.name.as_deref())
        .filter(|n| n.starts_with("link"))
        .collect();
    links.sort_unstable();
    assert_eq!(links, ["link0", "link1", "link2", "link3", "link4"]);
    assert!(tasks.iter().all(|t| t.start_ns <= t.end_ns && t.worker < 2));
}
