//! loom models of a graph run's predecessor counts (`src/graph/pending.rs`):
//! predecessors finishing at once make their node ready exactly once, and
//! the one that does sees every other predecessor's writes, whether it
//! found the count at one (and skipped its decrement) or decremented it to
//! zero.
//!
//! Run: `LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg loom" cargo test --release
//! --target-dir target/loom --test loom_pending`.

#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use loom::thread;
use sixfold::loom_api::loom_arrive;

/// `in_degree` predecessors, each on its own thread, write their output
/// (a plain write: the node reads it unsynchronized but for the count)
/// and arrive. Whoever is told the node is ready reads every output.
fn predecessors_race(in_degree: usize) {
    loom::model(move || {
        let count = Arc::new(AtomicU32::new(in_degree as u32));
        let outputs: Arc<Vec<UnsafeCell<usize>>> =
            Arc::new((0..in_degree).map(|_| UnsafeCell::new(0)).collect());
        let readies = Arc::new(AtomicUsize::new(0));
        let finish = {
            let (count, outputs, readies) = (count.clone(), outputs.clone(), readies.clone());
            move |me: usize| {
                // SAFETY (model): only predecessor `me` writes its output
                // before arriving; loom flags any unsynchronized read.
                outputs[me].with_mut(|out| unsafe { *out = me + 1 });
                if loom_arrive(&count) {
                    readies.fetch_add(1, Ordering::Relaxed);
                    for (k, out) in outputs.iter().enumerate() {
                        let seen = out.with(|out| unsafe { *out });
                        assert_eq!(seen, k + 1, "the node started before predecessor {k}");
                    }
                }
            }
        };
        let others: Vec<_> = (1..in_degree)
            .map(|me| {
                let finish = finish.clone();
                thread::spawn(move || finish(me))
            })
            .collect();
        finish(0);
        for t in others {
            t.join().unwrap();
        }
        assert_eq!(readies.load(Ordering::Relaxed), 1, "ready exactly once");
    });
}

#[test]
fn a_single_predecessor_makes_its_node_ready_without_writing() {
    loom::model(|| {
        let count = AtomicU32::new(1);
        assert!(loom_arrive(&count));
        assert_eq!(
            count.load(Ordering::Relaxed),
            1,
            "a count of one is not written"
        );
    });
}

#[test]
fn two_predecessors_at_once_make_the_node_ready_once_after_both() {
    predecessors_race(2);
}

#[test]
fn three_predecessors_at_once_make_the_node_ready_once_after_all() {
    predecessors_race(3);
}
