//! Many runs of light and mixed pipelines on two and four workers, so that
//! chains are lent out and taken (or taken back) in every order: a token
//! lost or retired twice hangs a run or ends it early, which the watchdog
//! and the item counts catch. Items that sleep every 997th one keep the
//! measured work per item near the line between light and shared batches,
//! so a batch may see the measure flip while it fetches (a batch that read
//! it twice once dropped the tokens it had not fetched for: a hang here).

mod common;

use sixfold::{Pipeline, Pool};
use std::time::Duration;

fn run(pool: &Pool, items: u64, tokens: usize, heavy_every: u64) -> (u64, u64) {
    let mut next = 0u64;
    let mut count = 0u64;
    let mut last = None;
    let mut in_order = true;
    let mut p = Pipeline::new(|| {
        next += 1;
        (next <= items).then_some(next)
    })
    .parallel(|x: u64| {
        if heavy_every != 0 && x.is_multiple_of(heavy_every) {
            std::thread::sleep(Duration::from_micros(50));
        }
        std::hint::black_box(x)
    })
    .serial_in_order(|x| {
        if let Some(l) = last {
            in_order &= x == l + 1;
        }
        last = Some(x);
        count += 1;
    });
    pool.run_pipeline(&mut p, tokens).unwrap();
    drop(p);
    assert!(in_order, "the in-order stage saw items out of order");
    (count, next.min(items))
}

#[test]
fn light_pipelines_lend_and_take_back_their_tokens_without_losing_one() {
    common::within("the pipeline runs", Duration::from_secs(600), || {
        for threads in [2, 4] {
            let pool = Pool::builder().num_threads(threads).build().unwrap();
            for round in 0..120 {
                let heavy_every = [0, 997, 61][round % 3];
                // One round in four with more tokens than a shared batch
                // takes (16), so batches are capped below the even share.
                let tokens = if round % 4 == 3 { 100 } else { 8 };
                let (count, fetched) = run(&pool, 20_000, tokens, heavy_every);
                assert_eq!(count, fetched, "{threads} workers, round {round}");
                assert_eq!(count, 20_000);
            }
        }
    });
}
