//! Execution traces: one record per task with sane times, written as
//! Chrome trace-event JSON that parses, and agreeing with `stats()`.

mod common;

use common::fib_join;
use serde_json::Value;
use sixfold::{Graph, Pool, Rule};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn a_traced_graph_run_writes_one_event_per_task() {
    const RUNS: usize = 5;
    let pool = Pool::builder().num_threads(2).trace(true).build().unwrap();
    let ran = AtomicUsize::new(0);
    let mut g = Graph::new();
    let work = || {
        ran.fetch_add(1, Ordering::Relaxed);
        std::hint::black_box((0..2_000u64).sum::<u64>());
    };
    let root = g.add_named("root", work);
    let mut layer = vec![root];
    for depth in 0..4 {
        let next: Vec<_> = (0..4)
            .map(|k| g.add_named(format!("n{depth}.{k}"), work))
            .collect();
        for &a in &layer {
            for &b in &next {
                g.precede(a, b).unwrap();
            }
        }
        layer = next;
    }
    let sink = g.add_named("sink", work);
    for &a in &layer {
        g.precede(a, sink).unwrap();
    }
    let nodes = g.len();
    // Untraced warm-up noise must not leak in: start from empty.
    let _ = pool.take_trace();
    let before = pool.stats();
    pool.run_graph_n(&mut g, RUNS).unwrap();
    pool.install(|| pool.run_graph(&mut g)).unwrap();
    let stats = pool.stats().since(&before);
    let trace = pool.take_trace();
    assert_eq!(ran.load(Ordering::Relaxed), nodes * (RUNS + 1));

    let mut json = Vec::new();
    trace.write_chrome_json(&mut json).unwrap();
    let doc: Value = serde_json::from_slice(&json).expect("valid JSON");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let tasks: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "task")
        .collect();

    // One event per task: every node run, plus the `install` job.
    let total_by_stats = stats.total();
    assert_eq!(tasks.len() as u64, total_by_stats);
    assert_eq!(tasks.len(), nodes * (RUNS + 1) + 1);
    let named = tasks
        .iter()
        .filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n == "root" || n.starts_with('n') || n == "sink")
        })
        .count();
    assert_eq!(
        named,
        nodes * (RUNS + 1),
        "every node event carries its name"
    );

    // Sane times; worker ids in range; one worker's node events do not
    // overlap (no node waits, so none nests in another; the `install` job,
    // which waits in `run_graph`, contains the nodes it ran meanwhile).
    let mut per_worker: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for e in &tasks {
        let tid = e["tid"].as_u64().unwrap();
        assert!((tid as usize) < pool.num_workers(), "worker id {tid}");
        let ts = e["ts"].as_f64().unwrap();
        let dur = e["dur"].as_f64().unwrap();
        assert!(ts >= 0.0 && dur >= 0.0, "start {ts}, duration {dur}");
        if e["name"] != "task" {
            per_worker.entry(tid).or_default().push((ts, ts + dur));
        }
    }
    for (tid, mut spans) in per_worker {
        spans.sort_by(|a, b| a.partial_cmp(b).unwrap());
        for pair in spans.windows(2) {
            assert!(
                pair[1].0 + 0.001 >= pair[0].1,
                "worker {tid}: {:?} overlaps {:?}",
                pair[0],
                pair[1]
            );
        }
    }

    // The rule in each event's args agrees with stats(), rule by rule.
    let mut by_rule = [0u64; 6];
    for e in &tasks {
        let rule = e["args"]["rule"].as_u64().unwrap() as usize;
        assert!((1..=6).contains(&rule));
        by_rule[rule - 1] += 1;
    }
    for rule in Rule::ALL {
        assert_eq!(
            by_rule[rule as usize],
            stats.by_rule(rule),
            "rule {} in the trace vs stats",
            rule.number()
        );
    }
    assert_eq!(by_rule, trace.tasks_by_rule());

    // The summary has a row per worker.
    let summary = trace.summary();
    assert_eq!(summary.lines().count(), 1 + pool.num_workers());
}

/// A long chain of unnamed nodes runs one node after the other on one
/// worker (rule 2), which counts such nodes instead of writing a record
/// each: the trace must still hold one event per node, in order, with
/// the right rules, across many batches, and a named node or one with
/// nested tasks in the middle of the chain must break the count, not
/// lose or misplace a record.
#[test]
fn an_unnamed_chain_gets_an_event_per_node_in_order_across_batches() {
    const NODES: usize = 20_000;
    const NAMED: usize = 9_000;
    const NESTING: usize = 13_000;
    let pool = Pool::builder().num_threads(2).trace(true).build().unwrap();
    let ran = AtomicUsize::new(0);
    let mut g = Graph::new();
    let ids: Vec<_> = (0..NODES)
        .map(|k| {
            let ran = &ran;
            let body = move || {
                ran.fetch_add(1, Ordering::Relaxed);
                if k == NESTING {
                    let (a, b) = sixfold::join(|| fib_join(8), || fib_join(7));
                    assert_eq!(a + b, 34);
                }
            };
            if k == NAMED {
                g.add_named("middle", body)
            } else {
                g.add(body)
            }
        })
        .collect();
    for pair in ids.windows(2) {
        g.precede(pair[0], pair[1]).unwrap();
    }
    let _ = pool.take_trace();
    let before = pool.stats();
    pool.run_graph_n(&mut g, 2).unwrap();
    let stats = pool.stats().since(&before);
    let trace = pool.take_trace();
    assert_eq!(ran.load(Ordering::Relaxed), 2 * NODES);

    assert_eq!(trace.tasks.len() as u64, stats.total());
    assert_eq!(trace.tasks_by_rule(), {
        let mut by_rule = [0u64; 6];
        for rule in Rule::ALL {
            by_rule[rule as usize] = stats.by_rule(rule);
        }
        by_rule
    });
    // Every node but each run's first came by rule 2.
    assert_eq!(stats.by_rule(Rule::Successor), 2 * (NODES as u64 - 1));
    let middle: Vec<_> = trace
        .tasks
        .iter()
        .filter(|t| t.name.as_deref() == Some("middle"))
        .collect();
    assert_eq!(middle.len(), 2, "the named node, once a run");
    assert!(middle.iter().all(|t| t.rule == Rule::Successor));

    // A worker's rule-2 events are the chain's nodes, in the order they
    // ran: each starts where (or after) the one before it ended.
    for w in 0..pool.num_workers() {
        let mut last_end = 0;
        for t in trace
            .tasks
            .iter()
            .filter(|t| t.worker == w && t.rule == Rule::Successor)
        {
            assert!(t.start_ns <= t.end_ns, "{t:?}");
            assert!(
                t.start_ns >= last_end,
                "worker {w}: {t:?} starts before {last_end}"
            );
            last_end = t.end_ns;
        }
    }
    // The nested join's halves run inline (rule 3) lie inside the node
    // that ran them, or inside a half stolen from it (rule 6): another
    // event of their worker contains each. A rule-3 event that is not
    // nested is a run's first node, which the second node follows at once.
    let contains = |outer: &sixfold::TaskEvent, inner: &sixfold::TaskEvent| {
        !std::ptr::eq(outer, inner)
            && outer.worker == inner.worker
            && matches!(outer.rule, Rule::Successor | Rule::Steal)
            && outer.start_ns <= inner.start_ns
            && inner.end_ns <= outer.end_ns
    };
    let mut nested = 0;
    for t in trace.tasks.iter().filter(|t| t.rule == Rule::OwnDeque) {
        if trace.tasks.iter().any(|n| contains(n, t)) {
            nested += 1;
        } else {
            assert!(
                trace.tasks.iter().any(|n| n.worker == t.worker
                    && n.rule == Rule::Successor
                    && n.start_ns == t.end_ns),
                "{t:?} lies in no node and starts no chain"
            );
        }
    }
    assert!(nested > 0, "the nested join ran halves inline");
}

#[test]
fn joins_and_sleeps_are_traced_and_off_means_empty() {
    let pool = Pool::builder().num_threads(2).trace(true).build().unwrap();
    let before = pool.stats();
    assert_eq!(pool.install(|| fib_join(12)), 144);
    // Let the workers fall asleep, then wake them: a sleep is recorded
    // when it ends. Waiting for them to be asleep, not 50 ms: on a loaded
    // machine they had not got there yet, and nothing slept. (A worker
    // counted asleep may find the waking job in its last check and not
    // block: then again.)
    let start = std::time::Instant::now();
    while pool
        .stats()
        .since(&before)
        .workers
        .iter()
        .all(|w| w.sleeps == 0)
    {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the workers never slept"
        );
        while pool.sleeping_workers() < 2 {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "the workers never fell asleep"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        pool.install(|| ());
    }
    let stats = pool.stats().since(&before);
    let trace = pool.take_trace();
    let total = stats.total();
    assert_eq!(
        trace.tasks.len() as u64,
        total,
        "every join half is a record"
    );
    assert!(!trace.sleeps.is_empty(), "the idle pool slept");
    for s in &trace.sleeps {
        assert!(s.end_ns >= s.start_ns);
    }

    let untraced = Pool::builder().num_threads(2).build().unwrap();
    untraced.install(|| fib_join(10));
    let empty = untraced.take_trace();
    assert!(empty.tasks.is_empty() && empty.sleeps.is_empty());
}

/// The worker reads the clock before it searches and at the start of the
/// first task after, so the time a worker spends idle is never counted
/// as the last task's or the next one's.
#[test]
fn a_task_ends_when_it_returns_not_when_its_worker_next_works() {
    use std::time::Duration;
    let pool = Pool::builder().num_threads(1).trace(true).build().unwrap();
    let _ = pool.take_trace();
    pool.install(|| std::thread::sleep(Duration::from_millis(2)));
    std::thread::sleep(Duration::from_millis(300));
    pool.install(|| ());
    let trace = pool.take_trace();
    assert_eq!(trace.tasks.len(), 2, "{:?}", trace.tasks);
    let (first, second) = (&trace.tasks[0], &trace.tasks[1]);
    assert!(
        first.end_ns - first.start_ns >= 2_000_000,
        "the task slept 2 ms: {first:?}"
    );
    assert!(
        first.end_ns + 100_000_000 <= second.start_ns,
        "the first task ends before the 300 ms idle gap: {first:?} {second:?}"
    );
    assert!(second.end_ns >= second.start_ns);
}

/// A task that runs across a `take_trace` (an outer task whose nested
/// tasks were taken meanwhile) keeps its start: the buffer keeps the
/// clock readings its later record needs. Its nested tasks, in either
/// take, lie inside it, and it lasts at least as long as it measured
/// itself.
#[test]
fn a_task_running_across_a_take_keeps_its_start_and_contains_its_children() {
    use std::sync::mpsc::channel;
    use std::time::{Duration, Instant};
    let pool = Pool::builder().num_threads(1).trace(true).build().unwrap();
    let _ = pool.take_trace();
    let (halfway_tx, halfway_rx) = channel();
    let (taken_tx, taken_rx) = channel::<()>();
    let pool = &pool;
    let (first, wall) = std::thread::scope(|s| {
        let outer = s.spawn(move || {
            pool.install(move || {
                let started = Instant::now();
                // Enough join halves to fill and flush the worker's batch.
                assert_eq!(fib_join(20), 6765);
                halfway_tx.send(()).unwrap();
                taken_rx.recv().unwrap();
                assert_eq!(fib_join(20), 6765);
                started.elapsed()
            })
        });
        halfway_rx.recv().unwrap();
        let first = pool.take_trace();
        taken_tx.send(()).unwrap();
        (first, outer.join().unwrap())
    });
    let second = pool.take_trace();
    assert!(
        !first.tasks.is_empty(),
        "the first half's records were taken"
    );
    let outer = second
        .tasks
        .iter()
        .max_by_key(|t| t.end_ns - t.start_ns)
        .expect("records");
    // The clocks (the trace's and `Instant`) agree to far better than
    // this slack; losing the first half would lose the 10 ms the take
    // waited for the task in flight.
    let slack = Duration::from_micros(200).as_nanos() as u64;
    assert!(
        outer.end_ns - outer.start_ns + slack >= wall.as_nanos() as u64,
        "the outer task lasted {wall:?}: {outer:?}"
    );
    for t in first.tasks.iter().chain(&second.tasks) {
        assert!(
            outer.start_ns <= t.start_ns && t.start_ns <= t.end_ns && t.end_ns <= outer.end_ns,
            "{t:?} lies outside the outer task {outer:?}"
        );
    }
    assert_eq!(
        first.tasks.len() + second.tasks.len(),
        2 * 10_945 + 1,
        "every join half and the outer task"
    );
}

/// A pool without threads runs each call on a new guest of its one slot:
/// the second guest's records come after the first's, not mixed with
/// them (its stamps go on from where the first guest's stopped).
#[test]
fn guests_of_a_pool_without_threads_trace_one_after_the_other() {
    let pool = Pool::builder().num_threads(0).trace(true).build().unwrap();
    let _ = pool.take_trace();
    assert_eq!(pool.install(|| fib_join(12)), 144);
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(pool.install(|| fib_join(12)), 144);
    let trace = pool.take_trace();
    // Each install: 232 join halves (the caller runs the body itself).
    assert_eq!(trace.tasks.len(), 2 * 232, "{}", trace.summary());
    let (first, second) = trace.tasks.split_at(232);
    let first_end = first.iter().map(|t| t.end_ns).max().unwrap();
    let second_start = second.iter().map(|t| t.start_ns).min().unwrap();
    assert!(
        first_end + 4_000_000 <= second_start,
        "the calls were 5 ms apart: the first ends at {first_end} ns, the second starts at {second_start} ns"
    );
    for t in &trace.tasks {
        assert!(t.start_ns <= t.end_ns, "{t:?}");
    }
}

/// A join half that panics still gets its record, and leaves the
/// worker's trace state as it was: the records after it nest as before.
#[test]
fn a_panicking_join_half_is_recorded_and_tracing_goes_on() {
    let pool = Pool::builder().num_threads(1).trace(true).build().unwrap();
    let _ = pool.take_trace();
    let before = pool.stats();
    let caught = pool.install(|| {
        std::panic::catch_unwind(|| {
            sixfold::join(|| 1, || -> i32 { std::panic::panic_any("planted") })
        })
    });
    assert!(caught.is_err(), "the second half's panic is resumed");
    assert_eq!(pool.install(|| fib_join(10)), 55);
    let stats = pool.stats().since(&before);
    let trace = pool.take_trace();
    assert_eq!(trace.tasks.len() as u64, stats.total(), "one record a task");
    // The second install's record contains its join halves, which come
    // after the first install's.
    let outer = trace.tasks.last().unwrap();
    let inner = &trace.tasks[trace.tasks.len() - 1 - 88..trace.tasks.len() - 1];
    for t in inner {
        assert!(
            outer.start_ns <= t.start_ns && t.end_ns <= outer.end_ns,
            "{t:?} {outer:?}"
        );
    }
    assert_eq!(trace.tasks_by_rule()[Rule::OwnDeque as usize], 1 + 88);
}
