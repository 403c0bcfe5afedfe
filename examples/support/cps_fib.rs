//! Fibonacci in continuation-passing style: the task types shared by the
//! `fib_continuation` and `tour` examples and the `compare` benchmark.
//!
//! Each `Fib(n)` task with `n >= 2` creates a continuation `Sum` that waits
//! for two children, spawns `Fib(n - 2)`, and recycles itself as `Fib(n - 1)`
//! (rule 1: it runs again at once on the same worker, no allocation). The
//! last child to finish makes `Sum` ready (rule 2), which adds the two parts
//! and hands the total to its own successor: another `Sum`, or at the top
//! the `Answer` that `fib` reads.
//!
//! `Sum` holds plain values only: a node whose body has no drop glue is
//! freed without a call, and a continuation-passing program makes one
//! `Sum` a fork. What only the top needs (the `Arc` the caller reads) sits
//! in `Answer`, made once.

use sixfold::{Context, Pool, Task, TaskRef};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Compute fib(n) and deliver it to part `slot` of the successor `Sum`.
pub struct Fib {
    pub n: u64,
    pub slot: usize,
}

/// Waits for two parts, then delivers their sum upwards.
pub struct Sum {
    parts: [AtomicU64; 2],
    slot: usize,
}

impl Sum {
    pub fn new(slot: usize) -> Self {
        Sum {
            parts: [AtomicU64::new(0), AtomicU64::new(0)],
            slot,
        }
    }
}

/// The top's successor: stores the value it is handed where `fib` reads it.
pub struct Answer {
    value: AtomicU64,
    out: Arc<AtomicU64>,
}

/// Hand `value` to part `slot` of this task's successor.
fn deliver(cx: &Context<'_>, slot: usize, value: u64) {
    match cx.successor::<Sum>() {
        Some(sum) => sum.parts[slot].store(value, Ordering::Relaxed),
        None => deliver_answer(cx, value),
    }
}

/// The top's delivery, once a run: out of the way of the others.
#[cold]
fn deliver_answer(cx: &Context<'_>, value: u64) {
    let answer = cx
        .successor::<Answer>()
        .expect("every Fib and Sum has a Sum or the Answer after it");
    answer.value.store(value, Ordering::Relaxed);
}

impl Task for Fib {
    fn execute(&mut self, cx: &mut Context<'_>) -> Option<TaskRef> {
        if self.n < 2 {
            deliver(cx, self.slot, self.n);
            return None;
        }
        // The continuation takes over our successor (and our slot in it).
        let sum = cx.continuation(Sum::new(self.slot));
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
        deliver(cx, self.slot, total);
        None
    }
}

impl Task for Answer {
    fn execute(&mut self, _cx: &mut Context<'_>) -> Option<TaskRef> {
        let value = self.value.load(Ordering::Relaxed);
        self.out.store(value, Ordering::Relaxed);
        None
    }
}

/// fib(n) on `pool`.
pub fn fib(pool: &Pool, n: u64) -> u64 {
    let out = Arc::new(AtomicU64::new(0));
    let mut root = TaskRef::new(Fib { n, slot: 0 });
    let answer = TaskRef::new(Answer {
        value: AtomicU64::new(0),
        out: out.clone(),
    });
    root.precede(&answer).expect("no cycle");
    pool.run([root, answer]);
    out.load(Ordering::Relaxed)
}
