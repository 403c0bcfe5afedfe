//! Fibonacci in continuation-passing style, the way oneTBB's classic task
//! API did it: no thread ever blocks waiting for a child.
//!
//! Each `Fib(n)` task with `n >= 2` creates a continuation `Sum` that waits
//! for two children, spawns `Fib(n - 2)`, and recycles itself as `Fib(n - 1)`
//! (rule 1: it runs again at once on the same worker). The last child to
//! finish makes `Sum` ready (rule 2), which adds the two parts and hands the
//! total to its own successor.
//!
//! The task types are in `examples/support/cps_fib.rs`: that is the page to
//! copy.
//!
//! Run: `cargo run --release --example fib_continuation -- 32`

#[path = "support/cps_fib.rs"]
mod cps_fib;

use cps_fib::fib;
use sixfold::{Pool, Rule};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(30);
    let pool = Pool::builder().build().expect("pool");
    let start = std::time::Instant::now();
    let value = fib(&pool, n);
    let elapsed = start.elapsed();
    println!(
        "fib({n}) = {value} in {:.1} ms on {} workers",
        elapsed.as_secs_f64() * 1e3,
        pool.num_threads()
    );
    let stats = pool.stats();
    println!(
        "tasks: {} ({} by rule 1, {} by rule 2, {} stolen)",
        stats.total(),
        stats.by_rule(Rule::Returned),
        stats.by_rule(Rule::Successor),
        stats.by_rule(Rule::Steal)
    );
    print!("{stats}");
}
