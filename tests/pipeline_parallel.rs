//! A parallel stage really runs in parallel: it holds `min(workers,
//! tokens)` items at once, as oneTBB promises, on the first run (before the
//! engine measured anything) and on every rerun, with or without a serial
//! stage before it; and items that block are not queued behind each other
//! on one worker while another idles.
//!
//! The items meet at a barrier inside the parallel stage. A barrier that
//! is never complete would hang the test, so it gives up after a generous
//! limit and records the failure: the test fails, it never hangs.

mod common;

use sixfold::{Pipeline, Pool};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a barrier waits for its last item before it gives up. Far
/// longer than any scheduling delay on a loaded machine (a sleeping worker
/// looks for lent items every millisecond).
const GIVE_UP: Duration = Duration::from_secs(20);

/// A barrier for `size` arrivals that gives up after `GIVE_UP`.
struct Rendezvous {
    size: usize,
    arrived: Mutex<usize>,
    all_here: Condvar,
    gave_up: AtomicUsize,
}

impl Rendezvous {
    fn new(size: usize) -> Self {
        Rendezvous {
            size,
            arrived: Mutex::new(0),
            all_here: Condvar::new(),
            gave_up: AtomicUsize::new(0),
        }
    }

    /// Wait until `size` items arrived (or give up, noting it).
    fn meet(&self) {
        let mut arrived = self.arrived.lock().unwrap();
        *arrived += 1;
        if *arrived >= self.size {
            self.all_here.notify_all();
            return;
        }
        let deadline = Instant::now() + GIVE_UP;
        while *arrived < self.size {
            let now = Instant::now();
            if now >= deadline {
                self.gave_up.fetch_add(1, Ordering::SeqCst);
                return;
            }
            arrived = self
                .all_here
                .wait_timeout(arrived, deadline - now)
                .unwrap()
                .0;
        }
    }
}

/// One run: `items` items; the first `meeting` of them meet at a barrier
/// inside the parallel stage. Returns how many barrier waits gave up.
fn run_once(pool: &Pool, tokens: usize, meeting: usize, serial_first: bool) -> usize {
    let items = meeting * 3;
    let barrier = Rendezvous::new(meeting);
    let mut next = 0usize;
    let mut sink = Vec::with_capacity(items);
    let source = || {
        (next < items).then(|| {
            next += 1;
            next - 1
        })
    };
    let meet = |i: usize| {
        if i < meeting {
            barrier.meet();
        }
        i
    };
    if serial_first {
        let mut seen = 0;
        let mut p = Pipeline::new(source)
            .serial_in_order(|i: usize| {
                assert_eq!(i, seen, "in-order stage out of order");
                seen += 1;
                i
            })
            .parallel(meet)
            .serial_in_order(|i| sink.push(i));
        pool.run_pipeline(&mut p, tokens).unwrap();
    } else {
        let mut p = Pipeline::new(source)
            .parallel(meet)
            .serial_in_order(|i| sink.push(i));
        pool.run_pipeline(&mut p, tokens).unwrap();
    }
    assert_eq!(
        sink,
        (0..items).collect::<Vec<_>>(),
        "items lost or reordered"
    );
    barrier.gave_up.load(Ordering::SeqCst)
}

/// `min(workers, tokens)` items meet in the parallel stage, for every
/// pool size and token count of the issue, on the first run and on 100
/// reruns of the same pipeline shape on the same pool (the engine's
/// measurement from the first run steers the later ones).
fn min_of_workers_and_tokens_meet(serial_first: bool) {
    for workers in [2, 4] {
        for tokens in [2, 4, 8] {
            let pool = Pool::builder().num_threads(workers).build().unwrap();
            let meeting = workers.min(tokens);
            for run in 0..=100 {
                let gave_up = run_once(&pool, tokens, meeting, serial_first);
                assert_eq!(
                    gave_up, 0,
                    "{workers} workers, {tokens} tokens, serial stage first: \
                     {serial_first}, run {run}: {meeting} items never met in the \
                     parallel stage ({gave_up} barrier waits gave up)"
                );
            }
        }
    }
}

/// A hang anywhere else (not at the barrier) fails the test too.
const WATCHDOG: Duration = Duration::from_secs(300);

#[test]
fn min_of_workers_and_tokens_items_meet_in_a_parallel_stage() {
    common::within("the meetings", WATCHDOG, || {
        min_of_workers_and_tokens_meet(false)
    });
}

#[test]
fn min_of_workers_and_tokens_items_meet_after_a_serial_in_order_stage() {
    common::within("the meetings", WATCHDOG, || {
        min_of_workers_and_tokens_meet(true)
    });
}

/// The same from a task of the pool (the run's first job starts on a
/// worker's deque, not in the shared queue) and from a pool's caller.
#[test]
fn items_meet_when_the_run_starts_on_a_worker() {
    common::within("the meetings", WATCHDOG, || {
        let pool = Pool::builder().num_threads(2).build().unwrap();
        for run in 0..20 {
            let gave_up = pool.install(|| run_once(&pool, 8, 2, run % 2 == 0));
            assert_eq!(gave_up, 0, "run {run}: two items never met");
        }
    });
}

/// Eight items that each block 50 ms in a parallel stage, on 2 workers,
/// the first run of a fresh pipeline: two at a time, 200 ms in all at
/// best. Blocking (a sleep) needs no core, so a loaded machine does not
/// stretch it; the 20% margin is for handing items over.
#[test]
fn eight_blocking_items_on_two_workers_take_at_most_one_point_two_times_the_ideal() {
    let took = common::within("eight 50 ms items", WATCHDOG, || {
        let pool = Pool::builder().num_threads(2).build().unwrap();
        // Workers started and asleep, as in a program that built its pool
        // earlier.
        std::thread::sleep(Duration::from_millis(20));
        let mut next = 0;
        let mut done = 0;
        let mut p = Pipeline::new(|| {
            (next < 8).then(|| {
                next += 1;
                next
            })
        })
        .parallel(|i| {
            std::thread::sleep(Duration::from_millis(50));
            i
        })
        .serial_in_order(|_| done += 1);
        let start = Instant::now();
        pool.run_pipeline(&mut p, 8).unwrap();
        let took = start.elapsed();
        drop(p);
        assert_eq!(done, 8);
        took
    });
    assert!(
        took <= Duration::from_millis(240),
        "8 items of 50 ms on 2 workers took {took:?}; ideal 200 ms, limit 240 ms"
    );
}
