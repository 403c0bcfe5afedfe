//! Pipelines of random shapes (one to five stages, each any-order,
//! in-order or parallel, then a parallel filter and an in-order sink), with
//! light stage bodies, on one to four workers: every run must deliver
//! every item that passes the filter, in order, and not hang.
//!
//! The shape that once hung: an item behind a front that waits at a later
//! in-order gate finds its own, earlier in-order gate closed; the worker
//! retried that item and nothing else. When the item whose turn came first
//! sat further back in the same chain (an any-order gate hands its next
//! item in right behind the one that finished, so a chain need not be in
//! source order), nothing could open the gate and the worker spun forever.
//! Light bodies keep a run on one worker until a body is preempted or
//! sleeps and another worker takes the rest of the chain; more workers than
//! cores make that happen often, in ever different places. A watchdog
//! turns a hang into a failure that names the run.

mod common;

use sixfold::{Pipeline, Pool};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

const PANIC: &str = "gate mix: intentional";

/// Rounds per pool size: `SIXFOLD_GATE_MIX_ROUNDS` (default 1,500).
fn rounds() -> u64 {
    std::env::var("SIXFOLD_GATE_MIX_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500)
}

/// Stage work: nothing, but now and then (one call in `sleep_every`) a
/// short sleep, so another worker takes the lent rest of a chain.
fn body(item: u64, stage: u64, seed: u64, sleep_every: u64) {
    let h = common::mix(item ^ (stage << 40) ^ (seed << 20));
    if sleep_every != 0 && h.is_multiple_of(sleep_every) {
        std::thread::sleep(Duration::from_micros(h % 100));
    }
}

/// One run of the shape `seed` picks; returns (delivered, expected).
fn run(pool: &Pool, seed: u64) -> (Vec<u64>, Vec<u64>) {
    let mut h = common::mix(seed);
    let mut pick = |n: u64| {
        h = common::mix(h);
        h % n
    };
    let items = pick(200);
    let tokens = 1 + pick(8) as usize;
    let kinds: Vec<u64> = (0..1 + pick(5)).map(|_| pick(3)).collect();
    let keep_odd = pick(3) != 0;
    let sleep_every = [0, 0, 61, 251][pick(4) as usize];
    // One run in six panics in a stage: the run is cancelled, and the
    // items in flight pass the in-order gates after it without running.
    let panic_at = (pick(6) == 0 && items > 0).then(|| (pick(kinds.len() as u64), 1 + pick(items)));
    let mut next = 0u64;
    let mut delivered = Vec::new();
    let mut p: Pipeline<'_, u64> = Pipeline::new(|| {
        next += 1;
        (next <= items).then_some(next)
    });
    for (k, &kind) in kinds.iter().enumerate() {
        let stage = k as u64;
        let f = move |x: u64| {
            if panic_at == Some((stage, x)) {
                panic!("{PANIC}");
            }
            body(x, stage, seed, sleep_every);
            x
        };
        p = match kind {
            0 => p.serial_in_order(f),
            1 => p.serial_out_of_order(f),
            _ => p.parallel(f),
        };
    }
    let mut p = p
        .parallel(move |x| (keep_odd || x.is_multiple_of(2)).then_some(x))
        .flatten()
        .serial_in_order(|x| delivered.push(x));
    // Half the runs start on a worker (its wait runs chains too).
    let from_inside = pick(2) == 0;
    let result = catch_unwind(AssertUnwindSafe(|| {
        if from_inside {
            pool.install(|| pool.run_pipeline(&mut p, tokens))
        } else {
            pool.run_pipeline(&mut p, tokens)
        }
    }));
    drop(p);
    let mut expect: Vec<u64> = (1..=items).filter(|x| keep_odd || x % 2 == 0).collect();
    match result {
        Ok(done) => done.unwrap(),
        Err(payload) => {
            assert!(panic_at.is_some(), "{}", common::panic_message(&*payload));
            // Delivered in order, without a gap, up to where it stopped.
            expect.truncate(delivered.len());
        }
    }
    (delivered, expect)
}

#[test]
fn random_mixes_of_any_order_and_in_order_gates_deliver_in_order() {
    common::quiet_intentional_panics(PANIC);
    for threads in [1, 2, 3, 4] {
        let pool = std::sync::Arc::new(Pool::builder().num_threads(threads).build().unwrap());
        for round in 0..rounds() {
            let seed = (threads as u64) << 32 | round;
            let pool = pool.clone();
            let (delivered, expect) = common::within(
                &format!("pipeline of seed {seed} on {threads} workers"),
                Duration::from_secs(60),
                move || run(&pool, seed),
            );
            assert_eq!(delivered, expect, "seed {seed} on {threads} workers");
        }
    }
}

/// One run of the shape that hung, with the stalls that set it up: work
/// enough in the parallel stage that items are shared between workers,
/// item `slow_any` sleeping in the any-order stage (the items behind it
/// park there, and come back to its worker one by one, each right behind
/// the one before: out of source order), and item `slow_sink` sleeping in
/// the sink (so the front of that chain waits at the last gate while the
/// items behind it reach the middle one).
fn stalled_run(pool: &Pool, tokens: usize, slow_any: u64, slow_sink: u64, stall: Duration) {
    let items = 40;
    let mut next = 0u64;
    let mut delivered = Vec::new();
    let mut p = Pipeline::new(|| {
        next += 1;
        (next <= items).then_some(next)
    })
    .parallel(|x: u64| {
        let mut v = x | 1;
        for _ in 0..600 {
            v ^= v << 13;
            v ^= v >> 7;
            v ^= v << 17;
        }
        std::hint::black_box(v);
        x
    })
    .serial_out_of_order(move |x| {
        if x == slow_any {
            std::thread::sleep(stall);
        }
        x
    })
    .serial_in_order(|x| x)
    .serial_in_order(|x| {
        if x == slow_sink {
            std::thread::sleep(2 * stall);
        }
        delivered.push(x);
    });
    pool.run_pipeline(&mut p, tokens).unwrap();
    drop(p);
    assert_eq!(delivered, (1..=items).collect::<Vec<_>>());
}

#[test]
fn items_handed_in_out_of_order_behind_a_waiting_front_do_not_stall_the_chain() {
    // Before the fix most of these runs hung (a worker retried one item at
    // a closed gate forever); where the stalls fall depends on timing, so
    // several placements run on several pool sizes.
    for threads in [2, 3, 4] {
        let pool = std::sync::Arc::new(Pool::builder().num_threads(threads).build().unwrap());
        for tokens in [4, 8] {
            for slow_any in 3..7 {
                for slow_sink in [slow_any - 2, slow_any - 1] {
                    let pool = pool.clone();
                    common::within(
                        &format!(
                            "{threads} workers, {tokens} tokens, item {slow_any} slow in the \
                             any-order stage, item {slow_sink} in the sink"
                        ),
                        Duration::from_secs(30),
                        move || {
                            stalled_run(
                                &pool,
                                tokens,
                                slow_any,
                                slow_sink,
                                Duration::from_millis(10),
                            )
                        },
                    );
                }
            }
        }
    }
}
