//! loom models of the real Chase-Lev deque (`src/queues/chase_lev.rs`)
//! with its two pop modes: in the fast mode the owner's pop has only a
//! compiler barrier between its store of `back` and its load of `front`,
//! and each thief pays the heavy half of an asymmetric fence (modelled by
//! a mutex, `src/platform/asymmetric_fence.rs`); the owner goes fenced at
//! the first pop that finds `front` moved, and back to fast after a quiet
//! pop (one, in the model). Whatever the interleaving, every item is
//! taken exactly once.
//!
//! Run: `LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg loom" cargo test --release
//! --target-dir target/loom --test loom_deque`.

#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use sixfold::loom_api::{LoomChaseLev, LoomChaseLevStealer};

/// How often each item was taken, by anyone.
struct Taken(Vec<AtomicUsize>);

impl Taken {
    fn new(items: usize) -> Arc<Self> {
        Arc::new(Taken((0..items).map(|_| AtomicUsize::new(0)).collect()))
    }
    fn take(&self, item: Option<u32>) {
        if let Some(item) = item {
            self.0[item as usize].fetch_add(1, Ordering::Relaxed);
        }
    }
    fn check(&self, deque: &LoomChaseLev) {
        // The owner takes what is left after everyone joined.
        while let Some(item) = deque.pop() {
            self.take(Some(item));
        }
        for (item, count) in self.0.iter().enumerate() {
            assert_eq!(count.load(Ordering::Relaxed), 1, "item {item}");
        }
    }
}

fn thief(stealer: LoomChaseLevStealer, taken: &Arc<Taken>) -> thread::JoinHandle<()> {
    let taken = taken.clone();
    thread::spawn(move || taken.take(stealer.steal()))
}

/// `items` pushed, then two thieves steal once each while the owner pops
/// `pops` times; every item is taken once.
fn two_thieves_one_steal_each(deque: LoomChaseLev, items: u32, pops: usize) {
    for item in 0..items {
        deque.push(item);
    }
    let taken = Taken::new(items as usize);
    let thieves = [
        thief(deque.stealer(), &taken),
        thief(deque.stealer(), &taken),
    ];
    for _ in 0..pops {
        taken.take(deque.pop());
    }
    for t in thieves {
        t.join().unwrap();
    }
    taken.check(&deque);
}

/// The race the fence exists for: two items, two thieves, a fast pop.
/// The first thief takes item 0; the second reads `front` after that
/// claim and may read a `back` older than the owner's pop, which takes
/// item 1 without a claim. The heavy barrier keeps the second thief from
/// taking item 1 too.
#[test]
fn fast_pop_against_two_thieves() {
    loom::model(|| two_thieves_one_steal_each(LoomChaseLev::new(), 2, 1));
}

/// The mode changes under a thief: the owner's pops go fenced when a
/// steal moved `front`, then go fast again after one quiet pop, while the
/// thief may be between reading the mode and claiming. Pushes in between
/// grow the buffer (four slots in the model).
#[test]
fn mode_changes_under_a_thief() {
    loom::model(|| {
        let deque = LoomChaseLev::new();
        for item in 0..3 {
            deque.push(item);
        }
        let taken = Taken::new(6);
        let stealer = deque.stealer();
        let thief = {
            let taken = taken.clone();
            thread::spawn(move || {
                taken.take(stealer.steal());
                taken.take(stealer.steal());
            })
        };
        taken.take(deque.pop());
        taken.take(deque.pop());
        for item in 3..6 {
            deque.push(item);
        }
        taken.take(deque.pop());
        thief.join().unwrap();
        taken.check(&deque);
    });
}

/// Leaving the fenced mode while thieves steal: the owner's first pop is
/// fenced and quiet, so it goes fast, and its second pop may be fast. A
/// thief that still read "fenced" skips the heavy barrier; the `front` it
/// read must then be one the owner's fast pop sees, or it and that pop
/// could both take item 1 (after the other thief took item 0).
#[test]
fn leaving_the_fenced_mode_under_two_thieves() {
    loom::model(|| two_thieves_one_steal_each(LoomChaseLev::new_fenced(), 3, 2));
}
