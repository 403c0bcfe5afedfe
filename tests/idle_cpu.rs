//! An idle pool must not burn CPU: a fully idle 2-thread pool uses less
//! than 20 ms of CPU time over one second. This bounds CPU time (with
//! getrusage, for the whole process), not speed. It is alone in its file so
//! that no other test runs in the same process while it measures.

#[path = "common/process_cpu.rs"]
mod process_cpu;

use process_cpu::process_cpu_time;
use sixfold::Pool;
use std::time::{Duration, Instant};

#[test]
fn a_fully_idle_two_thread_pool_uses_under_20_ms_of_cpu_per_second() {
    let pool = Pool::builder().num_threads(2).build().unwrap();
    // Give both workers something to do once, then let them fall asleep.
    pool.install(|| pool.spawn(|| {}));
    pool.wait_idle();
    let start = Instant::now();
    while pool.sleeping_workers() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "workers never slept"
        );
        std::thread::sleep(Duration::from_millis(1));
    }

    let cpu_before = process_cpu_time();
    std::thread::sleep(Duration::from_secs(1));
    let used = process_cpu_time() - cpu_before;
    assert_eq!(pool.sleeping_workers(), 2);
    assert!(
        used < Duration::from_millis(20),
        "an idle pool used {used:?} of CPU in one second"
    );
}
