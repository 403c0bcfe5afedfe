//! Pipelines: order, one item at a time in serial stages, the token limit,
//! filtering, pinned stages, panics and cancels in every stage kind, runs
//! nested in tasks, graph nodes and scopes, reruns, and bad input.

mod common;

use common::{pool, within};
use sixfold::{Graph, Pipeline, PipelineError, Pool, Rule, TaskRef};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// A little work whose amount depends on `seed`: 0 to ~2 us.
fn busy(seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..(seed % 7) * 100 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// Detects two items inside one serial stage at once.
#[derive(Default)]
struct Exclusive {
    inside: AtomicBool,
    overlaps: AtomicUsize,
}

impl Exclusive {
    fn enter(&self) {
        if self.inside.swap(true, Ordering::SeqCst) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn leave(&self) {
        self.inside.store(false, Ordering::SeqCst);
    }
}

#[test]
fn in_order_stages_see_exact_source_order_with_random_work_on_0_1_2_and_4_workers() {
    within(
        "in_order_stages_see_exact_source_order_with_random_work_on_0_1_2_and_4_workers",
        LIMIT,
        in_order_stages_see_exact_source_order_with_random_work_on_0_1_2_and_4_workers_body,
    );
}

fn in_order_stages_see_exact_source_order_with_random_work_on_0_1_2_and_4_workers_body() {
    for threads in [0, 1, 2, 4] {
        let pool = pool(threads);
        for tokens in [1, 3, 8] {
            let n = 2_000u64;
            let mut next = 0u64;
            let (first_seen, second_seen) = (Mutex::new(Vec::new()), Mutex::new(Vec::new()));
            let (ex1, ex2, ex3) = (
                Exclusive::default(),
                Exclusive::default(),
                Exclusive::default(),
            );
            let ooo_count = AtomicUsize::new(0);
            let mut p = Pipeline::new(|| {
                next += 1;
                (next <= n).then_some(next)
            })
            .parallel(|i| {
                busy(i * 31);
                i
            })
            .serial_in_order(|i| {
                ex1.enter();
                busy(i * 17);
                first_seen.lock().unwrap().push(i);
                ex1.leave();
                i
            })
            .parallel(|i| {
                busy(i * 7);
                i
            })
            .serial_out_of_order(|i| {
                ex2.enter();
                ooo_count.fetch_add(1, Ordering::SeqCst);
                ex2.leave();
                i
            })
            .serial_in_order(|i| {
                ex3.enter();
                second_seen.lock().unwrap().push(i);
                ex3.leave();
            });
            pool.run_pipeline(&mut p, tokens).unwrap();
            drop(p);
            let expect: Vec<u64> = (1..=n).collect();
            let what = format!("{threads} workers, {tokens} tokens");
            assert_eq!(*first_seen.lock().unwrap(), expect, "{what}");
            assert_eq!(*second_seen.lock().unwrap(), expect, "{what}");
            assert_eq!(ooo_count.load(Ordering::SeqCst), n as usize, "{what}");
            for ex in [&ex1, &ex2, &ex3] {
                assert_eq!(
                    ex.overlaps.load(Ordering::SeqCst),
                    0,
                    "{what}: two items in a serial stage"
                );
            }
        }
    }
}

#[test]
fn a_serial_stage_never_runs_two_items_at_once_even_when_items_pile_up() {
    within(
        "a_serial_stage_never_runs_two_items_at_once_even_when_items_pile_up",
        LIMIT,
        a_serial_stage_never_runs_two_items_at_once_even_when_items_pile_up_body,
    );
}

fn a_serial_stage_never_runs_two_items_at_once_even_when_items_pile_up_body() {
    // Slow serial stages behind a fast parallel one on four workers: items
    // queue at every gate all the time.
    let pool = pool(4);
    let (a, b) = (Exclusive::default(), Exclusive::default());
    let mut i = 0u64;
    let mut p = Pipeline::new(|| {
        i += 1;
        (i <= 3_000).then_some(i)
    })
    .parallel(|x| x)
    .serial_out_of_order(|x| {
        a.enter();
        busy(x % 5 + 3);
        a.leave();
        x
    })
    .serial_in_order(|x| {
        b.enter();
        busy(x % 3 + 2);
        b.leave();
    });
    for _ in 0..5 {
        pool.run_pipeline(&mut p, 16).unwrap();
    }
    drop(p);
    assert_eq!(a.overlaps.load(Ordering::SeqCst), 0);
    assert_eq!(b.overlaps.load(Ordering::SeqCst), 0);
}

#[test]
fn items_in_flight_never_exceed_the_token_limit() {
    within(
        "items_in_flight_never_exceed_the_token_limit",
        LIMIT,
        items_in_flight_never_exceed_the_token_limit_body,
    );
}

fn items_in_flight_never_exceed_the_token_limit_body() {
    // The last two take batches capped below `tokens / workers` (items
    // here carry enough work to be shared).
    for (threads, tokens) in [(1, 1), (2, 2), (2, 5), (4, 3), (4, 16), (2, 64), (4, 256)] {
        let pool = pool(threads);
        let in_flight = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let mut i = 0u64;
        let mut p = Pipeline::new(|| {
            i += 1;
            if i > 2_000 {
                return None;
            }
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            Some(i)
        })
        .parallel(|x| {
            busy(x);
            x
        })
        .serial_in_order(|x| {
            busy(x % 3);
            in_flight.fetch_sub(1, Ordering::SeqCst);
        });
        pool.run_pipeline(&mut p, tokens).unwrap();
        drop(p);
        let most = most.load(Ordering::SeqCst);
        assert!(most <= tokens, "{most} in flight with {tokens} tokens");
        assert!(most >= 1);
        assert_eq!(in_flight.load(Ordering::SeqCst), 0);
    }
}

#[test]
fn the_token_limit_is_used_when_a_stage_is_slow() {
    within(
        "the_token_limit_is_used_when_a_stage_is_slow",
        LIMIT,
        the_token_limit_is_used_when_a_stage_is_slow_body,
    );
}

fn the_token_limit_is_used_when_a_stage_is_slow_body() {
    // A slow serial sink: the source runs ahead until every token is out.
    let pool = pool(2);
    let in_flight = AtomicUsize::new(0);
    let most = AtomicUsize::new(0);
    let mut i = 0u64;
    let mut p = Pipeline::new(|| {
        i += 1;
        if i > 200 {
            return None;
        }
        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(now, Ordering::SeqCst);
        Some(i)
    })
    .serial_in_order(|_| {
        std::thread::sleep(Duration::from_micros(200));
        in_flight.fetch_sub(1, Ordering::SeqCst);
    });
    pool.run_pipeline(&mut p, 6).unwrap();
    drop(p);
    assert_eq!(most.load(Ordering::SeqCst), 6);
}

#[test]
fn flatten_filters_items_and_keeps_the_order_of_the_rest() {
    within(
        "flatten_filters_items_and_keeps_the_order_of_the_rest",
        LIMIT,
        flatten_filters_items_and_keeps_the_order_of_the_rest_body,
    );
}

fn flatten_filters_items_and_keeps_the_order_of_the_rest_body() {
    for threads in [0, 2, 4] {
        let pool = pool(threads);
        let mut i = 0u32;
        let mut kept = Vec::new();
        let mut p = Pipeline::new(|| {
            i += 1;
            (i <= 5_000).then_some(i)
        })
        .parallel(|x| (x % 3 == 0).then_some(x))
        .flatten()
        .serial_in_order(|x| if x % 2 == 0 { None } else { Some(x * 10) })
        .flatten()
        .serial_in_order(|x| kept.push(x));
        pool.run_pipeline(&mut p, 7).unwrap();
        drop(p);
        let expect: Vec<u32> = (1..=5_000)
            .filter(|x| x % 3 == 0 && x % 2 == 1)
            .map(|x| x * 10)
            .collect();
        assert_eq!(kept, expect, "{threads} workers");
    }
}

#[test]
fn a_pinned_stage_runs_nearly_all_its_items_on_its_worker() {
    within(
        "a_pinned_stage_runs_nearly_all_its_items_on_its_worker",
        LIMIT,
        a_pinned_stage_runs_nearly_all_its_items_on_its_worker_body,
    );
}

fn a_pinned_stage_runs_nearly_all_its_items_on_its_worker_body() {
    let pool = pool(2);
    let on_worker = AtomicUsize::new(0);
    let total = AtomicUsize::new(0);
    let mut i = 0u64;
    let mut p = Pipeline::new(|| {
        i += 1;
        (i <= 5_000).then_some(i)
    })
    .parallel(|x| {
        busy(x);
        x
    })
    .serial_in_order(|x| {
        total.fetch_add(1, Ordering::Relaxed);
        if sixfold::current_worker() == Some(1) {
            on_worker.fetch_add(1, Ordering::Relaxed);
        }
        busy(x % 4);
    })
    .pin(1);
    pool.run_pipeline(&mut p, 8).unwrap();
    drop(p);
    let share = on_worker.load(Ordering::Relaxed) as f64 / total.load(Ordering::Relaxed) as f64;
    assert!(share >= 0.95, "{:.1}% on the pinned worker", share * 100.0);
}

/// An item type that counts its drops.
struct Counted<'c>(u64, &'c AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::SeqCst);
    }
}

/// Where a pipeline fails, for the panic and cancel tests.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Where {
    Source,
    Parallel,
    InOrder,
    OutOfOrder,
}

/// Build a pipeline that panics (or fires its cancel token) at `fail_at`
/// when it sees item 300 of 1,000, run it on 1-4 workers, and check what
/// the contract says: the panic is resumed (or `Cancelled` returned),
/// every item made was dropped exactly once, the source stopped, and the
/// pipeline runs cleanly again afterwards.
fn fail_and_rerun(threads: usize, fail_at: Where, cancel: bool) {
    let pool = pool(threads);
    let made = AtomicUsize::new(0);
    let dropped = AtomicUsize::new(0);
    let armed = AtomicBool::new(true);
    let delivered = AtomicUsize::new(0);
    let token: Mutex<Option<sixfold::CancelToken>> = Mutex::new(None);
    let fail = |stage: Where, x: u64| {
        if stage == fail_at && x == 300 && armed.swap(false, Ordering::SeqCst) {
            if cancel {
                token.lock().unwrap().as_ref().unwrap().cancel();
            } else {
                panic!("[intentional] stage {stage:?} failed");
            }
        }
    };
    // The source restarts from 1 when told to, so the pipeline can rerun.
    let next = std::sync::atomic::AtomicU64::new(0);
    let mut p = Pipeline::new(|| {
        let i = next.load(Ordering::Relaxed);
        if i == 1_000 {
            return None;
        }
        next.store(i + 1, Ordering::Relaxed);
        fail(Where::Source, i + 1);
        made.fetch_add(1, Ordering::SeqCst);
        Some(Counted(i + 1, &dropped))
    })
    .parallel(|c| {
        fail(Where::Parallel, c.0);
        busy(c.0 % 5);
        c
    })
    .serial_in_order(|c| {
        fail(Where::InOrder, c.0);
        c
    })
    .serial_out_of_order(|c| {
        fail(Where::OutOfOrder, c.0);
        c
    })
    .serial_in_order(|c| {
        delivered.fetch_add(1, Ordering::SeqCst);
        c
    });
    *token.lock().unwrap() = Some(p.cancel_token());
    let what = format!("{threads} workers, {fail_at:?}, cancel {cancel}");
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.run_pipeline(&mut p, 6)
    }));
    match (cancel, outcome) {
        (true, Ok(result)) => assert_eq!(result, Err(PipelineError::Cancelled), "{what}"),
        (false, Err(payload)) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_default();
            assert_eq!(
                message,
                format!("[intentional] stage {fail_at:?} failed"),
                "{what}"
            );
        }
        (_, other) => panic!("{what}: unexpected outcome {:?}", other.map(|_| ())),
    }
    let made_first = made.load(Ordering::SeqCst);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        made_first,
        "{what}: every item dropped once"
    );
    // The source stopped: it never got near the end.
    assert!(made_first < 1_000, "{what}: {made_first} items made");
    assert!(delivered.load(Ordering::SeqCst) < 1_000, "{what}");
    // Reusable: a clean run delivers everything (the source restarts, as
    // its own code says).
    next.store(0, Ordering::Relaxed);
    made.store(0, Ordering::SeqCst);
    dropped.store(0, Ordering::SeqCst);
    delivered.store(0, Ordering::SeqCst);
    pool.run_pipeline(&mut p, 6).unwrap();
    drop(p);
    assert_eq!(delivered.load(Ordering::SeqCst), 1_000, "{what}: rerun");
    assert_eq!(dropped.load(Ordering::SeqCst), 1_000, "{what}: rerun drops");
}

#[test]
fn a_panic_in_each_stage_kind_stops_the_source_drops_the_items_and_is_resumed() {
    within(
        "a_panic_in_each_stage_kind_stops_the_source_drops_the_items_and_is_resumed",
        LIMIT,
        a_panic_in_each_stage_kind_stops_the_source_drops_the_items_and_is_resumed_body,
    );
}

fn a_panic_in_each_stage_kind_stops_the_source_drops_the_items_and_is_resumed_body() {
    common::quiet_intentional_panics("[intentional]");
    for threads in [1, 2, 4] {
        for at in [
            Where::Source,
            Where::Parallel,
            Where::InOrder,
            Where::OutOfOrder,
        ] {
            fail_and_rerun(threads, at, false);
        }
    }
}

#[test]
fn a_cancel_in_each_stage_kind_stops_the_run_and_the_pipeline_runs_again() {
    within(
        "a_cancel_in_each_stage_kind_stops_the_run_and_the_pipeline_runs_again",
        LIMIT,
        a_cancel_in_each_stage_kind_stops_the_run_and_the_pipeline_runs_again_body,
    );
}

fn a_cancel_in_each_stage_kind_stops_the_run_and_the_pipeline_runs_again_body() {
    for threads in [1, 2, 4] {
        for at in [
            Where::Source,
            Where::Parallel,
            Where::InOrder,
            Where::OutOfOrder,
        ] {
            fail_and_rerun(threads, at, true);
        }
    }
}

/// A pipeline of 100 items summed in order, as a closure to run anywhere.
fn sum_pipeline(pool: &Pool) -> u64 {
    let mut i = 0u64;
    let mut sum = 0u64;
    let mut p = Pipeline::new(|| {
        i += 1;
        (i <= 100).then_some(i)
    })
    .parallel(|x| x * 2)
    .serial_in_order(|x| sum += x);
    pool.run_pipeline(&mut p, 4).unwrap();
    drop(p);
    sum
}

#[test]
fn a_pipeline_runs_inside_a_task_a_graph_node_and_a_scope() {
    within(
        "a_pipeline_runs_inside_a_task_a_graph_node_and_a_scope",
        LIMIT,
        a_pipeline_runs_inside_a_task_a_graph_node_and_a_scope_body,
    );
}

fn a_pipeline_runs_inside_a_task_a_graph_node_and_a_scope_body() {
    let pool = Arc::new(pool(2));
    let expect = 2 * 5050;
    within("nested pipelines", LIMIT, move || {
        // Inside a task.
        let got = Arc::new(AtomicUsize::new(0));
        let (p2, g2) = (pool.clone(), got.clone());
        pool.run(TaskRef::from_fn(move |_| {
            g2.store(sum_pipeline(&p2) as usize, Ordering::SeqCst);
        }));
        assert_eq!(got.load(Ordering::SeqCst), expect);

        // Inside a graph node.
        let node_sum = AtomicUsize::new(0);
        {
            let mut g = Graph::new();
            let pool_ref = &pool;
            let node_sum = &node_sum;
            let a = g.add(move || {
                node_sum.fetch_add(sum_pipeline(pool_ref) as usize, Ordering::SeqCst);
            });
            let b = g.add(move || {
                node_sum.fetch_add(sum_pipeline(pool_ref) as usize, Ordering::SeqCst);
            });
            g.precede(a, b).unwrap();
            pool.run_graph(&mut g).unwrap();
        }
        assert_eq!(node_sum.load(Ordering::SeqCst), 2 * expect);

        // Inside a scope, two at once.
        let (x, y) = (AtomicUsize::new(0), AtomicUsize::new(0));
        pool.scope(|s| {
            s.spawn(|_| x.store(sum_pipeline(&pool) as usize, Ordering::SeqCst));
            s.spawn(|_| y.store(sum_pipeline(&pool) as usize, Ordering::SeqCst));
        });
        assert_eq!(
            x.load(Ordering::SeqCst) + y.load(Ordering::SeqCst),
            2 * expect
        );

        // From a worker of another pool: it keeps working while it waits.
        let other = Pool::builder().num_threads(1).build().unwrap();
        assert_eq!(other.install(|| sum_pipeline(&pool)) as usize, expect);
    });
}

#[test]
fn a_pipeline_runs_1000_times() {
    within(
        "a_pipeline_runs_1000_times",
        LIMIT,
        a_pipeline_runs_1000_times_body,
    );
}

fn a_pipeline_runs_1000_times_body() {
    let pool = pool(2);
    let mut i = 0u32;
    let mut total = 0u64;
    let mut runs = 0u32;
    let mut p = Pipeline::new(|| {
        if i == 50 {
            i = 0;
            return None;
        }
        i += 1;
        Some(i)
    })
    .parallel(u64::from)
    .serial_in_order(|x| {
        total += x;
        if x == 50 {
            runs += 1;
        }
    });
    for _ in 0..1000 {
        pool.run_pipeline(&mut p, 5).unwrap();
    }
    drop(p);
    assert_eq!(runs, 1000);
    assert_eq!(total, 1000 * (50 * 51 / 2));
}

#[test]
fn bad_input_is_an_error_before_anything_runs() {
    within(
        "bad_input_is_an_error_before_anything_runs",
        LIMIT,
        bad_input_is_an_error_before_anything_runs_body,
    );
}

fn bad_input_is_an_error_before_anything_runs_body() {
    let pool = pool(2);
    let calls = AtomicUsize::new(0);
    let mut p = Pipeline::new(|| {
        calls.fetch_add(1, Ordering::SeqCst);
        None::<u32>
    })
    .parallel(|x| x)
    .name("resize")
    .pin(5);
    assert_eq!(
        pool.run_pipeline(&mut p, 4),
        Err(PipelineError::AffinityOutOfRange {
            stage: "resize".into(),
            worker: 5,
            num_workers: 2
        })
    );
    let message = pool.run_pipeline(&mut p, 4).unwrap_err().to_string();
    assert!(
        message.contains("resize") && message.contains("worker 5"),
        "{message}"
    );
    let mut q = Pipeline::new(|| {
        calls.fetch_add(1, Ordering::SeqCst);
        None::<u32>
    });
    assert_eq!(pool.run_pipeline(&mut q, 0), Err(PipelineError::ZeroTokens));
    drop((p, q));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "the source was never called"
    );
}

#[test]
fn debug_shows_the_stages() {
    within("debug_shows_the_stages", LIMIT, debug_shows_the_stages_body);
}

fn debug_shows_the_stages_body() {
    let p = Pipeline::new(|| None::<u8>)
        .name("read")
        .parallel(|b| b)
        .name("decode")
        .serial_in_order(Some)
        .flatten()
        .serial_out_of_order(|_| ())
        .pin(0);
    let text = format!("{p:?}");
    for part in [
        "source",
        "read",
        "parallel",
        "decode",
        "serial_in_order",
        "flatten",
        "serial_out_of_order",
        "pinned_to: 0",
    ] {
        assert!(text.contains(part), "{part} missing from {text}");
    }
    assert_eq!(p.num_stages(), 3);
}

#[test]
fn the_trace_names_every_stage_execution_and_stats_add_up() {
    within(
        "the_trace_names_every_stage_execution_and_stats_add_up",
        LIMIT,
        the_trace_names_every_stage_execution_and_stats_add_up_body,
    );
}

fn the_trace_names_every_stage_execution_and_stats_add_up_body() {
    let pool = Pool::builder().num_threads(2).trace(true).build().unwrap();
    // Several runs: which steps wait (and must be named so) varies.
    for _ in 0..20 {
        trace_one_run(&pool);
    }
}

fn trace_one_run(pool: &Pool) {
    let mut i = 0u32;
    let mut p = Pipeline::new(|| {
        i += 1;
        (i <= 200).then_some(i)
    })
    .name("read")
    .parallel(|x| x + 1)
    .name("work")
    .serial_in_order(|_| ())
    .name("write");
    pool.take_trace();
    let before = pool.stats();
    pool.run_pipeline(&mut p, 4).unwrap();
    drop(p);
    let stats = pool.stats().since(&before);
    let trace = pool.take_trace();
    let count = |name: &str| {
        trace
            .tasks
            .iter()
            .filter(|t| t.name.as_deref() == Some(name))
            .count()
    };
    // Every item passed each stage once; "read" also counts the fetches
    // that found the source exhausted, one per token.
    assert_eq!(count("work"), 200);
    assert_eq!(count("write"), 200);
    assert!(count("read") >= 200, "{}", count("read"));
    // The run's tasks are the trace's records, rule by rule.
    assert_eq!(stats.total(), trace.tasks.len() as u64);
    let by_rule = trace.tasks_by_rule();
    for rule in Rule::ALL {
        assert_eq!(stats.by_rule(rule), by_rule[rule as usize], "{rule:?}");
    }
}

#[test]
fn stages_borrow_from_the_caller_and_keep_their_state() {
    within(
        "stages_borrow_from_the_caller_and_keep_their_state",
        LIMIT,
        stages_borrow_from_the_caller_and_keep_their_state_body,
    );
}

fn stages_borrow_from_the_caller_and_keep_their_state_body() {
    let pool = pool(2);
    let words = ["a", "bb", "ccc", "dddd"];
    let mut index = 0;
    let mut longest = 0;
    let mut seen = 0;
    let mut p = Pipeline::new(|| {
        let w = words.get(index)?;
        index += 1;
        Some(*w)
    })
    .parallel(|w: &str| w.len())
    .serial_out_of_order(|len| {
        seen += 1;
        longest = longest.max(len);
    });
    pool.run_pipeline(&mut p, 2).unwrap();
    drop(p);
    assert_eq!((longest, seen), (4, 4));
}

/// `stage(mode, f)` builds the stage its mode names: an in-order stage
/// sees source order, serial ones never run two items at once; and a
/// mode's name parses back to it.
#[test]
fn a_stage_mode_chosen_at_run_time_behaves_as_the_named_builder() {
    use sixfold::StageMode;
    let pool = pool(4);
    for mode in [
        StageMode::SerialInOrder,
        StageMode::SerialOutOfOrder,
        StageMode::Parallel,
    ] {
        assert_eq!(mode.name().parse::<StageMode>().unwrap(), mode);
        let inside = AtomicUsize::new(0);
        let most_inside = AtomicUsize::new(0);
        let seen = Mutex::new(Vec::new());
        let mut next = 0u64;
        let mut p = Pipeline::new(|| {
            next += 1;
            (next <= 200).then_some(next)
        })
        .stage(mode, |x| {
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            most_inside.fetch_max(now, Ordering::SeqCst);
            seen.lock().unwrap().push(x);
            busy(x);
            inside.fetch_sub(1, Ordering::SeqCst);
        });
        pool.run_pipeline(&mut p, 8).unwrap();
        drop(p);
        let mut seen = seen.into_inner().unwrap();
        if mode == StageMode::SerialInOrder {
            assert_eq!(seen, (1..=200).collect::<Vec<_>>(), "{mode}: source order");
        }
        if mode != StageMode::Parallel {
            assert_eq!(
                most_inside.load(Ordering::SeqCst),
                1,
                "{mode} ran two items at once"
            );
        }
        seen.sort_unstable();
        assert_eq!(
            seen,
            (1..=200).collect::<Vec<_>>(),
            "{mode}: every item once"
        );
    }
    assert!("diagonal".parse::<StageMode>().is_err());
}
