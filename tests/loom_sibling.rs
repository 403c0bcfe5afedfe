//! loom models of a continuation released beside its spawned child
//! (`src/task/node/run.rs`, `finish`): a node that finishes
//! while the other holder of its successor's count is the job on top of
//! its own deque pops that job first and releases its own unit with a
//! plain store instead of a read-modify-write, while a thief may be
//! stealing the same job. Whatever the interleaving, the successor
//! becomes ready exactly once, after both of its predecessors' writes.
//!
//! Run: `LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg loom" cargo test --release
//! --target-dir target/loom --test loom_sibling`.

#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use loom::thread;
use sixfold::loom_api::{LoomDeque, LoomRelease, loom_release_count, loom_release_or_sibling};

/// The job id of the spawned child; other ids are unrelated jobs.
const CHILD: u32 = 7;
const OTHER: u32 = 9;

/// The successor's state: its count (the parent's unit and the child's),
/// what each predecessor wrote for it, and how often it became ready.
struct Successor {
    pending: AtomicU32,
    parts: [UnsafeCell<u32>; 2],
    readies: AtomicUsize,
}

impl Successor {
    fn new() -> Self {
        Successor {
            pending: AtomicU32::new(2),
            parts: [UnsafeCell::new(0), UnsafeCell::new(0)],
            readies: AtomicUsize::new(0),
        }
    }

    /// Predecessor `k` writes its part (a plain write: the successor
    /// reads it unsynchronized but for the count).
    fn deliver(&self, k: usize) {
        // SAFETY (model): only predecessor `k` writes part `k`, before it
        // releases its unit; loom flags any unsynchronized access.
        self.parts[k].with_mut(|p| unsafe { *p = k as u32 + 1 });
    }

    /// The successor runs: it must see both parts.
    fn run(&self) {
        self.readies.fetch_add(1, Ordering::Relaxed);
        for (k, part) in self.parts.iter().enumerate() {
            // SAFETY (model): as in `deliver`.
            let seen = part.with(|p| unsafe { *p });
            assert_eq!(
                seen,
                k as u32 + 1,
                "the successor ran before predecessor {k}"
            );
        }
    }

    /// The child runs, wherever it was taken: part 1, then its release.
    fn run_child(&self) {
        self.deliver(1);
        if loom_release_count(&self.pending) {
            self.run();
        }
    }
}

/// The parent finishes beside its child on its deque (under `above`,
/// jobs pushed after the child), while a thief steals from the front.
fn parent_and_thief(above: &'static [u32]) {
    loom::model(move || {
        let succ = Arc::new(Successor::new());
        let deque = LoomDeque::new();
        deque.push(CHILD);
        for &job in above {
            deque.push(job);
        }
        let stealer = deque.stealer();
        let thief = {
            let succ = succ.clone();
            thread::spawn(move || {
                // Take jobs from the front until the child or nothing.
                while let Some(job) = stealer.steal() {
                    if job == CHILD {
                        succ.run_child();
                        return;
                    }
                }
            })
        };
        // The parent: its part, then its release beside the child.
        succ.deliver(0);
        match loom_release_or_sibling(&succ.pending, &deque, CHILD) {
            // Ours: the successor now waits for the child alone.
            LoomRelease::Sibling => succ.run_child(),
            released => {
                if released == LoomRelease::Last {
                    succ.run();
                }
                // Rule 3: the rest of the deque, the child among it
                // unless the thief took it.
                while let Some(job) = deque.pop() {
                    if job == CHILD {
                        succ.run_child();
                    }
                }
            }
        }
        thief.join().unwrap();
        assert_eq!(
            succ.readies.load(Ordering::Relaxed),
            1,
            "ready exactly once"
        );
    });
}

#[test]
fn a_child_on_top_is_taken_and_released_beside_or_stolen_first() {
    parent_and_thief(&[]);
}

#[test]
fn another_job_on_top_goes_back_and_the_release_is_the_usual_one() {
    parent_and_thief(&[OTHER]);
}

#[test]
fn a_count_held_by_a_third_unit_is_left_to_the_usual_release() {
    loom::model(|| {
        let pending = AtomicU32::new(3);
        let deque = LoomDeque::new();
        deque.push(CHILD);
        assert_eq!(
            loom_release_or_sibling(&pending, &deque, CHILD),
            LoomRelease::NotLast
        );
        assert_eq!(pending.load(Ordering::Relaxed), 2, "our unit, released");
        assert_eq!(deque.pop(), Some(CHILD), "the child left where it was");
    });
}
