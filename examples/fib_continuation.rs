//! Fibonacci in continuation-passing style, the way oneTBB's classic task
//! API did it: no thread ever blocks waiting for a child.
//!
//! Each `Fib(n)` task with `n >= 2` creates a continuation `Sum` that waits
//! for two children, spawns `Fib(n - 2)`, and recycles itself as `Fib(n - 1)`
//! (rule 1: it runs again at once on the same worker). The last child to
//! finish makes `Sum` ready (rule 2), which adds the two parts and hands the
//! total to its own successor.
//!
//! Run: `cargo run --release --example fib_continuation -- 32`

use sixfold::{Context, Pool, Rule, Task, TaskRef};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Compute fib(n) and deliver it to part `slot` of the successor `Sum`.
struct Fib {
    n: u64,
    slot: usize,
}

/// Waits for two parts, then delivers their sum upwards (or to `out`).
struct Sum {
    parts: [AtomicU64; 2],
    slot: usize,
    out: Option<Arc<AtomicU64>>,
}

impl Sum {
    fn new(slot: usize, out: Option<Arc<AtomicU64>>) -> Self {
        Sum {
            parts: [AtomicU64::new(0), AtomicU64::new(0)],
            slot,
            out,
        }
    }
}

/// Hand `value` to part `slot` of this task's successor.
fn deliver(cx: &Context<'_>, slot: usize, value: u64) {
    let sum = cx
        .successor::<Sum>()
        .expect("every Fib has a Sum successor");
    sum.parts[slot].store(value, Ordering::Relaxed);
}

impl Task for Fib {
    fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
        if self.n < 2 {
            deliver(cx, self.slot, self.n);
            return None;
        }
        // The continuation takes over our successor (and our slot in it).
        let sum = cx.continuation(Sum::new(self.slot, None));
        cx.spawn(sum.child(Fib {
            n: self.n - 2,
            slot: 1,
        }));
        // Become the other child: no allocation, and we run again at once.
        self.n -= 1;
        self.slot = 0;
        cx.recycle();
        None
    }
}

impl Task for Sum {
    fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
        let total = self.parts[0].load(Ordering::Relaxed) + self.parts[1].load(Ordering::Relaxed);
        match &self.out {
            Some(out) => out.store(total, Ordering::Relaxed),
            None => deliver(cx, self.slot, total),
        }
        None
    }
}

/// fib(n) on `pool`.
fn fib(pool: &Pool, n: u64) -> u64 {
    let out = Arc::new(AtomicU64::new(0));
    // The root delivers into part 0 of a final Sum whose part 1 stays 0.
    let mut root = TaskRef::new(Fib { n, slot: 0 });
    let answer = TaskRef::new(Sum::new(0, Some(out.clone())));
    root.precede(&answer).expect("no cycle");
    pool.run([root, answer]);
    out.load(Ordering::Relaxed)
}

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
