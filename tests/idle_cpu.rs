//! An idle pool must not burn CPU: a fully idle 2-thread pool uses less
//! than 20 ms of CPU time over one second. This bounds CPU time (with
//! getrusage, for the whole process), not speed. It is alone in its file so
//! that no other test runs in the same process while it measures.

use sixfold::Pool;
use std::time::{Duration, Instant};

/// User + system CPU time of this process so far.
fn process_cpu_time() -> Duration {
    // SAFETY: getrusage writes into the struct we pass; zeroed is a valid
    // initial value for this plain C struct.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

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
