//! Fibonacci in continuation-passing style: the task types shared by the
//! `fib_continuation` and `tour` examples and the `compare` benchmark.
//!
//! Each `Fib(n)` task with `n >= 2` creates a continuation `Sum` that waits
//! for two children, spawns `Fib(n - 2)`, and recycles itself as `Fib(n - 1)`
//! (rule 1: it runs again at once on the same worker, no allocation). The
//! last child to finish makes `Sum` ready (rule 2), which adds the two parts
//! and hands the total to its own successor.

use sixfold::{Context, Pool, Task, TaskRef};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Compute fib(n) and deliver it to part `slot` of the successor `Sum`.
pub struct Fib {
    pub n: u64,
    pub slot: usize,
}

/// Waits for two parts, then delivers their sum upwards (or to `out`).
pub struct Sum {
    parts: [AtomicU64; 2],
    slot: usize,
    out: Option<Arc<AtomicU64>>,
}

impl Sum {
    pub fn new(slot: usize, out: Option<Arc<AtomicU64>>) -> Self {
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
pub fn fib(pool: &Pool, n: u64) -> u64 {
    let out = Arc::new(AtomicU64::new(0));
    // The root delivers into part 0 of a final Sum whose part 1 stays 0.
    let mut root = TaskRef::new(Fib { n, slot: 0 });
    let answer = TaskRef::new(Sum::new(0, Some(out.clone())));
    root.precede(&answer).expect("no cycle");
    pool.run([root, answer]);
    out.load(Ordering::Relaxed)
}
