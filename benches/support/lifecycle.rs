//! A pool's whole life as a user who builds one per job pays for it.
//!
//! * `pool_lifecycle/2x50`: 50 rounds of building a pool of two threads,
//!   running one `join` in it from outside, and dropping it; sixfold
//!   against rayon. The two drops differ by contract: sixfold's runs what
//!   was queued and joins its threads before it returns, rayon's returns
//!   at once and its threads exit in the background (where they may
//!   overlap the next round).
//!
//! The comment line beside it gives the same rounds with plain threads
//! (`std::thread::spawn` and `join`, two a round, nothing else): what
//! starting and ending two threads costs on this machine with no pool at
//! all. Under `under-load`, that is what bounds a round: a new thread, or
//! one that must run to exit, waits for a core that a busy loop holds.

use super::{compare, ms, side, threads};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Rounds in one timed sample.
const ROUNDS: usize = 50;

fn sixfold_round() -> u64 {
    let pool = sixfold::Pool::builder()
        .num_threads(threads())
        .build()
        .expect("sixfold pool");
    let (a, b) = pool.install(|| sixfold::join(|| black_box(1u64), || black_box(2u64)));
    drop(pool);
    a + b
}

fn rayon_round() -> u64 {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads())
        .build()
        .expect("rayon pool");
    let (a, b) = pool.install(|| rayon::join(|| black_box(1u64), || black_box(2u64)));
    drop(pool);
    a + b
}

fn plain_threads_round() -> u64 {
    let handles: Vec<_> = (0..threads() as u64)
        .map(|i| std::thread::spawn(move || black_box(i + 1)))
        .collect();
    handles.into_iter().map(|h| h.join().expect("thread")).sum()
}

/// `ROUNDS` rounds, each checked against `expect`.
fn rounds(round: fn() -> u64, expect: u64) -> impl FnOnce() {
    move || {
        for _ in 0..ROUNDS {
            assert_eq!(round(), expect);
        }
    }
}

/// `pool_lifecycle/2x50`.
pub(super) fn bench_pool_lifecycle(_: &sixfold::Pool, _: &rayon::ThreadPool) {
    let name = format!("pool_lifecycle/{}x{ROUNDS}", threads());
    let (mine, rayon) = compare(
        &name,
        7,
        side(|| rounds(sixfold_round, 3)),
        side(|| rounds(rayon_round, 3)),
    );
    let plain_sum = (1..=threads() as u64).sum();
    let mut plain: Vec<Duration> = (0..7)
        .map(|_| {
            let start = Instant::now();
            rounds(plain_threads_round, plain_sum)();
            start.elapsed()
        })
        .collect();
    plain.sort();
    let plain = plain[plain.len() / 2];
    let per_round = |d: Duration| ms(d) * 1e3 / ROUNDS as f64;
    println!(
        "#   {name}: us a round (build, one join from outside, drop): sixfold {:.1}, rayon {:.1} (its drop does not wait for its threads); {} plain threads started and joined {:.1}",
        per_round(mine),
        per_round(rayon),
        threads(),
        per_round(plain),
    );
}
