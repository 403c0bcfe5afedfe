//! loom models of posting work against workers falling asleep.
//!
//! Workers run the real idle loop of `sleep/` and take jobs through the
//! scheduler's deque facade (`src/queues/deque.rs`), which under loom is a
//! loom-visible stand-in for crossbeam's deque (as tokio does with its own
//! queue). The poster owns the deque and pushes; the workers steal.
//! Posting follows the pool's protocol: push, then `new_injected_jobs`. A lost job shows up as a loom deadlock
//! (a worker blocked with the job still queued) or as a failed assertion.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release --target-dir target/loom --test loom_sleep`
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use sixfold::loom_api::{LoomDeque, LoomLatch, LoomSleep, LoomStealer};

/// A worker's loop: run jobs from `queue` until `terminate` is set.
fn worker(
    sleep: &LoomSleep,
    queue: &LoomStealer,
    terminate: &LoomLatch,
    ran: &AtomicUsize,
    index: usize,
) {
    let mut idle = sleep.start_looking(index);
    while !terminate.probe() {
        if queue.steal().is_some() {
            sleep.work_found();
            ran.fetch_add(1, Ordering::SeqCst);
            idle = sleep.start_looking(index);
        } else {
            sleep.no_work_found(&mut idle, terminate, || !queue.is_empty());
        }
    }
    sleep.work_found();
}

/// Post one job the way `Registry::inject` does. Returns sleepers woken.
fn inject(sleep: &LoomSleep, queue: &LoomDeque) -> usize {
    let was_empty = queue.is_empty();
    queue.push(1);
    sleep.new_injected_jobs(1, was_empty)
}

/// Wait (yielding to loom) until `ran` reaches `n`.
fn wait_ran(ran: &AtomicUsize, n: usize) {
    while ran.load(Ordering::SeqCst) < n {
        thread::yield_now();
    }
}

fn shut_down(sleep: &LoomSleep, latches: &[Arc<LoomLatch>]) {
    for (index, latch) in latches.iter().enumerate() {
        if latch.set() {
            sleep.notify_worker_latch_is_set(index);
        }
    }
}

#[test]
fn external_injection_racing_the_last_sleeper_is_not_lost() {
    loom::model(|| {
        let sleep = Arc::new(LoomSleep::new(1));
        let queue = LoomDeque::new();
        let ran = Arc::new(AtomicUsize::new(0));
        let terminate = Arc::new(LoomLatch::new());
        let handle = {
            let (sleep, queue, ran, terminate) = (
                sleep.clone(),
                queue.stealer(),
                ran.clone(),
                terminate.clone(),
            );
            thread::spawn(move || worker(&sleep, &queue, &terminate, &ran, 0))
        };
        inject(&sleep, &queue);
        // If the worker slept through the injection, this never returns and
        // loom reports the deadlock.
        wait_ran(&ran, 1);
        shut_down(&sleep, &[terminate]);
        handle.join().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn two_sleepers_and_one_new_job_wake_at_most_one_and_the_job_runs() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(|| {
        let sleep = Arc::new(LoomSleep::new(2));
        let queue = LoomDeque::new();
        let ran = Arc::new(AtomicUsize::new(0));
        let latches = [Arc::new(LoomLatch::new()), Arc::new(LoomLatch::new())];
        let handles: Vec<_> = (0..2)
            .map(|index| {
                let (sleep, queue, ran, terminate) = (
                    sleep.clone(),
                    queue.stealer(),
                    ran.clone(),
                    latches[index].clone(),
                );
                thread::spawn(move || worker(&sleep, &queue, &terminate, &ran, index))
            })
            .collect();
        let woken = inject(&sleep, &queue);
        assert!(woken <= 1, "one job woke {woken} sleepers");
        wait_ran(&ran, 1);
        shut_down(&sleep, &latches);
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    });
}
