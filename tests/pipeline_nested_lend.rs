//! Pipelines run inside the stage bodies of a pipeline, on the same
//! workers, with bodies that fork (`join`) and leave a spawned task behind.
//!
//! An inner pipeline's stage body runs while the outer one's offer is out,
//! so the inner chain is lent to the worker's deque. A `join` wait inside
//! the body can pop that lent chain and run it there, and the chain can lend
//! itself again from the same front slot to the same deque, under the task
//! the body spawned. The body's own take-back must then not mistake the
//! second lend for its own (the same slot, the same deque): that discarded a
//! live chain, whose tokens never came back. Every run must deliver every
//! item, in order, and not hang, and every spawned task must run.

mod common;

use sixfold::{Pipeline, Pool};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Outer runs per pool size: `SIXFOLD_NESTED_LEND_ROUNDS` (default 200).
fn rounds() -> u64 {
    std::env::var("SIXFOLD_NESTED_LEND_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

fn spin(x: u64, rounds: u32) -> u64 {
    let mut v = x | 1;
    for _ in 0..rounds {
        v ^= v << 13;
        v ^= v >> 7;
        v ^= v << 17;
    }
    std::hint::black_box(v)
}

/// A source of the items 1..=`n`.
fn numbers(n: u64) -> impl FnMut() -> Option<u64> + Send {
    let mut next = 0;
    move || {
        next += 1;
        (next <= n).then_some(next)
    }
}

const OUTER_ITEMS: u64 = 6;
const INNER_ITEMS: u64 = 12;

/// One inner run: items 1..=`items` through a forking parallel stage and
/// an in-order sink; returns the items as delivered.
fn inner(pool: &Pool, seed: u64, items: u64, spawned: &Arc<AtomicU64>) -> Vec<u64> {
    let mut delivered = Vec::new();
    let mut p = Pipeline::new(numbers(items))
        .parallel(|x: u64| {
            let h = common::mix(seed ^ x);
            let (a, b) = sixfold::join(
                || spin(x, 50 + (h % 200) as u32),
                || spin(x ^ h, 50 + (h >> 8) as u32 % 200),
            );
            let spawned = spawned.clone();
            sixfold::spawn(move || {
                spin(a ^ b, 20);
                spawned.fetch_add(1, Ordering::Relaxed);
            });
            x
        })
        .serial_in_order(|x| delivered.push(x));
    pool.run_pipeline(&mut p, 4).unwrap();
    drop(p);
    delivered
}

fn outer(pool: &Pool, seed: u64, spawned: &Arc<AtomicU64>) {
    let mut delivered = Vec::new();
    let mut p = Pipeline::new(numbers(OUTER_ITEMS))
        .parallel(|x: u64| {
            let got = inner(pool, seed ^ (x << 32), INNER_ITEMS, spawned);
            assert_eq!(got, (1..=INNER_ITEMS).collect::<Vec<_>>(), "inner run {x}");
            x
        })
        .serial_in_order(|x| delivered.push(x));
    pool.run_pipeline(&mut p, 3).unwrap();
    drop(p);
    assert_eq!(delivered, (1..=OUTER_ITEMS).collect::<Vec<_>>());
}

#[test]
fn pipelines_in_forking_stage_bodies_deliver_every_item_in_order_and_lose_no_spawn() {
    for threads in [2, 3] {
        let pool = Arc::new(common::pool(threads));
        let spawned = Arc::new(AtomicU64::new(0));
        for round in 0..rounds() {
            let (pool, spawned) = (pool.clone(), spawned.clone());
            let seed = (threads as u64) << 40 | round;
            common::within(
                &format!("nested pipelines of seed {seed} on {threads} workers"),
                Duration::from_secs(60),
                move || pool.install(|| outer(&pool, seed, &spawned)),
            );
        }
        // Every task a body spawned ran (none was taken for another job
        // and dropped).
        let expected = rounds() * OUTER_ITEMS * INNER_ITEMS;
        common::poll_until("every spawned task", Duration::from_secs(60), || {
            spawned.load(Ordering::Relaxed) == expected
        });
    }
}
