//! Stress test of the unit credit of scope jobs (`src/worker/credit.rs`).
//!
//! A scope job adds the units of its spawns in batches and gives back the
//! unused ones with its own unit when it ends. A unit given back too early
//! or twice lets the scope return while jobs still run (caught here: every
//! job counts itself as finished, and the count must be complete the
//! moment the scope returns); a unit never given back hangs the scope
//! (caught by the watchdog). The jobs spawn 0 to 80 children (across
//! batch boundaries), some from the halves of a `join` (which may run on
//! another worker, in another job's credit frame), some from the jobs of a
//! nested scope, and some panic (rayon's contract: every job still runs).

mod common;

use common::{mix, quiet_intentional_panics, within};
use sixfold::{Pool, Scope, ScopeFifo};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Children of the job with `seed` at `depth`: a few, sometimes many.
fn children(depth: u32, seed: u64) -> u64 {
    match (depth, mix(seed) % 8) {
        (0, _) => 0,
        (_, 0) => 40 + mix(seed ^ 1) % 41,
        (_, r) => r % 4,
    }
}

fn child_seed(seed: u64, i: u64) -> u64 {
    mix(seed ^ (i + 1).wrapping_mul(0xA24B_AED4_963E_E407))
}

/// Jobs in the tree under (and including) this one.
fn jobs(depth: u32, seed: u64) -> usize {
    1 + (0..children(depth, seed))
        .map(|i| jobs(depth - 1, child_seed(seed, i)))
        .sum::<usize>()
}

/// How a job spawns its children, by seed.
enum How {
    Direct,
    FromJoin,
    FromNestedScope,
}

fn how(seed: u64) -> How {
    match mix(seed ^ 2) % 4 {
        0 => How::FromJoin,
        1 => How::FromNestedScope,
        _ => How::Direct,
    }
}

fn panics(seed: u64) -> bool {
    mix(seed ^ 3).is_multiple_of(29)
}

struct Ledger {
    finished: AtomicUsize,
    panicked: AtomicUsize,
}

impl Ledger {
    /// The job's last act: count it, and panic if it is one that does.
    fn end(&self, seed: u64) {
        self.finished.fetch_add(1, Ordering::Relaxed);
        if panics(seed) {
            self.panicked.fetch_add(1, Ordering::Relaxed);
            panic!("intentional panic in a scope job");
        }
    }
}

fn job<'s>(s: &Scope<'s>, ledger: &'s Ledger, depth: u32, seed: u64) {
    let k = children(depth, seed);
    let spawn_range = |s: &Scope<'s>, range: std::ops::Range<u64>| {
        for i in range {
            let seed = child_seed(seed, i);
            s.spawn(move |s| job(s, ledger, depth - 1, seed));
        }
    };
    match how(seed) {
        How::Direct => spawn_range(s, 0..k),
        How::FromJoin => {
            sixfold::join(|| spawn_range(s, 0..k / 2), || spawn_range(s, k / 2..k));
        }
        How::FromNestedScope => sixfold::scope(|inner| {
            inner.spawn(|_| spawn_range(s, 0..k / 2));
            inner.spawn(|_| spawn_range(s, k / 2..k));
        }),
    }
    ledger.end(seed);
}

fn job_fifo<'s>(s: &ScopeFifo<'s>, ledger: &'s Ledger, depth: u32, seed: u64) {
    let k = children(depth, seed);
    let spawn_range = |s: &ScopeFifo<'s>, range: std::ops::Range<u64>| {
        for i in range {
            let seed = child_seed(seed, i);
            s.spawn_fifo(move |s| job_fifo(s, ledger, depth - 1, seed));
        }
    };
    match how(seed) {
        How::Direct | How::FromNestedScope => spawn_range(s, 0..k),
        How::FromJoin => {
            sixfold::join(|| spawn_range(s, 0..k / 2), || spawn_range(s, k / 2..k));
        }
    }
    ledger.end(seed);
}

/// A pool whose workers have room for deep cascades of nested waits: a
/// wait (a `join` too) runs the worker's other jobs meanwhile, each of
/// which may wait again (README, "Waiting without deadlocks"), and with a
/// FIFO scope those are the oldest jobs of the worker, breadth first; in
/// a debug build the default 2 MiB overflowed. Depth is not what this test
/// is about.
fn pool(threads: usize) -> Pool {
    Pool::builder()
        .num_threads(threads)
        .stack_size(64 << 20)
        .build()
        .unwrap()
}

/// Run one tree in a scope (FIFO or not) and check the count at return.
fn round(pool: &Pool, depth: u32, seed: u64, fifo: bool) {
    let ledger = Ledger {
        finished: AtomicUsize::new(0),
        panicked: AtomicUsize::new(0),
    };
    let result = catch_unwind(AssertUnwindSafe(|| {
        if fifo {
            pool.scope_fifo(|s| s.spawn_fifo(|s| job_fifo(s, &ledger, depth, seed)));
        } else {
            pool.scope(|s| s.spawn(|s| job(s, &ledger, depth, seed)));
        }
    }));
    let expected = jobs(depth, seed);
    assert_eq!(
        ledger.finished.load(Ordering::Relaxed),
        expected,
        "the scope returned before all its jobs finished (seed {seed}, fifo {fifo})"
    );
    assert_eq!(
        result.is_err(),
        ledger.panicked.load(Ordering::Relaxed) > 0,
        "a job's panic is resumed, and only then (seed {seed})"
    );
}

#[test]
fn scopes_return_exactly_when_every_job_gave_back_its_units() {
    quiet_intentional_panics("intentional");
    for threads in [2, 4] {
        within(
            &format!("scopes on {threads} workers"),
            Duration::from_secs(120),
            move || {
                let pool = pool(threads);
                for r in 0..400u64 {
                    let seed = mix(r * 31 + threads as u64);
                    round(&pool, 4, seed, r % 2 == 1);
                }
            },
        );
    }
}
