//! loom model: a latch set racing its owner falling asleep on it.
//!
//! The owner runs the real idle loop of `sleep/` (search, get sleepy,
//! sleep) waiting on a `CoreLatch`; another thread sets the latch and, if
//! `set` reports the owner asleep, wakes exactly that owner. In every
//! interleaving loom explores, the owner must return (a lost wake-up shows
//! up as a loom deadlock).
//!
//! Also: an outside thread blocking on its lock latch while the setter
//! sets it, where the setter notifies only a thread that already waits
//! (a missed wake-up is again a loom deadlock), and the latch reused.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release --target-dir target/loom --test loom_latch`
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use sixfold::loom_api::{LoomLatch, LoomLockLatch, LoomSleep};

/// The owner's side: wait for `latch` with nothing else to do.
fn wait_for(sleep: &LoomSleep, latch: &LoomLatch, worker: usize) {
    let mut idle = sleep.start_looking(worker);
    while !latch.probe() {
        sleep.no_work_found(&mut idle, latch, || false);
    }
    sleep.work_found();
}

#[test]
fn latch_set_racing_its_owner_falling_asleep_is_not_lost() {
    loom::model(|| {
        let sleep = Arc::new(LoomSleep::new(1));
        let latch = Arc::new(LoomLatch::new());
        let setter = {
            let (sleep, latch) = (sleep.clone(), latch.clone());
            thread::spawn(move || {
                if latch.set() {
                    sleep.notify_worker_latch_is_set(0);
                }
            })
        };
        wait_for(&sleep, &latch, 0);
        setter.join().unwrap();
        assert!(latch.probe());
        assert_eq!(sleep.sleeping_threads(), 0);
    });
}

#[test]
fn setting_one_owners_latch_leaves_the_other_sleeper_alone() {
    loom::model(|| {
        let sleep = Arc::new(LoomSleep::new(2));
        let mine = Arc::new(LoomLatch::new());
        let theirs = Arc::new(LoomLatch::new());
        let other = {
            let (sleep, theirs) = (sleep.clone(), theirs.clone());
            thread::spawn(move || wait_for(&sleep, &theirs, 1))
        };
        let setter = {
            let (sleep, mine) = (sleep.clone(), mine.clone());
            thread::spawn(move || {
                if mine.set() {
                    sleep.notify_worker_latch_is_set(0);
                }
            })
        };
        wait_for(&sleep, &mine, 0);
        setter.join().unwrap();
        // Worker 1's latch was never set: it must still be waiting. Release
        // it the way the pool's shutdown does.
        assert!(!theirs.probe());
        if theirs.set() {
            sleep.notify_worker_latch_is_set(1);
        }
        other.join().unwrap();
    });
}

#[test]
fn lock_latch_set_racing_its_waiter_blocking_is_not_lost() {
    loom::model(|| {
        let latch = Arc::new(LoomLockLatch::new());
        for _round in 0..2 {
            let setter = {
                let latch = latch.clone();
                thread::spawn(move || latch.set())
            };
            latch.wait();
            setter.join().unwrap();
            // Reused, as an outside caller's latch is from one wait to the
            // next: the next round must block again until its own set.
            latch.reset();
        }
    });
}
