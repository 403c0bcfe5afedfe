//! Small pipeline runs that walk every `unsafe` path of the pipeline
//! engine, sized to run under Miri in CI (`cargo +nightly miri test --test
//! miri_pipeline`): item cells written and read through raw pointers, items
//! that own heap memory moved between stages and dropped (also when a
//! stage filters, panics or the run is cancelled), the chain of slots
//! handed between workers through the gates, the deques and the mailboxes,
//! the source gate's holder word, and the one-worker loop (`run_alone`).
//! They run as ordinary tests too.

mod common;

use common::pool;
use sixfold::{Pipeline, PipelineError, Pool};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};

/// Source -> parallel map to a `String` -> filter -> out-of-order ->
/// in-order sink: every kind of stage, with items that own heap memory.
fn run_every_stage_kind(pool: &Pool, items: u32, tokens: usize) -> Vec<String> {
    let mut next = 0;
    let mut odd_seen = 0;
    let mut out = Vec::new();
    let mut p = Pipeline::new(|| {
        next += 1;
        (next <= items).then_some(next)
    })
    .parallel(|n: u32| format!("item {n}"))
    .parallel(|s: String| (!s.ends_with('3')).then_some(s))
    .flatten()
    .serial_out_of_order(|s: String| {
        odd_seen += 1;
        s + "!"
    })
    .serial_in_order(|s| out.push(s));
    pool.run_pipeline(&mut p, tokens).unwrap();
    drop(p);
    assert_eq!(odd_seen, out.len());
    out
}

fn expected(items: u32) -> Vec<String> {
    (1..=items)
        .filter(|n| n % 10 != 3)
        .map(|n| format!("item {n}!"))
        .collect()
}

#[test]
fn items_with_heap_memory_pass_every_stage_kind_on_one_and_two_workers() {
    for threads in [0, 1, 2] {
        let pool = pool(threads);
        for tokens in [1, 3] {
            assert_eq!(run_every_stage_kind(&pool, 24, tokens), expected(24));
        }
    }
}

#[test]
fn a_run_from_inside_a_worker_keeps_working_and_finishes() {
    let pool = pool(2);
    let out = pool.install(|| run_every_stage_kind(&pool, 16, 4));
    assert_eq!(out, expected(16));
}

#[test]
fn a_panicking_stage_drops_the_items_in_flight_and_the_pipeline_runs_again() {
    let pool = pool(2);
    let mut next = 0;
    let fail = AtomicBool::new(true);
    let mut sunk = Vec::new();
    let mut p = Pipeline::new(|| {
        next += 1;
        (next <= 20).then(|| format!("{next}"))
    })
    .parallel(|s: String| s + "x")
    .serial_in_order(|s: String| {
        if fail.load(Ordering::Relaxed) && s == "5x" {
            panic!("[intentional] stage fails on item 5");
        }
        sunk.push(s);
    });
    let result = catch_unwind(AssertUnwindSafe(|| pool.run_pipeline(&mut p, 3)));
    assert!(result.is_err(), "the stage's panic is resumed");
    // Rerun: the source continues after what the failed run took.
    fail.store(false, Ordering::Relaxed);
    pool.run_pipeline(&mut p, 3).unwrap();
    drop(p);
    assert!(sunk.starts_with(&["1x".to_string(), "2x".into(), "3x".into(), "4x".into()]));
    assert!(sunk.iter().all(|s| s != "5x"));
    assert!(sunk.ends_with(&["20x".to_string()]));
}

#[test]
fn a_cancelled_run_drops_its_items_and_reports_it() {
    let pool = pool(2);
    let mut next = 0;
    let p = Pipeline::new(|| {
        next += 1;
        Some(vec![next; 4])
    });
    let token = p.cancel_token();
    let mut p = p
        .parallel(|v: Vec<u32>| v.iter().sum::<u32>())
        .serial_in_order(move |sum: u32| {
            if sum >= 40 {
                token.cancel();
            }
        });
    assert_eq!(pool.run_pipeline(&mut p, 4), Err(PipelineError::Cancelled));
}

#[test]
fn a_pinned_stage_gets_its_items_through_the_mailbox() {
    let pool = pool(2);
    let mut next = 0;
    let mut on_worker = Vec::new();
    let mut p = Pipeline::new(|| {
        next += 1;
        (next <= 12).then(|| next.to_string())
    })
    .parallel(|s: String| s.len())
    .serial_in_order(|len: usize| on_worker.push((len, sixfold::current_worker())))
    .pin(1);
    pool.run_pipeline(&mut p, 3).unwrap();
    drop(p);
    assert_eq!(on_worker.len(), 12);
    assert!(
        on_worker.iter().all(|(_, w)| w.is_some()),
        "stages run on workers"
    );
}

/// The lent chain taken by the other worker: two items meet inside a
/// parallel stage, which only happens if the worker blocked in the first
/// one's stage lends the rest of its chain (or its free tokens, in the
/// one-worker loop) and the other worker takes it. The meeting gives up
/// after a while rather than hang, and the test then fails.
#[test]
fn a_blocked_item_lends_the_rest_of_its_chain_to_the_other_worker() {
    let pool = pool(2);
    for run in 0..2 {
        assert!(items_meet(&pool), "run {run}: the two items never met");
    }
}

/// The same inside `isolate`: the lent job is an isolated region's (it
/// owns memory of its own, freed once whoever ends up with it). When the
/// other worker steals the run's first job and blocks in the first item,
/// the caller's isolated wait is the only one left to take the lend (two
/// of nine `-Zmiri-many-seeds` seeds ran that interleaving, and the items
/// never met until isolated waits looked at lent work).
#[test]
fn a_blocked_item_in_an_isolated_run_lends_the_rest_too() {
    let pool = pool(2);
    let met = pool.install(|| sixfold::isolate(|| items_meet(&pool)));
    assert!(met, "the two items never met");
}

/// A run inside a stage body of another run on the same worker: the outer
/// run's free tokens are on offer, so the inner run lends through the
/// deque instead (one offer a worker), and its items still meet.
#[test]
fn a_run_inside_a_stage_lends_through_the_deque_and_its_items_meet() {
    let pool = pool(2);
    let mut sent = false;
    let mut met = Vec::new();
    let mut outer = Pipeline::new(|| (!std::mem::replace(&mut sent, true)).then_some(()))
        .parallel(|()| items_meet(&pool))
        .serial_in_order(|m| met.push(m));
    pool.run_pipeline(&mut outer, 2).unwrap();
    drop(outer);
    assert_eq!(met, [true], "the inner run's items never met");
}

/// Items 1 and 2 of four wait for each other in a parallel stage: they
/// meet only if one's chain is lent while the other blocks. Gives up after
/// a minute (false) rather than hang.
fn items_meet(pool: &Pool) -> bool {
    use std::sync::{Condvar, Mutex};
    use std::time::{Duration, Instant};
    {
        let arrived = Mutex::new(0);
        let all_here = Condvar::new();
        let met = AtomicBool::new(true);
        let mut next = 0;
        let mut out = Vec::new();
        let mut p = Pipeline::new(|| {
            next += 1;
            (next <= 4).then(|| format!("item {next}"))
        })
        .parallel(|s: String| {
            if s.ends_with('1') || s.ends_with('2') {
                let mut n = arrived.lock().unwrap();
                *n += 1;
                all_here.notify_all();
                let deadline = Instant::now() + Duration::from_secs(60);
                while *n < 2 {
                    let now = Instant::now();
                    if now >= deadline {
                        met.store(false, Ordering::Relaxed);
                        break;
                    }
                    n = all_here.wait_timeout(n, deadline - now).unwrap().0;
                }
            }
            s
        })
        .serial_in_order(|s| out.push(s));
        pool.run_pipeline(&mut p, 4).unwrap();
        drop(p);
        assert_eq!(out.len(), 4);
        met.load(Ordering::Relaxed)
    }
}
